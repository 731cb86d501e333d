"""Benchmark the preprocess_eeg stage against the same MNE calls made directly.

A synthetic 64-channel, 1000 Hz recording (60 minutes; 5 with ``--small``) is saved
as FIF with an event every 2 s. Two worker processes, run one after the other in the
same invocation, each read it and preprocess it with the same parameters (notch at
50 Hz, 0.1-40 Hz band-pass, average reference, -0.2..0.8 s epochs with baseline):

- ``stage``: :func:`neuroflow.preprocessing.eeg.preprocess_eeg_recording`, including
  automatic bad-channel detection and writing both zarr stores;
- ``mne``: ``read_raw_fif`` -> ``notch_filter`` -> ``filter`` -> ``set_eeg_reference``
  -> ``Epochs(preload=True)``;
- ``mne+save``: the same, then ``Epochs.save`` and ``Raw.save`` (float32 FIF), i.e. the
  same work as the stage, which also writes its two stores.

Each worker reports its wall time and its peak resident memory above the memory held
after imports; the workers alternate ``--repeats`` times and the best time of each is
compared, since the machine is shared. Both workers import the same libraries before
the clock starts, so one-off import time counts for neither. Targets: time ratio
stage / MNE <= 1.3; stage peak <= 3x the recording's float64 size.

Usage: ``python bench/bench_eeg.py [--small] [--repeats N] [--workdir DIR]``.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

N_CHANNELS = 64
SFREQ = 1000.0
EVENT_EVERY = 2.0
CONFIG = {
    "notch_freq": [50.0],
    "l_freq": 0.1,
    "h_freq": 40.0,
    "eeg_reference": "average",
    "epochs_tmin": -0.2,
    "epochs_tmax": 0.8,
    "baseline": [None, 0.0],
    "conditions": ["stim"],
    "find_flat_channels": True,
    "find_noisy_channels": True,
    "find_uncorrelated_channels": True,
    "interpolate_bads": True,
}


def _rss_bytes() -> int:
    """Current resident set size of this process."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize()


def _peak_bytes() -> int:
    """Peak resident set size of this process so far."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def make_recording(path: Path, minutes: float, seed: int = 0) -> int:
    """Write the synthetic recording; return its float64 size in bytes."""
    import mne
    import numpy as np

    rng = np.random.default_rng(seed)
    n_times = int(minutes * 60 * SFREQ)
    names = [f"E{i:02d}" for i in range(N_CHANNELS)]
    data = np.empty((N_CHANNELS, n_times))
    block = 2**20
    mixing = rng.uniform(0.5, 1.5, (N_CHANNELS, 4))
    for start in range(0, n_times, block):
        stop = min(start + block, n_times)
        sources = rng.standard_normal((4, stop - start)) * 5e-6
        noise = rng.standard_normal((N_CHANNELS, stop - start)) * 1e-6
        data[:, start:stop] = mixing @ sources + noise
    raw = mne.io.RawArray(data, mne.create_info(names, SFREQ, "eeg"), verbose="error")
    del data
    onsets = np.arange(1.0, n_times / SFREQ - 1.0, EVENT_EVERY)
    raw.set_annotations(mne.Annotations(onsets, 0.0, ["stim"] * len(onsets)))
    raw.save(path, overwrite=True, verbose="error")
    return N_CHANNELS * n_times * 8


def _preimport() -> None:
    """Import every library either worker uses, before timing starts."""
    import mne  # noqa: F401
    import mne_bids  # noqa: F401
    import scipy.signal  # noqa: F401
    import xarray  # noqa: F401
    import zarr  # noqa: F401

    import neuroflow.preprocessing.eeg  # noqa: F401


def worker_stage(fif: Path, out: Path) -> None:
    """Run the whole stage on ``fif`` and write its stores under ``out``."""
    _preimport()
    from neuroflow.artifacts import build_provenance
    from neuroflow.preprocessing.eeg import preprocess_eeg_recording

    provenance = build_provenance(stage="preprocess_eeg", version="bench", config=CONFIG)
    base = _rss_bytes()
    t0 = time.perf_counter()
    preprocess_eeg_recording(
        recording=fif,
        epochs_output=out / "epochs.zarr",
        continuous_output=out / "continuous.zarr",
        config=CONFIG,
        provenance=provenance,
    )
    print(json.dumps({"seconds": time.perf_counter() - t0, "peak": _peak_bytes() - base}))


def worker_mne(fif: Path, out: Path, save: bool = False) -> None:
    """Make the same MNE calls directly; with ``save``, also write both results as FIF."""
    import mne

    _preimport()

    base = _rss_bytes()
    t0 = time.perf_counter()
    raw = mne.io.read_raw_fif(fif, preload=True, verbose="error")
    raw.notch_filter([50.0], verbose="error")
    raw.filter(0.1, 40.0, verbose="error")
    raw.set_eeg_reference("average", verbose="error")
    events, event_id = mne.events_from_annotations(raw, verbose="error")
    epochs = mne.Epochs(
        raw, events, event_id, -0.2, 0.8, baseline=(None, 0.0), preload=True, verbose="error"
    )
    epochs.get_data(copy=False)
    if save:
        epochs.save(out / "ref-epo.fif", fmt="single", overwrite=True, verbose="error")
        raw.save(out / "ref_raw.fif", fmt="single", overwrite=True, verbose="error")
    print(json.dumps({"seconds": time.perf_counter() - t0, "peak": _peak_bytes() - base}))


WORKERS = {
    "mne": worker_mne,
    "mne+save": lambda fif, out: worker_mne(fif, out, save=True),
    "stage": worker_stage,
}


def _run_worker(kind: str, fif: Path, out: Path) -> dict:
    """Run one worker in a fresh process and parse its report."""
    cmd = [sys.executable, __file__, "--worker", kind, "--fif", str(fif), "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{kind} worker failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    """Parse arguments and print timings, memory and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="5-minute recording")
    parser.add_argument("--workdir", type=Path, default=None, help="where to write files")
    parser.add_argument("--repeats", type=int, default=2, help="alternating runs of each")
    parser.add_argument("--worker", choices=list(WORKERS), help=argparse.SUPPRESS)
    parser.add_argument("--fif", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        WORKERS[args.worker](args.fif, args.out)
        return
    minutes = 5.0 if args.small else 60.0
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        tmp = Path(tmp)
        fif = tmp / "bench_raw.fif"
        t0 = time.perf_counter()
        nbytes = make_recording(fif, minutes)
        print(
            f"recording: {N_CHANNELS} ch x {SFREQ:g} Hz x {minutes:g} min "
            f"({nbytes / 2**30:.2f} GiB float64), written in {time.perf_counter() - t0:.1f} s"
        )
        runs: dict[str, list[dict]] = {kind: [] for kind in WORKERS}
        for _ in range(args.repeats):  # alternate, so all see the same machine load
            for kind in WORKERS:
                runs[kind].append(_run_worker(kind, fif, tmp))
    best = {k: min(v, key=lambda r: r["seconds"]) for k, v in runs.items()}
    peak = {k: max(r["peak"] for r in v) for k, v in runs.items()}
    for kind, label in (("mne", "MNE calls"), ("mne+save", "MNE + save"), ("stage", "stage")):
        times = ", ".join(f"{r['seconds']:.1f}" for r in runs[kind])
        print(
            f"{label:10s}: best {best[kind]['seconds']:7.1f} s (runs: {times})  "
            f"peak +{peak[kind] / 2**30:.2f} GiB"
        )
    for ref in ("mne", "mne+save"):
        ratio = best["stage"]["seconds"] / best[ref]["seconds"]
        print(f"time ratio stage / {ref:8s} (best of {args.repeats}): {ratio:.2f}  (target <= 1.3)")
    print(
        f"peak memory / raw float64 size: stage {peak['stage'] / nbytes:.2f} (target <= 3.0), "
        f"MNE calls {peak['mne'] / nbytes:.2f}"
    )


if __name__ == "__main__":
    main()
