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
            "encoding_tribe_training",
            "training",
            "fMRI encoding",
            "Training curves",
            {"model": "tribe"},
        ),
        (
            "encoding_tribe_small_v2_training",
            "training",
            "fMRI encoding",
            "Training curves",
            {"model": "tribe_small_v2"},
        ),
        (
            "decoding_generalization",
            "decoding",
            "Decoding",
            "EEG temporal generalisation",
            {"analysis": "classification (balanced accuracy)"},
        ),
        (
            "decoding_cross_subject",
            "decoding",
            "Decoding",
            "EEG across subjects",
            {"analysis": "held-out subjects or sessions, aligned vs unaligned (balanced accuracy)"},
        ),
        ("rsa_eeg_cross_temporal", "rsa", "RSA", "EEG", {"figure": "cross-temporal RSA"}),
        ("rsa_eeg_model_time", "rsa", "RSA", "EEG", {"figure": "model time x brain time RSA"}),
        ("rsa_fmri_roi_alignment", "rsa", "RSA", "fMRI", {"figure": "ROI x ROI alignment"}),
        (
            "rsa_fmri_layer_similarity",
            "rsa",
            "RSA",
            "fMRI",
            {"figure": "layer x ROI similarity"},
        ),
        (
            "eeg_encoding_efficientnet__blocks.7_r",
            "eeg_encoding",
            "EEG encoding",
            "Time courses",
            {"model": "efficientnet__blocks.7"},
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
            {"analysis": "encoding (mean r)"},
        ),
        (
            "layer_sweep_effnet_rsa_eeg_tau-a_peak",
            "layer_sweep",
            "Layer sweeps",
            "effnet",
            {"analysis": "rsa_eeg (tau-a_peak)"},
        ),
        (
            "layer_sweep_clip_identification_contrastive_top1",
            "layer_sweep",
            "Layer sweeps",
            "clip",
            {"analysis": "identification_contrastive (top1)"},
        ),
        (
            "layer_sweep_effnet_layers_alignment",
            "layer_sweep",
            "Layer sweeps",
            "effnet_layers",
            {"analysis": "encoding vs RSA (mean r, RDM similarity)"},
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
        "layer_sweep_s_alignment",
        "encoding_tribe_training",
        "encoding_other_training",
    ]
    keys: dict[tuple[str, str], set] = {}
    for name in names:
        entry = figure_entry(name)
        keys.setdefault((entry.category, entry.subcategory), set()).add(tuple(entry.labels))
    assert all(len(v) == 1 for v in keys.values()), keys


@pytest.mark.parametrize(
    ("name", "subcategory", "recording", "measure"),
    [
        ("sub-01_task-images_qc-psd", "EEG", "sub-01 task-images", "power spectra before/after"),
        ("sub-A2_ses-2_task-x_run-03_qc-drop-log", "EEG", "sub-A2 ses-2 task-x run-03", None),
        ("sub-01_task-movie_run-1_qc-variance_removed", "fMRI", "sub-01 task-movie run-1", None),
        ("sub-07_qc-carpet", "fMRI", "sub-07", "carpet plot"),
    ],
)
def test_qc_figures_are_placed_by_recording_and_measure(name, subcategory, recording, measure):
    entry = figure_entry(name)
    assert entry == qc_entry(name)
    assert entry.category == "Quality control" and entry.subcategory == subcategory
    assert entry.kind == f"qc-{name.rsplit('_qc-', 1)[1]}"
    assert entry.labels["recording"] == recording
    assert entry.labels["measure"] == (measure or QC_FIGURES[entry.kind.removeprefix("qc-")][1])
    assert "Quality control" in CATEGORIES


def _report_switch_breaks(names: list[str]) -> list[str]:
    """Entries Snakemake's report cannot show, by its rule for label switches.

    The report (``abstract_results.js``) makes a label other than the first a switch
    when it has exactly two values, each on half of the entries, and looks every entry
    up by its other labels plus the switch's value: a combination without both values
    is missing and the page fails.
    """
    entries = [figure_entry(n) for n in names]
    keys = list(entries[0].labels)
    switches = []
    for key in keys[1:]:
        values = [e.labels[key] for e in entries]
        unique = set(values)
        if len(unique) == 2 and all(2 * values.count(v) == len(values) for v in unique):
            switches.append(key)
    if len(switches) != 1:
        return []
    (switch,) = switches
    seen: dict[tuple, set] = {}
    for entry in entries:
        rest = tuple(entry.labels[k] for k in keys if k != switch)
        seen.setdefault(rest, set()).add(entry.labels[switch])
    both = {e.labels[switch] for e in entries}
    return [str(rest) for rest, values in seen.items() if values != both]


@pytest.mark.parametrize(
    "names",
    [
        ["decoding_features_timecourse", "decoding_classification_timecourse"],
        ["layer_sweep_cnn", "layer_sweep_cnn_rsa_spearman"],
        [
            "layer_sweep_cnn_identification_ridge_top1",
            "layer_sweep_cnn_identification_ridge_top5",
        ],
        # two subjects, one recording each, the same task: the recording names the subject
        [f"sub-0{s}_task-images_qc-{k}" for s in (1, 2) for k in ("psd", "erp")],
        # two subjects with one different run each
        [f"sub-01_task-x_run-1_qc-{k}" for k in ("mean", "tsnr")]
        + [f"sub-02_task-x_run-2_qc-{k}" for k in ("mean", "tsnr")],
        # training curves of two transformer models
        ["encoding_tribe_training", "encoding_tribe_large_training"],
        # score maps of two models, r and noise-normalised r: a working switch
        [
            f"sub-01_model-{m}_fs-{m}_{metric}"
            for m in ("visual", "semantic")
            for metric in ("r", "r_normalized")
        ],
    ],
)
def test_every_report_table_can_be_shown(names):
    assert len({figure_entry(n).subcategory for n in names}) == 1
    assert _report_switch_breaks(names) == []


def test_qc_entry_rejects_other_names():
    with pytest.raises(ValueError, match=r"QC figure name must be .*got 'sub-01_qc-nope'"):
        qc_entry("sub-01_qc-nope")
    with pytest.raises(ValueError, match="QC figure name"):
        qc_entry("roi_mean_r")
