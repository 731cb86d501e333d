"""Export stores in the file formats of the field, each with the version it came from.

- Voxel-wise score stores (``evaluation``, ``trial_evaluation``) become NIfTI statistical
  maps with BIDS-derivatives names, e.g.
  ``sub-01/func/sub-01_task-movie_model-visual_stat-r_statmap.nii.gz``; ``stat`` is
  ``r``, ``rnormalized`` or ``p``, and ``desc-fdr`` maps keep only the voxels
  significant after FDR (0 elsewhere). Undefined scores stay NaN; units are mm and s,
  and the qform equals the sform (code 4, MNI, for an ``MNI*`` space, else 1, scanner).
- EEG epochs stores (``preprocess_eeg``) become MNE ``-epo.fif`` files, with the
  evoked response of each condition in one ``-ave.fif``; ``info["highpass"]`` and
  ``info["lowpass"]`` hold the pass band the stage applied.
- EEG score stores (``eeg_evaluation``: channel x latency) become an MNE evoked file of
  ``r`` whose comment names the model, and a long-format TSV of every score.
- Decoding and RSA stores become long-format TSVs (``variable``, one column per dim,
  ``value``).
- Feature stores become one ``.npy`` (stimulus, feature) per layer, with the stimulus
  order in a TSV beside it, or one HDF5 file (``--features-format h5``).
- The summary becomes ``scores.tsv`` with a JSON sidecar that describes its columns.

Every exported file has a JSON sidecar (BIDS style) naming the store it came from
(relative to the results folder), its stage and version, and what the file holds. The
dataset's entities (subject, session, task, run) are BIDS labels (alphanumeric); a
model's label is its name in file-system-safe form (:func:`neuroflow.names.file_form`,
``model-efficientnet__blocks.7``), the spelling it has in every other file name, which
a strict BIDS label (alphanumeric only) would change. The export
folder gets a BIDS ``dataset_description.json`` (``DatasetType: derivative``) whose
``GeneratedBy`` names neuroflow, its version and the stage versions exported.
"""

from __future__ import annotations

from neuroflow.export.common import (
    results_relative,
)
from neuroflow.export.eeg import (
    export_eeg_scores,
    export_epochs,
    filter_band,
)
from neuroflow.export.maps import (
    MAP_STATISTICS,
    NIFTI_MNI,
    NIFTI_SCANNER,
    export_score_maps,
    nifti_space_code,
)
from neuroflow.export.run import (
    BIDS_VERSION,
    DATASET_DESCRIPTION,
    EXPORT_KINDS,
    export_results,
    stage_versions_of,
    write_dataset_description,
)
from neuroflow.export.tables import (
    SUMMARY_COLUMN_DESCRIPTIONS,
    SUMMARY_METRIC_DESCRIPTIONS,
    TABLE_MAX_VALUES,
    export_features,
    export_summary,
    export_table,
    results_table,
)

__all__ = [
    "BIDS_VERSION",
    "DATASET_DESCRIPTION",
    "EXPORT_KINDS",
    "MAP_STATISTICS",
    "NIFTI_MNI",
    "NIFTI_SCANNER",
    "SUMMARY_COLUMN_DESCRIPTIONS",
    "SUMMARY_METRIC_DESCRIPTIONS",
    "TABLE_MAX_VALUES",
    "export_eeg_scores",
    "export_epochs",
    "export_features",
    "export_results",
    "export_score_maps",
    "export_summary",
    "export_table",
    "filter_band",
    "nifti_space_code",
    "results_relative",
    "results_table",
    "stage_versions_of",
    "write_dataset_description",
]
