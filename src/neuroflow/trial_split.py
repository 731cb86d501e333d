"""Which stimuli and runs the models hold out for testing.

Pure functions on stimulus ids and run keys (no data is read), shared by the encoding
and decoding stages and the workflow plan, which notes a split that tests on more
stimuli than it trains on before anything runs.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from neuroflow.io.records import natural_key

__all__ = [
    "MIN_TEST_STIMULI",
    "N_BLOCKS_ONE_RUN",
    "TEST_SELECTIONS",
    "TRIAL_MODEL_SUFFIX",
    "auto_test_runs",
    "select_test_stimuli",
    "select_trial_test_stimuli",
    "split_note",
]

logger = logging.getLogger(__name__)

#: Appended to a model's name in trial-based outputs, so that summaries tell a model fit
#: on single trials (held-out stimuli) from the same model fit on runs (held-out runs).
TRIAL_MODEL_SUFFIX = "_trials"
#: Named selections of ``trial_split.test`` (else a list of stimulus ids).
TEST_SELECTIONS = ("auto", "repeated")
#: Fewest test stimuli ``auto`` holds out (of the trial split, and of
#: :func:`select_test_stimuli` when counts do not single out a test set): the
#: permutation test of a score needs 4.
MIN_TEST_STIMULI = 4
#: Contiguous blocks that stand in for runs in the penalty's cross-validation when a
#: subject has one training run.
N_BLOCKS_ONE_RUN = 5


def _auto_test_stimuli(
    order: Sequence[str], counts: Mapping[str, int], fraction: float, seed: int
) -> list[str]:
    """``auto``: the most-shown stimuli when some are shown more often than the others
    and those are at most half of all (THINGS' test images); else a seeded ``fraction``
    of the repeated stimuli (at least :data:`MIN_TEST_STIMULI`, leaving 2 stimuli to
    train on), drawn among those shown the most common repeat count (so that every test
    stimulus keeps all its repeats). In order of first presentation."""
    top = max(counts.values())
    most = [s for s in order if counts[s] == top]
    if top > min(counts.values()) and len(most) <= len(order) / 2:
        return most
    repeated = [s for s in order if counts[s] > 1]
    mode = Counter(counts[s] for s in repeated).most_common(1)[0][0]
    pool = [s for s in repeated if counts[s] == mode]
    if len(pool) < min(MIN_TEST_STIMULI, len(repeated)):
        pool = repeated
    wanted = max(MIN_TEST_STIMULI, round(fraction * len(repeated)))
    n_test = max(1, min(len(pool), wanted, len(order) - 2))
    picked = set(np.random.default_rng(seed).choice(sorted(pool), n_test, replace=False))
    return [s for s in order if s in picked]


def select_trial_test_stimuli(
    stimuli: Sequence[str] | np.ndarray,
    test: str | Sequence[str],
    where: str = "the trials",
    *,
    fraction: float = 0.2,
    seed: int = 0,
) -> list[str]:
    """Stimuli held out for testing, in order of first presentation.

    Parameters
    ----------
    stimuli : sequence of str, shape (n_trials,)
        Stimulus id of every trial.
    test : "auto" | "repeated" | sequence of str
        ``"auto"``: the most-shown stimuli when they are at most half of all and
        shown more often than the others, else a seeded ``fraction`` of the stimuli
        shown more than once (at least :data:`MIN_TEST_STIMULI`, leaving at least 2
        to train on), drawn among those shown the most common number of times;
        ``"repeated"``: every stimulus shown more than once (when that leaves fewer
        than 2 to train on, ``auto``'s choice); else explicit ids.
    where : str
        Names the data in error messages (e.g. the betas store).
    fraction : float
        Share of the repeated stimuli ``auto`` holds out, in ``(0, 1)``.
    seed : int
        Seed of that draw.

    Returns
    -------
    test_ids : list of str
        Held-out stimulus ids, without duplicates.
    """
    ids = [str(s) for s in stimuli]
    counts = Counter(ids)
    order = list(dict.fromkeys(ids))
    if isinstance(fraction, bool) or not isinstance(fraction, int | float) or not 0 < fraction < 1:
        raise ValueError(
            f"`trial_split.test_fraction` must be a number in (0, 1), got {fraction!r} instead."
        )
    if isinstance(test, str):
        if test not in TEST_SELECTIONS:
            raise ValueError(
                "`trial_split.test` must be 'auto', 'repeated' or a list of stimulus ids, "
                f"got {test!r} instead."
            )
        repeated = [s for s in order if counts[s] > 1]
        if not repeated:
            raise ValueError(
                f"{where}: no stimulus is shown more than once (field `stimulus`), so "
                f"`trial_split.test: {test}` selects no test stimuli (their noise ceiling "
                "needs repeats); list them explicitly."
            )
        if test == "auto":
            return _auto_test_stimuli(order, counts, fraction, seed)
        if len(counts) - len(repeated) < 2:
            # every stimulus repeated (a common RSA design): hold out a seeded fifth of
            # them, with all their repeats, as EEG and fMRI decoding do
            chosen = _auto_test_stimuli(order, counts, fraction, seed)
            logger.warning(
                "%s: %d of %d stimuli are shown more than once, which leaves fewer than 2 "
                "to train on; `trial_split.test: repeated` holds out %d of them instead (a "
                "seeded fifth; list test stimuli to choose them).",
                where,
                len(repeated),
                len(counts),
                len(chosen),
            )
            return chosen
        return repeated
    if not isinstance(test, Sequence) or not test:
        raise ValueError(
            "`trial_split.test` must be 'auto', 'repeated' or a non-empty list of stimulus "
            f"ids, got {test!r} instead."
        )
    wanted = list(dict.fromkeys(str(s) for s in test))
    missing = [s for s in wanted if s not in counts]
    if missing:
        raise ValueError(
            f"{where}: `trial_split.test` names stimulus id(s) {missing[:5]} that no trial "
            f"shows (field `stimulus`; {len(counts)} stimuli are shown)."
        )
    return wanted


def split_note(n_train: int, n_test: int, test: Any) -> str | None:
    """A line saying the split when it tests on more stimuli than it trains on.

    Parameters
    ----------
    n_train, n_test : int
        Training and test stimuli.
    test : str | sequence of str
        The ``trial_split.test`` setting.

    Returns
    -------
    note : str | None
        None when ``n_test <= n_train``.
    """
    if n_test <= n_train:
        return None
    how = f"trial_split.test: {test}" if isinstance(test, str) else "trial_split.test (a list)"
    note = f"trains on {n_train} stimuli and tests on {n_test} ({how})"
    if test == "auto":
        return f"{note}: the design has too few stimuli for a larger training set"
    return (
        f"{note}; trial_split.test: auto holds out a fraction (trial_split.test_fraction) "
        "of the repeated stimuli instead"
    )


def auto_test_runs(keys: Sequence[str], sequences: Mapping[str, Sequence[str]]) -> list[str]:
    """Held-out runs chosen by ``test_runs: auto``.

    Parameters
    ----------
    keys : sequence of str
        One subject's run keys.
    sequences : dict of str to sequence of str
        Stimulus ids of each run's stimulus events, in order.

    Returns
    -------
    keys : list of str
        The runs whose stimulus sequence another run repeats (a test movie shown
        twice), when that leaves a training run; else the last run (by key, numbers
        compared by value: ``run-10`` comes after ``run-9``); empty with fewer than 2
        runs.
    """
    keys = sorted(keys, key=natural_key)
    if len(keys) < 2:
        return []
    groups: dict[tuple[str, ...], list[str]] = {}
    for key in keys:
        sequence = tuple(sequences.get(key) or ())
        if sequence:
            groups.setdefault(sequence, []).append(key)
    repeated = [key for group in groups.values() if len(group) >= 2 for key in group]
    if repeated and len(keys) - len(repeated) >= 1:
        return sorted(repeated, key=natural_key)
    return [keys[-1]]


def select_test_stimuli(
    stimuli: Sequence[str],
    test: str | Sequence[str],
    *,
    fraction: float = 0.2,
    seed: int = 0,
) -> list[str]:
    """Stimuli held out for testing, in order of first presentation.

    Parameters
    ----------
    stimuli : sequence of str, shape (n_epochs,)
        Stimulus id of every epoch or event.
    test : "auto" | "repeated" | sequence of str
        ``"auto"``: the most-presented stimuli when some stimuli are presented more
        often than others and those are at most half of all (THINGS-EEG's test images);
        otherwise (every stimulus shown equally often, or immediate and delayed repeats
        of most images as in ds000117) a random ``fraction`` of the stimuli, drawn with
        ``seed`` among those shown the most common number of times. ``"repeated"``:
        every stimulus presented more than once. Else explicit ids.
    fraction : float
        Share of the stimuli ``"auto"`` draws when counts do not single out a test set
        (at least :data:`MIN_TEST_STIMULI`, leaving at least 2 to train on).
    seed : int
        Seed of that draw.

    Returns
    -------
    test_ids : list of str
        Held-out stimulus ids.
    """
    ids = [str(s) for s in stimuli]
    counts = Counter(ids)
    order = list(dict.fromkeys(ids))
    if isinstance(test, str):
        if test == "repeated":
            return [s for s in order if counts[s] > 1]
        if test != "auto":
            raise ValueError(
                f"`test` must be 'auto', 'repeated' or a list of stimulus ids, got {test!r} "
                "instead."
            )
        top = max(counts.values(), default=0)
        most = [s for s in order if counts[s] == top]
        if top > min(counts.values(), default=0) and len(most) <= len(order) / 2:
            return most
        # draw among the stimuli shown the most common number of times, so that the
        # test stimuli share one repeat count (and keep their repeats)
        mode = Counter(counts.values()).most_common(1)[0][0]
        pool = sorted(s for s in order if counts[s] == mode)
        # at least MIN_TEST_STIMULI (scores and their permutation test need a few), and
        # at least 2 stimuli left to train on
        wanted = max(MIN_TEST_STIMULI, round(fraction * len(order)))
        n_test = max(1, min(len(pool), wanted, len(order) - 2))
        picked = set(np.random.default_rng(seed).choice(pool, n_test, replace=False))
        return [s for s in order if s in picked]
    wanted = [str(s) for s in test]
    missing = [s for s in wanted if s not in counts]
    if missing:
        raise ValueError(
            f"`test` names stimulus id(s) {missing[:5]} that no epoch shows "
            f"({len(counts)} stimuli are shown)."
        )
    return list(dict.fromkeys(wanted))
