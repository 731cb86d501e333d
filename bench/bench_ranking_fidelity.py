"""How much of a planted response the encoding pipeline recovers, and whether it ranks models right.

Generates an event-related design (~1 s events 3.5-6.5 s apart, a 16 s rest block per
run, TR 2 s) and a movie (contiguous shots of 2-6 s, TR 1.5 s) in which four feature
spaces with different temporal statistics drive four ROIs with unequal strengths:

=================  ========================================================================
feature space      per event (or shot)
=================  ========================================================================
image_statistics   12 correlated, positive continuous features (two of them planted)
condition          a categorical code of three levels, one-hot (levels 1, 0.5, 0 planted)
modulator          one numeric parametric modulator (a response time, planted linearly)
embedding          6 dimensions that vary slowly from event to event (two planted)
=================  ========================================================================

ROI ``k`` responds to space ``k`` at full strength, to space ``k + 1`` at half and to space
``k + 2`` at a quarter (cyclically), and its noise is scaled for an SNR that falls from
ROI to ROI; in the event-related design every event also evokes a response. The BOLD is
made on a 0.1 s grid with SPM's canonical HRF, or (``hrf="mismatch"``, printed as
"mismatch HRFs") with an HRF of each voxel's own: a double gamma peaking at 4-7 s, with an
undershoot of 0 to 0.35 of SPM's size 6-14 s after the peak; the movie is also made with
Glover's HRF (``hrf="glover"``), the one shape the encoder's library shares with the
single-HRF encoder it replaced.

The pipeline is what the workflow runs (its building blocks, without files): the design
is read from the events (:func:`neuroflow.features.design.classify_run`), the alignment
settings resolved from it (:func:`neuroflow.features.design.resolve_alignment`), the
features aligned (:func:`neuroflow.features.resampling.hrf_weights` with the event regressor
and the per-event rows of :func:`neuroflow.features.resampling.event_rows`, or
:func:`neuroflow.features.resampling.average_weights` and the encoder's HRF), standardised on
the training runs and fitted by ridge regression with the encoding stage's penalty grid
and leave-one-run-out cross-validation (per voxel, the HRF model of a library that
cross-validates best on the training runs). The oracle is given what the pipeline must
estimate, the exact regressors of every column of the space (each voxel's own HRF, the
events' true timing), and fits them as the pipeline does (standardised ridge, same
penalty grid and cross-validation): the ratio measures what the alignment path loses. A
second oracle, ordinary least squares on the planted columns alone, also knows which
columns matter; the pipeline cannot, and loses to it what estimating the other columns'
weights costs (most for the slow embedding, whose runs hold few independent values).
Every run is scored once: folds of two runs each are held out in turn, the pipeline and
both oracles fitted on the other runs of the same fold, and a voxel's test R² is that of
its predictions pooled over the folds (``--folds last`` scores the last two runs only,
as the tests do: a weak model's R² on two runs is noisy).
Printed, R² averaged over the seeds' datasets: pipeline / oracle mean test R² per feature
space per ROI (for the spaces planted in that ROI whose planted oracle explains at least
:data:`MIN_ORACLE_R2`), whether the pipeline ranks the four models in each ROI as the
oracle does, the R² themselves, and each seed's lowest ratio and spread.

Usage: ``python bench/bench_ranking_fidelity.py [--small] [--seed 0] [--seeds 8]
[--folds all|last] [--runs N] [--compare] [--hrf-model NAME ...] [--event-penalty P]``;
``--runs`` sets the runs per dataset (6 with ``--small``, else 10); ``--compare`` adds the
event-related design aligned as before ``method: auto`` (average within TRs and the
encoder's HRF) and as ``config/presets/event_related.yaml`` did before the per-event rows
were centred;
``--hrf-model`` replaces the resolved HRF library (``--hrf-model glover --hrf-model spm``:
the library before the SPM peaks 4-7 s), and for the movie the encoder's HRF library
(``--hrf-model glover``: the encoder's single HRF before its default library, Glover's
and SPM's peaking at 4-7 s); ``--event-penalty 1`` penalises the event
regressor like a feature (the encoder before ``encoding.event_penalty``).
"""

from __future__ import annotations

import argparse
import itertools
import time
from dataclasses import dataclass, field

import numpy as np

from neuroflow.encoding.fitting import make_alphas
from neuroflow.encoding.stage import DEFAULT_CONFIG
from neuroflow.features.design import classify_run, resolve_alignment
from neuroflow.features.resampling import average_weights, event_rows, hrf_weights
from neuroflow.models import ridge_cv, run_splits
from neuroflow.models.delays import apply_delays, delay_variants

SPACES = ("image_statistics", "condition", "modulator", "embedding")
#: Strength of space ``(k + j) % 4`` in ROI ``k``.
STRENGTHS = (1.0, 0.5, 0.25, 0.0)
#: Signal-to-noise variance ratio of ROI ``k``.
SNRS = (0.8, 0.6, 0.45, 0.35)
#: Smallest oracle R² of a (space, ROI) pair whose ratio is shown.
MIN_ORACLE_R2 = 0.05
#: Smallest difference of oracle R² between two models of an ROI whose order the pipeline
#: must keep (models closer than this, such as two that explain nothing, may swap).
RANK_TOLERANCE = 0.01
ALIGNMENT = {
    "method": "auto",
    "aggregation": "mean",
    "delays": [0],
    "tr_reference": "start",
    "lanczos_window": 3,
    "hrf_model": "auto",
    "oversampling": 50,
    "slice_time_ref": 0.0,
    "event_regressor": "auto",
    "missing": "error",
}


@dataclass
class Dataset:
    """One generated design: per run its timing, per space its per-event rows."""

    kind: str
    tr: float
    n_volumes: int
    timing: list[tuple[np.ndarray, np.ndarray]]  # per run (onsets, durations)
    rows: dict[str, list[np.ndarray]]  # space -> per run (n_events, n_features)
    planted: dict[str, list[np.ndarray]]  # space -> per run planted per-event values
    bold: list[np.ndarray]  # per run (n_volumes, n_voxels)
    roi: np.ndarray  # (n_voxels,) ROI index
    # space -> per run the exact regressors of the planted columns (with the evoked
    # response first in an event-related design), one set per HRF: (n_hrfs, n_volumes, n)
    oracle: dict[str, list[np.ndarray]]
    # the same for every column of the space (centred), as the pipeline is given them
    oracle_full: dict[str, list[np.ndarray]]
    hrf_index: np.ndarray  # (n_voxels,) the HRF of each voxel (index into the above)
    # (run, HRF model) -> the pipeline's event weights, filled as they are computed
    weights: dict = field(default_factory=dict)


#: Fine time step (s) of the generated responses.
DT = 0.1


def double_gamma(peak: float = 5.0, undershoot: float = 1 / 6, delay: float = 10.0) -> np.ndarray:
    """A double-gamma HRF on a :data:`DT` grid over 32 s, summing to 1.

    The defaults are SPM's canonical HRF (gamma shapes 6 and 16, unit scale); ``peak``
    moves the first gamma's mode, ``delay`` puts the undershoot's mode that many seconds
    after it, and ``undershoot`` scales the undershoot.
    """
    from scipy.stats import gamma

    t = np.arange(0, 32, DT)
    hrf = gamma.pdf(t, peak + 1.0) - undershoot * gamma.pdf(t, peak + 1.0 + delay)
    return hrf / hrf.sum()


def glover_kernel() -> np.ndarray:
    """Glover's HRF (nilearn's ``glover_hrf``) on a :data:`DT` grid over 32 s, summing to 1."""
    from nilearn.glm.first_level import glover_hrf

    hrf = glover_hrf(DT, oversampling=1, time_length=32.0)[: round(32 / DT)]
    return hrf / hrf.sum()


def _stimulus_grid(values, onsets, durations, n_volumes, tr):
    """Each column of ``values`` as boxcars at the events, on a :data:`DT` grid."""
    grid = np.zeros((round(n_volumes * tr / DT) + 400, values.shape[1]))
    for v, onset, duration in zip(values, onsets, durations, strict=True):
        start = round(onset / DT)
        grid[start : start + max(1, round(duration / DT))] += v
    return grid


def _convolve(grid, hrf, n_volumes, tr):
    """``grid`` (n_grid, n_columns) convolved with ``hrf`` and sampled at the volumes."""
    from scipy.signal import fftconvolve

    conv = fftconvolve(grid, hrf[:, None], axes=0)[: len(grid)]
    return conv[np.round(np.arange(n_volumes) * tr / DT).astype(int)]


def _spm_regressors(values, onsets, durations, n_volumes, tr):
    """Each column of ``values`` as SPM-HRF-convolved boxcars on a :data:`DT` grid."""
    grid = _stimulus_grid(values, onsets, durations, n_volumes, tr)
    return _convolve(grid, double_gamma(), n_volumes, tr)


def voxel_hrfs(rng: np.random.Generator, n_voxels: int) -> np.ndarray:
    """Non-canonical HRFs, one per voxel: peaks 4-7 s, undershoots of various size and lag.

    Returns
    -------
    hrfs : ndarray, shape (n_voxels, n_grid)
    """
    return np.stack(
        [
            double_gamma(rng.uniform(4.0, 7.0), rng.uniform(0.0, 0.35), rng.uniform(6.0, 14.0))
            for _ in range(n_voxels)
        ]
    )


def _event_timing(rng, n_volumes, tr):
    end = n_volumes * tr - 18.0
    rest = rng.uniform(0.4, 0.6) * end
    onsets, durations, t = [], [], rng.uniform(4.0, 6.0)
    while t < end:
        if rest <= t < rest + 16.0:
            t = rest + 16.0 + rng.uniform(2.0, 4.0)
            continue
        onsets.append(t)
        durations.append(rng.uniform(0.8, 1.2))
        t += rng.uniform(3.5, 6.5)
    return np.array(onsets), np.array(durations)


def _blocked_timing(rng, n_volumes, tr):
    """Blocks of 12-20 s of images (0.8 s each, one per second) between 10-16 s of rest."""
    onsets, durations, t = [], [], rng.uniform(4.0, 8.0)
    end = n_volumes * tr - 18.0
    while t < end:
        block_end = min(t + rng.uniform(12.0, 20.0), end)
        while t < block_end:
            onsets.append(t)
            durations.append(0.8)
            t += 1.0
        t += rng.uniform(10.0, 16.0)
    return np.array(onsets), np.array(durations)


TIMINGS = {"event_related": _event_timing, "blocked": _blocked_timing}


def _movie_timing(rng, n_volumes, tr):
    onsets, durations, t = [], [], 0.0
    while t < n_volumes * tr:
        d = rng.uniform(2.0, 6.0)
        onsets.append(t)
        durations.append(d)
        t += d
    return np.array(onsets), np.array(durations)


def make_dataset(
    kind: str,
    *,
    n_runs: int,
    n_volumes: int,
    seed: int,
    n_voxels: int = 12,
    hrf: str = "canonical",
) -> Dataset:
    """Generate one design (``"event_related"``, ``"blocked"`` or ``"movie"``) with planted ROIs.

    ``hrf``: ``"canonical"`` makes every voxel's response with SPM's HRF, ``"glover"``
    with Glover's;
    ``"mismatch"`` gives each voxel an HRF of its own (:func:`voxel_hrfs`: peak 4-7 s,
    undershoot 0-0.35 of SPM's size and 6-14 s after the peak).
    """
    rng = np.random.default_rng(seed)
    tr = 1.5 if kind == "movie" else 2.0
    timing = [TIMINGS.get(kind, _movie_timing)(rng, n_volumes, tr) for _ in range(n_runs)]
    counts = [len(o) for o, _ in timing]
    n = sum(counts)
    latent = rng.standard_normal((n, 3))
    stats = np.abs(latent @ rng.standard_normal((3, 12)) + 0.5 * rng.standard_normal((n, 12)))
    stats = stats + rng.uniform(0.5, 2.0, 12)  # positive, as luminance and energies are
    levels = rng.integers(0, 3, n)
    condition = np.eye(3)[levels]
    rt = rng.uniform(0.4, 1.2, n)
    embedding = np.zeros((n, 6))
    for i in range(1, n):
        embedding[i] = 0.95 * embedding[i - 1] + np.sqrt(1 - 0.95**2) * rng.standard_normal(6)
    embedding += 1.0
    z = (stats - stats.mean(0)) / stats.std(0)
    all_rows = {
        "image_statistics": stats,
        "condition": condition,
        "modulator": rt[:, None],
        "embedding": embedding,
    }
    # the planted columns of each space (the oracle fits one weight per column) and
    # their weights in the response
    all_planted = {
        "image_statistics": z[:, :2],
        "condition": condition[:, :2],
        "modulator": ((rt - rt.mean()) / rt.std())[:, None],
        "embedding": embedding[:, :2] - 1.0,
    }
    weights = {
        "image_statistics": np.array([1.0, 0.7]),
        "condition": np.array([1.0, 0.5]),
        "modulator": np.array([1.0]),
        "embedding": np.array([1.0, -0.8]),
    }
    split = np.cumsum([0, *counts])
    rows = {s: [v[a:b] for a, b in itertools.pairwise(split)] for s, v in all_rows.items()}
    planted = {s: [v[a:b] for a, b in itertools.pairwise(split)] for s, v in all_planted.items()}
    evoked = 0.0 if kind == "movie" else 0.5
    courses = {s: [] for s in SPACES}
    for r, (onsets, durations) in enumerate(timing):
        for s in SPACES:
            values = np.column_stack([np.ones(counts[r]), planted[s][r]])
            reg = _spm_regressors(values, onsets, durations, n_volumes, tr)
            courses[s].append(np.column_stack([reg[:, 0], reg[:, 1:] @ weights[s]]))
    scale = {s: 1.0 / np.concatenate(courses[s])[:, 1].std() for s in SPACES}
    evoked_scale = 1.0 / np.concatenate(courses[SPACES[0]])[:, 0].std()
    roi = np.repeat(np.arange(4), n_voxels)
    gains = np.exp(0.2 * rng.standard_normal(roi.size))
    # the HRF of each voxel: SPM's for all, or one of its own (drawn apart, so that the
    # rest of the dataset is the same whatever the HRFs)
    if hrf == "canonical":
        kernels, hrf_index = double_gamma()[None], np.zeros(roi.size, dtype=int)
    elif hrf == "glover":
        kernels, hrf_index = glover_kernel()[None], np.zeros(roi.size, dtype=int)
    elif hrf == "mismatch":
        kernels = voxel_hrfs(np.random.default_rng([seed, 1]), roi.size)
        hrf_index = np.arange(roi.size)
    else:
        raise ValueError(f"`hrf` must be 'canonical', 'glover' or 'mismatch', got {hrf!r} instead.")
    # the stimulus of each ROI on the fine grid, convolved with each voxel's HRF; the
    # oracle's regressors with each HRF: the planted columns, and every column
    signals, oracle, oracle_full = [], {s: [] for s in SPACES}, {s: [] for s in SPACES}
    for r, (onsets, durations) in enumerate(timing):
        on_grid = {}
        for s in SPACES:
            values = np.column_stack([np.ones(counts[r]), planted[s][r]])
            on_grid[s] = _stimulus_grid(values, onsets, durations, n_volumes, tr)
            every = np.column_stack([np.ones(counts[r]), rows[s][r] - all_rows[s].mean(0)])
            grid_full = _stimulus_grid(every, onsets, durations, n_volumes, tr)
            first = 0 if evoked else 1
            oracle[s].append(
                np.stack([_convolve(on_grid[s], h, n_volumes, tr)[:, first:] for h in kernels])
            )
            oracle_full[s].append(
                np.stack([_convolve(grid_full, h, n_volumes, tr)[:, first:] for h in kernels])
            )
        per_roi = []
        for k in range(4):
            course = evoked * evoked_scale * on_grid[SPACES[0]][:, 0]
            for j, strength in enumerate(STRENGTHS):
                space = SPACES[(k + j) % 4]
                course = course + strength * scale[space] * (on_grid[space][:, 1:] @ weights[space])
            per_roi.append(course)
        per_roi = np.stack(per_roi, 1)
        signals.append(
            np.column_stack(
                [
                    _convolve(per_roi[:, [roi[v]]], kernels[hrf_index[v]], n_volumes, tr)[:, 0]
                    for v in range(roi.size)
                ]
            )
        )
    pooled = np.concatenate(signals)
    signal_sd = pooled.std(0)
    bold = []
    for r in range(n_runs):
        noise = np.zeros((n_volumes, roi.size))
        innov = rng.standard_normal((n_volumes, roi.size))
        noise[0] = innov[0]
        for t in range(1, n_volumes):
            noise[t] = 0.3 * noise[t - 1] + np.sqrt(1 - 0.09) * innov[t]
        sig = signals[r] / signal_sd * np.sqrt(np.array(SNRS)[roi]) * gains
        bold.append(sig + noise)
    return Dataset(
        kind, tr, n_volumes, timing, rows, planted, bold, roi, oracle, oracle_full, hrf_index
    )


def _r2(y, pred):
    return 1.0 - ((y - pred) ** 2).sum(0) / ((y - y.mean(0)) ** 2).sum(0)


def _ridge(blocks, ds, train, test, voxels=None, events=None, event_penalty=None):
    """Stage-like ridge fit of one design (list over runs); test predictions and CV score.

    Returns the predictions of the test runs' volumes (n_test_volumes, n_voxels) and the
    cross-validation score of each voxel on the training runs (n_voxels,).

    ``events``: mask of the event-regressor columns, whose scale is divided by
    ``1 / sqrt(event_penalty)`` as the encoding stage does (default: the stage's
    ``event_penalty``).
    """
    X = np.concatenate(blocks)
    runs = np.concatenate([np.full(ds.n_volumes, r) for r in range(len(ds.bold))])
    tr_mask, te_mask = np.isin(runs, train), np.isin(runs, test)
    mean, std = X[tr_mask].mean(0), X[tr_mask].std(0)
    scale = np.where(std > 0, std, 1.0)
    if events is not None:
        penalty = DEFAULT_CONFIG["event_penalty"] if event_penalty is None else event_penalty
        scale = np.where(events, scale * np.sqrt(penalty), scale)
    Z = (X - mean) / scale
    Y = np.concatenate(ds.bold)
    if voxels is not None:
        Y = Y[:, voxels]
    z_mean = Z[tr_mask].mean(0)
    y_mean = Y[tr_mask].mean(0)
    result = ridge_cv(
        Z[tr_mask] - z_mean,
        Y[tr_mask] - y_mean,
        alphas=make_alphas(DEFAULT_CONFIG["alphas"]),
        splits=run_splits(runs[tr_mask]),
    )
    pred = result.predict(Z[te_mask] - z_mean) + y_mean
    return pred, np.asarray(result.cv_score)


def _test_bold(ds: Dataset, test) -> np.ndarray:
    """The BOLD of the test runs, in run order (n_test_volumes, n_voxels)."""
    return np.concatenate([ds.bold[r] for r in sorted(test)])


def pipeline_predictions(
    ds: Dataset,
    space: str,
    train,
    test,
    *,
    mode: str = "auto",
    hrf_model=None,
    event_penalty=None,
) -> tuple[np.ndarray, dict]:
    """Test-run predictions (n_test_volumes, n_voxels) of the pipeline's model of one space.

    ``mode``: ``"auto"`` (the alignment ``method: auto`` resolves to), ``"average"``
    (average within TRs and the encoder's HRF, the path before ``auto``) or
    ``"uncentred"`` (the event-related preset with raw per-event rows). ``hrf_model``
    replaces the resolved HRF model(s) of the event-related path; ``event_penalty``
    the encoding stage's relative penalty of the event regressor.
    """
    kinds = {classify_run(o, d, ds.tr).kind for o, d in ds.timing}
    kind = kinds.pop() if len(kinds) == 1 else "unknown"
    delays = dict(DEFAULT_CONFIG["delays"])
    if mode == "average":
        kind = "continuous"
    alignment, delays = resolve_alignment(ALIGNMENT, delays, kind)
    if hrf_model is not None and alignment["method"] == "hrf":
        alignment["hrf_model"] = list(hrf_model)
    elif hrf_model is not None and delays["method"] == "hrf":
        delays["hrf_model"] = list(hrf_model)
    times = np.arange(ds.n_volumes) * ds.tr
    if alignment["method"] == "average":
        averaged = [
            average_weights(times, ds.tr, onsets, durations) @ rows
            for (onsets, durations), rows in zip(ds.timing, ds.rows[space], strict=True)
        ]
        # standardised on the training runs before the encoder's HRF, as the stage does
        # (delaying uncentred features adds a ramp at each run's start)
        pooled = np.concatenate([averaged[r] for r in train])
        mean, std = pooled.mean(0), pooled.std(0)
        std = np.where(std > 0, std, 1.0)
        # one fit per HRF model of the encoder's library, the best in CV kept per voxel
        fits = [
            _ridge([apply_delays((a - mean) / std, spec, ds.tr) for a in averaged], ds, train, test)
            for spec in delay_variants(delays)
        ]
        return _best_in_cv(fits), {**alignment, "encoder_hrf": delays.get("hrf_model")}
    centre = np.concatenate(ds.rows[space]).mean(0)
    fits = []
    for model in alignment["hrf_model"]:
        blocks = []
        for r, rows in enumerate(ds.rows[space]):
            # the spaces share the events: one set of weights per run and HRF model
            if (r, model) not in ds.weights:
                onsets, durations = ds.timing[r]
                ds.weights[r, model] = hrf_weights(times, ds.tr, onsets, durations, hrf_model=model)
            w = ds.weights[r, model]
            if mode == "uncentred":
                placed = np.column_stack([rows, np.ones(len(rows))])
            else:
                placed = event_rows(rows, centre, alignment["event_regressor"])
            # one block of columns per basis function, as the features stage stores them
            bases = w[None] if w.ndim == 2 else w
            blocks.append(np.concatenate([b @ placed for b in bases], 1))
        events = None
        if alignment["event_regressor"] and mode != "uncentred":
            events = np.tile(np.arange(placed.shape[1]) == placed.shape[1] - 1, len(bases))
        fits.append(_ridge(blocks, ds, train, test, events=events, event_penalty=event_penalty))
    return _best_in_cv(fits), alignment


def _best_in_cv(fits) -> np.ndarray:
    """Per voxel, the test predictions of the fit (one per HRF model) with the best CV score."""
    scores = np.stack([f[1] for f in fits])
    choice = np.argmax(scores, 0)
    return np.stack([f[0] for f in fits])[choice, :, np.arange(choice.size)].T


def oracle_predictions(
    ds: Dataset, space: str, train, test, *, columns: str = "all", estimator: str = "ridge"
) -> np.ndarray:
    """Test-run predictions (n_test_volumes, n_voxels) of a model of one space on the exact
    regressors (each voxel's HRF).

    ``columns``: ``"all"``, every column of the space, as the pipeline is given them (the
    oracle knows the HRF and the timing, not which columns matter), or ``"planted"``, only
    the planted ones. ``estimator``: ``"ridge"``, the pipeline's (standardised ridge, the
    encoding stage's penalty grid, leave-one-run-out on the training runs), or ``"ols"``.
    """
    regressors = ds.oracle_full[space] if columns == "all" else ds.oracle[space]
    runs = np.concatenate([np.full(ds.n_volumes, r) for r in range(len(ds.bold))])
    tr_mask, te_mask = np.isin(runs, train), np.isin(runs, test)
    Y = np.concatenate(ds.bold)
    out = np.zeros((int(te_mask.sum()), Y.shape[1]))
    for h in range(regressors[0].shape[0]):
        voxels = np.flatnonzero(ds.hrf_index == h)
        blocks = [reg[h] for reg in regressors]
        if estimator == "ridge":
            out[:, voxels] = _ridge(blocks, ds, train, test, voxels)[0]
            continue
        X = np.concatenate(blocks)
        X = np.column_stack([X, np.ones(len(X))])
        coef = np.linalg.lstsq(X[tr_mask], Y[tr_mask][:, voxels], rcond=None)[0]
        out[:, voxels] = X[te_mask] @ coef
    return out


def held_out_folds(n_runs: int, n_test: int, folds: str = "last") -> list[list[int]]:
    """The test runs of each fit: the last ``n_test`` runs (``folds="last"``), or every run
    once, ``n_test`` consecutive runs per fold (``folds="all"``; a last, shorter fold takes
    what is left)."""
    runs = list(range(n_runs))
    if folds == "last":
        return [runs[-n_test:]]
    if folds == "all":
        return [runs[i : i + n_test] for i in range(0, n_runs, n_test)]
    raise ValueError(f"`folds` must be 'last' or 'all', got {folds!r} instead.")


def scores(
    ds: Dataset,
    *,
    n_test: int,
    folds: str = "last",
    mode: str = "auto",
    hrf_model=None,
    event_penalty=None,
) -> dict:
    """Mean test R² (space x ROI) of the pipeline and of both oracles on one dataset.

    Each fold of :func:`held_out_folds` is fitted on the other runs; the R² of a voxel is
    that of its test predictions pooled over the folds (every run once with
    ``folds="all"``), for the pipeline and both oracles on the same folds.
    """
    runs = list(range(len(ds.bold)))
    splits = [
        ([r for r in runs if r not in test], test)
        for test in held_out_folds(len(runs), n_test, folds)
    ]
    y = np.concatenate([_test_bold(ds, test) for _, test in splits])
    out = {name: np.zeros((4, 4)) for name in ("pipeline", "oracle", "oracle_planted")}
    alignment = None
    options = {"mode": mode, "hrf_model": hrf_model, "event_penalty": event_penalty}
    planted = {"columns": "planted", "estimator": "ols"}
    for s, space in enumerate(SPACES):
        fits = [pipeline_predictions(ds, space, *split, **options) for split in splits]
        alignment = fits[0][1]
        p = _r2(y, np.concatenate([pred for pred, _ in fits]))
        o = _r2(y, np.concatenate([oracle_predictions(ds, space, *split) for split in splits]))
        op = _r2(
            y, np.concatenate([oracle_predictions(ds, space, *sp, **planted) for sp in splits])
        )
        for k in range(4):
            in_roi = ds.roi == k
            out["pipeline"][s, k], out["oracle"][s, k] = p[in_roi].mean(), o[in_roi].mean()
            out["oracle_planted"][s, k] = op[in_roi].mean()
    return {**out, "alignment": alignment}


def _same_order(pipe: np.ndarray, oracle: np.ndarray) -> bool:
    """Whether ``pipe`` orders every pair of models that ``oracle`` tells apart as it does."""
    return all(
        pipe[a] > pipe[b]
        for a in range(len(oracle))
        for b in range(len(oracle))
        if oracle[a] - oracle[b] >= RANK_TOLERANCE
    )


def summarise(results: list[dict]) -> dict:
    """Ratios (space x ROI) and rankings per ROI of R² averaged over datasets.

    ``ratio`` and ``rank_equal`` compare the pipeline with the oracle that fits every
    column of each space on its exact regressors by the pipeline's ridge
    (:func:`oracle_predictions` defaults); ``ratio_planted`` and ``rank_equal_planted`` with OLS
    on the planted columns only. Ratios are shown where the space is planted in the ROI
    and the planted oracle explains at least :data:`MIN_ORACLE_R2`. ``lowest``: the
    smallest ratio; ``spread``: the largest minus the smallest. ``rank_equal``: per ROI,
    whether the pipeline orders every two models whose oracle R² differ by at least
    :data:`RANK_TOLERANCE` as the oracle does; ``rank_identical``: whether the full
    orders are equal.
    """
    pipe, orac, orac_planted = (
        np.mean([r[name] for r in results], axis=0)
        for name in ("pipeline", "oracle", "oracle_planted")
    )
    planted = np.array([[STRENGTHS[(s - k) % 4] > 0 for k in range(4)] for s in range(4)])
    planted &= orac_planted >= MIN_ORACLE_R2
    ratio = np.where(planted, pipe / orac, np.nan)
    return {
        "pipeline": pipe,
        "oracle": orac,
        "oracle_planted": orac_planted,
        "ratio": ratio,
        "ratio_planted": np.where(planted, pipe / orac_planted, np.nan),
        "lowest": float(np.nanmin(ratio)),
        "spread": float(np.nanmax(ratio) - np.nanmin(ratio)),
        "rank_equal": [_same_order(pipe[:, k], orac[:, k]) for k in range(4)],
        "rank_equal_planted": [_same_order(pipe[:, k], orac_planted[:, k]) for k in range(4)],
        "rank_identical": [
            list(np.argsort(-pipe[:, k])) == list(np.argsort(-orac[:, k])) for k in range(4)
        ],
        "alignment": results[0]["alignment"],
        "n_datasets": len(results),
    }


def fidelity(ds: Dataset, **options) -> dict:
    """:func:`summarise` of one dataset (``options``: as :func:`scores`): ratios, rankings
    and the resolved alignment."""
    return summarise([scores(ds, **options)])


def _print(title: str, result: dict) -> None:
    a = result["alignment"]
    print(
        f"\n{title}: alignment {a['method']}, hrf_model {a['hrf_model']}, "
        f"event_regressor {a['event_regressor']}"
        + (f", encoder's HRF {a['encoder_hrf']}" if a.get("encoder_hrf") else "")
    )
    for suffix, name in (("", "every column, ridge"), ("_planted", "planted columns, OLS")):
        print(f"pipeline/oracle test R2 (oracle: exact regressors, {name})")
        print(f"{'':24s}" + "".join(f"{f'ROI {k}':>9s}" for k in range(4)))
        for s, space in enumerate(SPACES):
            ratio = result[f"ratio{suffix}"][s]
            cells = "".join(f"{'-':>9s}" if np.isnan(v) else f"{v:9.3f}" for v in ratio)
            print(f"{space:24s}{cells}")
        oracle = result[f"oracle{suffix}"]
        print(f"{'oracle R2 (driving)':24s}" + "".join(f"{oracle[k, k]:9.3f}" for k in range(4)))
        ranks = result[f"rank_equal{suffix}"]
        print(f"{'ranking = oracle':24s}" + "".join(f"{v!s:>9s}" for v in ranks))
        if not suffix:
            ranks = result["rank_identical"]
            print(f"{'  (every pair)':24s}" + "".join(f"{v!s:>9s}" for v in ranks))
    print("test R2 per ROI (pipeline / oracle, every column / oracle, planted columns)")
    for s, space in enumerate(SPACES):
        cells = "".join(
            f"{result['pipeline'][s, k]:7.3f}/{result['oracle'][s, k]:.3f}/"
            f"{result['oracle_planted'][s, k]:.3f}"
            for k in range(4)
        )
        print(f"{space:18s}{cells}")
    print(f"lowest ratio {result['lowest']:.3f}, spread {result['spread']:.3f}")


def share_weights(ds: Dataset, others) -> None:
    """Let ``ds`` reuse the event weights of a dataset with the same events (same seed)."""
    for other in others:
        if other is not ds and len(other.timing) == len(ds.timing) and other.tr == ds.tr:
            same = all(
                np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
                for a, b in zip(other.timing, ds.timing, strict=True)
            )
            if same and other.n_volumes == ds.n_volumes:
                ds.weights = other.weights
                return


def run(
    small: bool,
    seeds: list[int],
    compare: bool,
    hrf_model=None,
    event_penalty=None,
    folds: str = "all",
    n_runs: int | None = None,
) -> dict[str, dict]:
    """Print the tables (R² averaged over the seeds' datasets); return them by design.

    ``folds``: ``"all"`` scores every run once (folds of 2 runs), ``"last"`` the last 2.
    ``n_runs``: runs per dataset instead of the size's (6 small, 10 full).
    """
    size = {"n_runs": 6, "n_volumes": 120} if small else {"n_runs": 10, "n_volumes": 160}
    if n_runs is not None:
        size["n_runs"] = n_runs
    out = {}
    designs = [
        ("event_related", "canonical", "auto"),
        ("event_related", "mismatch", "auto"),
        ("movie", "canonical", "auto"),
        ("movie", "mismatch", "auto"),
        ("movie", "glover", "auto"),
        ("blocked", "canonical", "auto"),
        ("blocked", "mismatch", "auto"),
    ]
    if compare:
        designs += [("event_related", "canonical", "average")]
        designs += [("event_related", "canonical", "uncentred")]
    cache = {}
    for kind, hrf, mode in designs:
        t0 = time.perf_counter()
        per_seed = []
        for seed in seeds:
            if (kind, hrf, seed) not in cache:
                cache[kind, hrf, seed] = make_dataset(kind, seed=seed, hrf=hrf, **size)
                share_weights(cache[kind, hrf, seed], cache.values())
            ds = cache[kind, hrf, seed]
            per_seed.append(
                scores(
                    ds,
                    n_test=2,
                    folds=folds,
                    mode=mode,
                    hrf_model=hrf_model,
                    event_penalty=event_penalty,
                )
            )
        result = summarise(per_seed)
        key = f"{kind}/{mode}" if hrf == "canonical" else f"{kind}/{mode}/{hrf} HRFs"
        out[key] = result
        took = time.perf_counter() - t0
        _print(f"{kind}, {hrf} HRFs ({mode}, {folds} folds, seeds {seeds}, {took:.1f} s)", result)
        for seed, one in zip(seeds, per_seed, strict=True):
            alone = summarise([one])
            print(
                f"seed {seed} alone: lowest ratio {alone['lowest']:.3f}, spread "
                f"{alone['spread']:.3f}, ranking = oracle {alone['rank_equal']}"
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="6 runs of 120 volumes")
    parser.add_argument("--seed", type=int, default=0, help="the first seed")
    parser.add_argument("--seeds", type=int, default=8, help="datasets averaged per design")
    parser.add_argument("--compare", action="store_true", help="also the paths before auto")
    parser.add_argument(
        "--hrf-model",
        action="append",
        help="HRF model of the event-related path instead of the resolved library (repeat "
        "for a library)",
    )
    parser.add_argument(
        "--event-penalty",
        type=float,
        help="relative ridge penalty of the event regressor (default: the encoding stage's; "
        "1 penalises it like a feature)",
    )
    parser.add_argument(
        "--folds",
        choices=("all", "last"),
        default="all",
        help="score every run once, 2 runs per fold (all), or the last 2 runs only (last)",
    )
    parser.add_argument("--runs", type=int, help="runs per dataset (default: 6 small, 10 full)")
    args = parser.parse_args()
    seeds = list(range(args.seed, args.seed + args.seeds))
    run(args.small, seeds, args.compare, args.hrf_model, args.event_penalty, args.folds, args.runs)


if __name__ == "__main__":
    main()
