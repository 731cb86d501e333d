"""Progress of long steps: a line per few percent in the job log and on the terminal.

A step that loops over many items (feature extraction over stimuli, permutation nulls
over targets, decoding permutations) reports through :class:`Progress`:

- the job log (the ``neuroflow.progress`` logger) gets a line every ``log_percent``
  percent with the count, the rate and the time left;
- inside a workflow job (see :func:`job_label`), standard error gets the same line, with
  the job's name in front, every ``terminal_percent`` percent, so that several jobs
  running at once still print whole, attributable lines in Snakemake's output;
- outside a job, on an interactive terminal, a ``tqdm`` bar.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import math
import sys
import time
from collections.abc import Iterator
from types import TracebackType
from typing import Any, TextIO

__all__ = ["Progress", "format_progress", "job_label"]

logger = logging.getLogger("neuroflow.progress")

_JOB: contextvars.ContextVar[str | None] = contextvars.ContextVar("neuroflow_job", default=None)


@contextlib.contextmanager
def job_label(label: str) -> Iterator[None]:
    """Mark the code inside as the workflow job ``label`` (e.g. ``"features/clip 3f2a"``)."""
    token = _JOB.set(label)
    try:
        yield
    finally:
        _JOB.reset(token)


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds // 60:.0f} min {seconds % 60:02.0f} s"
    return f"{seconds // 3600:.0f} h {(seconds % 3600) // 60:02.0f} min"


def format_progress(what: str, done: int, total: int, unit: str, elapsed: float) -> str:
    """One progress line, e.g. ``"permutations: 40% (400/1,000 targets), 52.1/s, 12 s left"``.

    Parameters
    ----------
    what : str
        The step.
    done, total : int
        Items done and in all (``total > 0``).
    unit : str
        What an item is, plural.
    elapsed : float
        Seconds since the step started.

    Returns
    -------
    line : str
    """
    rate = done / elapsed if elapsed > 0 else math.inf
    left = (total - done) / rate if done and rate > 0 else math.inf
    shown_rate = f"{rate:,.1f}/s" if math.isfinite(rate) else "-"
    return (
        f"{what}: {100 * done / total:.0f}% ({done:,}/{total:,} {unit}), {shown_rate}, "
        + ("done" if done >= total else f"{_duration(left)} left")
        + f" ({_duration(elapsed)} so far)"
    )


class Progress:
    """Report the progress of a loop over ``total`` items.

    Parameters
    ----------
    total : int
        Items in all; 0 reports nothing.
    what : str
        The step, as the line names it.
    unit : str
        What an item is, plural.
    log_percent : float
        Job-log line every this many percent (and at the end).
    terminal_percent : float
        Inside a job, standard-error line every this many percent.
    stream : file-like | None
        Where terminal output goes; standard error by default.

    Examples
    --------
    >>> with Progress(len(batches), "extraction", "images") as progress:  # doctest: +SKIP
    ...     for batch in batches:
    ...         run(batch)
    ...         progress.update(len(batch))
    """

    def __init__(
        self,
        total: int,
        what: str,
        unit: str = "items",
        *,
        log_percent: float = 10.0,
        terminal_percent: float = 25.0,
        stream: TextIO | None = None,
    ) -> None:
        for name, value in (("log_percent", log_percent), ("terminal_percent", terminal_percent)):
            if not 0 < value <= 100:
                raise ValueError(f"`{name}` must be in (0, 100], got {value!r} instead.")
        self.total = max(int(total), 0)
        self.what, self.unit = what, unit
        self.done = 0
        self._steps = {"log": log_percent, "terminal": terminal_percent}
        self._last: dict[str, float] = dict.fromkeys(self._steps, 0.0)
        self._stream = stream if stream is not None else sys.stderr
        self._job = _JOB.get()
        self._start = time.perf_counter()
        self._bar: Any = None
        if self.total and self._job is None and _is_terminal(self._stream):
            from tqdm.auto import tqdm

            self._bar = tqdm(total=self.total, desc=what, unit=unit, file=self._stream)

    def update(self, n: int = 1) -> None:
        """Count ``n`` more items done."""
        if not self.total:
            return
        self.done = min(self.done + int(n), self.total)
        if self._bar is not None:
            self._bar.update(int(n))
        percent = 100 * self.done / self.total
        line = None
        for channel, step in self._steps.items():
            # buckets of `step` percent; the end is its own bucket, reported once
            bucket = math.inf if self.done >= self.total else math.floor(percent / step + 1e-9)
            if bucket <= self._last[channel]:
                continue
            self._last[channel] = bucket
            line = line or format_progress(
                self.what, self.done, self.total, self.unit, time.perf_counter() - self._start
            )
            if channel == "log":
                logger.info(line)
            elif self._job is not None:
                print(f"[{self._job}] {line}", file=self._stream, flush=True)

    def close(self) -> None:
        """Stop the terminal bar (the counts stay as they are)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
