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
made with SPM's canonical HRF on a 0.1 s grid.

The pipeline is what the workflow runs (its building blocks, without files): the design
is read from the events (:func:`neuroflow.features.design.classify_run`), the alignment
settings resolved from it (:func:`neuroflow.features.design.resolve_alignment`), the
features aligned (:func:`neuroflow.features.align.hrf_weights` with the event regressor
and the per-event rows of :func:`neuroflow.features.align.event_rows`, or
:func:`neuroflow.features.align.average_weights` and the encoder's HRF), standardised on
the training runs and fitted by ridge regression with the encoding stage's penalty grid
and leave-one-run-out cross-validation (per voxel, the HRF model of a library that
cross-validates best). The oracle is ordinary least squares on the exact planted
regressors of each space. Printed: pipeline / oracle mean test R² per feature space per
ROI (for the spaces planted in that ROI), and whether the pipeline's ranking of the four
models in each ROI equals the oracle's.

Usage: ``python bench/bench_ranking_fidelity.py [--small] [--seed 0] [--compare]``;
``--compare`` adds the event-related design aligned as before ``method: auto`` (average
within TRs and the encoder's HRF) and as ``config/presets/event_related.yaml`` did
before the per-event rows were centred.
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from neuroflow.encoding.stage import DEFAULT_CONFIG, make_alphas
from neuroflow.features.align import average_weights, event_rows, hrf_weights
from neuroflow.features.design import classify_run, resolve_alignment
from neuroflow.models import ridge_cv, run_splits
from neuroflow.models.delays import apply_delays

SPACES = ("image_statistics", "condition", "modulator", "embedding")
#: Strength of space ``(k + j) % 4`` in ROI ``k``.
STRENGTHS = (1.0, 0.5, 0.25, 0.0)
#: Signal-to-noise variance ratio of ROI ``k``.
SNRS = (0.8, 0.6, 0.45, 0.35)
#: Smallest oracle R² of a (space, ROI) pair whose ratio is shown.
MIN_ORACLE_R2 = 0.05
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
    oracle: dict[str, list[np.ndarray]]  # space -> per run exact planted regressors


def _spm_regressors(values, onsets, durations, n_volumes, tr):
    """Each column of ``values`` as SPM-HRF-convolved boxcars on a 0.1 s grid."""
    dt = 0.1
    grid = np.zeros((round(n_volumes * tr / dt) + 400, values.shape[1]))
    for v, onset, duration in zip(values, onsets, durations, strict=True):
        start = round(onset / dt)
        grid[start : start + max(1, round(duration / dt))] += v
    t = np.arange(0, 32, dt)
    from scipy.stats import gamma

    hrf = gamma.pdf(t, 6) - gamma.pdf(t, 16) / 6.0
    hrf /= hrf.sum()
    conv = np.stack([np.convolve(grid[:, j], hrf)[: len(grid)] for j in range(grid.shape[1])], 1)
    return conv[np.round(np.arange(n_volumes) * tr / dt).astype(int)]


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


def _movie_timing(rng, n_volumes, tr):
    onsets, durations, t = [], [], 0.0
    while t < n_volumes * tr:
        d = rng.uniform(2.0, 6.0)
        onsets.append(t)
        durations.append(d)
        t += d
    return np.array(onsets), np.array(durations)


def make_dataset(kind: str, *, n_runs: int, n_volumes: int, seed: int, n_voxels: int = 12):
    """Generate one design (``"event_related"`` or ``"movie"``) with planted ROIs."""
    rng = np.random.default_rng(seed)
    tr = 2.0 if kind == "event_related" else 1.5
    timing = [
        (_event_timing if kind == "event_related" else _movie_timing)(rng, n_volumes, tr)
        for _ in range(n_runs)
    ]
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
    evoked = 0.5 if kind == "event_related" else 0.0
    courses = {s: [] for s in SPACES}
    oracle = {s: [] for s in SPACES}
    for r, (onsets, durations) in enumerate(timing):
        for s in SPACES:
            values = np.column_stack([np.ones(counts[r]), planted[s][r]])
            reg = _spm_regressors(values, onsets, durations, n_volumes, tr)
            oracle[s].append(reg if evoked else reg[:, 1:])
            courses[s].append(np.column_stack([reg[:, 0], reg[:, 1:] @ weights[s]]))
    scale = {s: 1.0 / np.concatenate(courses[s])[:, 1].std() for s in SPACES}
    evoked_scale = 1.0 / np.concatenate(courses[SPACES[0]])[:, 0].std()
    roi = np.repeat(np.arange(4), n_voxels)
    gains = np.exp(0.2 * rng.standard_normal(roi.size))
    signals = []
    for r in range(n_runs):
        per_roi = []
        for k in range(4):
            course = evoked * evoked_scale * courses[SPACES[0]][r][:, 0]
            for j, strength in enumerate(STRENGTHS):
                space = SPACES[(k + j) % 4]
                course = course + strength * scale[space] * courses[space][r][:, 1]
            per_roi.append(course)
        signals.append(np.stack(per_roi, 1))
    pooled = np.concatenate(signals)
    signal_sd = pooled.std(0)
    bold = []
    for r in range(n_runs):
        noise = np.zeros((n_volumes, roi.size))
        innov = rng.standard_normal((n_volumes, roi.size))
        noise[0] = innov[0]
        for t in range(1, n_volumes):
            noise[t] = 0.3 * noise[t - 1] + np.sqrt(1 - 0.09) * innov[t]
        sig = signals[r][:, roi] / signal_sd[roi] * np.sqrt(np.array(SNRS)[roi]) * gains
        bold.append(sig + noise)
    return Dataset(kind, tr, n_volumes, timing, rows, planted, bold, roi, oracle)


def _r2(y, pred):
    return 1.0 - ((y - pred) ** 2).sum(0) / ((y - y.mean(0)) ** 2).sum(0)


def _ridge(blocks, ds, train, test):
    """Stage-like ridge fit of one design (list over runs); test R² and CV score per voxel."""
    X = np.concatenate(blocks)
    runs = np.concatenate([np.full(ds.n_volumes, r) for r in range(len(ds.bold))])
    tr_mask, te_mask = np.isin(runs, train), np.isin(runs, test)
    mean, std = X[tr_mask].mean(0), X[tr_mask].std(0)
    Z = (X - mean) / np.where(std > 0, std, 1.0)
    Y = np.concatenate(ds.bold)
    z_mean = Z[tr_mask].mean(0)
    y_mean = Y[tr_mask].mean(0)
    result = ridge_cv(
        Z[tr_mask] - z_mean,
        Y[tr_mask] - y_mean,
        alphas=make_alphas(DEFAULT_CONFIG["alphas"]),
        splits=run_splits(runs[tr_mask]),
    )
    pred = result.predict(Z[te_mask] - z_mean) + y_mean
    return _r2(Y[te_mask], pred), np.asarray(result.cv_score)


def pipeline_r2(
    ds: Dataset, space: str, train, test, *, mode: str = "auto"
) -> tuple[np.ndarray, dict]:
    """Test R² per voxel of the pipeline's model of one feature space.

    ``mode``: ``"auto"`` (the alignment ``method: auto`` resolves to), ``"average"``
    (average within TRs and the encoder's HRF, the path before ``auto``) or
    ``"uncentred"`` (the event-related preset with raw per-event rows).
    """
    kinds = {classify_run(o, d, ds.tr).kind for o, d in ds.timing}
    kind = kinds.pop() if len(kinds) == 1 else "unknown"
    delays = dict(DEFAULT_CONFIG["delays"])
    if mode == "average":
        kind = "continuous"
    alignment, delays = resolve_alignment(ALIGNMENT, delays, kind)
    times = np.arange(ds.n_volumes) * ds.tr
    if alignment["method"] == "average":
        blocks = []
        for (onsets, durations), rows in zip(ds.timing, ds.rows[space], strict=True):
            w = average_weights(times, ds.tr, onsets, durations)
            blocks.append(apply_delays(w @ rows, delays, ds.tr))
        return _ridge(blocks, ds, train, test)[0], alignment
    centre = np.concatenate(ds.rows[space]).mean(0)
    fits = []
    for model in alignment["hrf_model"]:
        blocks = []
        for (onsets, durations), rows in zip(ds.timing, ds.rows[space], strict=True):
            w = hrf_weights(times, ds.tr, onsets, durations, hrf_model=model)
            if mode == "uncentred":
                placed = np.column_stack([rows, np.ones(len(rows))])
            else:
                placed = event_rows(rows, centre, alignment["event_regressor"])
            blocks.append(w @ placed)
        fits.append(_ridge(blocks, ds, train, test))
    scores = np.stack([f[1] for f in fits])
    choice = np.argmax(scores, 0)
    return np.stack([f[0] for f in fits])[choice, np.arange(choice.size)], alignment


def oracle_r2(ds: Dataset, space: str, train, test) -> np.ndarray:
    """Test R² per voxel of OLS on the exact planted regressors of one space."""
    X = np.concatenate(ds.oracle[space])
    X = np.column_stack([X, np.ones(len(X))])
    runs = np.concatenate([np.full(ds.n_volumes, r) for r in range(len(ds.bold))])
    tr_mask, te_mask = np.isin(runs, train), np.isin(runs, test)
    Y = np.concatenate(ds.bold)
    coef = np.linalg.lstsq(X[tr_mask], Y[tr_mask], rcond=None)[0]
    return _r2(Y[te_mask], X[te_mask] @ coef)


def fidelity(ds: Dataset, *, n_test: int, mode: str = "auto") -> dict:
    """Ratios (space x ROI), rankings per ROI and the resolved alignment."""
    runs = list(range(len(ds.bold)))
    train, test = runs[:-n_test], runs[-n_test:]
    pipe, orac = np.zeros((4, 4)), np.zeros((4, 4))
    alignment = None
    for s, space in enumerate(SPACES):
        p, alignment = pipeline_r2(ds, space, train, test, mode=mode)
        o = oracle_r2(ds, space, train, test)
        for k in range(4):
            pipe[s, k], orac[s, k] = p[ds.roi == k].mean(), o[ds.roi == k].mean()
    # ratios where the space is planted in the ROI and its oracle explains something
    planted = np.array([[STRENGTHS[(s - k) % 4] > 0 for k in range(4)] for s in range(4)])
    planted &= orac >= MIN_ORACLE_R2
    return {
        "pipeline": pipe,
        "oracle": orac,
        "ratio": np.where(planted, pipe / orac, np.nan),
        "rank_equal": [
            list(np.argsort(-pipe[:, k])) == list(np.argsort(-orac[:, k])) for k in range(4)
        ],
        "alignment": alignment,
    }


def _print(title: str, result: dict) -> None:
    a = result["alignment"]
    print(
        f"\n{title}: alignment {a['method']}, hrf_model {a['hrf_model']}, "
        f"event_regressor {a['event_regressor']}"
    )
    print(f"{'pipeline/oracle test R2':24s}" + "".join(f"{f'ROI {k}':>9s}" for k in range(4)))
    for s, space in enumerate(SPACES):
        cells = "".join(f"{'-':>9s}" if np.isnan(v) else f"{v:9.3f}" for v in result["ratio"][s])
        print(f"{space:24s}{cells}")
    print(
        f"{'oracle R2 (planted)':24s}" + "".join(f"{result['oracle'][k, k]:9.3f}" for k in range(4))
    )
    print(f"{'ranking = oracle':24s}" + "".join(f"{v!s:>9s}" for v in result["rank_equal"]))


def run(small: bool, seed: int, compare: bool) -> dict[str, dict]:
    """Print the tables; return the results by design (and comparison mode)."""
    size = {"n_runs": 6, "n_volumes": 120} if small else {"n_runs": 10, "n_volumes": 160}
    out = {}
    designs: list[tuple[str, str, Callable]] = [
        ("event_related", "auto", make_dataset),
        ("movie", "auto", make_dataset),
    ]
    if compare:
        designs += [("event_related", "average", make_dataset)]
        designs += [("event_related", "uncentred", make_dataset)]
    cache = {}
    for kind, mode, make in designs:
        t0 = time.perf_counter()
        if kind not in cache:
            cache[kind] = make(kind, seed=seed, **size)
        result = fidelity(cache[kind], n_test=2, mode=mode)
        out[f"{kind}/{mode}"] = result
        _print(f"{kind} ({mode}, {time.perf_counter() - t0:.1f} s)", result)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="6 runs of 120 volumes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compare", action="store_true", help="also the paths before auto")
    args = parser.parse_args()
    run(args.small, args.seed, args.compare)


if __name__ == "__main__":
    main()
