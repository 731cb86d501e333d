"""Benchmark the predict stage split into feature extraction and prediction.

A pool of N never-shown images (seeded, random but smooth RGB PNGs of 96 px, written
to a temporary folder) goes through the two steps of the ``predict`` stage, on CPU:

1. extraction: :func:`neuroflow.features.pools.extract_pool_features` (the pool read
   with :func:`~neuroflow.features.pools.read_stimulus_pool`) writes one zarr store per
   layer, once with the weight-free ``image_statistics`` extractor and once with the
   packaged CNN ``{"name": "cnn", "extractor": "torch_module", "model":
   "efficientnet-lite0"}`` (its default layers, as a workflow entry extracts them;
   skipped, with the reason, when it cannot load). Extraction runs on one thread
   (:func:`neuroflow.features.threads.fixed_threads`); model loading and file hashing
   are part of the time;
2. prediction: a synthetic single-trial encoder (as ``bench/bench_predict.py`` builds
   it: random coefficients, 8 ROIs plus unlabelled voxels; 2000 voxels by default) on
   the width of the extractor's last layer (1280 for the CNN's ``avg-pooling``),
   standardised with the extracted features' own mean and s.d., is written with
   :func:`neuroflow.artifacts.write_dataset`; the timed part opens it and the feature
   store and streams the rows, batch by batch as the stage does
   (:func:`neuroflow.features.align.features_for_stimuli`), through
   :func:`neuroflow.insilico.predict_pool`.

Each extraction runs first on a 16-image warm-up pool (imports, first calls), then on
a 16-image probe pool and on the N-image pool (one run each). Each prediction runs
once to warm up, then on N and on 5N rows (the N-row store streamed 5 times under new
ids), best of ``--repeats`` runs. The 10,000-image extrapolation of each step is the
line through its two sizes (a fixed cost, e.g. loading the model, plus a cost per
image). The tracemalloc peak of the prediction at N and 5N rows (runs of their own,
untimed, after a garbage collection; one run each, it varies by a few MB from run to
run) shows that its memory does not grow with the pool. For scale, the whole
prediction stage (:func:`neuroflow.insilico.predict_stimulus_set`: also the rankings,
one contact sheet per ROI and the output store) is timed once on N images.

Usage: ``python bench/bench_predict_split.py [--quick] [--n-images N] [--voxels V]
[--batch B] [--repeats R] [--skip-cnn]``.
"""

from __future__ import annotations

import argparse
import gc
import os
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

#: Extractor entries, by the name shown in the table.
EXTRACTORS: dict[str, dict[str, Any]] = {
    "image_statistics": {"name": "stats", "extractor": "image_statistics"},
    "efficientnet-lite0": {
        "name": "cnn",
        "extractor": "torch_module",
        "model": "efficientnet-lite0",
    },
}
N_ROIS = 8
#: Images of the warm-up and probe pools.
N_PROBE = 16
#: Pool size the times are extrapolated to.
N_TARGET = 10_000
#: Prediction rows of the second size, as a multiple of N.
SCALE = 5
SIZE = 96


def make_images(folder: Path, n: int, seed: int) -> None:
    """Write ``n`` smooth random RGB PNGs (a 6 x 6 grid upsampled bicubically)."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for i in range(n):
        grid = (rng.random((6, 6, 3)) * 255).astype(np.uint8)
        image = Image.fromarray(grid).resize((SIZE, SIZE), Image.Resampling.BICUBIC)
        image.save(folder / f"im{i:05d}.png")


def extract(entry: dict[str, Any], folder: Path, out: Path) -> tuple[dict[str, Path], float]:
    """Stores written by the pool's extraction (layer -> path) and its wall time (s)."""
    from neuroflow.artifacts import build_provenance
    from neuroflow.features.config import fill_entry, layer_names
    from neuroflow.features.pools import extract_pool_features, read_stimulus_pool

    start = time.perf_counter()
    pool = read_stimulus_pool(folder.name, {"folder": str(folder)}, folder.parent)
    config = {**entry, "device": "cpu"}
    output = {name: out / f"{name}.zarr" for name in layer_names(fill_entry(config))}
    provenance = build_provenance(stage="features", version="bench", config=config)
    paths = extract_pool_features(pool=pool, output=output, config=config, provenance=provenance)
    return paths, time.perf_counter() - start


def write_encoder(features: np.ndarray, n_voxels: int, path: Path, seed: int = 0) -> Path:
    """A random single-trial encoder on ``features``' width, stored as the stage reads it."""
    from neuroflow.artifacts import build_provenance, write_dataset
    from neuroflow.encoding.stored import encoder_dataset

    rng = np.random.default_rng(seed)
    n_features = features.shape[1]
    ds = encoder_dataset(
        coef=rng.standard_normal((n_features, n_voxels)) / np.sqrt(n_features),
        spaces=["img"],
        n_features=[n_features],
        delays={"method": "none"},
        variants=["none"],
        design_mean=np.zeros((1, n_features)),
        feature_mean=features.mean(0, keepdims=True),
        feature_scale=np.maximum(features.std(0, keepdims=True), 1e-6),
        target_mean=rng.standard_normal(n_voxels),
        units="beta",
    )
    labels = np.array([f"roi{j}" for j in range(N_ROIS)] + ["unlabelled"], dtype=object)
    ds = ds.assign_coords(
        voxel=np.arange(n_voxels),
        roi=("voxel", labels[rng.integers(0, labels.size, n_voxels)]),
    )
    ds.attrs.update(delays={"method": "none"}, subject="01", model="bench")
    provenance = build_provenance(stage="trial_encoding", version="bench", config={})
    return write_dataset(ds, path, provenance=provenance)


def batches(store: xr.Dataset, batch: int, copies: int) -> Iterator[tuple[list[str], dict]]:
    """The store's rows, ``batch`` at a time, ``copies`` times over (new ids each time)."""
    from neuroflow.features.align import features_for_stimuli

    ids = [str(s) for s in store["stimulus"].values]
    for r in range(copies):
        for start in range(0, len(ids), batch):
            chunk = ids[start : start + batch]
            rows = features_for_stimuli(store, chunk)
            yield [f"{i}#{r}" if r else i for i in chunk], {"img": rows}


def predict(encoder_path: Path, features_path: Path, batch: int, copies: int) -> np.ndarray:
    """ROI means of the pool (``copies`` times the store's rows), read as the stage reads."""
    from neuroflow.artifacts import open_dataset
    from neuroflow.insilico import predict_pool

    encoder = open_dataset(encoder_path)
    store = open_dataset(features_path)
    prediction = predict_pool(encoder, batches(store, batch, copies), batch_size=batch)
    return prediction.roi_response


def timed(fn: Callable[..., Any], *args: object, repeats: int = 1) -> float:
    """Best wall time (s) of ``repeats`` calls ``fn(*args)``."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args)
        best = min(best, time.perf_counter() - start)
    return best


def peak_mb(fn: Callable[..., Any], *args: object) -> float:
    """tracemalloc peak (MB) of one call ``fn(*args)``, after a garbage collection."""
    gc.collect()
    tracemalloc.start()
    try:
        fn(*args)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak / 2**20


def stage(encoder_path: Path, features_path: Path, folder: Path, out: Path, batch: int) -> None:
    """The whole prediction stage: rankings, contact sheets and the output store too."""
    from neuroflow.artifacts import build_provenance
    from neuroflow.insilico import predict_stimulus_set

    predict_stimulus_set(
        encoder_path=encoder_path,
        feature_stores={"img": features_path},
        output=out / "sub-01_pool.zarr",
        provenance=build_provenance(stage="predict", version="bench", config={}),
        stimuli_dir=folder,
        batch_size=batch,
    )


def line(n_small: int, t_small: float, n_big: int, t_big: float) -> tuple[float, float]:
    """Fixed cost (s) and cost per image (s) of the line through two timed sizes."""
    per = max((t_big - t_small) / (n_big - n_small), 0.0)
    return max(t_small - per * n_small, 0.0), per


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="quick run (N=200)")
    parser.add_argument("--n-images", type=int, default=2000, help="images in the pool (N)")
    parser.add_argument("--voxels", type=int, default=2000, help="voxels of the encoder")
    parser.add_argument("--batch", type=int, default=256, help="stimuli per prediction batch")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each prediction timing")
    parser.add_argument("--skip-cnn", action="store_true", help="image_statistics only")
    args = parser.parse_args()
    n = 200 if args.quick else args.n_images
    if n <= N_PROBE:
        parser.error(f"--n-images must be above {N_PROBE}, got {n} instead.")
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats} instead.")
    from neuroflow.artifacts import open_dataset

    names = [k for k in EXTRACTORS if not (args.skip_cnn and k != "image_statistics")]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    with tempfile.TemporaryDirectory(prefix="bench-predict-split-") as tmp:
        root = Path(tmp)
        start = time.perf_counter()
        for folder, size, seed in (("warm", N_PROBE, 2), ("probe", N_PROBE, 1), ("pool", n, 0)):
            make_images(root / "stimuli" / folder, size, seed)
        print(
            f"pool of {n} PNG images ({SIZE} px, written in {time.perf_counter() - start:.1f} s); "
            f"CPU, {cores} cores (extraction on 1 thread); encoder {args.voxels} voxels "
            f"({N_ROIS} ROIs + unlabelled), prediction batches of {args.batch}",
            flush=True,
        )
        rows = []
        for name in names:
            entry = EXTRACTORS[name]
            out = root / "features" / entry["name"]
            try:
                extract(entry, root / "stimuli" / "warm", out / "warm")
            except Exception as exc:  # a missing optional model is reported, not fatal
                print(f"{name}: skipped, it cannot extract ({type(exc).__name__}: {exc})")
                continue
            _, t_probe = extract(entry, root / "stimuli" / "probe", out / "probe")
            paths, t_extract = extract(entry, root / "stimuli" / "pool", out / "pool")
            layer = list(paths)[-1]
            features = open_dataset(paths[layer])["features"].values
            encoder = write_encoder(features, args.voxels, root / f"encoder-{entry['name']}.zarr")
            shape = (encoder, paths[layer], args.batch)
            predict(*shape, 1)  # warm up
            t_predict = timed(predict, *shape, 1, repeats=args.repeats)
            t_predict_big = timed(predict, *shape, SCALE, repeats=args.repeats)
            rows.append(
                {
                    "name": name,
                    "width": features.shape[1],
                    "extract": t_extract,
                    "predict": t_predict,
                    "peaks": (peak_mb(predict, *shape, 1), peak_mb(predict, *shape, SCALE)),
                    "stage": timed(stage, *shape[:2], root / "stimuli" / "pool", out, args.batch),
                    "fit_extract": line(N_PROBE, t_probe, n, t_extract),
                    "fit_predict": line(n, t_predict, SCALE * n, t_predict_big),
                }
            )
            print(
                f"{name}: {len(paths)} layer store(s), predicting from {layer!r} "
                f"({features.shape[1]} features); extraction {t_extract:.2f} s "
                f"({N_PROBE}-image probe {t_probe:.2f} s), prediction {t_predict:.3f} s "
                f"({SCALE * n} rows {t_predict_big:.3f} s)",
                flush=True,
            )

    print()
    print(
        f"{'extractor':<20}{'width':>6}{'extract s':>10}{'img/s':>8}{'predict s':>10}"
        f"{'img/s':>9}{'extract %':>10}{'predict %':>10}{'10k est. s':>11}"
        f"{'pred. peak N/5N':>17}{'stage s':>9}"
    )
    for row in rows:
        t_x, t_p = row["extract"], row["predict"]
        (fixed_x, per_x), (fixed_p, per_p) = row["fit_extract"], row["fit_predict"]
        estimate = fixed_x + fixed_p + N_TARGET * (per_x + per_p)
        peaks = "{:.1f}/{:.1f} MB".format(*row["peaks"])
        print(
            f"{row['name']:<20}{row['width']:>6}{t_x:>10.2f}{n / t_x:>8.1f}{t_p:>10.3f}"
            f"{n / t_p:>9.0f}{100 * t_x / (t_x + t_p):>9.1f}%{100 * t_p / (t_x + t_p):>9.1f}%"
            f"{estimate:>11.1f}{peaks:>17}{row['stage']:>9.2f}"
        )
    print()
    for row in rows:
        (fixed_x, per_x), (fixed_p, per_p) = row["fit_extract"], row["fit_predict"]
        few, many = row["peaks"]
        print(
            f"{row['name']}: {N_TARGET:,} images ~ extraction {fixed_x + N_TARGET * per_x:.1f} s "
            f"({fixed_x:.2f} s fixed + {1e3 * per_x:.2f} ms/image) + prediction "
            f"{fixed_p + N_TARGET * per_p:.2f} s ({fixed_p:.3f} s fixed + {1e3 * per_p:.3f} "
            f"ms/image); prediction peak {SCALE}N/N {many / few:.2f}; the stage beyond "
            f"predict_pool {row['stage'] - row['predict']:.2f} s on N images"
        )
    print(
        f"N = {n}. Times: wall clock; extraction and stage one run each, prediction best "
        f"of {args.repeats}; img/s: N over the time to its left. extract/predict %: shares "
        "of extraction + prediction (predict_pool with the encoder and feature stores "
        f"opened); 10k est.: both steps extrapolated to {N_TARGET:,} images along the line "
        f"through the two sizes measured ({N_PROBE} and N images for extraction, N and "
        f"{SCALE}N rows for prediction); pred. peak: tracemalloc peak of the prediction at "
        f"N and {SCALE}N rows; stage s: predict_stimulus_set on N images (prediction, "
        "rankings, one contact sheet per ROI, output store)."
    )


if __name__ == "__main__":
    main()
