"""Cross-field checks of a validated config, run before any job.

The schema checks each value alone (type, range, allowed keys). The checks here relate
values to each other: an interval whose start is after its end, filter edges the wrong
way round, penalty grids that overflow. Each message names the key path, the values and
what was expected, so a mistake fails in the dry run instead of minutes into a job.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

__all__ = ["ALPHA_EXPONENT_LIMIT", "config_errors"]

#: Largest |base-10 exponent| of a ridge penalty. Float32 data cannot tell a penalty of
#: 1e-30 from 0 or one of 1e30 from infinity (every weight is exactly 0), and 1e39
#: overflows float32: a grid beyond this is a typo, not a search.
ALPHA_EXPONENT_LIMIT = 30.0


def _get(config: Mapping[str, Any], path: str) -> Any:
    node: Any = config
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _ordered(
    config: Mapping[str, Any], low: str, high: str, what: str, *, strict: bool = True
) -> Iterator[str]:
    """``low < high`` (or ``<=``) when both are numbers (``"auto"`` is resolved later)."""
    lo, hi = _get(config, low), _get(config, high)
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (lo, hi)):
        return
    if (lo >= hi) if strict else (lo > hi):
        relation = "smaller than" if strict else "at most"
        yield f"`{low}` must be {relation} `{high}` ({what}), got {lo} and {hi} instead."


def _window(config: Mapping[str, Any], path: str, what: str) -> Iterator[str]:
    """A ``[start, end]`` pair whose start is before its end."""
    pair = _get(config, path)
    if isinstance(pair, Sequence) and len(pair) == 2 and None not in pair and pair[0] >= pair[1]:
        yield (
            f"`{path}` must be [start, end] with start < end ({what}), got {list(pair)} instead."
        )


def _alpha_grid(config: Mapping[str, Any], path: str) -> Iterator[str]:
    """A ``{start, stop, num}`` grid of base-10 exponents that is ordered and finite."""
    grid = _get(config, path)
    if not isinstance(grid, Mapping):
        return
    start, stop = grid.get("start"), grid.get("stop")
    if start is None or stop is None:
        return
    for key, value in (("start", start), ("stop", stop)):
        if abs(value) > ALPHA_EXPONENT_LIMIT:
            yield (
                f"`{path}.{key}` is a base-10 exponent and must be between "
                f"-{ALPHA_EXPONENT_LIMIT:g} and {ALPHA_EXPONENT_LIMIT:g} (penalties "
                f"1e-{ALPHA_EXPONENT_LIMIT:g} to 1e{ALPHA_EXPONENT_LIMIT:g}), got {value} "
                f"instead (10 ** {value} is "
                + ("infinite in float64" if abs(value) > 308 else "beyond float32 resolution")
                + ")."
            )
    if start > stop:
        yield f"`{path}.start` must be at most `{path}.stop`, got {start} and {stop} instead."


def _alpha_list(config: Mapping[str, Any], path: str) -> Iterator[str]:
    values = _get(config, path)
    if not isinstance(values, Sequence):
        return
    for value in values:
        if isinstance(value, int | float) and not (
            10**-ALPHA_EXPONENT_LIMIT <= value <= 10**ALPHA_EXPONENT_LIMIT
        ):
            yield (
                f"`{path}` must hold penalties between 1e-{ALPHA_EXPONENT_LIMIT:g} and "
                f"1e{ALPHA_EXPONENT_LIMIT:g}, got {value} instead."
            )


def _hrf_once(config: Mapping[str, Any]) -> Iterator[str]:
    """Features aligned with the HRF are not convolved with it again by the encoders."""
    if _get(config, "features.alignment.method") == "hrf":
        delays = _get(config, "encoding.delays.method")
        if delays == "hrf":
            yield (
                "`encoding.delays.method` must be 'none' or 'fir' when "
                "`features.alignment.method` is 'hrf' (the aligned features are already "
                "convolved with the HRF), got 'hrf' instead."
            )


_CHECKS: tuple[Callable[[Mapping[str, Any]], Iterator[str]], ...] = (
    _hrf_once,
    lambda c: _ordered(
        c, "preprocess_eeg.epochs_tmin", "preprocess_eeg.epochs_tmax", "the epoch window"
    ),
    lambda c: _ordered(
        c, "preprocess_eeg.l_freq", "preprocess_eeg.h_freq", "a band-pass keeps l_freq..h_freq"
    ),
    lambda c: _ordered(c, "eeg_encoding.tmin", "eeg_encoding.tmax", "the latencies modelled"),
    lambda c: _ordered(c, "eeg_encoding.trf.tmin", "eeg_encoding.trf.tmax", "the TRF lags"),
    lambda c: _window(c, "decoding.identification.window", "the epoch window decoded"),
    lambda c: _window(c, "decoding.cross_subject.window", "the whole-epoch window decoded"),
    lambda c: _alpha_grid(c, "encoding.alphas"),
    lambda c: _alpha_grid(c, "eeg_encoding.alphas"),
    lambda c: _alpha_list(c, "decoding.features.alphas"),
    lambda c: _alpha_list(c, "decoding.identification.alphas"),
)


def config_errors(config: Mapping[str, Any]) -> list[str]:
    """Every cross-field inconsistency of a validated config.

    Parameters
    ----------
    config : dict
        The config after schema validation and default filling.

    Returns
    -------
    errors : list of str
        One message per problem, each naming its key path; empty when consistent.
    """
    return [message for check in _CHECKS for message in check(config)]
