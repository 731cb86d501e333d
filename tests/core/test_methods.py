"""The report's methods paragraph, written from the config and what the run does."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from neuroflow.config import load_schema, validate_config
from neuroflow.workflow.methods import REFERENCES, MethodsText, RunFacts, methods_rst

SCHEMA = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "config.schema.yaml"


@pytest.fixture(scope="module")
def config() -> dict:
    return validate_config({}, load_schema(SCHEMA))


def _cited(text: str) -> tuple[set[int], list[str]]:
    body, _, refs = text.partition("**References**")
    markers = {int(n) for group in re.findall(r"\[([\d, ]+)\]", body) for n in group.split(",")}
    return markers, [line for line in refs.strip().splitlines() if line]


FMRI_EEG = RunFacts(
    n_fmri_subjects=2,
    n_eeg_subjects=2,
    encoding_models=("visual", "semantic"),
    eeg_models=("visual",),
    decoding=True,
    rsa=("eeg", "fmri"),
    extractors=(
        {"name": "minilm", "extractor": "sentence_transformer", "model": "all-MiniLM-L6-v2"},
    ),
)


def test_every_marker_has_its_reference_and_no_other(config):
    text = methods_rst(config, FMRI_EEG)
    markers, refs = _cited(text)
    assert markers == set(range(1, len(refs) + 1))
    assert refs[0].startswith("1. Abraham A")  # nilearn, cited first
    assert any("Gramfort A" in r for r in refs) and any("Nili H" in r for r in refs)
    assert "visual, semantic" in text and "minilm (sentence_transformer, all-MiniLM-L6-v2)" in text
    assert f"q = {config['evaluation']['fdr']['alpha']}" in text


def test_only_the_analyses_that_run_are_described(config):
    eeg_only = RunFacts(n_eeg_subjects=1, decoding=True, rsa=("eeg",))
    text = methods_rst(config, eeg_only)
    assert "BOLD" not in text and "Encoding models" not in text and "crossnobis" not in text
    assert "EEG recordings were read" in text and "EEG decoding comprised" in text
    _, refs = _cited(text)
    assert not any("Abraham A" in r for r in refs)


def test_settings_choose_the_citations(config):
    cfg = copy.deepcopy(config)
    cfg["evaluation"]["fdr"]["method"] = "by"
    cfg["evaluation"]["permutation"]["tail"] = "gpd"
    cfg["encoding"]["delays"]["hrf_model"] = "spm"
    cfg["evaluation"]["noise_ceiling"]["method"] = "ncsnr"
    _, refs = _cited(methods_rst(cfg, FMRI_EEG))
    joined = "\n".join(refs)
    for key in ("by", "knijnenburg", "spm_hrf", "nsd"):
        assert REFERENCES[key] in joined, key
    for key in ("bh", "glover", "schoppe"):
        assert REFERENCES[key] not in joined, key


def test_quality_control_is_described_when_enabled(config):
    assert config["qc"]["enabled"]
    text = methods_rst(config, FMRI_EEG)
    assert "Quality control of each EEG recording" in text
    assert "Quality control of each fMRI run" in text
    for measure in ("power spectrum", "flagged bad", "drop log", "evoked response"):
        assert measure in text, measure
    for measure in ("temporal SNR", "carpet plot", "framewise", "variance explained"):
        assert measure in text, measure
    markers, refs = _cited(text)
    assert markers == set(range(1, len(refs) + 1))
    joined = "\n".join(refs)
    for key in ("power_carpet", "power_fd", "mne", "nilearn"):
        assert REFERENCES[key] in joined, key
    # ICA is described only when it runs
    assert "ICA components removed" not in text
    cfg = copy.deepcopy(config)
    cfg["preprocess_eeg"]["spatial_filter"] = "ica"
    assert "ICA components removed" in methods_rst(cfg, FMRI_EEG)


def test_quality_control_is_absent_when_disabled(config):
    cfg = copy.deepcopy(config)
    cfg["qc"]["enabled"] = False
    text = methods_rst(cfg, FMRI_EEG)
    assert "Quality control" not in text and "carpet" not in text
    markers, refs = _cited(text)
    assert markers == set(range(1, len(refs) + 1))
    joined = "\n".join(refs)
    assert REFERENCES["power_carpet"] not in joined and REFERENCES["power_fd"] not in joined


def test_quality_control_follows_the_modalities_that_run(config):
    text = methods_rst(config, RunFacts(n_eeg_subjects=1, decoding=True))
    assert "Quality control of each EEG recording" in text
    assert "fMRI run" not in text and REFERENCES["power_carpet"] not in text
    cfg = copy.deepcopy(config)
    cfg["dataset"]["source"] = "timeseries"  # parcel series: no image to check
    assert "Quality control of each fMRI run" not in methods_rst(cfg, FMRI_EEG)


def test_eeg_ica_is_described_only_when_it_runs(config):
    cfg = copy.deepcopy(config)
    cfg["preprocess_eeg"]["spatial_filter"] = None
    text = methods_rst(cfg, FMRI_EEG)
    assert "ICA (" not in text and "Pion-Tonachini" not in text
    cfg["preprocess_eeg"]["spatial_filter"] = "ica"
    text = methods_rst(cfg, FMRI_EEG)
    assert "ICA (fastica) removed components labelled as artefacts by ICLabel" in text
    assert "Pion-Tonachini" in text
    cfg["preprocess_eeg"]["ica_use_icalabel"] = False
    text = methods_rst(cfg, FMRI_EEG)
    assert "ICA (fastica) removed components correlated with EOG channels" in text
    assert "Pion-Tonachini" not in text


def test_cross_subject_decoding_is_described_with_its_alignment(config):
    facts = RunFacts(n_eeg_subjects=2, decoding=True, decoding_cross_subject=True)
    text = methods_rst(config, facts)
    assert "Cross-subject EEG decoding scored each subject in turn" in text
    assert "shrinkage LDA at every time point, shrinkage LDA on whole epochs" in text
    markers, refs = _cited(text)
    assert markers == set(range(1, len(refs) + 1))
    assert any(REFERENCES["he_wu"] in r for r in refs)
    cfg = copy.deepcopy(config)
    cfg["decoding"]["cross_subject"].update(alignment="none", cv="leave-one-session-out")
    text = methods_rst(cfg, facts)
    assert "Cross-session EEG decoding scored each session of a subject" in text
    assert REFERENCES["he_wu"] not in text
    assert "Cross-subject" not in methods_rst(config, RunFacts(n_eeg_subjects=1, decoding=True))


def test_fmri_decoding_and_rsa_inference_are_described(config):
    facts = RunFacts(n_fmri_subjects=2, decoding_fmri="events", rsa=("fmri",))
    text = methods_rst(config, facts)
    assert "fMRI decoding used the mean BOLD over each stimulus event shifted by 4.5 s" in text
    assert "ridge and contrastive (InfoNCE" in text and "one-vs-rest logistic" in text
    assert "95 % percentile confidence intervals" in text and "1000 bootstrap" in text
    markers, refs = _cited(text)
    assert markers == set(range(1, len(refs) + 1))
    cfg = copy.deepcopy(config)
    cfg["decoding"]["contrastive"]["enabled"] = False
    cfg["decoding"]["fmri"]["concepts"]["enabled"] = False
    cfg["rsa"]["bootstrap"]["over"] = "none"
    text = methods_rst(cfg, RunFacts(n_fmri_subjects=2, decoding_fmri="trials", rsa=("fmri",)))
    assert "fMRI decoding used single-trial response estimates" in text
    assert "InfoNCE" not in text and "logistic" not in text and "bootstrap" not in text
    assert "other subjects" not in text and "other sessions" not in text
    assert "fMRI decoding" not in methods_rst(config, RunFacts(n_fmri_subjects=2))
    cfg["decoding"]["fmri"]["cv"] = "leave-one-session-out"
    assert "trained on that subject's other sessions" in methods_rst(cfg, facts)
    cfg["decoding"]["fmri"]["cv"] = "leave-one-subject-out"
    assert "trained on the other subjects' presentations" in methods_rst(cfg, facts)


def test_transformer_models_are_described_with_their_options(config):
    cfg = copy.deepcopy(config)
    cfg["encoding"]["models"]["tribe"] = {
        "feature_spaces": ["image_statistics", "minilm"],
        "model": "transformer",
        "transformer": {"hidden": 64, "seeds": [0, 1, 2]},
    }
    facts = RunFacts(n_fmri_subjects=2, encoding_models=("visual", "tribe"))
    text = methods_rst(cfg, facts)
    assert "Encoding models (visual) mapped the features" in text
    assert "The transformer encoding model(s) (tribe), after TRIBE" in text
    assert "to 64 dimensions" in text and "predictions of 3 seed(s) were averaged" in text
    assert REFERENCES["tribe"] in text
    markers, refs = _cited(text)
    assert markers == set(range(1, len(refs) + 1))
    only = methods_rst(cfg, RunFacts(n_fmri_subjects=2, encoding_models=("tribe",)))
    assert "ridge regression" not in only and "after TRIBE" in only
    assert "TRIBE" not in methods_rst(
        config, RunFacts(n_fmri_subjects=2, encoding_models=("visual",))
    )


def test_methods_text_is_itself_but_lists_short(config):
    """The paragraph as text everywhere, but short in ``repr`` and f-strings (the report's
    info panels), with a digest that changes with the text (Snakemake's rerun check)."""
    text = methods_rst(config, FMRI_EEG)
    assert isinstance(text, MethodsText) and len(text) > 1000
    plain = str(text)
    assert type(plain) is str and plain == text and plain.startswith("BOLD runs")
    label = repr(text)
    assert label == f"{text}" == format(text, "") and len(label) < 60
    assert re.fullmatch(rf"<methods: {len(text)} characters, sha1 [0-9a-f]{{10}}>", label)
    other = methods_rst(config, RunFacts(n_eeg_subjects=1, decoding=True))
    assert repr(other) != label and f"params: {other}" == f"params: {other!r}"
    import pickle

    again = pickle.loads(pickle.dumps(text))
    assert type(again) is MethodsText and again == text and repr(again) == label
