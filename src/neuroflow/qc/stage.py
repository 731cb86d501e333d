"""The ``qc_eeg`` and ``qc_fmri`` stages: one store and a folder of figures per recording.

Each job reads a recording's input file again (the spectrum or the raw BOLD before
any preprocessing) and its preprocessed store, writes ``<key>_qc.zarr`` and the
figures ``<key>_qc/<key>_qc-<kind>.png`` that the report lists under "Quality control".
Both are written atomically: an interrupted job leaves neither.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neuroflow.artifacts import atomic_directory, write_dataset
from neuroflow.io.records import EegRecording

if TYPE_CHECKING:
    import xarray as xr

__all__ = ["QC_CATEGORY", "qc_eeg_recording", "qc_fmri_run"]

#: Report category of the QC figures.
QC_CATEGORY = "Quality control"


def qc_eeg_recording(
    *,
    recording: EegRecording | str | os.PathLike,
    epochs_store: str | os.PathLike,
    continuous_store: str | os.PathLike | None,
    output: str | os.PathLike,
    plots: str | os.PathLike,
    prefix: str,
    config: Mapping[str, Any],
    provenance: Mapping[str, Any],
) -> tuple[Path, Path]:
    """Stage entry point: QC store and figures of one EEG recording.

    Parameters
    ----------
    recording : EegRecording | path-like
        The recording.
    epochs_store, continuous_store : path-like
        Its ``preprocess_eeg`` stores (no continuous store for epoched input).
    output : path-like
        The QC store (see :func:`neuroflow.qc.eeg.eeg_qc_dataset`).
    plots : path-like
        Folder of the figures (see :func:`neuroflow.qc.eeg.eeg_qc_figures`).
    prefix : str
        The recording's entity key, the figures' file name prefix.
    config : dict
        The ``qc`` section (``dpi``).
    provenance : dict
        From :func:`neuroflow.artifacts.build_provenance`.

    Returns
    -------
    output, plots : Path
    """
    from neuroflow.qc.eeg import eeg_qc_dataset, eeg_qc_figures

    ds = eeg_qc_dataset(
        recording=recording, epochs_store=epochs_store, continuous_store=continuous_store
    )
    return _write_qc(
        ds,
        partial(eeg_qc_figures, ds, prefix=prefix, dpi=int(config.get("dpi", 100))),
        output=output,
        plots=plots,
        provenance=provenance,
    )


def qc_fmri_run(
    *,
    bold: str | os.PathLike,
    clean_store: str | os.PathLike,
    confounds: str | os.PathLike | None,
    preprocess_config: Mapping[str, Any],
    output: str | os.PathLike,
    plots: str | os.PathLike,
    prefix: str,
    config: Mapping[str, Any],
    provenance: Mapping[str, Any],
) -> tuple[Path, Path]:
    """Stage entry point: QC store and figures of one fMRI run.

    Parameters
    ----------
    bold : path-like
        The run's BOLD image as read by ``preprocess_fmri``.
    clean_store : path-like
        Its ``preprocess_fmri`` store.
    confounds : path-like | None
        The run's confounds table.
    preprocess_config : dict
        The ``preprocess_fmri`` section (which confounds and drifts the cleaning used).
    output : path-like
        The QC store (see :func:`neuroflow.qc.fmri.fmri_qc_dataset`).
    plots : path-like
        Folder of the figures (see :func:`neuroflow.qc.fmri_figures.fmri_qc_figures`).
    prefix : str
        The run's entity key.
    config : dict
        The ``qc`` section.
    provenance : dict
        From :func:`neuroflow.artifacts.build_provenance`.

    Returns
    -------
    output, plots : Path
    """
    from neuroflow.qc.fmri import fmri_qc_dataset
    from neuroflow.qc.fmri_figures import fmri_qc_figures

    ds = fmri_qc_dataset(
        bold=bold,
        clean_store=clean_store,
        confounds=confounds,
        preprocess_config=preprocess_config,
    )
    return _write_qc(
        ds,
        partial(fmri_qc_figures, ds, bold=bold, prefix=prefix),
        output=output,
        plots=plots,
        provenance=provenance,
    )


def _write_qc(
    ds: xr.Dataset,
    draw: Callable[..., object],
    *,
    output: str | os.PathLike,
    plots: str | os.PathLike,
    provenance: Mapping[str, Any],
) -> tuple[Path, Path]:
    """Draw the figures into ``plots`` (``draw(out_dir=<temporary folder>)``), then write
    ``ds`` to the store ``output``, each atomically; returns both paths."""
    with atomic_directory(plots) as tmp:
        draw(out_dir=tmp)
    store = write_dataset(ds, output, provenance=provenance)  # text as fixed-width strings
    return store, Path(plots)
