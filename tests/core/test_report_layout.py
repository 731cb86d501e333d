"""Report categories, subcategories and labels of the summary figures, from their names."""

from __future__ import annotations

import pytest

from neuroflow.workflow.report_layout import CATEGORIES, QC_FIGURES, figure_entry, qc_entry


@pytest.mark.parametrize(
    ("name", "kind", "category", "subcategory", "labels"),
    [
        ("roi_mean_r", "roi_scores", "fMRI encoding", "Scores per ROI", {"metric": "mean r"}),
        (
            "roi_mean_r_normalized",
            "roi_scores",
            "fMRI encoding",
            "Scores per ROI",
            {"metric": "mean noise-normalised r"},
        ),
        (
            "sub-01_model-joint_fs-image-statistics-minilm_layer-output-embedding_r_normalized",
            "score_map",
            "fMRI encoding",
            "Score maps",
            {
                "subject": "01",
                "model": "joint",
                "feature space": "image-statistics-minilm",
                "layer": "output-embedding",
                "metric": "noise-normalised r",
            },
        ),
        (
            "sub-A2_model-video_fs-videomae_r",
            "score_map",
            "fMRI encoding",
            "Score maps",
            {
                "subject": "A2",
                "model": "video",
                "feature space": "videomae",
                "layer": "",
                "metric": "r",
            },
        ),
        (
            "decoding_generalization",
            "decoding",
            "Decoding",
            "EEG temporal generalisation",
            {"analysis": "classification", "metric": "balanced accuracy"},
        ),
        ("rsa_eeg_cross_temporal", "rsa", "RSA", "EEG", {"figure": "cross-temporal RSA"}),
        ("rsa_fmri_roi_alignment", "rsa", "RSA", "fMRI", {"figure": "ROI x ROI alignment"}),
        (
            "eeg_encoding_efficientnet__blocks_7_r",
            "eeg_encoding",
            "EEG encoding",
            "Time courses",
            {"model": "efficientnet__blocks_7"},
        ),
        (
            "trf_words_power",
            "trf",
            "EEG encoding",
            "Temporal response functions",
            {"model": "words"},
        ),
        (
            "layer_sweep_effnet_layers",
            "layer_sweep",
            "Layer sweeps",
            "effnet_layers",
            {"analysis": "encoding", "metric": "mean r"},
        ),
        (
            "layer_sweep_effnet_rsa_eeg_tau-a_peak",
            "layer_sweep",
            "Layer sweeps",
            "effnet",
            {"analysis": "rsa_eeg", "metric": "tau-a_peak"},
        ),
        (
            "layer_sweep_clip_identification_contrastive_top1",
            "layer_sweep",
            "Layer sweeps",
            "clip",
            {"analysis": "identification_contrastive", "metric": "top1"},
        ),
        ("something_else", "other", "Other figures", "Other", {"figure": "something_else"}),
    ],
)
def test_figure_entry(name, kind, category, subcategory, labels):
    entry = figure_entry(name)
    assert (entry.kind, entry.category, entry.subcategory) == (kind, category, subcategory)
    assert entry.labels == labels
    assert entry.category in CATEGORIES


def test_figures_of_one_subcategory_share_label_keys():
    names = [
        "sub-01_model-a_fs-x_r",
        "sub-02_model-b_fs-y_layer-l_r_normalized",
        "decoding_features_timecourse",
        "decoding_classification_timecourse",
        "layer_sweep_s",
        "layer_sweep_s_rsa_spearman",
    ]
    keys: dict[tuple[str, str], set] = {}
    for name in names:
        entry = figure_entry(name)
        keys.setdefault((entry.category, entry.subcategory), set()).add(tuple(entry.labels))
    assert all(len(v) == 1 for v in keys.values()), keys


@pytest.mark.parametrize(
    ("name", "subcategory", "recording", "measure"),
    [
        ("sub-01_task-images_qc-psd", "EEG", "task-images", "power spectra before/after"),
        ("sub-A2_ses-2_task-x_run-03_qc-drop-log", "EEG", "ses-2 task-x run-03", None),
        ("sub-01_task-movie_run-1_qc-variance_removed", "fMRI", "task-movie run-1", None),
        ("sub-07_qc-carpet", "fMRI", "", "carpet plot"),
    ],
)
def test_qc_figures_are_placed_by_recording_and_measure(name, subcategory, recording, measure):
    entry = figure_entry(name)
    assert entry == qc_entry(name)
    assert entry.category == "Quality control" and entry.subcategory == subcategory
    assert entry.kind == f"qc-{name.rsplit('_qc-', 1)[1]}"
    assert entry.labels["subject"] == name.split("_")[0].removeprefix("sub-")
    assert entry.labels["recording"] == recording
    assert entry.labels["measure"] == (measure or QC_FIGURES[entry.kind.removeprefix("qc-")][1])
    assert "Quality control" in CATEGORIES


def test_qc_entry_rejects_other_names():
    with pytest.raises(ValueError, match=r"QC figure name must be .*got 'sub-01_qc-nope'"):
        qc_entry("sub-01_qc-nope")
    with pytest.raises(ValueError, match="QC figure name"):
        qc_entry("roi_mean_r")
