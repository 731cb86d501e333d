"""Benchmark streaming in-silico prediction against one dense matrix product.

Same encoder, same pool, same run: :func:`neuroflow.insilico.predict_pool` streams a
pool of stimuli through a single-trial encoder in batches, keeping only the ROI means,
vs the numpy reference that standardises the whole pool, multiplies it by the
coefficients at once and averages the ROIs of the full (stimulus, voxel) matrix.
Prints both times, their ratio, the tracemalloc peak of each (the reference's grows
with the pool, the stream's does not) and the largest difference of the ROI means.

Usage: ``python bench/bench_predict.py [--small]``.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
from collections.abc import Callable, Iterator

import numpy as np
import xarray as xr

N_ROIS = 8


def make_encoder(n_features: int, n_voxels: int, seed: int = 0) -> xr.Dataset:
    """A random single-trial encoder with ``N_ROIS`` regions and unlabelled voxels."""
    from neuroflow.encoding.stored import encoder_dataset

    rng = np.random.default_rng(seed)
    ds = encoder_dataset(
        coef=rng.standard_normal((n_features, n_voxels)) / np.sqrt(n_features),
        spaces=["img"],
        n_features=[n_features],
        delays={"method": "none"},
        variants=["none"],
        design_mean=np.zeros((1, n_features)),
        feature_mean=rng.standard_normal((1, n_features)),
        feature_scale=rng.uniform(0.5, 2.0, (1, n_features)),
        target_mean=rng.standard_normal(n_voxels),
        units="beta",
    )
    labels = np.array([f"roi{j}" for j in range(N_ROIS)] + ["unlabelled"], dtype=object)
    ds = ds.assign_coords(roi=("voxel", labels[rng.integers(0, labels.size, n_voxels)]))
    ds.attrs["delays"] = {"method": "none"}
    return ds


def pool(n_stimuli: int, n_features: int, batch: int, seed: int = 1) -> Iterator:
    """Batches of random feature rows, generated on the fly (as read from a store)."""
    rng = np.random.default_rng(seed)
    for start in range(0, n_stimuli, batch):
        n = min(batch, n_stimuli - start)
        ids = [f"s{start + i:06d}" for i in range(n)]
        yield ids, {"img": rng.standard_normal((n, n_features)).astype(np.float32)}


def streamed(encoder: xr.Dataset, n_stimuli: int, n_features: int, batch: int) -> np.ndarray:
    from neuroflow.insilico import predict_pool

    return predict_pool(encoder, pool(n_stimuli, n_features, batch), batch_size=batch).roi_response


def dense(encoder: xr.Dataset, n_stimuli: int, n_features: int, batch: int) -> np.ndarray:
    """numpy reference: the whole pool in memory, one product, ROI means of the result."""
    X = np.concatenate([rows["img"] for _, rows in pool(n_stimuli, n_features, batch)])
    mean, scale = encoder["feature_mean"].values[0], encoder["feature_scale"].values[0]
    design = ((X - mean) / scale).astype(np.float32) - encoder["design_mean"].values[0]
    response = design @ encoder["coef"].values + encoder["target_mean"].values
    labels = encoder["roi"].values
    rois = sorted(set(labels) - {"unlabelled"})
    return np.column_stack([response[:, labels == r].mean(1) for r in rois])


def measure(fn: Callable[..., np.ndarray], *args: object) -> tuple[np.ndarray, float, float]:
    """Result, wall time (s) and tracemalloc peak (MB) of one call ``fn(*args)``."""
    tracemalloc.start()
    try:
        start = time.perf_counter()
        out = fn(*args)
        elapsed = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return out, elapsed, peak / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="quick run")
    parser.add_argument("--batch", type=int, default=500, help="stimuli per batch")
    args = parser.parse_args()
    sizes = [(1_000, 128, 500)] if args.small else [(10_000, 768, 2_000)]
    # warm up: imports and first calls are not timed
    warm = make_encoder(8, 20)
    streamed(warm, 10, 8, 4)
    dense(warm, 10, 8, 4)
    for n_stimuli, n_features, n_voxels in sizes:
        encoder = make_encoder(n_features, n_voxels)
        shape = (encoder, n_stimuli, n_features, args.batch)
        ref, t_ref, m_ref = measure(dense, *shape)
        ours, t_ours, m_ours = measure(streamed, *shape)
        diff = float(np.abs(ours - ref).max())
        print(
            f"predict {n_stimuli} stimuli x {n_features} features -> {n_voxels} voxels "
            f"({N_ROIS} ROIs), batches of {args.batch}: streamed {t_ours:.2f} s "
            f"(peak {m_ours:.1f} MB), dense numpy {t_ref:.2f} s (peak {m_ref:.1f} MB); "
            f"time ratio streamed/dense {t_ours / t_ref:.2f}, memory ratio "
            f"{m_ours / m_ref:.2f}, max |diff| of ROI means {diff:.1e}"
        )


if __name__ == "__main__":
    main()
