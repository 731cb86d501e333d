"""Nuisance regressors of one run: fMRIPrep strategies, custom columns, global signal.

fMRIPrep confounds are selected with nilearn's
:func:`nilearn.interfaces.fmriprep.load_confounds`, which knows fMRIPrep's
column names across versions (motion 6/12/24, WM/CSF, aCompCor from the
sidecar JSON, global signal, scrubbing by FD and DVARS with a minimum segment
length). Raw datasets have no such table: there the global signal is computed
from the data and the other components are skipped with a warning.

The default strategy ``"auto"`` regresses head motion (and the white-matter and CSF
signals where the table has them) from every run that has an fMRIPrep-style table
(columns ``trans_x`` ...), as nilearn's ``"simple"`` strategy does, and nothing from
runs without one: motion that leaks into the signal otherwise shows up as
discoveries in voxels that carry no stimulus information.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "FMRIPREP_COMPONENTS",
    "Confounds",
    "auto_components",
    "check_finite_confounds",
    "non_steady_state_count",
    "read_confounds_table",
    "select_confounds",
]

#: Strategy components read from an fMRIPrep confounds table.
FMRIPREP_COMPONENTS = ("motion", "wm_csf", "global_signal", "compcor", "scrub")


@dataclass
class Confounds:
    """Regressors and flagged volumes of one run (all volumes, none dropped yet).

    Attributes
    ----------
    table : pandas.DataFrame, shape (n_volumes, n_confounds)
        Continuous regressors (NaN-free), one row per volume.
    outliers : ndarray of bool, shape (n_volumes,)
        Volumes flagged by scrubbing.
    notes : list of dict
        What was selected or skipped, for the ``steps`` record.
    """

    table: pd.DataFrame
    outliers: np.ndarray
    notes: list[dict[str, Any]] = field(default_factory=list)


def read_confounds_table(path: str | os.PathLike, n_volumes: int) -> pd.DataFrame:
    """Read a confounds TSV and check that it has one row per volume.

    Parameters
    ----------
    path : path-like
        Tab-separated table with a header row; ``n/a`` cells are missing.
    n_volumes : int
        Volumes in the BOLD run.

    Returns
    -------
    table : pandas.DataFrame, shape (n_volumes, n_columns)
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Confounds file {path} does not exist.")
    table = pd.read_csv(path, sep="\t", na_values=["n/a"])
    if len(table) != n_volumes:
        raise ValueError(
            f"Confounds file {path} must have one row per volume ({n_volumes}), "
            f"got {len(table)} rows instead."
        )
    return table


def check_finite_confounds(
    table: pd.DataFrame, path: str | os.PathLike | None, *, start: int = 0
) -> None:
    """Refuse selected confounds that are NaN or infinite in a volume the cleaning keeps.

    Parameters
    ----------
    table : pandas.DataFrame, shape (n_volumes, n_confounds)
        The selected regressors (:attr:`Confounds.table`), one row per volume of the
        confounds file.
    path : path-like | None
        The confounds file, for the message.
    start : int
        First volume kept (the volumes dropped before it are not checked).

    Raises
    ------
    ValueError
        Naming the file, the columns and the rows (1-based, as in the file below its
        header: the first few and their count).
    """
    values = table.to_numpy(dtype=float)[start:]
    bad = ~np.isfinite(values)
    if not bad.any():
        return
    rows = np.flatnonzero(bad.any(axis=1)) + start + 1
    columns = [str(c) for c, b in zip(table.columns, bad.any(axis=0), strict=True) if b]
    shown = ", ".join(str(r) for r in rows[:5]) + (", ..." if len(rows) > 5 else "")
    source = f"Confounds file {path}" if path is not None else "The selected confounds"
    raise ValueError(
        f"{source}: column(s) {columns} must be finite in every volume kept, got NaN or "
        f"infinite values in {len(rows)} row(s) ({shown}; row 1 is the first volume) "
        "instead. Fill in those rows, select other columns with "
        "`preprocess_fmri.confounds`, or drop those volumes with "
        "`preprocess_fmri.drop_volumes` when they lead the run."
    )


def non_steady_state_count(table: pd.DataFrame | None) -> int:
    """Leading volumes flagged by fMRIPrep's ``non_steady_state_outlier*`` columns.

    Parameters
    ----------
    table : pandas.DataFrame | None
        Confounds table.

    Returns
    -------
    n : int
        One past the last flagged volume (0 when there are no such columns).
    """
    if table is None:
        return 0
    cols = [c for c in table.columns if str(c).startswith("non_steady_state_outlier")]
    if not cols:
        return 0
    flagged = np.flatnonzero(table[cols].fillna(0).to_numpy().any(axis=1))
    return int(flagged.max()) + 1 if flagged.size else 0


def _load_fmriprep(
    path: Path, components: list[str], params: Mapping[str, Any]
) -> tuple[pd.DataFrame, np.ndarray | None]:
    """Call nilearn's ``load_confounds`` on ``path`` (under an fMRIPrep-style name)."""
    from nilearn.interfaces.fmriprep import load_confounds

    dvars = params["std_dvars_threshold"]
    with tempfile.TemporaryDirectory() as tmp:
        stem = "sub-0_task-0"
        image = Path(tmp) / f"{stem}_space-T1w_desc-preproc_bold.nii.gz"
        image.touch()
        shutil.copyfile(path, Path(tmp) / f"{stem}_desc-confounds_timeseries.tsv")
        sidecar = path.with_suffix(".json")
        if sidecar.is_file():
            shutil.copyfile(sidecar, Path(tmp) / f"{stem}_desc-confounds_timeseries.json")
        try:
            table, sample_mask = load_confounds(
                str(image),
                strategy=tuple(components),
                motion=params["motion"],
                wm_csf=params["wm_csf"],
                global_signal=params["global_signal"],
                compcor=params["compcor"],
                n_compcor=params["n_compcor"],
                fd_threshold=params["fd_threshold"],
                std_dvars_threshold=np.inf if dvars is None else dvars,
                scrub=params["scrub_min_segment"],
                demean=True,
            )
        except (ValueError, KeyError) as err:
            raise ValueError(f"Confounds file {path}: {err}") from err
    return table, sample_mask


def _custom_columns(table: pd.DataFrame, columns: list[str], path: Path) -> pd.DataFrame:
    """User-named columns of a confounds table, leading NaNs back-filled."""
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ValueError(
            f"Confounds file {path} has no column(s) {missing}; available: {list(table.columns)}."
        )
    chosen = table[columns] if columns else table.select_dtypes("number")
    chosen = chosen.apply(pd.to_numeric, errors="coerce").bfill()
    if chosen.isna().any().any():
        bad = chosen.columns[chosen.isna().any()].tolist()
        raise ValueError(f"Confounds file {path}: column(s) {bad} have missing values.")
    return chosen


_MOTION_SUFFIXES = {
    "basic": ("",),
    "power2": ("", "_power2"),
    "derivatives": ("", "_derivative1"),
    "full": ("", "_derivative1", "_power2", "_derivative1_power2"),
}


def auto_components(table: pd.DataFrame | None, motion: str = "full") -> tuple[list[str], str]:
    """Components (and motion model) the ``"auto"`` strategy takes from a confounds table.

    Parameters
    ----------
    table : pandas.DataFrame | None
        The run's confounds table, or ``None`` when it has none.
    motion : str
        The configured motion model (``basic``, ``power2``, ``derivatives``, ``full``).

    Returns
    -------
    components : list of str
        ``["motion", "wm_csf"]`` for an fMRIPrep-style table with ``white_matter`` and
        ``csf`` columns, ``["motion"]`` for one without them, ``[]`` for no table or a
        table without ``trans_x`` (a user's own columns are used only when asked for,
        with the ``custom`` strategy).
    motion : str
        ``motion``, or ``"basic"`` when the table lacks that model's columns (older or
        trimmed tables with only the six parameters).
    """
    if table is None or "trans_x" not in table.columns:
        return [], motion
    columns = set(table.columns)
    names = ("trans_x", "trans_y", "trans_z", "rot_x", "rot_y", "rot_z")
    if not {f"{n}{suffix}" for n in names for suffix in _MOTION_SUFFIXES[motion]} <= columns:
        motion = "basic"
    if {"white_matter", "csf"} <= columns:
        return ["motion", "wm_csf"], motion
    return ["motion"], motion


def select_confounds(
    *,
    path: str | os.PathLike | None,
    n_volumes: int,
    config: Mapping[str, Any],
    global_signal: np.ndarray | None = None,
) -> Confounds:
    """Select a run's nuisance regressors according to the ``confounds`` config.

    Parameters
    ----------
    path : path-like | None
        fMRIPrep ``desc-confounds_timeseries.tsv`` or a user table.
    n_volumes : int
        Volumes in the run.
    config : dict
        The ``confounds`` subsection (``strategy``, ``motion``, ...).
    global_signal : ndarray, shape (n_volumes,) | None
        Mean in-mask signal, used when ``global_signal`` is requested and no
        table provides it.

    Returns
    -------
    confounds : Confounds
        Regressors and scrubbed volumes.
    """
    strategy = config["strategy"]
    empty = pd.DataFrame(index=range(n_volumes))
    result = Confounds(table=empty, outliers=np.zeros(n_volumes, bool))
    if strategy in ("none", None):
        return result
    path = Path(path) if path is not None else None
    table = read_confounds_table(path, n_volumes) if path is not None else None
    if strategy == "auto":
        components, motion = auto_components(table, config["motion"])
        if table is not None:
            result.notes.append({"auto": components, "motion": motion})
        if not components:
            return result
        config = {**config, "motion": motion}
    else:
        components = list(strategy)
    fmriprep_like = table is not None and "trans_x" in table.columns
    wanted = [c for c in components if c in FMRIPREP_COMPONENTS]
    parts = []
    if fmriprep_like and wanted:
        chosen, sample_mask = _load_fmriprep(path, wanted, config)
        if chosen is not None and chosen.shape[1]:
            parts.append(chosen.reset_index(drop=True))
        if "scrub" in wanted and sample_mask is not None:
            kept = np.zeros(n_volumes, bool)
            kept[np.asarray(sample_mask)] = True
            nss = non_steady_state_count(table)
            result.outliers = ~kept
            result.outliers[:nss] = False
        result.notes.append({"source": str(path), "components": wanted})
    else:
        if "global_signal" in wanted and global_signal is not None:
            parts.append(pd.DataFrame({"global_signal": np.asarray(global_signal, float)}))
            result.notes.append({"computed": ["global_signal"]})
        skipped = [c for c in wanted if c != "global_signal"]
        if skipped:
            warnings.warn(
                f"Confound component(s) {skipped} need an fMRIPrep confounds table, "
                f"which this run does not have{f' ({path})' if path else ''}; skipping them.",
                stacklevel=2,
            )
            result.notes.append({"skipped": skipped})
    if "custom" in components:
        if table is None:
            raise ValueError(
                "The 'custom' confounds strategy needs a confounds file for the run, got none."
            )
        parts.append(_custom_columns(table, list(config["columns"]), path).reset_index(drop=True))
        result.notes.append({"custom": list(config["columns"]) or "all numeric columns"})
    if parts:
        result.table = pd.concat(parts, axis=1)
    return result
