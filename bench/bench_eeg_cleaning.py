"""Agreement of neuroflow's EEG cleaning heuristics with pyprep and autoreject.

On each real recording of ``shared/data/eeg`` (MNE's testing data), band-passed
0.1-40 Hz (the stage's defaults) with its EEG channels only:

- bad channels: neuroflow's flat / noisy / uncorrelated criteria (the stage's default
  thresholds) against pyprep's ``NoisyChannels`` (RANSAC where every channel has a
  position: the BioSemi EDF gets the ``biosemi128`` template and keeps the channels it
  places);
- epochs: today's automatic per-channel peak-to-peak limits (``reject: auto``,
  ``reject_mad_k`` 5) against autoreject's global limit (``reject_method:
  autoreject_global``) and, with positions, its local limits (``autoreject``), on
  -0.2..0.8 s epochs around the recording's annotations when it has at least 20, else
  on back-to-back fixed-length epochs (12 at least).

For each pair the table gives the items flagged by each method, by both, and the
Jaccard index |both| / |either| (1.0 when neither flags anything). A recording a
method cannot handle (too short, too few channels) shows the reason instead.

Usage: ``python bench/bench_eeg_cleaning.py [--data DIR]`` (needs the ``eegclean`` extra).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import mne
import numpy as np

from neuroflow.preprocessing.eeg.bads import find_bad_channels, find_bad_channels_pyprep
from neuroflow.preprocessing.eeg.config import DEFAULT_CONFIG
from neuroflow.preprocessing.eeg.rejection import (
    reject_autoreject,
    reject_autoreject_global,
    reject_by_ptp,
)

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "eeg"
RECORDINGS = {
    "eeglab": ("eeglab/test_raw.set", mne.io.read_raw_eeglab, None),
    "edf": ("edf/test_reduced.edf", mne.io.read_raw_edf, "biosemi128"),
    "brainvision": ("brainvision/test_NO.vhdr", mne.io.read_raw_brainvision, None),
    "bdf": ("bdf/test_bdf_stim_channel.bdf", mne.io.read_raw_bdf, "standard_1020"),
}
SEED = 42


def jaccard(a: set, b: set) -> float:
    """|a & b| / |a | b|, 1.0 when both are empty."""
    return 1.0 if not (a or b) else len(a & b) / len(a | b)


def load(path: Path, reader, template: str | None) -> mne.io.BaseRaw:
    """EEG channels (those the template places, when given), band-passed 0.1-40 Hz."""
    raw = reader(path, preload=True, verbose="error").pick("eeg")
    if template is not None:
        raw.set_montage(template, on_missing="ignore", match_case=False, verbose="error")
        placed = [c["ch_name"] for c in raw.info["chs"] if np.abs(c["loc"][:3]).sum() > 0]
        raw.pick(placed)
    h_freq = min(DEFAULT_CONFIG["h_freq"], raw.info["sfreq"] / 2 - 1)
    return raw.filter(DEFAULT_CONFIG["l_freq"], h_freq, verbose="error")


def make_epochs(raw: mne.io.BaseRaw) -> tuple[mne.Epochs, str]:
    """Epochs around the annotations (>= 20), else fixed-length ones (>= 12)."""
    if len(raw.annotations) >= 20:
        events, _ = mne.events_from_annotations(raw, verbose="error")
        epochs = mne.Epochs(raw, events, tmin=-0.2, tmax=0.8, preload=True, verbose="error")
        return epochs, "annotations"
    length = min(1.0, raw.times[-1] / 12)
    epochs = mne.make_fixed_length_epochs(raw, duration=length, preload=True, verbose="error")
    return epochs, f"fixed {length:.2f} s"


def _row(what: str, n: int, a: set | str, b: set | str) -> dict:
    if isinstance(a, str) or isinstance(b, str):
        reason = a if isinstance(a, str) else b
        return {"what": what, "n": n, "a": "-", "b": "-", "both": "-", "jaccard": reason}
    return {
        "what": what,
        "n": n,
        "a": len(a),
        "b": len(b),
        "both": len(a & b),
        "jaccard": f"{jaccard(a, b):.2f}",
    }


def _try(fn):
    try:
        return fn()
    except Exception as err:  # a method refusing a recording is a result here
        return f"n/a ({type(err).__name__}: {str(err).splitlines()[0][:60]})"


def bench_recording(raw: mne.io.BaseRaw) -> list[dict]:
    """The agreement rows of one recording."""
    picks = np.arange(len(raw.ch_names))
    heuristic = set().union(
        *find_bad_channels(
            raw,
            picks,
            flat_threshold=DEFAULT_CONFIG["flat_threshold"],
            noisy_z_threshold=DEFAULT_CONFIG["noisy_z_threshold"],
            correlation_threshold=DEFAULT_CONFIG["correlation_threshold"],
        ).values()
    )
    pyprep = _try(
        lambda: set().union(
            *find_bad_channels_pyprep(raw, picks, ransac=True, random_state=SEED).values()
        )
    )
    rows = [_row("channels: heuristic (a) vs pyprep (b)", len(picks), heuristic, pyprep)]
    epochs, kind = make_epochs(raw)
    n = len(epochs)

    def dropped(method) -> set[int]:
        copy = epochs.copy()
        method(copy)
        return set(range(n)) - set(copy.selection.tolist())

    auto = dropped(lambda e: reject_by_ptp(e, "auto", DEFAULT_CONFIG["reject_mad_k"]))
    glob = _try(lambda: dropped(lambda e: reject_autoreject_global(e, random_state=SEED)))
    local = _try(lambda: dropped(lambda e: reject_autoreject(e, random_state=SEED)))
    rows.append(_row(f"epochs ({kind}): auto MAD (a) vs autoreject_global (b)", n, auto, glob))
    rows.append(_row(f"epochs ({kind}): auto MAD (a) vs autoreject local (b)", n, auto, local))
    return rows


def main() -> None:
    """Print the agreement table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="folder of the recordings")
    args = parser.parse_args()
    if not args.data.exists():
        raise SystemExit(f"{args.data.resolve()} does not exist: the real recordings are needed.")
    header = f"{'recording':<12} {'comparison':<52} {'n':>4} {'a':>3} {'b':>3} {'both':>4}  jaccard"
    print(header)
    print("-" * len(header))
    for name, (rel, reader, template) in RECORDINGS.items():
        start = time.perf_counter()
        raw = load(args.data / rel, reader, template)
        for row in bench_recording(raw):
            print(
                f"{name:<12} {row['what']:<52} {row['n']:>4} {row['a']!s:>3} {row['b']!s:>3} "
                f"{row['both']!s:>4}  {row['jaccard']}"
            )
        print(
            f"{'':<12} ({len(raw.ch_names)} EEG channels, {raw.times[-1]:.1f} s, "
            f"{time.perf_counter() - start:.1f} s to run)"
        )


if __name__ == "__main__":
    main()
