"""What a plan computes on a dataset: analyses that apply, notes, held-out runs, versions."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from dataset_shapes import make_ds000117_like, make_eeg_only, make_fmri_movie

from neuroflow.config import load_schema, validate_config
from neuroflow.workflow import WorkflowPlan

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def defaults() -> dict:
    return validate_config({}, load_schema(REPO / "workflow" / "schemas" / "config.schema.yaml"))


def _with(config: dict, **sections) -> dict:
    out = copy.deepcopy(config)
    for section, values in sections.items():
        out[section] = {**out[section], **values}
    return out


@pytest.fixture(scope="module")
def movie(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("movie") / "bids"
    make_fmri_movie(root, seed=0, n_volumes=40)
    return root


@pytest.fixture(scope="module")
def ds117(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ds117") / "bids"
    make_ds000117_like(root, seed=0, n_volumes=100)
    return root


def _bids(config: dict, root: Path | str, **dataset) -> dict:
    return _with(config, dataset={"source": "bids", "bids_root": str(root), **dataset})


def test_demo_plans_every_analysis(defaults):
    plan = WorkflowPlan(defaults)
    assert plan.notes == ()
    assert plan.rsa_modalities == ["eeg", "fmri"] and plan.decoding_enabled
    layers = plan.extractor_layers("efficientnet")
    sweep = [f"efficientnet__{layer}" for layer in layers]
    assert len(sweep) == 6  # the default's layer sweep: one model per block
    assert plan.encoding_models() == ["visual", "semantic", "joint", *sweep]
    assert plan.eeg_models() == ["visual", "semantic", "joint", *sweep]
    # the repeated test movie is held out, per subject
    assert plan.test_runs_of("01") == ["sub-01_task-movie_run-4", "sub-01_task-movie_run-5"]
    assert plan.encoding_config("visual", "02")["split"]["test_runs"] == [
        "sub-02_task-movie_run-4",
        "sub-02_task-movie_run-5",
    ]


def test_switches_and_feature_spaces(defaults):
    plan = WorkflowPlan(
        _with(
            defaults,
            rsa={"enabled": False},
            decoding={"feature_spaces": ["minilm"]},
            eeg_encoding={"models": {"words": {"feature_spaces": ["minilm"]}}},
        )
    )
    assert plan.rsa_modalities == [] and not any(k.startswith("rsa/") for k in plan.versions)
    assert list(plan.analysis_spaces("decoding")) == ["minilm"]
    assert plan.eeg_models() == ["words"]
    assert plan.eeg_encoding_config("words")["feature_spaces"] == ["minilm"]
    off = WorkflowPlan(_with(defaults, decoding={"enabled": False}))
    assert not off.decoding_enabled and "decoding" not in off.versions


@pytest.mark.parametrize(
    ("section", "values", "match"),
    [
        ("rsa", {"feature_spaces": ["minlm"]}, r"`rsa\.feature_spaces` .*Did you mean 'minilm'"),
        ("decoding", {"feature_spaces": ["minilm:layer-9"]}, r"has no layer 'layer-9'"),
        ("encoding", {"split": {"test_runs": ["9"]}}, r"`encoding\.split\.test_runs` \['9'\] n"),
        ("dataset", {"subjects": ["03"]}, r"`dataset\.subjects` names '03'.*available: 01, 02"),
    ],
)  # fmt: skip
def test_settings_naming_nothing_fail_before_any_job(defaults, section, values, match):
    with pytest.raises(ValueError, match=match):
        WorkflowPlan(_with(defaults, **{section: values}))


def test_fmri_only_movie_without_repeats_or_atlas(defaults, movie):
    plan = WorkflowPlan(_bids(defaults, movie))
    assert plan.eeg_recordings == [] and not plan.decoding_enabled
    assert plan.encoding_models()[:3] == ["visual", "semantic", "joint"]
    assert plan.test_runs_of("01") == ["sub-01_task-movie_run-3"]  # the last run
    (note,) = plan.notes
    assert note.startswith("rsa_fmri: skipped, the voxels have no ROI labels")
    labels = movie.parent / "x.nii.gz"  # the plan only checks that the atlas exists
    labels.touch()
    atlas = WorkflowPlan(
        _bids(
            _with(defaults, preprocess_fmri={"rois": {"atlas": str(labels), "labels": None}}),
            movie,
        )
    )
    (note,) = atlas.notes
    assert "it needs at least 3 stimuli shown in 2+ runs" in note and "has 0" in note


def test_eeg_only_dataset_without_stimuli(defaults, tmp_path):
    make_eeg_only(tmp_path / "bids", seed=0, n_events=20)
    plan = WorkflowPlan(_bids(defaults, tmp_path / "bids"))
    assert plan.fmri_runs == [] and plan.extractors == []
    assert plan.decoding_enabled and plan.analysis_spaces("decoding") == {}
    assert plan.eeg_models() == [] and plan.rsa_modalities == []
    assert plan.has_summary
    assert any("no captions table" in n for n in plan.notes)
    strict = _bids(_with(defaults, features={"unavailable": "error"}), tmp_path / "bids")
    with pytest.raises(ValueError, match=r"entry 'image_statistics' cannot run on this dataset"):
        WorkflowPlan(strict)


def test_sessions_filter_every_modality(defaults, ds117):
    eeg = WorkflowPlan(_bids(defaults, ds117, sessions=["eeg"]))
    assert eeg.fmri_runs == [] and {r.session for r in eeg.eeg_recordings} == {"eeg"}
    both = WorkflowPlan(_bids(defaults, ds117, sessions=["mri", "eeg"]))
    assert {r.session for r in both.fmri_runs} == {"mri"}
    with pytest.raises(ValueError, match=r"No session 'eg'.*Did you mean 'eeg'"):
        WorkflowPlan(_bids(defaults, ds117, sessions=["eg"]))


def test_stimulus_events_select_the_stimuli(defaults, ds117):
    plan = WorkflowPlan(_bids(defaults, ds117))
    assert "func/i999.bmp" in plan.design.stimulus_ids
    rest = {"exclude": {"stim_type": ["n/a"]}}
    plan = WorkflowPlan(_bids(defaults, ds117, stimulus_events=rest))
    assert "func/i999.bmp" not in plan.design.stimulus_ids


def test_versions_cover_the_selection_and_normalise_paths(defaults, ds117, tmp_path):
    base = WorkflowPlan(_bids(defaults, ds117)).versions
    one = WorkflowPlan(_bids(defaults, ds117, subjects=["01"])).versions
    assert base["preprocess_fmri"] == one["preprocess_fmri"]
    assert base["features/image_statistics"] != one["features/image_statistics"]
    assert base["decoding"] != one["decoding"] and base["summary"] != one["summary"]
    link = tmp_path / "link"
    link.symlink_to(ds117)
    for spelling in (f"{ds117}/", f"{ds117}/../{ds117.name}", str(link)):
        assert WorkflowPlan(_bids(defaults, spelling)).versions == base, spelling


def test_captions_from_a_table_elsewhere(defaults, movie, tmp_path):
    import shutil

    root = tmp_path / "bids"
    shutil.copytree(movie, root)
    (root / "annotations").mkdir()
    (root / "stimuli" / "captions.tsv").rename(root / "annotations" / "shots.tsv")
    plan = WorkflowPlan(_bids(defaults, root))
    assert "minilm" not in plan.scope.extractors
    plan = WorkflowPlan(_bids(defaults, root, captions="annotations/shots.tsv"))
    assert "minilm" in plan.scope.extractors
    assert plan.captions == root.resolve() / "annotations" / "shots.tsv"


def test_fmriprep_derivatives_of_a_sessions_dataset(defaults, tmp_path):
    facts = make_ds000117_like(tmp_path / "bids", seed=1, n_volumes=100, fmriprep=True)
    config = _bids(
        defaults,
        tmp_path / "bids",
        source="fmriprep",
        fmriprep_dir=str(tmp_path / "bids" / "derivatives" / "fmriprep"),
        sessions=["mri", "eeg"],
    )
    plan = WorkflowPlan(config)
    assert {r.session for r in plan.fmri_runs} == {"mri"}
    assert all(r.space == facts["fmriprep"]["space"] and r.mask for r in plan.fmri_runs)
    # events and sidecars come from the raw dataset (the TR from its top-level sidecar)
    assert all(r.events and r.events.suffix == ".tsv" for r in plan.fmri_runs)
    assert {r.session for r in plan.eeg_recordings} == {"eeg"}
    assert plan.test_runs_of("01") == ["sub-01_ses-mri_task-facerecognition_run-04"]


def test_an_edited_events_table_is_a_new_selection(defaults, movie, tmp_path):
    import shutil

    root = tmp_path / "bids"
    shutil.copytree(movie, root)
    before = WorkflowPlan(_bids(defaults, root)).versions
    table = sorted(root.rglob("*_events.tsv"))[0]
    table.write_text(table.read_text().replace("shot", "Shot", 1))
    after = WorkflowPlan(_bids(defaults, root)).versions
    assert before["preprocess_fmri"] == after["preprocess_fmri"]
    assert all(before[k] != after[k] for k in before if k.startswith(("features/", "encoding/")))


def test_a_run_without_stimulus_events_is_left_out_of_encoding(defaults, movie, tmp_path):
    import shutil

    root = tmp_path / "bids"
    shutil.copytree(movie, root)
    table = root / "sub-01" / "func" / "sub-01_task-movie_run-2_events.tsv"
    table.write_text(table.read_text().splitlines()[0] + "\n")  # the header only
    plan = WorkflowPlan(_bids(defaults, root))
    assert [r.run for r in plan.encoding_runs_of("01")] == ["1", "3"]
    assert [r.run for r in plan.encoding_runs_of("02")] == ["1", "2", "3"]
    assert any(
        n.startswith("encoding: sub-01_task-movie_run-2 left out, no stimulus events")
        for n in plan.notes
    )
    assert plan.test_runs_of("01") == ["sub-01_task-movie_run-3"]


def test_cross_field_settings_fail_before_any_job(defaults, movie):
    from neuroflow.config import ConfigError

    bad = _with(
        defaults,
        preprocess_eeg={"epochs_tmin": 0.5, "epochs_tmax": 0.1, "l_freq": 30.0, "h_freq": 30.0},
        encoding={"alphas": {"start": 3.0, "stop": -1.0, "num": 4}},
        eeg_encoding={"alphas": {"start": 0.0, "stop": 400.0, "num": 4}},
        decoding={"identification": {"window": [0.4, 0.1]}},
    )
    with pytest.raises(ConfigError) as info:
        WorkflowPlan(bad)
    text = str(info.value)
    for expected in (
        "`preprocess_eeg.epochs_tmin` must be smaller than `preprocess_eeg.epochs_tmax`",
        "got 0.5 and 0.1 instead",
        "`preprocess_eeg.l_freq` must be smaller than `preprocess_eeg.h_freq`",
        "`encoding.alphas.start` must be at most `encoding.alphas.stop`, got 3.0 and -1.0",
        "`eeg_encoding.alphas.stop` is a base-10 exponent and must be between -30 and 30",
        "`decoding.identification.window` must be [start, end] with start < end",
    ):
        assert expected in text, text
    folds = _bids(_with(defaults, encoding={"cv": {"grouped_kfold": 3}}), movie)
    match = r"`encoding\.cv\.grouped_kfold` must be at most .* got 3 but sub-01 has 2"
    with pytest.raises(ValueError, match=match):
        WorkflowPlan(folds)
    assert WorkflowPlan(_bids(_with(defaults, encoding={"cv": {"grouped_kfold": 2}}), movie))


def test_auto_test_runs_order_runs_by_number():
    from neuroflow.trial_split import auto_test_runs

    keys = [f"sub-01_task-x_run-{i}" for i in range(1, 12)]
    assert auto_test_runs(keys, {}) == ["sub-01_task-x_run-11"]
    repeated = {"sub-01_task-x_run-9": ("a", "b"), "sub-01_task-x_run-10": ("a", "b")}
    assert auto_test_runs(keys, repeated) == ["sub-01_task-x_run-9", "sub-01_task-x_run-10"]


def test_missing_root_and_parcel_target_fail_at_plan_time(defaults, movie, tmp_path):
    with pytest.raises(FileNotFoundError, match=r"`dataset\.bids_root` must be an existing"):
        WorkflowPlan(_bids(defaults, tmp_path / "nowhere"))
    with pytest.raises(ValueError, match=r"`encoding\.target: parcels` needs parcel time series"):
        WorkflowPlan(_bids(_with(defaults, encoding={"target": "parcels"}), movie))


def test_cross_subject_decoding_needs_two_subjects_or_sessions(defaults, tmp_path, monkeypatch):
    make_eeg_only(tmp_path / "bids", seed=0, n_events=20)
    root = tmp_path / "bids"
    plan = WorkflowPlan(_bids(defaults, root))
    assert plan.decoding_cross_subject_enabled
    assert plan.decoding_cross_subject_store() in plan.decoding_stores()
    assert not any("decoding_cross_subject" in n for n in plan.notes)
    block = defaults["decoding"]["cross_subject"]

    def cross(**values):
        return _with(defaults, decoding={"cross_subject": {**block, **values}})

    # its settings are its own version: the within-subject decoding keeps its folder
    wider = WorkflowPlan(_bids(cross(window=[0.1, 0.5]), root))
    assert wider.versions["decoding"] == plan.versions["decoding"]
    assert wider.versions["decoding_cross_subject"] != plan.versions["decoding_cross_subject"]
    one = WorkflowPlan(_bids(defaults, root, subjects=["01"]))
    assert not one.decoding_cross_subject_enabled
    assert "decoding_cross_subject" not in one.versions
    assert any(
        n.startswith("decoding_cross_subject: skipped, leave-one-subject-out needs 2+ EEG")
        for n in one.notes
    )
    sessions = WorkflowPlan(_bids(cross(cv="leave-one-session-out"), root))
    assert not sessions.decoding_cross_subject_enabled
    assert any("no subject has more than one" in n for n in sessions.notes)
    off = WorkflowPlan(_bids(cross(enabled=False), root))
    assert not off.decoding_cross_subject_enabled and off.decoding_enabled
    assert not any("decoding_cross_subject" in n for n in off.notes)

    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "pyriemann" else real(name, *a),
    )
    with pytest.raises(ValueError, match=r"names tangent_space, which needs pyriemann.*riemann"):
        WorkflowPlan(_bids(cross(classifiers=["tangent_space"]), root))


def test_fmri_decoding_patterns_and_concept_table(defaults, movie, tmp_path):
    demo = WorkflowPlan(defaults)
    assert demo.decoding_fmri_enabled and demo.decoding_fmri_patterns == "events"
    assert demo.concept_annotations == demo.stimuli_dir / "concepts.tsv"  # the demo writes one
    assert demo.decoding_fmri_inputs() == [demo.fmri_store(r.key) for r in demo.fmri_runs]
    # a movie with a concepts table: event patterns; the table found by `auto`
    plan = WorkflowPlan(_bids(defaults, movie))
    assert (
        plan.decoding_fmri_enabled
        and plan.concept_annotations == movie / "stimuli" / "concepts.tsv"
    )
    # `trials` without single-trial betas: skipped with a note
    trials = WorkflowPlan(_bids(_with(defaults, decoding={"fmri": {"patterns": "trials"}}), movie))
    assert not trials.decoding_fmri_enabled
    assert any(
        "decoding_fmri: skipped, `decoding.fmri.patterns` is 'trials'" in n for n in trials.notes
    )
    # single-trial betas estimated: auto reads them
    single = WorkflowPlan(_bids(_with(defaults, single_trial={"enabled": True}), movie))
    assert single.decoding_fmri_patterns == "trials"
    assert single.decoding_fmri_inputs() == [single.single_trial_store(s) for s in ("01", "02")]
    assert single.versions["decoding_fmri"] != plan.versions["decoding_fmri"]
    # a fMRI decoding setting reruns no EEG decoding; a missing table fails at plan time
    hrf = WorkflowPlan(_with(defaults, decoding={"fmri": {"hrf_lag": 5.0}}))
    assert hrf.versions["decoding"] == demo.versions["decoding"]
    assert hrf.versions["decoding_fmri"] != demo.versions["decoding_fmri"]
    loso = {"fmri": {"cv": "leave-one-subject-out"}}
    assert WorkflowPlan(_bids(_with(defaults, decoding=loso), movie)).decoding_fmri_enabled
    with pytest.raises(ValueError, match=r"`decoding.fmri.cv` must be 'within-subject' when"):
        WorkflowPlan(_bids(_with(defaults, decoding=loso), movie, subjects=["01"])).notes
    # the movie's runs carry no session: nothing to hold out session by session
    by_session = {"fmri": {"cv": "leave-one-session-out"}}
    with pytest.raises(ValueError, match=r"not be 'leave-one-session-out' when no fMRI subject"):
        WorkflowPlan(_bids(_with(defaults, decoding=by_session), movie)).notes
    missing = {"fmri": {"concepts": {"annotations": str(tmp_path / "nope.tsv")}}}
    with pytest.raises(FileNotFoundError, match=r"annotations` must name an existing TSV"):
        WorkflowPlan(_bids(_with(defaults, decoding=missing), movie)).notes


def test_transformer_model_is_planned_beside_the_ridge_models(defaults):
    from neuroflow.config.transformer_options import DEFAULT_OPTIONS

    models = {
        **defaults["encoding"]["models"],
        "tribe": {"feature_spaces": ["image_statistics", "minilm"], "model": "transformer"},
    }
    plain = WorkflowPlan(defaults)
    plan = WorkflowPlan(_with(defaults, encoding={"models": models}))
    assert plan.transformer_models() == ["tribe"]
    assert "tribe" not in plan.linear_models() and "visual" in plan.linear_models()
    assert plan.transformer_training_store("tribe").name == "training.zarr"
    # every option in its stage config (and version); no EEG or predict model takes it
    assert plan.encoding_config("tribe")["transformer"] == DEFAULT_OPTIONS
    assert "tribe" not in plan.eeg_models()
    assert "tribe" not in plan.scope.predict.models
    # the ridge models keep their versions; a transformer option reruns only the transformer
    for model in plain.encoding_models():
        assert plan.versions[f"encoding/{model}"] == plain.versions[f"encoding/{model}"]
    models["tribe"] = {**models["tribe"], "transformer": {"epochs": 5}}
    other = WorkflowPlan(_with(defaults, encoding={"models": models}))
    assert other.versions["encoding/tribe"] != plan.versions["encoding/tribe"]
    assert other.versions["encoding/visual"] == plan.versions["encoding/visual"]
    # transformer options on a ridge model are an error
    models["visual"] = {**models["visual"], "transformer": {"epochs": 5}}
    with pytest.raises(ValueError, match=r"visual.transformer` needs `model: transformer`"):
        WorkflowPlan(_with(defaults, encoding={"models": models})).notes


def test_transformer_schema_documents_the_package_defaults():
    from neuroflow.config.transformer_options import DEFAULT_OPTIONS

    schema = load_schema(REPO / "workflow" / "schemas" / "config.schema.yaml")
    entry = schema["properties"]["encoding"]["properties"]["models"]["additionalProperties"]
    options = entry["properties"]["transformer"]["properties"]
    assert {key: node["default"] for key, node in options.items()} == DEFAULT_OPTIONS


def _rewrite_events(path: Path, column: str, value: str) -> None:
    """Set every row's ``column`` of an events table to ``value``."""
    import pandas as pd

    table = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    table[column] = value
    table.to_csv(path, sep="\t", index=False)


def test_fmri_decoding_is_planned_from_the_jobs_own_check(defaults, tmp_path):
    facts = make_ds000117_like(tmp_path / "bids", seed=0, fmriprep=True, n_volumes=100)
    prep = str(tmp_path / "bids" / "derivatives" / "fmriprep")
    config = _with(
        defaults,
        dataset={"source": "fmriprep", "bids_root": str(facts["root"]), "fmriprep_dir": prep},
    )
    # the rest row (func/i999.bmp, once per run) is the most-presented stimulus: `test:
    # auto` holds out it alone, and identification needs 2 test stimuli
    plan = WorkflowPlan(config)
    assert not plan.decoding_fmri_enabled and "decoding_fmri" not in plan.versions
    (note,) = [n for n in plan.notes if n.startswith("decoding_fmri")]
    assert "no subject has stimuli to identify" in note
    assert "sub-01 (identification: 1 test and" in note and "2 of each are needed" in note
    # without the rest rows every image is shown twice: a fifth of them are held out
    images = {"stimulus_events": {"exclude": {"stim_type": ["n/a"]}}}
    kept = WorkflowPlan(_with(config, dataset={**config["dataset"], **images}))
    assert kept.decoding_fmri_enabled
    assert not any(n.startswith("decoding_fmri") for n in kept.notes)


def test_single_condition_eeg_plans_no_decoding(defaults, tmp_path):
    from dataset_shapes import make_single_condition_eeg

    make_single_condition_eeg(tmp_path / "bids", seed=1, n_events=12)
    plan = WorkflowPlan(_bids(defaults, tmp_path / "bids"))
    assert not plan.decoding_enabled and not plan.decoding_cross_subject_enabled
    assert plan.decoding_stores() == [] and plan.decoding_subjects == []
    (note,) = [n for n in plan.notes if n.startswith("decoding")]
    assert note.startswith("decoding: skipped, no decoding analysis applies (classification:")
    assert "sub-01, sub-02 have fewer than 2 classes of `condition`" in note
    # the summary still runs, and keeps the notes
    assert plan.has_summary and plan.qc_targets()


def test_resting_eeg_is_preprocessed_and_left_out_of_decoding(defaults, tmp_path):
    from dataset_shapes import make_resting_eeg

    facts = make_resting_eeg(tmp_path / "bids", seed=2, duration=8.0)
    plan = WorkflowPlan(_bids(defaults, tmp_path / "bids"))
    keys = [r.key for r in plan.eeg_recordings]
    assert [r.key for r in plan.resting_recordings] == keys and plan.event_recordings == []
    assert not plan.decoding_enabled and not plan.decoding_cross_subject_enabled
    left = [n for n in plan.notes if "lists no event to cut epochs around" in n]
    assert len(left) == len(facts["subjects"])
    assert left[0].startswith(f"decoding: {keys[0]} left out, its events table")
    assert plan.has_summary and plan.qc_targets()
    assert {str(p) for p in plan.qc_targets()} >= {str(plan.qc_store("eeg", k)) for k in keys}


def test_brainvision_without_events_or_markers_is_left_out_of_decoding(defaults, tmp_path):
    from dataset_shapes.eeg_inputs import make_eeg_inputs

    make_eeg_inputs(tmp_path / "bids", seed=0, n_epochs=10, duration=6.0)
    plan = WorkflowPlan(_bids(defaults, tmp_path / "bids"))
    vhdr = tmp_path / "bids" / "sub-02" / "eeg" / "sub-02_task-rest_eeg.vhdr"
    assert [r.key for r in plan.resting_recordings] == ["sub-02_task-rest"]
    assert plan.decoding_enabled and plan.decoding_subjects == ["01"]
    assert (
        "decoding: sub-02_task-rest left out, it has no events table and the markers of "
        f"{vhdr} hold no event to cut epochs around"
    ) in "\n".join(plan.notes)
    assert any(n.startswith("decoding: sub-02 left out, no decoding analysis") for n in plan.notes)
    # the cross-subject job reads no epochs of a resting recording: one subject is left
    assert not plan.decoding_cross_subject_enabled
    assert any(
        "leave-one-subject-out needs 2+ EEG subjects, got sub-01 with events" in n
        for n in plan.notes
    )
    assert {str(p) for p in plan.qc_targets()} >= {
        str(plan.qc_store("eeg", k)) for k in ("sub-01_task-faces", "sub-02_task-rest")
    }


def test_markers_hold_no_event_asks_the_job_s_event_search(defaults, tmp_path):
    from dataset_shapes import make_resting_eeg, make_single_condition_eeg

    from neuroflow.workflow.decoding_scope import markers_hold_no_event

    prep = defaults["preprocess_eeg"]
    make_resting_eeg(tmp_path / "rest", seed=0, n_subjects=1, duration=6.0, events=False)
    (rest,) = WorkflowPlan(_bids(defaults, tmp_path / "rest")).eeg_recordings
    assert rest.events is None and markers_hold_no_event(rest, prep)
    # events could come from a stim channel, or are found by another source: the job decides
    assert not markers_hold_no_event(rest, {**prep, "stim_channel": "STI"})
    assert not markers_hold_no_event(rest, {**prep, "event_source": "stim_channel"})
    lines = rest.channels.read_text().splitlines()
    lines[1] = lines[1].replace("\tEEG\t", "\tTRIG\t")  # a trigger channel
    rest.channels.write_text("\n".join(lines) + "\n")
    assert not markers_hold_no_event(rest, prep)
    # markers that are events (photic flashes), the events table moved away
    facts = make_single_condition_eeg(tmp_path / "photic", seed=0, n_subjects=1, n_events=6)
    for path in (tmp_path / "photic").rglob("*_events.tsv"):
        path.unlink()
    (flashes,) = WorkflowPlan(_bids(defaults, tmp_path / "photic")).eeg_recordings
    assert flashes.events is None and facts["subjects"] == ["01"]
    assert not markers_hold_no_event(flashes, prep)


def test_a_subject_without_classes_is_left_out_of_decoding(defaults, tmp_path):
    facts = make_eeg_only(tmp_path / "bids", seed=0, n_events=20)
    root = tmp_path / "bids"
    full = WorkflowPlan(_bids(defaults, root))
    assert full.decoding_subjects == ["01", "02"]
    assert "decoding_subjects" not in full.scope.selection  # versions as before
    for rec in facts["recordings"]:
        if rec["subject"] == "02":
            _rewrite_events(rec["events"], "trial_type", "standard")
    plan = WorkflowPlan(_bids(defaults, root))
    assert plan.decoding_enabled and plan.decoding_subjects == ["01"]
    assert plan.scope.selection["decoding_subjects"] == ["01"]
    assert plan.versions["decoding"] != full.versions["decoding"]
    assert any(
        n.startswith("decoding: sub-02 left out, no decoding analysis applies (classification:")
        for n in plan.notes
    )
    # one class left in common: nothing to decode across subjects
    assert not plan.decoding_cross_subject_enabled
    (note,) = [n for n in plan.notes if n.startswith("decoding_cross_subject")]
    assert "gives 1 class(es) that every held-out unit has (standard)" in note


def test_plan_and_job_share_the_decoding_checks():
    import numpy as np

    from neuroflow.analysis_inputs import SubjectEpochs
    from neuroflow.decoding.cross_subject_stage import shared_classes
    from neuroflow.decoding.options import applicable_parts, resolve_config
    from neuroflow.decoding.stage import _applicable_parts

    rng = np.random.default_rng(0)
    stim = np.array([f"s{i % 7}" for i in range(23)])
    cond = np.where(rng.random(23) < 0.5, "a", "b")
    epochs = SubjectEpochs(
        subject="03",
        data=np.zeros((23, 2, 5), np.float32),
        times=np.linspace(0, 0.4, 5),
        channels=np.array(["Cz", "Pz"]),
        stimulus=stim,
        condition=cond,
        session=np.zeros(23, dtype=str),
        sources=[Path("x_epo.zarr")],
    )
    cfg = resolve_config({})
    for features in ({}, {"f": "f.zarr"}):
        job = _applicable_parts([epochs], features, cfg)
        plan = applicable_parts({"03": (cond, stim)}, has_features=bool(features), config=cfg)
        assert job == plan
    one = applicable_parts({"03": (["a"] * 4, ["x", "y", "x", "y"])}, has_features=True, config=cfg)
    assert one["classification"] == "sub-03 have fewer than 2 classes of `condition`"
    assert one["features"] == "sub-03 show fewer than 3 distinct stimuli"
    assert one["identification"].startswith("sub-03 has 1 test and 1 training stimuli")
    assert shared_classes([["a", "b", "c"], ["b", "c"], ("c", "b", "d")]) == (
        ["b", "c"],
        ["a", "d"],
    )
    assert shared_classes([]) == ([], [])


def test_fmri_decoding_checks_name_what_is_missing():
    import pandas as pd

    from neuroflow.decoding.options import concepts_unavailable, fmri_identification_unavailable

    # one stimulus shown more than the others is held out alone
    rest = ["rest"] * 4 + [f"img{i}" for i in range(9) for _ in range(2)]
    assert fmri_identification_unavailable(rest) == (
        "1 test and 9 training stimuli (2 of each are needed)"
    )
    assert fmri_identification_unavailable([f"img{i}" for i in range(9) for _ in range(2)]) is None
    table = pd.DataFrame(
        {"stimulus": ["a", "b", "c", "d", "e"], "concept": ["dog", "dog", "cat", "dog", "cat"]}
    )
    assert concepts_unavailable(["x", "y"], table, min_count=1).startswith(
        "none of its 2 decoded stimuli (e.g. ['x', 'y']) is in the annotation table"
    )
    assert concepts_unavailable(list("abcde"), table, min_count=3) == (
        "no concept has 3+ positive and negative stimuli among 5"
    )
    assert concepts_unavailable(list("abcde"), table, min_count=2) is None
