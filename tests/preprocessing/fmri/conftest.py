"""Synthetic BOLD runs for the fMRI preprocessing tests."""

from __future__ import annotations

import json
from pathlib import Path

import nibabel as nib
import numpy as np
import pandas as pd
import pytest

MOTION = [f"{a}_{ax}" for a in ("trans", "rot") for ax in "xyz"]


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(42)


def write_confounds(path: Path, n: int, rng: np.random.Generator, n_nss: int = 0) -> pd.DataFrame:
    """fMRIPrep-style confounds table (motion 24, WM/CSF, GS, FD, DVARS)."""
    table = {}
    for name in MOTION:
        base = np.cumsum(rng.normal(0, 0.05, n))
        deriv = np.r_[np.nan, np.diff(base)]
        table[name] = base
        table[f"{name}_derivative1"] = deriv
        table[f"{name}_power2"] = base**2
        table[f"{name}_derivative1_power2"] = deriv**2
    for name in ("white_matter", "csf", "global_signal"):
        table[name] = rng.normal(100, 1, n)
    table["framewise_displacement"] = np.r_[np.nan, np.abs(rng.normal(0.1, 0.02, n - 1))]
    table["std_dvars"] = np.r_[np.nan, np.abs(rng.normal(1.0, 0.05, n - 1))]
    for v in range(n_nss):
        col = np.zeros(n)
        col[v] = 1
        table[f"non_steady_state_outlier{v:02d}"] = col
    df = pd.DataFrame(table)
    df.to_csv(path, sep="\t", index=False, na_rep="n/a")
    return df


@pytest.fixture
def make_run(tmp_path, rng):
    """Factory writing a small BOLD run with planted drift and confounds."""

    def make(
        shape=(7, 8, 9),
        n=60,
        tr=2.0,
        header_tr=None,
        sidecar=True,
        events=True,
        name="sub-01_task-movie_run-1_bold.nii.gz",
        n_confounds=0,
    ):
        t = np.arange(n) * tr
        brain = np.zeros(shape, bool)
        brain[1:-1, 1:-1, 1:-1] = True
        data = rng.normal(0, 1, (*shape, n))
        data += (1000.0 * brain)[..., None]
        data += 5.0 * (t / t[-1])  # linear drift
        data += 3.0 * np.cos(2 * np.pi * t / t[-1] / 2)  # slow drift below the cutoff
        conf = rng.normal(0, 1, (n, n_confounds))
        if n_confounds:
            data += np.einsum("tc,cxyz->xyzt", conf, rng.normal(0, 4, (n_confounds, *shape)))
        img = nib.Nifti1Image(data.astype(np.float32), np.diag([2.0, 2.0, 2.5, 1.0]))
        img.header.set_xyzt_units("mm", "sec")
        img.header["pixdim"][4] = tr if header_tr is None else header_tr
        path = tmp_path / name
        nib.save(img, path)
        stem = name.replace("_bold.nii.gz", "")
        sidecars = []
        if sidecar:
            sc = tmp_path / f"{stem}_bold.json"
            sc.write_text(json.dumps({"RepetitionTime": tr, "TaskName": "movie"}))
            sidecars.append(sc)
        ev = None
        if events:
            ev = tmp_path / f"{stem}_events.tsv"
            pd.DataFrame(
                {
                    "onset": [0.0, 10.0, 30.5],
                    "duration": [2.0, 2.0, 1.5],
                    "trial_type": ["face", "house", "n/a"],
                    "stim_file": ["a.png", "b.png", "c.png"],
                    "response_time": ["0.5", "n/a", "0.7"],
                    "stim_type": ["FAMOUS", "NEW", "FAMOUS"],
                }
            ).to_csv(ev, sep="\t", index=False)
        return {"bold": path, "sidecars": sidecars, "events": ev, "brain": brain, "conf": conf}

    return make


@pytest.fixture
def fmriprep_confounds():
    """The :func:`write_confounds` writer."""
    return write_confounds
