"""Voxel-wise score stores as NIfTI statistical maps with BIDS-derivatives names.

Undefined scores stay NaN; units are mm and s, and the qform equals the sform (code 4,
MNI, for an ``MNI*`` space, else 1, scanner).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from neuroflow.artifacts import open_dataset
from neuroflow.export.common import _claim, _label, _origin, _sidecar, _task, _write_json
from neuroflow.names import file_form

__all__ = [
    "MAP_STATISTICS",
    "NIFTI_MNI",
    "NIFTI_SCANNER",
    "export_score_maps",
    "nifti_space_code",
]


#: NIfTI ``qform_code``/``sform_code``: 1 scanner (native) space, 4 MNI space.
NIFTI_SCANNER, NIFTI_MNI = 1, 4


#: Score variable -> BIDS ``stat`` label of the exported map.
MAP_STATISTICS = {"r": "r", "r_normalized": "rnormalized", "p_value": "p"}


def nifti_space_code(attrs: Mapping[str, Any]) -> int:
    """The NIfTI ``qform_code``/``sform_code`` of a score store's grid.

    Parameters
    ----------
    attrs : dict
        The store's attributes: ``space`` (a BIDS space label), ``entities["space"]``
        or ``space-<label>`` in the names of ``test_runs``.

    Returns
    -------
    code : int
        :data:`NIFTI_MNI` (4) for a space whose label starts with ``MNI``, else
        :data:`NIFTI_SCANNER` (1): the grid of the recordings.
    """
    labels = [attrs.get("space"), dict(attrs.get("entities") or {}).get("space")]
    labels += [
        m.group(1)
        for run in attrs.get("test_runs") or []
        if (m := re.search(r"space-([A-Za-z0-9]+)", str(run)))
    ]
    mni = any(str(label).upper().startswith("MNI") for label in labels if label)
    return NIFTI_MNI if mni else NIFTI_SCANNER


def _set_grid(img: Any, affine: np.ndarray, code: int) -> None:
    """Give a NIfTI image the same qform and sform, and units of mm and s."""
    img.set_qform(affine, code=code)
    img.set_sform(affine, code=code)
    img.header.set_xyzt_units("mm", "sec")


#: Entities of the FDR-thresholded map (r where significant, 0 elsewhere).
_FDR_MAP = "desc-fdr_stat-r"


def _map_plan(store: Path, ds: xr.Dataset, output: Path) -> list[tuple[Path, str]]:
    """The maps of a score store: each file and the variable it holds (or :data:`_FDR_MAP`).

    Raises
    ------
    ValueError
        When the store lacks the voxel indices or the attributes a map needs.
    """
    missing = [c for c in ("i", "j", "k") if c not in ds.coords]
    missing += [a for a in ("affine", "mask_shape", "subject", "model") if a not in ds.attrs]
    if missing:
        raise ValueError(
            f"{store}: a score map needs the voxel indices i, j, k and the attributes affine, "
            f"mask_shape, subject and model, got none of {missing} instead."
        )
    subject = _label(ds.attrs["subject"])
    task = _task(ds)
    stem = f"sub-{subject}" + (f"_task-{_label(task)}" if task else "")
    stem += f"_model-{file_form(ds.attrs['model'])}"
    folder = output / f"sub-{subject}" / "func"
    maps = [
        (f"stat-{stat}", variable) for variable, stat in MAP_STATISTICS.items() if variable in ds
    ]
    if "significant" in ds and "r" in ds:
        maps.append((_FDR_MAP, _FDR_MAP))
    return [(folder / f"{stem}_{entities}_statmap.nii.gz", what) for entities, what in maps]


def export_score_maps(
    store: str | os.PathLike, output: str | os.PathLike, *, _claimed: dict | None = None
) -> list[Path]:
    """Write a voxel-wise score store as NIfTI statistical maps with JSON sidecars.

    Parameters
    ----------
    store : path-like
        Store of the ``evaluation`` (or ``trial_evaluation``) stage: per-voxel ``r``,
        ``r_normalized``, ``p_value`` and ``significant`` with the voxel indices
        ``i``, ``j``, ``k`` and the attributes ``affine`` and ``mask_shape``.
    output : path-like
        Root of the derivatives folder; maps go to ``sub-<s>/func/``.

    Returns
    -------
    paths : list of Path
        The maps written (sidecars beside them, same name with ``.json``).
    """
    from neuroflow.io.files import scores_to_nifti

    store, output = Path(store), Path(output)
    claimed = {} if _claimed is None else _claimed
    ds = open_dataset(store)
    planned = _map_plan(store, ds, output)
    ijk = np.stack([np.asarray(ds[c].values, dtype=np.int64) for c in "ijk"], axis=1)
    affine = np.asarray(
        json.loads(ds.attrs["affine"])
        if isinstance(ds.attrs["affine"], str)
        else ds.attrs["affine"]
    )
    code = nifti_space_code(ds.attrs)
    about = {
        **_origin(store, ds),
        "Subject": str(ds.attrs["subject"]),
        "Model": str(ds.attrs["model"]),
        "FeatureSpaces": list(ds.attrs.get("feature_spaces") or []),
        "Layer": ds.attrs.get("layer"),
        "TestRuns": list(ds.attrs.get("test_runs") or []),
        "NPermutations": ds.attrs.get("n_permutations"),
        "FDRAlpha": ds.attrs.get("fdr_alpha"),
    }
    out = []
    for path, what in planned:
        _claim(path, claimed, store)
        if what == _FDR_MAP:
            significant = np.asarray(ds["significant"].values, bool)
            r = np.asarray(ds["r"].values, np.float64)
            values = np.where(significant | np.isnan(r), r, 0.0)
            what = "r where significant after FDR, else 0 (n/a where r is undefined)"
        else:
            values = np.asarray(ds[what].values, np.float64)
        img = scores_to_nifti(
            values, ijk, affine=affine, mask_shape=ds.attrs["mask_shape"], undefined=np.nan
        )
        _set_grid(img, affine, code)
        path.parent.mkdir(parents=True, exist_ok=True)
        img.to_filename(path)
        _write_json(_sidecar(path), {**about, "Statistic": what})
        out.append(path)
    return out
