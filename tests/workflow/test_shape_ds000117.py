"""A ds000117-like fMRI + EEG dataset through ``snakemake``.

Sessions ``ses-mri`` (fMRI) and ``ses-eeg`` (EEG), zero-padded runs, the TR only in the
top-level sidecar, CRLF events tables in the real columns with ``n/a`` rest rows
(``func/i999.bmp``), stimuli under ``stimuli/func`` and ``stimuli/meg`` (most images
identical under both paths), no ``trial_type`` column, and immediate and delayed repeats
of every image. The configuration is the README's recipe for this shape.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from dataset_shapes import make_ds000117_like
from shape_helpers import open_stores, run_shape, summary_notes, summary_table
from workflow_helpers import planned_jobs, write_config

from neuroflow.workflow.report_layout import qc_entry

pytestmark = [pytest.mark.workflow, pytest.mark.slow]

LEVELS = {
    "FAMOUS": "face",
    "UNFAMILIAR": "face",
    "SCRAMBLED": "scrambled",
    "Famous": "face",
    "Unfamiliar": "face",
    "Scrambled": "scrambled",
}


def recipe(bids: str, sessions: list[str]) -> dict:
    """The README's ds000117 configuration, with fewer permutations (speed only)."""
    return {
        "dataset": {
            "source": "bids",
            "bids_root": bids,
            "sessions": sessions,
            # rest rows (stim_type n/a, func/i999.bmp) are not images
            "stimulus_events": {"exclude": {"stim_type": ["n/a"]}},
        },
        # the EEG events have no trial_type: their condition is stim_type
        "preprocess_eeg": {"event_column": "stim_type"},
        "features": {
            "extractors": [
                {"name": "image_statistics", "extractor": "image_statistics"},
                {
                    "name": "condition",
                    "extractor": "events",
                    "events": {"categorical": ["stim_type"], "levels": {"stim_type": LEVELS}},
                },
            ]
        },
        "encoding": {
            "models": {
                "visual": {"feature_spaces": ["image_statistics"], "model": "ridge"},
                "condition": {"feature_spaces": ["condition"], "model": "ridge"},
            }
        },
        "evaluation": {"permutation": {"n_permutations": 100}},
        "eeg_encoding": {"inference": {"n_permutations": 20}},
        "decoding": {
            "classification": {"n_permutations": 10, "generalization": False},
            "features": {"n_permutations": 20},
            "identification": {"n_permutations": 50},
            "contrastive": {"enabled": False},
        },
    }


@pytest.fixture(scope="module")
def ds117(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    root = tmp_path_factory.mktemp("ds117")
    facts = make_ds000117_like(root / "bids", seed=0, meg_fif=True, eeg_sfreq=125.0)
    run = run_shape(root / "run", recipe(str(root / "bids"), ["mri", "eeg"]))
    return run, facts


def test_sessions_select_each_modality(ds117):
    run, facts = ds117
    fmri = open_stores(run, "preprocess_fmri")
    eeg = open_stores(run, "preprocess_eeg", "*_epo.zarr")
    assert len(fmri) == len(facts["subjects"]) * len(facts["fmri_runs"])
    assert all("_ses-mri_" in name for name in fmri)
    assert len(eeg) == len(facts["subjects"]) * len(facts["eeg_runs"])
    assert all("_ses-eeg_" in name for name in eeg)  # ses-meg is left out by the filter
    # the TR comes from the top-level sidecar only
    assert {ds.attrs["tr"] for ds in fmri.values()} == {facts["tr"]}


def test_rest_rows_are_not_stimuli_and_identical_files_are_one(ds117):
    run, facts = ds117
    (images,) = open_stores(run, "features", "output.zarr").values()
    ids = [str(s) for s in images["stimulus"].values]
    assert not [s for s in ids if "i999" in s]
    canonical = dict(zip(ids, (str(c) for c in images["canonical_stimulus"].values), strict=True))
    both = [n for n in facts["identical"] if f"func/{n}" in canonical and f"meg/{n}" in canonical]
    assert both  # shown to the fMRI and the EEG under two paths
    for name in both:
        assert canonical[f"meg/{name}"] == canonical[f"func/{name}"]
    conflict = facts["conflict"]  # same name in both folders, another image
    assert canonical[f"func/{conflict}"] == f"func/{conflict}"
    assert canonical[f"meg/{conflict}"] == f"meg/{conflict}"
    (events,) = open_stores(run, "features", "events.zarr").values()
    assert list(events["feature_name"].values) == ["stim_type=face", "stim_type=scrambled"]


def test_fmri_encoding_holds_out_the_last_run(ds117):
    run, facts = ds117
    scores = open_stores(run, "evaluation")
    assert {name.split("-")[0] for name in scores} == {"visual", "condition"}
    for name, ds in scores.items():
        subject = ds.attrs["subject"]
        assert ds.attrs["test_runs"] == [f"sub-{subject}_ses-mri_task-facerecognition_run-04"]
        if name.startswith("condition"):
            ijk = np.stack([ds[c].values for c in ("i", "j", "k")], axis=1)
            face = np.asarray(facts["planted"]["face_blob"][subject])[tuple(ijk.T)]
            assert np.median(ds["r"].values[face]) > 0.3, name


def test_eeg_encoding_pools_runs_and_scores_every_image(ds117):
    run, facts = ds117
    stores = open_stores(run, "eeg_encoding")
    assert stores and all(
        len(ds.attrs["recordings"]) == len(facts["eeg_runs"]) for ds in stores.values()
    )
    for ds in stores.values():
        # every image is repeated and none is set apart: each is predicted once by
        # cross-validation over images (`repeated` would hold out nearly all of them)
        assert ds.attrs["test_design"] == "cross-validated"
        assert ds.attrs["n_test_stimuli"] == ds.attrs["n_train_stimuli"]
        assert ds.attrs["n_test_repeats"] == 2


def test_eeg_decoding_and_rsa_on_stimulus_types(ds117):
    run, facts = ds117
    (ds,) = (xr.open_zarr(p) for p in (run / "results" / "decoding").rglob("decoding_eeg.zarr"))
    assert ds.attrs["classification_cv_groups"] == ["stimulus"]
    peak = ds["feature_peak_latency"].sel(feature_space="condition").values
    assert np.all(np.abs(peak - facts["planted"]["n170_latency"]) < 0.05)
    table = summary_table(run)
    assert {"classification", "rsa_eeg", "encoding"} <= set(table["analysis"])
    notes = summary_notes(run)
    assert any(n.startswith("rsa_fmri: skipped, the voxels have no ROI labels") for n in notes)


def test_quality_control_of_each_session_recording(ds117):
    run, facts = ds117
    n_subjects = len(facts["subjects"])
    fmri = open_stores(run, "qc_fmri", "*_qc.zarr")
    eeg = open_stores(run, "qc_eeg", "*_qc.zarr")
    assert len(fmri) == n_subjects * len(facts["fmri_runs"])
    assert len(eeg) == n_subjects * len(facts["eeg_runs"])
    for name in [*fmri, *eeg]:
        stage = "qc_fmri" if name in fmri else "qc_eeg"
        for png in (run / "results" / stage / name.removesuffix(".zarr")).glob("*.png"):
            entry = qc_entry(png.stem)
            assert entry.subcategory == ("fMRI" if stage == "qc_fmri" else "EEG")
            assert entry.labels["recording"].split(" ")[1] in ("ses-mri", "ses-eeg")
    for ds in eeg.values():
        # every event of the recording is accounted for, kept or dropped with a reason
        assert ds.sizes["event"] == int(ds["n_events"].sum())
        reasons = ds["drop_reason"].values.astype(object)
        assert ((reasons == "") == ds["event_kept"].values).all()
        assert np.isfinite(ds["psd_before"].values).all()
    for ds in fmri.values():
        assert np.isfinite(ds["tsnr"].values).all() and (ds["tsnr"].values >= 0).all()


def test_eeg_of_a_meg_recording_and_session_filters(ds117, tmp_path):
    _, facts = ds117
    bids = str(facts["root"])
    # only the MEG session: its EEG channels are analysed, no fMRI stage is planned
    config = recipe(bids, ["meg"])
    write_config(tmp_path / "config.yaml", config)
    jobs = planned_jobs(tmp_path)
    assert jobs.get("preprocess_eeg") == len(facts["subjects"])
    assert not {"preprocess_fmri", "fit_encoding"} & set(jobs)
    # only the MRI session: no EEG stage
    write_config(tmp_path / "config.yaml", recipe(bids, ["mri"]))
    jobs = planned_jobs(tmp_path)
    eeg_rules = {"preprocess_eeg", "decode_eeg_subject", "decode_eeg"}
    assert "preprocess_fmri" in jobs and not eeg_rules & set(jobs)
    # the MEG + EEG file itself, through the EEG preprocessing
    meg = tmp_path / "meg"
    config["encoding"]["models"] = {"condition": {"feature_spaces": ["condition"]}}
    config["features"]["extractors"] = config["features"]["extractors"][1:]
    config["decoding"]["identification"]["enabled"] = False
    config["eeg_encoding"] = {"enabled": False}
    # the assertions read the preprocessed epochs and their QC: no later stage runs
    run_shape(meg, config, "--until", "qc_eeg")
    (epochs,) = open_stores(meg, "preprocess_eeg", "sub-01_*_epo.zarr").values()
    assert set(epochs["ch_type"].values.astype(object)) == {"eeg"}
    assert epochs.sizes["channel"] == len(facts["meg"]["01"]["eeg_channels"])
    (qc,) = open_stores(meg, "qc_eeg", "sub-01_*_qc.zarr").values()
    assert list(qc["channel"].values) == list(epochs["channel"].values)
