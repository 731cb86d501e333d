"""Benchmark the per-target ridge solver against himalaya and scikit-learn.

Prints timings measured side by side in one run, their ratios, the solver's achieved
GFLOP/s against a large float32 matrix product, peak memory, and the whole encoding
stage with zarr I/O.

Usage: ``python bench/bench_ridge.py [--small]``, or ``python bench/bench_ridge.py
--sizes [--repeats 5] [--busy]`` for the medians of interleaved repeats of the solver and
himalaya at three sizes (600×200×2k, 1,500×500×10k, 3,000×1,000×20k); ``--busy`` runs a
process that keeps one core busy throughout, as another job on a shared node would.
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from neuroflow.models import ridge_cv, run_splits


def _rss_mb() -> float:
    """High-water mark of this process's resident memory, in MB."""
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def _timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def gemm_gflops(size: int = 4096, repeats: int = 3) -> float:
    """Best-of-``repeats`` float32 GEMM rate on the CPU, in GFLOP/s."""
    a = torch.randn(size, size)
    b = torch.randn(size, size)
    best = np.inf
    for _ in range(repeats):
        _, dt = _timed(torch.matmul, a, b)
        best = min(best, dt)
    return 2 * size**3 / best / 1e9


def solver_flops(n: int, p: int, t: int, splits, n_alphas: int) -> float:
    """Floating-point operations of ``ridge_cv`` (primal form) on this problem."""
    flops = 2 * n * p * p  # X.T X
    flops += 2 * n * p * t  # C = X.T Y, once per target batch
    for train, val in splits:
        nt, nv = len(train), len(val)
        flops += 2 * nt * p * p + 9 * p**3 + 2 * nv * p * p  # Gram, eigh, A = X_val V
        flops += 2 * p * p * t + 2 * nv * p * t  # B = V.T C - A.T Y_val
        flops += n_alphas * (2 * nv * p * t + 4 * nv * t)  # predictions + fused R²
    flops += 9 * p**3 + 2 * n * p * t + 4 * p * p * t  # refit: eigh, X.T Y, rotate, back
    return float(flops)


def run_himalaya(X, Y, alphas, splits, backend: str) -> float:
    from himalaya.backend import set_backend
    from himalaya.ridge import RidgeCV
    from himalaya.scoring import r2_score

    set_backend(backend, on_error="raise")
    try:
        model = RidgeCV(alphas=alphas, cv=splits, solver_params={"score_func": r2_score})
        Xb, Yb = (torch.as_tensor(X), torch.as_tensor(Y)) if backend == "torch" else (X, Y)
        _, dt = _timed(model.fit, Xb, Yb)
    finally:
        set_backend("numpy")
    return dt


def run_sklearn_gridsearch(X, Y, alphas, splits, n_sub: int) -> float:
    """GridSearchCV(Ridge) per target (sklearn has no per-target alpha with grouped CV)."""
    from sklearn.linear_model import Ridge
    from sklearn.model_selection import GridSearchCV

    t0 = time.perf_counter()
    for j in range(n_sub):
        GridSearchCV(Ridge(fit_intercept=False), {"alpha": alphas}, cv=splits, scoring="r2").fit(
            X, Y[:, j]
        )
    return time.perf_counter() - t0


def run_sklearn_multitarget(X, Y, alphas, splits) -> float:
    """sklearn Ridge on all targets per (fold, alpha), per-target choice, then refit."""
    from sklearn.linear_model import Ridge
    from sklearn.metrics import r2_score

    t0 = time.perf_counter()
    scores = np.zeros((len(alphas), Y.shape[1]))
    for train, val in splits:
        for i, a in enumerate(alphas):
            model = Ridge(alpha=a, fit_intercept=False).fit(X[train], Y[train])
            scores[i] += r2_score(Y[val], model.predict(X[val]), multioutput="raw_values")
    best = scores.argmax(0)
    for i in np.unique(best):
        Ridge(alpha=alphas[i], fit_intercept=False).fit(X, Y[:, best == i])
    return time.perf_counter() - t0


def run_stage(n_runs: int, n_per_run: int, p_base: int, t: int, lags: int) -> tuple[float, float]:
    """Write synthetic stores, run ``fit_encoding``; returns (write time, stage time)."""
    import xarray as xr

    from neuroflow.artifacts import build_provenance, write_dataset
    from neuroflow.encoding import fit_encoding

    rng = np.random.default_rng(0)
    W = rng.standard_normal((p_base, t)).astype(np.float32) / np.sqrt(p_base)
    prov = build_provenance(stage="bench", version="0", config={})
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        brain, feats = [], []
        t0 = time.perf_counter()
        for r in range(n_runs):
            F = rng.standard_normal((n_per_run, p_base)).astype(np.float32)
            Yr = F @ W + rng.standard_normal((n_per_run, t)).astype(np.float32)
            time_s = np.arange(n_per_run) * 2.0
            ds = xr.Dataset(
                {"bold": (("time", "voxel"), Yr)},
                coords={
                    "time": time_s,
                    "voxel": np.arange(t),
                    "roi": ("voxel", np.full(t, "V1", dtype=object)),
                    **{c: ("voxel", np.arange(t)) for c in "ijk"},
                    **{c: ("voxel", np.arange(t) * 2.0) for c in "xyz"},
                },
                attrs={
                    "tr": 2.0,
                    "affine": np.eye(4).tolist(),
                    "mask_shape": [t, 1, 1],
                    "entities": {"subject": "01", "task": "bench", "run": str(r + 1)},
                },
            )
            brain.append(write_dataset(ds, root / f"bold_{r}.zarr", provenance=prov))
            fds = xr.Dataset(
                {"features": (("time", "feature"), F)},
                coords={"time": time_s, "feature": np.arange(p_base)},
            )
            feats.append(write_dataset(fds, root / f"feat_{r}.zarr", provenance=prov))
        t_write = time.perf_counter() - t0
        cfg = {
            "feature_spaces": ["f"],
            "model": "ridge",
            "alphas": {"start": 0, "stop": 5, "num": 10},
            "delays": {"method": "fir", "lags": list(range(1, lags + 1))},
            "split": {"test_runs": [str(n_runs)]},
            "device": "cpu",
        }
        _, t_stage = _timed(
            fit_encoding,
            brain=brain,
            features={"f": feats},
            output=root / "enc.zarr",
            config=cfg,
            provenance=prov,
        )
    return t_write, t_stage


SIZES = ((600, 200, 2000), (1500, 500, 10000), (3000, 1000, 20000))


def _problem(n: int, p: int, t: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)).astype(np.float32)
    Y = (X @ rng.standard_normal((p, t)).astype(np.float32)) / np.sqrt(p)
    Y += rng.standard_normal((n, t)).astype(np.float32) * rng.uniform(0.5, 5, t).astype(np.float32)
    X -= X.mean(0)
    Y -= Y.mean(0)
    return X, Y, run_splits(np.repeat(np.arange(5), n // 5)), np.logspace(0, 5, 10)


def _spin(stop) -> None:  # pragma: no cover - runs in a child process
    x = 0
    while not stop.is_set():
        x += 1


def compare_sizes(repeats: int, busy: bool, backends: tuple[str, ...] = ("torch", "numpy")) -> None:
    """Median of interleaved repeats of neuroflow and himalaya at :data:`SIZES`."""
    import multiprocessing as mp

    stop = mp.Event()
    spinner = mp.Process(target=_spin, args=(stop,), daemon=True) if busy else None
    if spinner is not None:
        spinner.start()
    print(
        f"{repeats} interleaved repeats per size, torch threads={torch.get_num_threads()}"
        + (", one other process spinning on a core throughout" if busy else "")
    )
    try:
        for n, p, t in SIZES:
            X, Y, splits, alphas = _problem(n, p, t)
            times: dict[str, list[float]] = {"neuroflow": []}
            times.update({f"himalaya {b}": [] for b in backends})
            for _ in range(repeats):
                times["neuroflow"].append(
                    _timed(ridge_cv, X, Y, alphas=alphas, splits=splits, device="cpu")[1]
                )
                for backend in backends:
                    times[f"himalaya {backend}"].append(run_himalaya(X, Y, alphas, splits, backend))
            med = {k: float(np.median(v)) for k, v in times.items()}
            spread = {k: (min(v), max(v)) for k, v in times.items()}
            best = min((f"himalaya {b}" for b in backends), key=med.get)
            print(
                f"{n} x {p} x {t}: "
                + ", ".join(
                    f"{k} median {med[k]:.2f} s [{spread[k][0]:.2f}-{spread[k][1]:.2f}]"
                    for k in times
                )
                + f" -> {med[best] / med['neuroflow']:.2f}x vs {best} (target >= 1.3x)"
            )
    finally:
        stop.set()
        if spinner is not None:
            spinner.join(timeout=10)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="quick run on a small problem")
    parser.add_argument("--sizes", action="store_true", help="interleaved repeats, 3 sizes")
    parser.add_argument("--repeats", type=int, default=5, help="repeats per size (--sizes)")
    parser.add_argument("--busy", action="store_true", help="keep one core busy (--sizes)")
    parser.add_argument(
        "--backends",
        nargs="+",
        default=["torch", "numpy"],
        choices=["torch", "numpy"],
        help="himalaya backends compared (--sizes)",
    )
    args = parser.parse_args(argv)
    if args.sizes:
        compare_sizes(max(1, args.repeats), args.busy, tuple(args.backends))
        return
    if args.small:
        n, p, t, n_sub, n_sub_mt = 600, 200, 2000, 10, 2000
    else:
        n, p, t, n_sub, n_sub_mt = 3000, 1000, 20000, 20, 2000
    n_folds, n_alphas = 5, 10
    # leave-one-run-out over 5 runs = 5 folds, 10 alphas
    X, Y, splits, alphas = _problem(n, p, t)
    print(
        f"problem: {n} samples x {p} features x {t} targets, {n_folds} folds, "
        f"{n_alphas} alphas, float32, torch threads={torch.get_num_threads()}"
    )

    gemm = gemm_gflops()
    rss0 = _rss_mb()
    res, t_ours = _timed(ridge_cv, X, Y, alphas=alphas, splits=splits, device="cpu")
    rss_ours = _rss_mb()
    gflop = solver_flops(n, p, t, splits, n_alphas) / 1e9
    print(
        f"neuroflow ridge_cv:        {t_ours:8.2f} s   ({gflop:.0f} GFLOP, "
        f"{gflop / t_ours:.0f} GFLOP/s = {gflop / t_ours / gemm:.0%} of GEMM {gemm:.0f} GFLOP/s)"
    )
    print(
        f"  peak RSS {rss_ours:.0f} MB (+{rss_ours - rss0:.0f} MB over the data; "
        f"X+Y = {(X.nbytes + Y.nbytes) / 2**20:.0f} MB)"
    )

    him = {}
    for backend in ("torch", "numpy"):
        with contextlib.suppress(Exception):
            him[backend] = run_himalaya(X, Y, alphas, splits, backend)
            print(f"himalaya RidgeCV ({backend:5s}):  {him[backend]:8.2f} s")
    if him:
        best = min(him, key=him.get)
        print(
            f"  -> speed-up vs himalaya ({best}, the faster): {him[best] / t_ours:.2f}x "
            f"(target >= 1.3x); peak RSS now {_rss_mb():.0f} MB"
        )

    t_gs = run_sklearn_gridsearch(X, Y, alphas, splits, n_sub) * t / n_sub
    print(
        f"sklearn GridSearchCV(Ridge) per target: {t_gs:8.1f} s (measured on {n_sub} "
        f"targets, scaled linearly to {t}) -> speed-up {t_gs / t_ours:.0f}x (target >= 10x)"
    )
    sub = min(n_sub_mt, t)
    t_mt = run_sklearn_multitarget(X, Y[:, :sub], alphas, splits) * t / sub
    print(
        f"sklearn Ridge multi-target per (fold, alpha): {t_mt:8.1f} s (measured on {sub} "
        f"targets, scaled linearly) -> speed-up {t_mt / t_ours:.1f}x"
    )

    n_runs, lags = 6, 4
    p_base = max(p // lags, 1)
    t_write, t_stage = run_stage(n_runs, n // (n_runs - 1), p_base, t, lags)
    print(
        f"encoding stage with zarr I/O ({n_runs - 1} train runs x {n // (n_runs - 1)} TRs, "
        f"{p_base}x{lags} delayed features, {t} voxels, LORO): writing inputs "
        f"{t_write:.1f} s, fit_encoding {t_stage:.1f} s ({t_stage / t_ours:.2f}x the bare "
        f"solver above)"
    )
    if him:
        print(
            f"  -> whole stage (zarr in, fit, predict, zarr out) vs himalaya RidgeCV ({best}) "
            f"on the same problem: {him[best] / t_stage:.2f}x (target >= 1.3x)"
        )
    assert np.isfinite(res.cv_score).all()


if __name__ == "__main__":
    main()
