"""An EEG-only BIDS dataset as MNE-BIDS writes it, through ``snakemake`` end to end.

No ``func/``, no ``stimuli/``, events named only by their type (``standard`` /
``deviant``), one subject in BrainVision and one in FIF: the default configuration
must finish with every analysis that applies (preprocessing, time-resolved decoding,
the summary) and leave out, with a note each, those that need stimulus features.
"""

from __future__ import annotations

import copy
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import mne
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from dataset_shapes import make_eeg_only
from shape_helpers import (
    run_shape,
    shared_shape_run,
    store_mtimes,
    summary_notes,
    summary_table,
)
from workflow_helpers import assert_run_unchanged, planned_jobs, snakemake, write_config

from neuroflow.qc.eeg import EEG_QC_FIGURES

pytestmark = [pytest.mark.workflow, pytest.mark.slow]

#: Only the number of permutations is lowered (speed); every analysis setting is default.
SPEED = {"decoding": {"classification": {"n_permutations": 10}}}


def _config(facts: dict) -> dict:
    return {"dataset": {"source": "bids", "bids_root": str(facts["root"])}, **SPEED}


@pytest.fixture(scope="session")
def eeg_only(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict]]:
    """The default configuration run on an EEG-only dataset, and its facts (read only;
    also checked by ``test_default_configs``)."""
    run, facts = shared_shape_run(
        tmp_path_factory, "shape_eeg_only", lambda bids: make_eeg_only(bids, seed=0), _config
    )
    yield run, facts
    assert_run_unchanged(tmp_path_factory, run)


def _decoding(run: Path) -> xr.Dataset:
    return xr.open_zarr(next((run / "results" / "decoding").rglob("decoding_eeg.zarr")))


def test_default_config_reaches_every_applicable_analysis(eeg_only):
    run, facts = eeg_only
    stages = {p.name for p in (run / "results").iterdir() if not p.name.startswith(".")}
    assert stages == {"preprocess_eeg", "qc_eeg", "decoding", "decoding_cross_subject", "summary"}
    epochs = sorted((run / "results" / "preprocess_eeg").rglob("*_epo.zarr"))
    assert len(epochs) == len(facts["subjects"]) * len(facts["runs"])
    table = summary_table(run)
    rows = table[table["analysis"] == "classification"]
    per_subject = rows[rows["statistic"] == "value"]
    assert sorted(per_subject["subject"]) == facts["subjects"]
    (group,) = rows[rows["subject"] == "group"].itertuples()
    assert group.statistic == "mean" and group.n_subjects == len(facts["subjects"])
    assert group.value == pytest.approx(per_subject["value"].mean())
    # 10 permutations cannot reach the 0.05 cluster level (99 are needed): no p-value,
    # the result is reported as inconclusive
    assert rows["inconclusive"].astype(bool).all() and rows["p_value"].isna().all()
    notes = summary_notes(run)
    assert any(n.startswith("features/image_statistics: skipped") for n in notes)
    assert any("rsa_eeg: skipped" in n for n in notes)
    ds = _decoding(run)
    assert ds.attrs["classification_cv_groups"] == ["epoch"]
    assert set(ds.attrs["skipped"]) == {"features", "identification"}
    # the long steps of the subjects' decoding and QC jobs report their progress in the
    # job logs: a line per 10 %, with the count, the rate and the time left
    decoding = {p: p.read_text() for p in (run / "logs" / "decoding").rglob("sub-*.log")}
    qc = {p: p.read_text() for p in (run / "logs" / "qc_eeg").rglob("*.log")}
    assert len(decoding) == len(facts["subjects"]) and len(qc) == len(epochs)
    for log, text in decoding.items():
        # (the permutations of the temporal generalisation give the sliding null too)
        lines = re.findall(r"classification null[^:]*: \d+% \(\d+/\d+ permutations\), .*", text)
        assert len(lines) >= 10 and " left (" in lines[0] and "done" in lines[-1], log
    for log, text in qc.items():
        assert re.search(r"QC: spectra of the recording: 100% \(\d+/\d+ channels\), ", text), log


def test_quality_control_of_every_recording(eeg_only):
    """One QC store and five figures per recording; the planted P300 and line noise show."""
    run, facts = eeg_only
    stores = sorted((run / "results" / "qc_eeg").rglob("*_qc.zarr"))
    assert len(stores) == len(facts["recordings"])
    planted = facts["planted"]
    for rec in facts["recordings"]:
        key = f"sub-{rec['subject']}_task-{facts['task']}_run-{rec['run']}"
        (store,) = [p for p in stores if p.name == f"{key}_qc.zarr"]
        qc = xr.open_zarr(store)
        figures = sorted(p.name for p in store.with_suffix("").glob("*.png"))
        assert figures == sorted(f"{key}_qc-{k}.png" for k in EEG_QC_FIGURES), key
        counts = dict(zip(qc["condition"].values, qc["n_events"].values, strict=True))
        assert counts == {
            "deviant": rec["n_deviants"],
            "standard": rec["n_events"] - rec["n_deviants"],
        }
        assert int(qc["event_kept"].sum()) == int(qc["n_kept"].sum())
        # the low-pass removes the line noise the recording carries
        line = qc["frequency"].sel(frequency=facts["line_freq"], method="nearest")
        ratio = qc["psd_before"].sel(frequency=line) / qc["psd_after"].sel(frequency=line)
        assert float(ratio.median()) > 100, key
        # the deviant-minus-standard ERP peaks at the planted channels and latency
        erp = qc["erp"].sel(time=planted["latency"], method="nearest")
        contrast = erp.sel(erp_condition="deviant") - erp.sel(erp_condition="standard")
        top = [str(c) for c in contrast.sortby(contrast, ascending=False)["channel"].values[:5]]
        assert set(planted["channels"]) & set(top), (key, top)


def _mne_reference(store: list[Path], decim: int) -> np.ndarray:
    """Balanced accuracy over time of MNE's SlidingEstimator with stratified epoch folds."""
    from mne.decoding import SlidingEstimator, cross_val_multiscore
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    from sklearn.model_selection import StratifiedKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    parts = [xr.open_zarr(p) for p in store]
    X = np.concatenate([d["epochs"].values for d in parts])[:, :, ::decim]
    y = np.concatenate([[str(v) for v in d["condition"].values] for d in parts])
    clf = make_pipeline(
        StandardScaler(), LinearDiscriminantAnalysis(solver="lsqr", shrinkage="auto")
    )
    slider = SlidingEstimator(clf, scoring="balanced_accuracy", n_jobs=1, verbose="error")
    folds = StratifiedKFold(5, shuffle=True, random_state=0)
    return cross_val_multiscore(slider, X, y, cv=folds, verbose="error").mean(0)


def test_two_conditions_named_by_type_decode_above_chance_like_mne(eeg_only):
    run, facts = eeg_only
    ds = _decoding(run)
    for subject in facts["subjects"]:
        ours = ds["class_score"].sel(subject=subject).values
        stores = sorted((run / "results" / "preprocess_eeg").rglob(f"sub-{subject}_*_epo.zarr"))
        mne_scores = _mne_reference(stores, decim=2)
        assert mne_scores.max() > 0.65, subject  # the planted effect, seen by MNE
        assert ours.max() > 0.65, subject
        assert abs(ours.max() - mne_scores.max()) < 0.1, subject
        # peaks at the planted latency, like MNE's
        peak = float(ds["time"].values[np.argmax(ours)])
        assert abs(peak - facts["planted"]["latency"]) < 0.08, (subject, peak)
    # events named only by their type: grouping folds by "stimulus" (= event name) would
    # leave a whole class out of training; the default stratifies epochs instead
    assert ds.attrs["classification_cv_groups"] == ["epoch"]


def test_selection_is_versioned_and_reverting_recomputes_nothing(eeg_only, tmp_path):
    run, _ = eeg_only
    work = tmp_path / "run"
    shutil.copytree(run, work, symlinks=True)
    config = (work / "config.yaml").read_text()
    before = store_mtimes(work / "results")
    full_decoding = {p.parent.name for p in (work / "results" / "decoding").rglob("*.zarr")}

    import yaml

    one = yaml.safe_load(config)
    one["dataset"]["subjects"] = ["1"]  # spelled as a number: still sub-01
    write_config(work / "config.yaml", one)
    jobs = planned_jobs(work)
    assert "preprocess_eeg" not in jobs  # the recordings' own stores are reused
    assert {"decode_eeg", "summarize_scores"} <= set(jobs)
    snakemake(work, "--cores", "2")
    after = store_mtimes(work / "results")
    # nothing that existed was rewritten; the one-subject results are new folders
    assert {k: after[k] for k in before} == before
    decoding = {p.parent.name for p in (work / "results" / "decoding").rglob("*.zarr")}
    assert len(decoding - full_decoding) == 1
    ds = xr.open_zarr(
        next(iter(work / "results" / "decoding" / d for d in decoding - full_decoding))
        / "decoding_eeg.zarr"
    )
    assert list(ds["subject"].values) == ["01"]

    (work / "config.yaml").write_text(config)
    assert planned_jobs(work) == {}


def test_a_failing_subject_keeps_the_others_decoding(eeg_only, tmp_path):
    """Decoding runs per subject: sub-02 failing (its epochs store damaged) keeps sub-01's
    store, and once sub-02 is repaired only its part and the gathering job run."""
    run, facts = eeg_only
    work = tmp_path / "run"
    shutil.copytree(run, work, symlinks=True)
    shutil.rmtree(work / "results" / "decoding")
    shutil.rmtree(work / "results" / "summary")
    epochs = sorted((work / "results" / "preprocess_eeg").rglob("sub-02_*_epo.zarr"))[0]
    chunk = next(p for p in sorted((epochs / "epochs" / "c").rglob("*")) if p.is_file())
    saved = chunk.read_bytes()
    chunk.unlink()
    proc = snakemake(work, "--cores", "2", "--keep-going", check=False)
    assert proc.returncode != 0
    subjects = sorted((work / "results" / "decoding").rglob("sub-*_decoding_eeg.zarr"))
    assert [p.name for p in subjects] == ["sub-01_decoding_eeg.zarr"]
    assert not list((work / "results" / "decoding").rglob("decoding_eeg.zarr"))
    logs = {p.name: p.read_text() for p in (work / "logs" / "decoding").rglob("sub-*.log")}
    assert f"Store {epochs.relative_to(work)} is damaged" in logs["sub-02.log"], logs["sub-02.log"]
    kept = store_mtimes(work / "results" / "decoding")

    chunk.write_bytes(saved)
    jobs = planned_jobs(work)
    assert jobs == {
        "decode_eeg_subject": 1,
        "decode_eeg": 1,
        "summarize_scores": 1,
        "summary_thumbnails": 1,
        "all": 1,
    }
    snakemake(work, "--cores", "2")
    after = store_mtimes(work / "results" / "decoding")
    assert {k: after[k] for k in kept} == kept  # sub-01's part was not recomputed
    combined = xr.open_zarr(next((work / "results" / "decoding").rglob("decoding_eeg.zarr")))
    assert list(combined["subject"].values) == facts["subjects"]
    assert "group_class_cluster_p" in combined
    xr.testing.assert_allclose(combined["class_score"], _decoding(run)["class_score"])


def _epoch_subject(bids: Path, subject: str) -> None:
    """Replace a subject's continuous FIF runs with MNE epochs files (``_epo.fif``)."""
    eeg = bids / f"sub-{subject}" / "eeg"
    for raw_file in sorted(eeg.glob("*_eeg.fif")):
        raw = mne.io.read_raw_fif(raw_file, preload=True, verbose="error")
        events, event_id = mne.events_from_annotations(raw, verbose="error")
        epochs = mne.Epochs(
            raw, events, event_id, tmin=-0.2, tmax=0.8, baseline=None, preload=True,
            verbose="error",
        )  # fmt: skip
        epochs.save(raw_file.with_name(raw_file.name.replace("_eeg.fif", "_epo.fif")))
        raw_file.unlink()
        # the events table keeps one row per epoch
        table = raw_file.with_name(raw_file.name.replace("_eeg.fif", "_events.tsv"))
        rows = pd.read_csv(table, sep="\t")
        assert len(rows) == len(epochs)


def test_epoched_recordings_are_read_as_epochs(tmp_path):
    facts = make_eeg_only(tmp_path / "bids", seed=1)
    _epoch_subject(tmp_path / "bids", "02")
    config = {"dataset": {"source": "bids", "bids_root": str(tmp_path / "bids")}, **SPEED}
    config = copy.deepcopy(config)
    config["decoding"]["classification"]["generalization"] = False
    run_shape(tmp_path / "run", config)
    results = tmp_path / "run" / "results" / "preprocess_eeg"
    epo = sorted(results.rglob("sub-02_*_epo.zarr"))
    assert len(epo) == len(facts["runs"])
    assert not list(results.rglob("sub-02_*_raw.zarr"))  # no continuous data to store
    assert {xr.open_zarr(p).attrs["input"] for p in epo} == {"epochs"}
    assert {xr.open_zarr(p).attrs["input"] for p in results.rglob("sub-01_*_epo.zarr")} == {
        "continuous"
    }
    ds = _decoding(tmp_path / "run")
    assert float(ds["class_score"].sel(subject="02").max()) > 0.65
