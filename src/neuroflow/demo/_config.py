"""Defaults and validation of the ``demo`` configuration section."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from neuroflow.config import merge_defaults

__all__ = ["DEFAULT_CONFIG", "resolve_config"]

#: The default ``demo`` section (mirrored by ``workflow/schemas/demo.schema.yaml``).
DEFAULT_CONFIG: dict[str, Any] = {
    "seed": 42,
    "n_subjects": 2,
    "image_size": 96,
    "fmri": {
        "n_train_runs": 3,
        "n_test_repeats": 2,
        "n_volumes": 400,
        "tr": 1.5,
        "grid_shape": [20, 24, 18],
        "voxel_size": 3.0,
        "shot_duration": [3.0, 6.0],
        "snr": {"early_visual": 1.0, "semantic": 0.8, "other": 0.1},
        "weak_fraction": 0.3,
        "rank": {"visual": 4, "semantic": 6},
        "ar_coef": 0.3,
        "noise_psc": 1.0,
        "drift_amplitude": 2.0,
        "motion_amplitude": 1.0,
        "write_confounds": True,
    },
    "eeg": {
        "n_channels": 32,
        "sfreq": 250.0,
        "n_trials": 1200,
        "n_test_images": 40,
        "n_repeats": 10,
        "stim_duration": 0.5,
        "soa": [0.9, 1.1],
        "latencies": {"visual": 0.1, "semantic": 0.4},
        "n_components": 6,
        "snr": 0.5,
        "noise_uv": 8.0,
        "line_freq": 50.0,
        "line_noise_uv": 4.0,
    },
    "pool": {"n_images": 120},
}

_MAX_CHANNELS = 64


def _check_int(value: Any, name: str, low: int, high: int | None = None) -> None:
    """Raise unless ``value`` is an int in [low, high]."""
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= low
    if ok and high is not None:
        ok = value <= high
    if not ok:
        span = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"`{name}` must be an int {span}, got {value!r} instead.")


def _check_float(value: Any, name: str, low: float, high: float | None = None, *, strict=True):
    """Raise unless ``value`` is a real number above ``low`` (strictly) and below ``high``."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if ok:
        ok = value > low if strict else value >= low
    if ok and high is not None:
        ok = value < high
    if not ok:
        span = f"{'>' if strict else '>='} {low}" + ("" if high is None else f" and < {high}")
        raise ValueError(f"`{name}` must be a number {span}, got {value!r} instead.")


def _check_range(value: Any, name: str, low: float) -> None:
    """Raise unless ``value`` is ``[min, max]`` with ``low < min <= max``."""
    if (
        not isinstance(value, list | tuple)
        or len(value) != 2
        or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
        or not (low < value[0] <= value[1])
    ):
        raise ValueError(
            f"`{name}` must be a pair [min, max] with {low} < min <= max, got {value!r} instead."
        )


def _validate_fmri(f: Mapping[str, Any]) -> None:
    """Check the ``fmri`` subsection."""
    _check_int(f["n_train_runs"], "demo.fmri.n_train_runs", 1, 20)
    _check_int(f["n_test_repeats"], "demo.fmri.n_test_repeats", 0, 20)
    _check_int(f["n_volumes"], "demo.fmri.n_volumes", 20, 2000)
    _check_float(f["tr"], "demo.fmri.tr", 0.1, 10.0)
    shape = f["grid_shape"]
    if (
        not isinstance(shape, list | tuple)
        or len(shape) != 3
        or not all(isinstance(s, int) and not isinstance(s, bool) and 10 <= s <= 128 for s in shape)
    ):
        raise ValueError(
            f"`demo.fmri.grid_shape` must be three ints in [10, 128], got {shape!r} instead."
        )
    _check_float(f["voxel_size"], "demo.fmri.voxel_size", 0.0, 20.0)
    _check_range(f["shot_duration"], "demo.fmri.shot_duration", 0.0)
    if f["shot_duration"][1] > f["n_volumes"] * f["tr"]:
        raise ValueError(
            "`demo.fmri.shot_duration` must not exceed the run length "
            f"({f['n_volumes'] * f['tr']:g} s), got {f['shot_duration']!r} instead."
        )
    for roi, snr in f["snr"].items():
        _check_float(snr, f"demo.fmri.snr.{roi}", 0.0, strict=False)
    _check_float(f["weak_fraction"], "demo.fmri.weak_fraction", 0.0, 1.0 + 1e-12, strict=False)
    for kind, rank in f["rank"].items():
        _check_int(rank, f"demo.fmri.rank.{kind}", 1, 64)
    _check_float(f["ar_coef"], "demo.fmri.ar_coef", -1.0, 1.0)
    _check_float(f["noise_psc"], "demo.fmri.noise_psc", 0.0, 50.0)
    _check_float(f["drift_amplitude"], "demo.fmri.drift_amplitude", 0.0, strict=False)
    _check_float(f["motion_amplitude"], "demo.fmri.motion_amplitude", 0.0, strict=False)
    if not isinstance(f["write_confounds"], bool):
        raise ValueError(
            f"`demo.fmri.write_confounds` must be a bool, got {f['write_confounds']!r} instead."
        )


def _validate_eeg(e: Mapping[str, Any]) -> None:
    """Check the ``eeg`` subsection."""
    _check_int(e["n_channels"], "demo.eeg.n_channels", 32, _MAX_CHANNELS)
    _check_float(e["sfreq"], "demo.eeg.sfreq", 0.0)
    if not 100.0 <= e["sfreq"] <= 5000.0:
        raise ValueError(f"`demo.eeg.sfreq` must be in [100, 5000] Hz, got {e['sfreq']!r} instead.")
    _check_int(e["n_trials"], "demo.eeg.n_trials", 1, 100_000)
    _check_int(e["n_test_images"], "demo.eeg.n_test_images", 0)
    _check_int(e["n_repeats"], "demo.eeg.n_repeats", 1, 1000)
    if e["n_test_images"] * e["n_repeats"] > e["n_trials"]:
        raise ValueError(
            "`demo.eeg.n_test_images` x `demo.eeg.n_repeats` must not exceed "
            f"`demo.eeg.n_trials` ({e['n_trials']}), got {e['n_test_images']} x "
            f"{e['n_repeats']} instead."
        )
    _check_float(e["stim_duration"], "demo.eeg.stim_duration", 0.0)
    _check_range(e["soa"], "demo.eeg.soa", 0.0)
    if e["soa"][0] < e["stim_duration"]:
        raise ValueError(
            f"`demo.eeg.soa` must start at or after `demo.eeg.stim_duration` "
            f"({e['stim_duration']:g} s), got {e['soa']!r} instead."
        )
    for kind, lat in e["latencies"].items():
        _check_float(lat, f"demo.eeg.latencies.{kind}", 0.0, e["soa"][0])
    _check_int(e["n_components"], "demo.eeg.n_components", 1, 8)
    _check_float(e["snr"], "demo.eeg.snr", 0.0, strict=False)
    _check_float(e["noise_uv"], "demo.eeg.noise_uv", 0.0)
    _check_float(e["line_freq"], "demo.eeg.line_freq", 0.0)
    if e["line_freq"] >= e["sfreq"] / 2:
        raise ValueError(
            f"`demo.eeg.line_freq` must be below the Nyquist frequency ({e['sfreq'] / 2:g} Hz), "
            f"got {e['line_freq']!r} instead."
        )
    _check_float(e["line_noise_uv"], "demo.eeg.line_noise_uv", 0.0, strict=False)


def resolve_config(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """Fill the ``demo`` section with defaults and check every value.

    Parameters
    ----------
    config : dict | None
        The ``demo`` section; missing keys take :data:`DEFAULT_CONFIG` values.

    Returns
    -------
    config : dict
        A complete, validated copy.
    """
    cfg = merge_defaults(DEFAULT_CONFIG, config or {}, "demo")
    _check_int(cfg["seed"], "demo.seed", 0, 2**32 - 1)
    _check_int(cfg["n_subjects"], "demo.n_subjects", 1, 99)
    _check_int(cfg["image_size"], "demo.image_size", 16, 512)
    _validate_fmri(cfg["fmri"])
    _validate_eeg(cfg["eeg"])
    _check_int(cfg["pool"]["n_images"], "demo.pool.n_images", 0)
    return cfg
