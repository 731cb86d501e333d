"""False-positive rates of the decoding tests on simulated null data, and power.

The first output is the calibration table (test, nominal level, observed rate of
``p <= nominal``, seeds, and the upper bound ``nominal + 2 binomial SE`` a calibrated
test stays under), from the simulators of ``tests/decoding/test_decoding_calibration.py``:

- fMRI identification of a twice-shown test movie (``_movie_identification_p``: AR(1)
  BOLD with drifts, shot features alike along the movie; 199 order-keeping
  permutations): top-1, top-5 and mean rank;
- fMRI concept decoding of 6 movie runs with scenes (``_concept_p``: ridge decoders
  refitted for each of 199 rotations / reflections within run blocks): mAP, mean AUC;
- EEG decoding of 4 runs whose epochs share run offsets, drift and AR(1) noise
  (``_eeg_p``, stage defaults): per-time-point and cluster p-values of classification,
  temporal generalisation and feature decoding, for named stimuli repeated across runs
  (``stimulus``; ``session``: folds by run), type-named events (``epoch``), and
  type-named events whose images repeat (``unnamed-repeats``: out of any null's reach,
  shown for reference).

Then the EEG tables per design: every seed simulates one subject's epochs with no
effect at all: temporally smooth, spatially mixed noise plus a response shared by the
repeats of each stimulus, and labels drawn independently of the data. The
``decode_eeg`` stage's own code then runs on them and we count the seeds with ANY
cluster at ``p <= alpha``:

- time-resolved classification with the stage defaults (shrinkage LDA, 5 grouped folds,
  99 label permutations; the sliding null taken from the generalisation null's
  diagonals as the stage does), and the generalisation (train x test time) test;
- the same sliding maps tested with the former thresholding (permuted maps thresholded
  at per-point quantiles of a null that holds them but not the observed map) and 20
  permutations, for reference;
- feature decoding over time (ridge to 5 random stimulus-level targets, 100 shuffles);
- group sign-flip tests over subjects' classification and feature time courses (of
  ``--group-maps`` further simulated subjects, split into groups of 6, 12 and 20).

Designs: ``stimulus`` (40 stimuli x 4 repeats, labels of whole stimuli, folds and
shuffles by stimulus), ``epoch`` (160 single epochs, two event types, stratified folds
and shuffles within folds) and ``repeats`` (60 stimuli shown 1, 2 or 4 times, labels of
whole stimuli: labels move only between stimuli shown as often). A calibrated test has
a rate at most ``alpha`` up to the binomial margin printed with it. ``--power`` adds a
planted class difference and reports how often the stage's defaults find it, and
``--timing`` times the classification of one demo-sized subject (1,200 epochs x 32
channels x 125 time points, two classes of 600 images) with the defaults, with the
former 20 / 5 permutations, and with 2 jobs.

python bench/bench_decoding_calibration.py                # 200 seeds per design
python bench/bench_decoding_calibration.py --table-only --seeds 200
python bench/bench_decoding_calibration.py --seeds 50 --group-maps 600 --jobs 2
python bench/bench_decoding_calibration.py --seeds 0 --group-maps 0 --power --timing
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

# the simulators of the calibration tests
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "decoding"))

ALPHA = 0.05
N_CH, N_T = 12, 40
#: Nominal levels of the calibration table.
LEVELS = (0.05, 0.01)


def simulate(seed: int, design: str, effect: float = 0.0):
    """One subject's epochs (``SubjectEpochs``) without (or with) a class difference."""
    from scipy.ndimage import gaussian_filter1d

    from neuroflow.analysis_inputs import SubjectEpochs

    rng = np.random.default_rng(seed)
    if design == "stimulus":
        n_stim, reps = 40, np.full(40, 4)
        label = rng.permutation(np.repeat(["a", "b"], 20))
    elif design == "epoch":
        n_stim, reps = 160, np.ones(160, int)
        label = rng.permutation(np.repeat(["a", "b"], 80))
    elif design == "repeats":
        n_stim, reps = 60, rng.permutation(np.repeat([1, 2, 4], 20))
        label = rng.permutation(np.repeat(["a", "b"], 30))
    else:
        raise ValueError(f"`design` must be stimulus, epoch or repeats, got {design!r} instead.")
    stim = np.repeat(np.arange(n_stim), reps)
    n = stim.size
    mix = rng.standard_normal((N_CH, N_CH)) / np.sqrt(N_CH)
    noise = gaussian_filter1d(rng.standard_normal((n, N_CH, N_T)), 2.0, axis=2)
    shared = gaussian_filter1d(rng.standard_normal((n_stim, N_CH, N_T)), 2.0, axis=2)[stim]
    data = np.einsum("ij,njt->nit", mix, noise + 0.7 * shared)
    y = label[stim]
    if effect:
        bump = np.exp(-0.5 * ((np.arange(N_T) - 22) / 3.0) ** 2)
        data += effect * (y == "a")[:, None, None] * rng.standard_normal(N_CH)[:, None] * bump
    order = rng.permutation(n)
    names = np.array([f"s{i}" for i in range(n_stim)])
    # events named by their type only: the stimulus is the class
    stimulus = y[order] if design == "epoch" else names[stim][order]
    return SubjectEpochs(
        subject=f"{seed}",
        data=data[order].astype(np.float32),
        times=np.arange(N_T) / 100.0,
        channels=np.array([f"E{i}" for i in range(N_CH)]),
        stimulus=stimulus,
        condition=y[order],
        session=np.zeros(n, dtype=str),
        sources=[Path(f"sim-{seed}")],
    )


def asymmetric_cluster_any(observed: np.ndarray, null: np.ndarray, alpha: float) -> bool:
    """Any cluster at ``p <= alpha`` under the former thresholding (for reference)."""
    from scipy import ndimage

    thr = np.quantile(null, 1 - alpha, axis=0)
    centre = null.mean(axis=0)

    def masses(m):
        lab, k = ndimage.label(m > thr)
        return ndimage.sum_labels(m - centre, lab, np.arange(1, k + 1)) if k else np.zeros(0)

    obs = masses(observed)
    mx = np.array([max(masses(m).max(initial=0.0), 0.0) for m in null])
    p = (1 + (mx[None] >= obs[:, None] - 1e-12).sum(1)) / (1 + len(null))
    return bool((p <= alpha).any())


def one_seed(args: tuple[int, str, float]) -> dict[str, object]:
    """Whether each test of one simulated subject finds a cluster at ``p <= ALPHA``."""
    from threadpoolctl import threadpool_limits

    from neuroflow.decoding.eeg_analyses import _classification
    from neuroflow.decoding.stage import resolve_config
    from neuroflow.decoding.temporal import cluster_permutation_test, sliding_ridge_scores

    seed, design, effect = args
    with threadpool_limits(1):
        sub = simulate(seed, design, effect)
        cfg = resolve_config({"seed": seed})
        X = sub.data.astype(np.float64)
        out = _classification(sub, X, cfg, seed)
        flags: dict[str, object] = {
            "classification": bool(np.nanmin(out["cluster_p"], initial=1) <= ALPHA),
            "generalization": bool(np.nanmin(out["gen_cluster_p"], initial=1) <= ALPHA),
            "former rule, 20 perm.": asymmetric_cluster_any(out["score"], out["null"][:20], ALPHA),
            "former rule, 99 perm.": asymmetric_cluster_any(out["score"], out["null"], ALPHA),
        }
        if design != "epoch":
            rng = np.random.default_rng(seed + 10**6)
            uniq, inv = np.unique(sub.stimulus, return_inverse=True)
            Y = rng.standard_normal((uniq.size, 5))[inv]
            score, null = sliding_ridge_scores(
                X,
                Y,
                sub.stimulus,
                alphas=cfg["features"]["alphas"],
                n_permutations=cfg["features"]["n_permutations"],
                seed=seed,
            )
            score, null = score.mean(axis=1), null.mean(axis=2)
            res = cluster_permutation_test(score, null, cluster_alpha=ALPHA)
            flags["features"] = bool(res.significant(ALPHA).any())
    return flags


def subject_maps(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Classification and feature time courses of one null subject (no permutations)."""
    from threadpoolctl import threadpool_limits

    from neuroflow.decoding.eeg_analyses import classification_groups
    from neuroflow.decoding.stage import resolve_config
    from neuroflow.decoding.temporal import sliding_ridge_scores, time_resolved_scores

    with threadpool_limits(1):
        sub = simulate(seed, "stimulus")
        X = sub.data.astype(np.float64)
        groups, _ = classification_groups(sub, sub.condition, "auto", 5, seed)
        score = time_resolved_scores(X, sub.condition, groups).mean(axis=0)
        rng = np.random.default_rng(seed + 10**6)
        uniq, inv = np.unique(sub.stimulus, return_inverse=True)
        Y = rng.standard_normal((uniq.size, 5))[inv]
        alphas = resolve_config({})["features"]["alphas"]
        r, _ = sliding_ridge_scores(X, Y, sub.stimulus, alphas=alphas)
    return score, r.mean(axis=1)


def margin(n: int, alpha: float = ALPHA) -> float:
    """``alpha`` plus two binomial standard errors over ``n`` runs."""
    return alpha + 2 * np.sqrt(alpha * (1 - alpha) / n)


def group_rates(n_maps: int, jobs: int, sizes: tuple[int, ...] = (6, 12, 20)) -> None:
    """False-positive rates of the group tests over disjoint groups of null subjects."""
    from neuroflow.decoding.temporal import group_cluster_test

    t0 = time.perf_counter()
    with ProcessPoolExecutor(jobs) as pool:
        pairs = list(pool.map(subject_maps, range(10**5, 10**5 + n_maps), chunksize=20))
    print(f"group tests of {n_maps} null subjects (stimulus design):")
    for i, (key, chance) in enumerate((("classification", 0.5), ("features", 0.0))):
        maps = np.stack([p[i] for p in pairs])
        for n_sub in sizes:
            n_groups = maps.shape[0] // n_sub
            hits = 0
            for g in range(n_groups):
                res = group_cluster_test(maps[g * n_sub : (g + 1) * n_sub], chance, seed=g)
                hits += bool(res.significant(ALPHA).any())
            if n_groups:
                print(
                    f"  {key:14s} {n_sub:2d} subjects: {hits / n_groups:.3f} of "
                    f"{n_groups} groups (margin {margin(n_groups):.3f})"
                )
    print(f"  ({time.perf_counter() - t0:.0f} s)")


def run(design: str, n_seeds: int, jobs: int, effect: float = 0.0) -> list[dict]:
    """Rates of every test over ``n_seeds`` simulated subjects of one design."""
    t0 = time.perf_counter()
    tasks = [(s, design, effect) for s in range(n_seeds)]
    with ProcessPoolExecutor(jobs) as pool:
        results = list(pool.map(one_seed, tasks))
    # a planted class difference leaves the feature targets unrelated to the data
    what = f"detection rate, class difference {effect:g}" if effect else "false-positive rate"
    print(
        f"{design}: {what} over {n_seeds} seeds (any cluster at p <= {ALPHA}; "
        f"margin {margin(n_seeds):.3f}), {time.perf_counter() - t0:.0f} s"
    )
    for key in results[0]:
        print(f"  {key:24s} {np.mean([r[key] for r in results]):.3f}")
    return results


def timing() -> None:
    """Time the classification of one demo-sized subject."""
    from neuroflow.analysis_inputs import SubjectEpochs
    from neuroflow.decoding.eeg_analyses import _classification
    from neuroflow.decoding.stage import resolve_config

    rng = np.random.default_rng(0)
    n = 1200  # demo-sized: 32 channels, 125 time points; two classes of 600 images
    cond = rng.permutation(np.repeat(["animate", "inanimate"], n // 2))
    X = rng.standard_normal((n, 32, 125))
    sub = SubjectEpochs(
        subject="01",
        data=X.astype(np.float32),
        times=np.arange(125) / 125.0,
        channels=np.array([f"E{i}" for i in range(32)]),
        stimulus=np.array([f"s{i}" for i in range(n)]),
        condition=cond,
        session=np.zeros(n, dtype=str),
        sources=[Path("demo-sized")],
    )
    for label, cls in (
        ("defaults (99 / 99 permutations)", {}),
        ("former defaults (20 / 5)", {"n_permutations": 20, "generalization_permutations": 5}),
        ("no generalisation, 99", {"generalization": False}),
        ("defaults, n_jobs 2", {"n_jobs": 2}),
    ):
        jobs = {"n_jobs": cls.pop("n_jobs")} if "n_jobs" in cls else {}
        cfg = resolve_config({"classification": cls, **jobs})
        t0 = time.perf_counter()
        _classification(sub, X, cfg, 0)
        print(f"classification of 1200 x 32 x 125, {label}: {time.perf_counter() - t0:.1f} s")


def identification_p(seed: int) -> dict[str, np.ndarray]:
    """Identification p-values (top1, top5, mean rank) of one null movie subject."""
    from test_decoding_calibration import _movie_identification_p
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        p = _movie_identification_p(seed)
    return {f"fMRI identification {k}": p[i] for i, k in enumerate(("top1", "top5", "mean rank"))}


def concept_p(seed: int) -> dict[str, np.ndarray]:
    """Concept p-values (mAP, mean AUC) of one null movie subject."""
    from test_decoding_calibration import _concept_p

    p = _concept_p(seed, keep_order=True)
    return {"fMRI concepts mAP": p[0], "fMRI concepts mean AUC": p[1]}


def eeg_p(args: tuple[int, str]) -> dict[str, np.ndarray]:
    """Per-point and cluster p-values of the stage's EEG tests on one null run subject."""
    from test_decoding_calibration import _eeg_p

    seed, design = args
    res = _eeg_p(seed, design, generalization=design == "stimulus")
    return {f"EEG {design}: {k.replace('_', ' ')}": v for k, v in res.items()}


def margin_at(n: int, alpha: float) -> float:
    """``alpha`` plus two binomial standard errors over ``n`` seeds."""
    return alpha + 2 * np.sqrt(alpha * (1 - alpha) / n)


def calibration_table(n_seeds: int, jobs: int, suites: list[str]) -> None:
    """Print test, nominal level, observed rate of ``p <= nominal``, seeds, bound."""
    t0 = time.perf_counter()
    rows: list[dict[str, np.ndarray]] = []
    with ProcessPoolExecutor(jobs) as pool:
        if "identification" in suites:
            rows.append(_stack(pool.map(identification_p, range(n_seeds), chunksize=5)))
        if "concepts" in suites:
            rows.append(_stack(pool.map(concept_p, range(n_seeds), chunksize=5)))
        for design in ("stimulus", "session", "epoch", "unnamed-repeats"):
            if "eeg" in suites:
                tasks = [(s, design) for s in range(n_seeds)]
                rows.append(_stack(pool.map(eeg_p, tasks, chunksize=5)))
    print(f"{'test':48s} {'nominal':>7s} {'observed':>8s} {'seeds':>5s} {'bound':>6s}")
    for block in rows:
        for name, p in block.items():
            for alpha in LEVELS:
                # a rate over time points varies no more than one point's: seeds bound it
                rate = float((p <= alpha).mean())
                flag = "" if rate <= margin_at(n_seeds, alpha) else "  ABOVE"
                print(
                    f"{name:48s} {alpha:7.2f} {rate:8.4f} {n_seeds:5d} "
                    f"{margin_at(n_seeds, alpha):6.3f}{flag}"
                )
    print(f"({time.perf_counter() - t0:.0f} s)")


def _stack(results) -> dict[str, np.ndarray]:
    """Per-seed dicts of p-values to arrays of shape (n_seeds, ...)."""
    results = list(results)
    return {k: np.array([r[k] for r in results]) for k in results[0]}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200, help="simulated subjects per design")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--designs", default="stimulus,epoch,repeats")
    parser.add_argument("--group-maps", type=int, default=2400, help="subjects of group tests")
    parser.add_argument("--power", action="store_true", help="also planted effects")
    parser.add_argument("--timing", action="store_true", help="also a demo-sized subject")
    parser.add_argument(
        "--suites", default="identification,concepts,eeg", help="rows of the calibration table"
    )
    parser.add_argument("--table-only", action="store_true", help="the calibration table only")
    args = parser.parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)
    if args.seeds:
        calibration_table(args.seeds, args.jobs, args.suites.split(","))
    if args.table_only:
        return
    for design in args.designs.split(",") if args.seeds else ():
        run(design, args.seeds, args.jobs)
    if args.group_maps:
        group_rates(args.group_maps, args.jobs)
    if args.power:
        for effect in (0.15, 0.3):
            run("stimulus", min(args.seeds, 50), args.jobs, effect)
    if args.timing:
        timing()


if __name__ == "__main__":
    main()
