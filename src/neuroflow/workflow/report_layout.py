"""Where each summary figure goes in the Snakemake report, and under which labels.

The summary job writes every figure into one folder (``results/summary/<v>/plots``);
the report lists each file under a category (fMRI encoding, EEG encoding, decoding,
RSA, layer sweeps) and a subcategory, with labels (subject, model, layer, metric, ...)
that the report shows as the columns of a table, so that results read as a table
rather than as paths.

Snakemake's report turns a label other than the first into an on/off switch when it
has exactly two values, each on half of a subcategory's entries, and then expects every
combination of the other labels to exist with both values; a label that follows from
the others (a metric fixed by the analysis, a subject that the recording names) breaks
the page. So no label here is a function of the others: a measure that depends on the
analysis is part of the analysis label, and a recording's label is its whole entity key.

:func:`figure_entry` reads all of it from the file name, which the summary builds from
the same parts (see :mod:`neuroflow.evaluation.stage` and
:mod:`neuroflow.evaluation.report`). The caption of each kind of figure is in
``workflow/report/figures.rst``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = [
    "CATEGORIES",
    "INSILICO_CATEGORY",
    "QC_FIGURES",
    "FigureEntry",
    "figure_entry",
    "qc_entry",
]

#: Report categories, in the order a reader meets them.
CATEGORIES = (
    "fMRI encoding",
    "EEG encoding",
    "Decoding",
    "RSA",
    "Layer sweeps",
    "In-silico",
    "Quality control",
    "Tables",
    "Methods",
    "Warnings",
    "Other figures",
)

#: Category of the contact sheets of the ``predict`` stage (one per subject, model, ROI).
INSILICO_CATEGORY = "In-silico"
_METRICS = {"r": "r", "r_normalized": "noise-normalised r"}
#: QC figure kind -> (subcategory, what it shows), as the report labels it.
QC_FIGURES = {
    "psd": ("EEG", "power spectra before/after"),
    "band-power": ("EEG", "band power per channel"),
    "channels": ("EEG", "bad channels and ICA"),
    "drop-log": ("EEG", "drop log and epochs per condition"),
    "erp": ("EEG", "evoked response"),
    "erp-conditions": ("EEG", "evoked response per condition"),
    "mean": ("fMRI", "mean image"),
    "tsnr": ("fMRI", "tSNR map"),
    "carpet": ("fMRI", "carpet plot"),
    "motion": ("fMRI", "framewise displacement, DVARS, global signal"),
    "variance_removed": ("fMRI", "variance removed per nuisance set"),
}
_QC = re.compile(r"^sub-(?P<subject>[A-Za-z0-9]+)(?:_(?P<recording>.+?))?_qc-(?P<kind>[a-z_-]+)$")
_SCORE_MAP = re.compile(
    r"^sub-(?P<subject>[^_]+)_model-(?P<model>.+?)_fs-(?P<fs>.+?)"
    r"(?:_layer-(?P<layer>.+?))?_(?P<metric>r|r_normalized)$"
)
_DECODING = {
    "decoding_features_timecourse": ("EEG time courses", "feature PCs", "r"),
    "decoding_classification_timecourse": (
        "EEG time courses",
        "classification",
        "balanced accuracy",
    ),
    "decoding_generalization": (
        "EEG temporal generalisation",
        "classification",
        "balanced accuracy",
    ),
    "decoding_fmri_identification": (
        "fMRI",
        "identification of held-out stimuli per ROI",
        "rank accuracy",
    ),
    "decoding_fmri_concepts": ("fMRI", "concept decoding per ROI", "ROC AUC"),
    "decoding_cross_subject": (
        "EEG across subjects",
        "held-out subjects or sessions, aligned vs unaligned",
        "balanced accuracy",
    ),
}
_RSA = re.compile(
    r"^rsa_(?P<modality>eeg|fmri)_"
    r"(?P<kind>cross_temporal|roi_alignment|layer_similarity|model_time)$"
)
_RSA_FIGURES = {
    "cross_temporal": "cross-temporal RSA",
    "roi_alignment": "ROI x ROI alignment",
    "layer_similarity": "layer x ROI similarity",
    "model_time": "model time x brain time RSA",
}
_TRF = re.compile(r"^trf_(?P<model>.+)_power$")
_TRAINING = re.compile(r"^encoding_(?P<model>.+)_training$")
_EEG_ENCODING = re.compile(r"^eeg_encoding_(?P<model>.+)_r$")
_SWEEP = re.compile(
    r"^layer_sweep_(?P<sweep>.+?)"
    r"(?:_(?P<stage>rsa_eeg|rsa|identification_[a-z]+)_(?P<metric>.+)|_(?P<alignment>alignment))?$"
)


@dataclass(frozen=True)
class FigureEntry:
    """Report placement of one summary figure.

    Attributes
    ----------
    kind : str
        ``roi_scores``, ``score_map``, ``training``, ``eeg_encoding``, ``decoding``,
        ``rsa``, ``trf``, ``layer_sweep`` or ``other``: which caption the figure gets.
    category, subcategory : str
        Report category and subcategory.
    labels : dict of str to str
        Label columns of the report's table; every figure of one subcategory has
        the same keys.
    """

    kind: str
    category: str
    subcategory: str
    labels: dict[str, str] = field(default_factory=dict)


def figure_entry(name: str) -> FigureEntry:
    """The report placement of the summary figure ``<name>.<ext>``.

    Parameters
    ----------
    name : str
        File name without its extension, e.g. ``"roi_mean_r"``,
        ``"sub-01_model-visual_fs-image-statistics_layer-output_r"`` or
        ``"encoding_tribe_training"`` (the training curves of model ``tribe``).

    Returns
    -------
    entry : FigureEntry
        Kind, category, subcategory and labels; names the summary does not write
        go to ``"Other figures"`` labelled with the name itself.
    """
    if name.startswith("roi_"):
        metric = name.removeprefix("roi_").removeprefix("mean_")
        return FigureEntry(
            "roi_scores",
            "fMRI encoding",
            "Scores per ROI",
            {"metric": f"mean {_METRICS.get(metric, metric)}"},
        )
    match = _SCORE_MAP.match(name)
    if match:
        return FigureEntry(
            "score_map",
            "fMRI encoding",
            "Score maps",
            {
                "subject": match["subject"],
                "model": match["model"],
                "feature space": match["fs"],
                "layer": match["layer"] or "",
                "metric": _METRICS[match["metric"]],
            },
        )
    match = _TRAINING.match(name)
    if match:
        return FigureEntry(
            "training", "fMRI encoding", "Training curves", {"model": match["model"]}
        )
    if name in _DECODING:
        subcategory, analysis, metric = _DECODING[name]
        return FigureEntry(
            "decoding", "Decoding", subcategory, {"analysis": f"{analysis} ({metric})"}
        )
    match = _RSA.match(name)
    if match:
        modality = match["modality"].upper() if match["modality"] == "eeg" else "fMRI"
        return FigureEntry("rsa", "RSA", modality, {"figure": _RSA_FIGURES[match["kind"]]})
    match = _EEG_ENCODING.match(name)
    if match:
        return FigureEntry(
            "eeg_encoding", "EEG encoding", "Time courses", {"model": match["model"]}
        )
    match = _TRF.match(name)
    if match:
        return FigureEntry(
            "trf", "EEG encoding", "Temporal response functions", {"model": match["model"]}
        )
    if _QC.match(name):
        return qc_entry(name)
    match = _SWEEP.match(name)
    if match:
        stage = match["stage"] or "encoding"
        analysis = f"{stage} ({match['metric'] or 'mean r'})"
        if match["alignment"]:
            analysis = "encoding vs RSA (mean r, RDM similarity)"
        return FigureEntry("layer_sweep", "Layer sweeps", match["sweep"], {"analysis": analysis})
    return FigureEntry("other", "Other figures", "Other", {"figure": name})


def qc_entry(name: str) -> FigureEntry:
    """The report placement of the QC figure ``<key>_qc-<kind>.<ext>``.

    Parameters
    ----------
    name : str
        File name without its extension, e.g. ``"sub-01_task-images_qc-psd"``.

    Returns
    -------
    entry : FigureEntry
        Kind ``qc-<kind>``, category "Quality control", subcategory ``EEG`` or ``fMRI``,
        labels recording (its entities, subject first) and measure.

    Raises
    ------
    ValueError
        When ``name`` is not a QC figure name.
    """
    match = _QC.match(name)
    if not match or match["kind"] not in QC_FIGURES:
        raise ValueError(
            f"A QC figure name must be '<key>_qc-<kind>' with kind one of "
            f"{sorted(QC_FIGURES)}, got {name!r} instead."
        )
    subcategory, measure = QC_FIGURES[match["kind"]]
    return FigureEntry(
        f"qc-{match['kind']}",
        "Quality control",
        subcategory,
        {"recording": name.rsplit("_qc-", 1)[0].replace("_", " "), "measure": measure},
    )
