"""Version ids: a change reaches only its stage and what depends on it."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from neuroflow.config import load_schema, validate_config
from neuroflow.workflow import FORMAT_VERSIONS, WorkflowPlan, stage_versions

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def default_config() -> dict:
    schema = load_schema(REPO / "workflow" / "schemas" / "config.schema.yaml")
    return validate_config({}, schema)


def _models(config: dict) -> list[str]:
    """Encoding models of ``config``, layer sweeps expanded (one model per layer)."""
    return [k.split("/", 1)[1] for k in stage_versions(config) if k.startswith("encoding/")]


def _changed(before: dict, after: dict) -> set[str]:
    a, b = stage_versions(before), stage_versions(after)
    assert a.keys() == b.keys()
    return {key for key in a if a[key] != b[key]}


def test_same_config_same_versions(default_config: dict) -> None:
    assert stage_versions(default_config) == stage_versions(copy.deepcopy(default_config))


def test_encoding_change_reaches_only_encoding_and_downstream(default_config: dict) -> None:
    changed = copy.deepcopy(default_config)
    changed["encoding"]["alphas"]["num"] = 7
    models = _models(default_config)
    assert "efficientnet__blocks.2" in models  # the default's layer sweep, expanded
    assert _changed(default_config, changed) == {
        *(f"encoding/{m}" for m in models),
        *(f"evaluation/{m}" for m in models),
        *(f"predict/{m}" for m in models),  # the demo's pool through every refitted model
        "summary",
        "geometry",  # plotted beside the layers' scores
    }


def test_one_model_change_leaves_other_models(default_config: dict) -> None:
    changed = copy.deepcopy(default_config)
    changed["encoding"]["models"]["visual"]["model"] = "auto"
    assert _changed(default_config, changed) == {
        "encoding/visual",
        "evaluation/visual",
        "predict/visual",
        "summary",
        "geometry",
    }


def test_preprocessing_change_reaches_everything_after_it(default_config: dict) -> None:
    changed = copy.deepcopy(default_config)
    changed["preprocess_fmri"]["high_pass"]["cutoff_hz"] = 0.02
    touched = _changed(default_config, changed)
    assert "preprocess_fmri" in touched
    assert {k for k in touched if k.startswith("align_features/")} == {
        f"align_features/{e['name']}" for e in default_config["features"]["extractors"]
    }
    assert not {k for k in touched if k.startswith(("features/", "demo", "preprocess_eeg"))}
    assert {k for k in touched if k.startswith("encoding/")}


def test_one_extractor_change_reaches_only_its_users(default_config: dict) -> None:
    changed = copy.deepcopy(default_config)
    entry = next(e for e in changed["features"]["extractors"] if e["name"] == "minilm")
    entry["batch_size"] = 8
    touched = _changed(default_config, changed)
    assert "features/minilm" in touched and "align_features/minilm" in touched
    assert "features/image_statistics" not in touched
    assert "encoding/visual" not in touched  # image statistics only
    assert {"encoding/semantic", "encoding/joint"} <= touched


def test_demo_change_reaches_every_stage(default_config: dict) -> None:
    changed = copy.deepcopy(default_config)
    changed["demo"]["seed"] += 1
    assert _changed(default_config, changed) == set(stage_versions(default_config))


def test_selection_versions_pooled_stages_only(default_config: dict) -> None:
    """A different choice of recordings is a different result of every stage that pools
    them (never a rewrite of an existing folder); per-recording stages keep theirs."""
    # three subjects, two selected: cross-subject decoding applies to both selections
    base = copy.deepcopy(default_config)
    base["demo"]["n_subjects"] = 3
    changed = copy.deepcopy(base)
    changed["dataset"]["subjects"] = ["01", "02"]
    touched = _changed(base, changed)
    assert not touched & {"demo", "preprocess_fmri", "preprocess_eeg"}
    pooled = {k for k in stage_versions(base) if k.split("/")[0] in POOLED_STAGES}
    assert "decoding_cross_subject" in pooled and pooled <= touched
    # the same selection spelled differently is the same selection
    again = copy.deepcopy(base)
    again["dataset"]["subjects"] = ["1", "2"]
    assert _changed(changed, again) == set()


POOLED_STAGES = {
    "features",
    "align_features",
    "encoding",
    "evaluation",
    "eeg_encoding",
    "eeg_evaluation",
    "decoding",
    "decoding_cross_subject",
    "rsa",
    "summary",
}


def test_format_version_bump_invalidates_stage(
    default_config: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = stage_versions(default_config)
    monkeypatch.setitem(FORMAT_VERSIONS, "encoding", FORMAT_VERSIONS["encoding"] + 1)
    after = stage_versions(default_config)
    assert before["preprocess_fmri"] == after["preprocess_fmri"]
    assert before["encoding/visual"] != after["encoding/visual"]
    assert before["evaluation/visual"] != after["evaluation/visual"]


def test_plan_paths_carry_versions(default_config: dict) -> None:
    plan = WorkflowPlan(default_config)
    versions = plan.versions
    run = plan.fmri_runs[0]
    assert versions["preprocess_fmri"] in str(plan.fmri_store(run.key))
    assert str(plan.bids_root).endswith(versions["demo"])
    name, layer = plan.feature_space("minilm")
    assert f"minilm-{versions['features/minilm']}" in str(plan.feature_store(name, layer))
    assert plan.encoding_config("joint")["feature_spaces"] == ["image_statistics", "minilm"]
    assert plan.encoding_config("joint")["name"] == "joint"


def test_plan_filters_demo_runs(default_config: dict) -> None:
    config = copy.deepcopy(default_config)
    config["dataset"]["subjects"] = ["02"]
    config["dataset"]["runs"] = ["01", "2"]
    plan = WorkflowPlan(config)
    assert {(r.subject, r.run) for r in plan.fmri_runs} == {("02", "1"), ("02", "2")}
    assert plan.subjects == ["02"]


def test_plan_unknown_key_and_layer(default_config: dict) -> None:
    plan = WorkflowPlan(default_config)
    with pytest.raises(KeyError, match="No fMRI run with key 'sub-99'"):
        plan.fmri_run("sub-99")
    with pytest.raises(KeyError, match="has no layer 'layer-3'"):
        plan.feature_space("minilm:layer-3")
    with pytest.raises(KeyError, match="No encoding model named 'nope'"):
        plan.encoding_config("nope")


def test_plan_requires_bids_root(default_config: dict) -> None:
    config = copy.deepcopy(default_config)
    config["dataset"]["source"] = "bids"
    with pytest.raises(ValueError, match=r"`dataset\.bids_root` must name the BIDS folder"):
        WorkflowPlan(config)


def test_plan_indexes_real_bids_tree_with_missing_session(
    default_config: dict, tmp_path: Path
) -> None:
    import json

    root = tmp_path / "bids"
    (root / "dataset_description.json").parent.mkdir(parents=True)
    (root / "dataset_description.json").write_text(json.dumps({"Name": "x", "BIDSVersion": "1.9"}))
    (root / "task-rest_bold.json").write_text(json.dumps({"RepetitionTime": 2.0}))
    layout = [("01", "01", "1"), ("01", "02", "1"), ("02", "01", "1"), ("02", "01", "2")]
    for sub, ses, run in layout:
        func = root / f"sub-{sub}" / f"ses-{ses}" / "func"
        func.mkdir(parents=True, exist_ok=True)
        (func / f"sub-{sub}_ses-{ses}_task-rest_run-{run}_bold.nii.gz").write_bytes(b"")
    config = copy.deepcopy(default_config)
    config["dataset"].update(source="bids", bids_root=str(root))
    plan = WorkflowPlan(config)
    assert sorted(r.key for r in plan.fmri_runs) == [
        "sub-01_ses-01_task-rest_run-1",
        "sub-01_ses-02_task-rest_run-1",
        "sub-02_ses-01_task-rest_run-1",
        "sub-02_ses-01_task-rest_run-2",
    ]
    assert plan.eeg_recordings == []
    assert "demo" not in plan.versions and "dataset" in plan.versions


@pytest.mark.parametrize(
    ("stage", "module"),
    [
        ("demo", "neuroflow.demo.generate"),
        ("preprocess_fmri", "neuroflow.preprocessing.fmri.stage"),
        ("single_trial", "neuroflow.preprocessing.fmri.single_trial"),
        ("preprocess_eeg", "neuroflow.preprocessing.eeg.stage"),
        ("evaluation", "neuroflow.evaluation.stage"),
        ("decoding", "neuroflow.decoding.stage"),
        ("decoding_fmri", "neuroflow.decoding.fmri"),
        ("decoding_cross_subject", "neuroflow.decoding.cross_subject_stage"),
        ("rsa", "neuroflow.rsa.stage"),
        ("geometry", "neuroflow.geometry.stage"),
    ],
)
def test_stage_modules_agree_with_format_versions(stage: str, module: str) -> None:
    """A stage's own FORMAT_VERSION and the one in its version ids are the same number."""
    import importlib

    assert FORMAT_VERSIONS[stage] == importlib.import_module(module).FORMAT_VERSION


def test_trf_settings_reach_only_trf_models(default_config: dict) -> None:
    models = _models(default_config)
    assert not [k for k in stage_versions(default_config) if k.startswith("eeg_trf/")]
    on = copy.deepcopy(default_config)
    on["eeg_encoding"]["trf"]["enabled"] = True
    before, after = stage_versions(default_config), stage_versions(on)
    assert set(after) - set(before) == {f"eeg_trf/{m}" for m in models}
    # switching TRFs on adds their stage (and the summary gathering it, and the geometry
    # plotted beside the summary's layer scores), nothing else
    assert {k for k in before if before[k] != after[k]} == {"summary", "geometry"}

    changed = copy.deepcopy(on)
    changed["eeg_encoding"]["trf"]["tmax"] = 0.5
    assert _changed(on, changed) == {*(f"eeg_trf/{m}" for m in models), "summary", "geometry"}
    # epochs-only settings leave the TRFs alone (the summary gathers the EEG scores);
    # shared solver settings reach both
    changed = copy.deepcopy(on)
    changed["eeg_encoding"]["decim"] = 2
    assert _changed(on, changed) == {
        *(f"eeg_{s}/{m}" for s in ("encoding", "evaluation") for m in models),
        *(f"predict_eeg/{m}" for m in models),  # the in-silico EEG reads the models
        "summary",
        "geometry",
    }
    changed = copy.deepcopy(on)
    changed["eeg_encoding"]["alphas"]["num"] = 5
    assert {f"eeg_trf/{m}" for m in models} | {f"eeg_encoding/{m}" for m in models} <= _changed(
        on, changed
    )
    # the TRF stage needs the epochs switch too
    off = copy.deepcopy(on)
    off["eeg_encoding"]["enabled"] = False
    assert not [k for k in stage_versions(off) if k.startswith("eeg_trf/")]


def test_trf_plan_paths_and_section(default_config: dict) -> None:
    config = copy.deepcopy(default_config)
    config["eeg_encoding"]["trf"].update(enabled=True, tmin=-0.05)
    plan = WorkflowPlan(config)
    rec = plan.eeg_recordings[0]
    store = plan.eeg_trf_store("semantic", rec.key)
    assert store.parts[-4:] == (
        "eeg_trf",
        f"semantic-{plan.versions['eeg_trf/semantic']}",
        f"sub-{rec.subject}",
        f"{rec.key}_trf.zarr",
    )
    assert len(plan.all_trf_stores()) == len(plan.encoding_models()) * len(plan.eeg_recordings)
    assert plan.stage_dir("eeg_trf", "joint") in plan.all_version_dirs()
    section = plan.eeg_trf_config("joint")
    assert section["feature_spaces"] == ["image_statistics", "minilm"]
    assert section["trf"]["tmin"] == -0.05 and "enabled" not in section["trf"]
    assert not {"cv", "test", "tmin", "tmax", "decim", "enabled"} & set(section)
    assert "trf" not in plan.eeg_encoding_config("joint")
    assert WorkflowPlan(default_config).all_trf_stores() == []


def test_qc_settings_reach_the_qc_stages_and_the_summary(default_config: dict) -> None:
    # the summary's methods paragraph describes the quality control
    changed = copy.deepcopy(default_config)
    changed["qc"]["dpi"] = 150
    assert _changed(default_config, changed) == {"qc_eeg", "qc_fmri", "summary", "geometry"}
    off = copy.deepcopy(default_config)
    off["qc"]["enabled"] = False
    before, after = stage_versions(default_config), stage_versions(off)
    assert set(before) - set(after) == {"qc_eeg", "qc_fmri"}
    assert {k for k in after if before[k] != after[k]} == {"summary", "geometry"}


def test_predict_and_geometry_settings_reach_only_their_stages(default_config: dict) -> None:
    models = _models(default_config)
    changed = copy.deepcopy(default_config)
    changed["predict"]["k"] = 5
    assert _changed(default_config, changed) == {
        f"predict{s}/{m}" for s in ("", "_eeg") for m in models
    }
    # EEG-only settings reach the EEG predictions, voxel targets the fMRI ones
    for key, value in (
        ("channel_groups", {"occipital": ["Oz", "O1"]}),
        ("latency_window", [0.08, 0.12]),
        ("targets", {"channels": ["Oz"], "voxels": []}),
    ):
        changed = copy.deepcopy(default_config)
        changed["predict"][key] = value
        assert _changed(default_config, changed) == {f"predict_eeg/{m}" for m in models}, key
    changed = copy.deepcopy(default_config)
    changed["predict"]["targets"] = {"voxels": [3, 40], "channels": []}
    assert _changed(default_config, changed) == {f"predict/{m}" for m in models}
    changed = copy.deepcopy(default_config)
    changed["predict"]["models"] = ["visual"]
    after = stage_versions(changed)
    assert {k for k in after if k.startswith("predict/")} == {"predict/visual"}
    assert {k for k in after if k.startswith("predict_eeg/")} == {"predict_eeg/visual"}
    assert {k for k in after if k.startswith("pool_features/")} == {
        "pool_features/image_statistics"
    }
    changed = copy.deepcopy(default_config)
    changed["geometry"]["n_folds"] = 3
    assert _changed(default_config, changed) == {"geometry"}
    changed["geometry"]["enabled"] = False
    assert "geometry" not in stage_versions(changed)
    # a new extractor entry is extracted over the pool only if a model uses it
    changed = copy.deepcopy(default_config)
    changed["features"]["extractors"].append({"name": "extra", "extractor": "image_statistics"})
    assert "pool_features/extra" not in stage_versions(changed)
