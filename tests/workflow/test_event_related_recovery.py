"""Event-related and blocked studies recover what their planted regressors explain.

Through ``snakemake``. The dataset (``dataset_shapes.make_event_related``) is fMRIPrep
output of one subject, three sessions of four runs with ~1 s image events (or two
sessions of blocks of 0.8 s images, one per second), a rest block and ``n/a`` cells per
run (the events tables rewritten with CRLF line ends, as ds000117 writes them), and
head motion that leaks into every voxel. Two ROIs respond: one to the images' luminance statistics
(driven by the ``image_statistics`` feature space), one to the animal images (driven by
the ``condition`` feature space, the events' ``trial_type``).

The config names the dataset, the two feature spaces and their models, and nothing about
the alignment: ``features.alignment.method: auto`` must read the design from the events
and align as ``config/presets/event_related.yaml`` does (each event's boxcar convolved
with an HRF library of SPM's HRF peaking at 4-7 s, an event regressor, no encoder
delays). The responses are made with SPM's HRF, which nothing tells the
pipeline: the library lets the encoder pick the shape per voxel on the training runs.
The oracle is ordinary least squares on the exact planted regressors, cleaned with each
run's own nuisance basis as the pipeline cleans its design, fitted on the same training
runs and scored on the same held-out runs: in each ROI the pipeline's mean test R² must
reach 90 % of the oracle's, and the two feature spaces' ratios must differ by at most
0.1 (the per-event features are centred before the convolution, so that the encoder's
standardisation does not shrink continuous features more than a categorical code).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from dataset_shapes import make_event_related
from shape_helpers import open_stores, run_shape, summary_notes

pytestmark = [pytest.mark.workflow, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
PAIRS = {"visual": "visual", "condition": "category"}  # model -> ROI it drives


def _config(facts: dict) -> dict:
    return {
        "dataset": {
            "source": "fmriprep",
            "bids_root": str(facts["root"]),
            "fmriprep_dir": str(facts["fmriprep_dir"]),
            # rest rows are not events of either feature space
            "stimulus_events": {"exclude": {"trial_type": ["rest"]}},
        },
        "features": {
            "extractors": [
                {"name": "image_statistics", "extractor": "image_statistics"},
                {
                    "name": "condition",
                    "extractor": "events",
                    "events": {"categorical": ["trial_type"]},
                },
            ],
        },
        "encoding": {
            "models": {
                "visual": {"feature_spaces": ["image_statistics"], "model": "ridge"},
                "condition": {"feature_spaces": ["condition"], "model": "ridge"},
            },
            # the last run of every session: three held-out runs
            "split": {"test_runs": ["4"]},
        },
        "evaluation": {"permutation": {"n_permutations": 100}},
        # only what the recovery reads: preprocessing, alignment, encoding, evaluation
        "qc": {"enabled": False},
        "decoding": {"enabled": False},
        "geometry": {"enabled": False},
    }


#: Sessions of each design's dataset (four runs each, the fourth held out): a blocked run
#: holds about 90 images, so two sessions of it show as many images as six event-related.
SESSIONS = {"event_related": 3, "blocked": 2}


@pytest.fixture(scope="module", params=list(SESSIONS))
def event_run(request, tmp_path_factory):
    design = request.param
    root = tmp_path_factory.mktemp(design)
    facts = make_event_related(root / "bids", seed=0, design=design, n_sessions=SESSIONS[design])
    for path in facts["events"].values():
        path.write_bytes(path.read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))
    workdir = run_shape(root / "run", _config(facts))
    return {**facts, "design_kind": design}, workdir


def _r2(y: np.ndarray, pred: np.ndarray) -> np.ndarray:
    return 1.0 - ((y - pred) ** 2).sum(axis=0) / ((y - y.mean(axis=0)) ** 2).sum(axis=0)


def _oracle_r2(facts, runs, train, test, roi):
    """Test R² per voxel of OLS on the planted regressors of ``roi``, cleaned per run."""

    def design(key):
        ds = runs[key]
        ses, run = key.split("_ses-")[1][:2], key.split("_run-")[1][:2]
        frames = np.round(ds["time"].values / facts["tr"]).astype(int)
        x = facts["design"][ses, run][roi][frames]
        basis = ds["nuisance_basis"].values.astype(float)
        x = x - basis @ (basis.T @ x)
        return np.column_stack([x, np.ones(len(x))])

    x_train = np.vstack([design(k) for k in train])
    y_train = np.vstack([runs[k]["bold"].values for k in train])
    coef = np.linalg.lstsq(x_train, y_train, rcond=None)[0]
    x_test = np.vstack([design(k) for k in test])
    y_test = np.vstack([runs[k]["bold"].values for k in test])
    return _r2(y_test, x_test @ coef), y_test


def test_each_feature_space_recovers_nine_tenths_of_the_oracle(event_run):
    facts, workdir = event_run
    runs = {
        name.split("/")[-1].split("_desc-")[0]: ds
        for name, ds in open_stores(workdir, "preprocess_fmri").items()
    }
    n_sessions = SESSIONS[facts["design_kind"]]
    assert len(runs) == 4 * n_sessions
    # the default confound strategy regressed fMRIPrep's motion, white matter and CSF
    steps = {s["name"]: s for s in next(iter(runs.values())).attrs["steps"]}
    assert steps["confounds"]["details"][0] == {"auto": ["motion", "wm_csf"], "motion": "basic"}
    # the plan read the event-related design from the events and said so
    (note,) = [n for n in summary_notes(workdir) if n.startswith("features.alignment.method")]
    assert f"the design is {facts['design_kind'].replace('_', '-')}" in note, note
    library = "['spm peak 4 s', 'spm', 'spm peak 6 s', 'spm peak 7 s']"
    assert f"method hrf, hrf_model {library}, event_regressor true" in note, note
    assert "encoding.delays.method none" in note, note
    for ds in open_stores(workdir, "align_features").values():
        assert ds.attrs["alignment"]["method"] == "hrf"
        assert ds.attrs["alignment"]["event_regressor"] is True
        assert ds.attrs["neuroflow"]["config"]["method"] == "hrf"
    encoders = open_stores(workdir, "encoding", "sub-01_encoding.zarr")
    scores = open_stores(workdir, "evaluation", "sub-01_scores.zarr")
    ratios = {}
    for model, roi in PAIRS.items():
        (enc,) = [ds for name, ds in encoders.items() if name.startswith(f"{model}-")]
        (score,) = [ds for name, ds in scores.items() if name.startswith(f"{model}-")]
        assert dict(enc.attrs["delays"])["method"] == "none"
        test = list(enc.attrs["test_runs"])
        assert [k.split("_run-")[1] for k in test] == ["04"] * n_sessions
        inside = facts["rois"][roi][enc["i"].values, enc["j"].values, enc["k"].values]
        # the preset's HRF library: the planted (SPM) shape is chosen in most ROI voxels
        assert enc.attrs["hrf_models"] == ["spm peak 4 s", "spm", "spm peak 6 s", "spm peak 7 s"]
        chosen = np.asarray(enc["hrf_model"].values, dtype=object)[inside]
        share = np.mean(chosen == "spm")
        print(f"{facts['design_kind']} {model}: planted HRF chosen in {share:.2f}")
        assert share > 0.75, (model, share)
        oracle, y_test = _oracle_r2(facts, runs, list(enc.attrs["train_runs"]), test, roi)
        np.testing.assert_allclose(enc["y_test"].values.reshape(y_test.shape), y_test)
        pipeline = score["r2"].values
        np.testing.assert_allclose(pipeline, _r2(y_test, enc["y_pred"].values), atol=1e-4)
        assert oracle[inside].mean() > 0.15, (model, oracle[inside].mean())
        ratios[model] = pipeline[inside].mean() / oracle[inside].mean()
    print(f"pipeline / oracle test R2 per ROI: {ratios}")
    assert all(ratio >= 0.9 for ratio in ratios.values()), ratios
    assert max(ratios.values()) - min(ratios.values()) <= 0.1, ratios


def _validated(overrides: dict) -> dict:
    from neuroflow.config import load_schema, validate_config

    return validate_config(
        overrides, load_schema(REPO / "workflow" / "schemas" / "config.schema.yaml")
    )


def test_auto_alignment_keeps_the_movie_path_of_the_demo():
    """The demo (a movie) resolves to the alignment it had before `auto`: same versions."""
    from neuroflow.workflow import WorkflowPlan

    auto = WorkflowPlan(_validated({}))
    before = {"method": "average", "hrf_model": "glover", "event_regressor": False}
    explicit = WorkflowPlan(_validated({"features": {"alignment": before}}))
    assert auto.versions == explicit.versions
    assert {k: auto.config["features"]["alignment"][k] for k in before} == before
    assert auto.config["encoding"]["delays"]["method"] == "hrf"
    assert not [n for n in auto.notes if "alignment" in n]


def test_auto_alignment_reads_the_design_and_refuses_mixed_designs(tmp_path):
    from dataset_shapes._common import tile_durations, write_tsv

    from neuroflow.workflow import WorkflowPlan

    facts = make_event_related(tmp_path / "bids", n_sessions=1, n_runs=2, image_size=16)
    dataset = {
        "source": "fmriprep",
        "bids_root": str(facts["root"]),
        "fmriprep_dir": str(facts["fmriprep_dir"]),
    }
    config = {"dataset": dataset, "results_dir": str(tmp_path / "results")}
    plan = WorkflowPlan(_validated(config))
    alignment = plan.config["features"]["alignment"]
    assert (alignment["method"], alignment["hrf_model"], alignment["event_regressor"]) == (
        "hrf",
        ["spm peak 4 s", "spm", "spm peak 6 s", "spm peak 7 s"],
        True,
    )
    assert plan.config["encoding"]["delays"]["method"] == "none"
    (note,) = [n for n in plan.notes if n.startswith("features.alignment.method auto")]
    assert "event-related" in note and "config/presets/event_related.yaml" in note
    # the preset's settings, written out, give the same versions
    preset = {"features": {"alignment": {k: alignment[k] for k in ("method", "hrf_model")}}}
    preset["features"]["alignment"]["event_regressor"] = True
    preset["encoding"] = {"delays": {"method": "none"}}
    written = WorkflowPlan(_validated({**config, **preset}))
    assert {k: v for k, v in written.versions.items() if k.startswith("align")} == {
        k: v for k, v in plan.versions.items() if k.startswith("align")
    }
    # one run turned into a movie: auto cannot choose, and says what to do
    onsets, durations = tile_durations(np.random.default_rng(0), 200.0, (2.0, 6.0))
    movie = facts["events"][("01", "02")]
    write_tsv(
        movie,
        {
            "onset": onsets,
            "duration": durations,
            "trial_type": ["shot"] * len(onsets),
            "stim_file": ["img_000.png"] * len(onsets),
        },
    )
    with pytest.raises(ValueError, match=r"show different designs \(event-related: .*run-01; "):
        WorkflowPlan(_validated(config))
    with pytest.raises(ValueError, match=r"config/presets/event_related\.yaml"):
        WorkflowPlan(_validated(config))
    chosen = {"features": {"alignment": {"method": "average"}}}
    assert (
        WorkflowPlan(_validated({**config, **chosen})).config["features"]["alignment"][
            "event_regressor"
        ]
        is False
    )
