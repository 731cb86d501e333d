"""The workflow end to end on a tiny demo: artifacts, provenance, CLI, config errors."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import snakemake_launcher
import xarray as xr
import yaml
from workflow_helpers import REPO, TINY_CONFIG, planned_jobs, snakemake, write_config

from neuroflow.artifacts import PROVENANCE_KEY, read_provenance
from neuroflow.preprocessing.eeg.config import epoch_window
from neuroflow.variables import undescribed

pytestmark = [pytest.mark.workflow, pytest.mark.slow]

SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"


def _stores(workdir: Path) -> list[Path]:
    return sorted(p for p in (workdir / "results").rglob("*.zarr") if (p / "zarr.json").exists())


def _neuroflow(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    """``python -m neuroflow.cli ARGS`` in ``workdir`` (started warm, as a new one)."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    return snakemake_launcher.run(list(args), env, 300, workdir, module="neuroflow.cli")


def test_every_stage_writes_versioned_xarray_stores(tiny_run: Path) -> None:
    stores = _stores(tiny_run)
    stages = {p.relative_to(tiny_run / "results").parts[0] for p in stores}
    assert stages >= {
        "preprocess_fmri",
        "preprocess_eeg",
        "features",
        "align_features",
        "encoding",
        "evaluation",
        "eeg_encoding",
        "eeg_evaluation",
        "decoding",
        "rsa",
        "summary",
    }
    for store in stores:
        ds = xr.open_zarr(store)
        assert ds.data_vars, store
        record = ds.attrs[PROVENANCE_KEY]
        version_dir = store.relative_to(tiny_run / "results").parts[1]
        assert version_dir.endswith(record["version"]), store
        assert record["stage"].split("/")[0] == store.relative_to(tiny_run / "results").parts[0]
        assert {"numpy", "xarray", "zarr", "python"} <= set(record["software"])
        assert record["config"], store
    # No leftovers of interrupted writes.
    assert not list((tiny_run / "results").rglob("*.partial-*"))


def test_job_logs_have_no_zarr_format_warnings(tiny_run: Path) -> None:
    logs = list((tiny_run / "logs").rglob("*.log"))
    assert len(logs) > 10
    for log in logs:
        text = log.read_text()
        assert "UnstableSpecificationWarning" not in text, log
        assert "Consolidated metadata" not in text, log


def test_decoding_rsa_and_summary_variables_are_described(tiny_run: Path) -> None:
    results = tiny_run / "results"
    stores = [
        *results.glob("decoding/*/decoding_eeg.zarr"),
        *results.glob("decoding/*/subjects/*.zarr"),
        *results.glob("rsa/*/*.zarr"),
        *results.glob("summary/*/scores.zarr"),
        *results.glob("qc_*/*/sub-*/*_qc.zarr"),
    ]
    assert {p.relative_to(results).parts[0] for p in stores} == {
        "decoding",
        "rsa",
        "summary",
        "qc_eeg",
        "qc_fmri",
    }
    for store in stores:
        assert undescribed(xr.open_zarr(store)) == [], store


def test_long_steps_log_their_progress(tiny_run: Path) -> None:
    logs = {p: p.read_text() for p in (tiny_run / "logs" / "features").rglob("*.log")}
    assert logs
    for log, text in logs.items():
        assert "extraction: 100% (" in text and "/s, done" in text, log
    evaluation = [p.read_text() for p in (tiny_run / "logs" / "evaluation").rglob("*.log")]
    assert evaluation
    assert all("permutation null (50 orders): 100% (" in text for text in evaluation)


def test_nothing_to_do_after_a_full_run(tiny_run: Path) -> None:
    assert planned_jobs(tiny_run) == {}


def test_summary_table_ranks_planted_feature_spaces(tiny_run: Path) -> None:
    table = next((tiny_run / "results" / "summary").rglob("scores.tsv"))
    df = pd.read_csv(table, sep="\t", na_values="n/a")
    fmri = df[(df["analysis"] == "encoding") & (df["statistic"] == "value")]
    rows = fmri[fmri["metric"] == "mean_r"].set_index(["model", "roi"])["value"]
    assert rows[("visual", "early_visual")] > rows[("semantic", "early_visual")]
    assert rows[("semantic", "semantic")] > rows[("visual", "semantic")]
    # every ROI row says which share of its targets exceeds the noise ceiling beyond the
    # ceiling's uncertainty (the score stores' exceeds_ceiling); undefined exactly where
    # no normalised score is
    exceeds = fmri[fmri["metric"] == "frac_exceeds_ceiling"].set_index(["model", "roi"])
    normalized = fmri[fmri["metric"] == "mean_r_normalized"].set_index(["model", "roi"])
    assert exceeds.index.equals(rows.index)
    defined = exceeds["value"].notna()
    assert defined.any() and (defined == normalized["value"].notna()).all()
    assert exceeds["value"][defined].between(0.0, 1.0).all()
    plots = list(table.parent.joinpath("plots").glob("*.png"))
    assert plots


def test_fmri_decoding_follows_the_planted_rois(tiny_run: Path) -> None:
    """Identification and concept decoding from the demo movie's shot events."""
    (store,) = (tiny_run / "results" / "decoding_fmri").glob("*/decoding_fmri.zarr")
    ds = xr.open_zarr(store).sel(subject="01")
    assert ds.attrs["patterns"] == "events"
    assert list(ds["decoder"].values) == ["ridge", "contrastive"]
    rank = ds["identification"].sel(metric="mean_rank", decoder="ridge")
    p = ds["identification_p"].sel(metric="mean_rank", decoder="ridge")
    chance = float(ds["identification_chance"].sel(metric="mean_rank").max())
    # the held-out test movie's shots: image statistics drive early visual, captions
    # the semantic ROI, nothing the noise ROI
    for space, roi in (("image_statistics", "early_visual"), ("minilm", "semantic")):
        assert float(rank.sel(feature_space=space, roi=roi)) < 0.75 * chance, (space, roi)
        assert float(p.sel(feature_space=space, roi=roi)) < 0.05, (space, roi)
    assert float(rank.sel(feature_space="image_statistics", roi="noise")) > 0.75 * chance
    # concepts (photograph, region, framing) follow both planted feature spaces
    auc = ds["concept_mean_auc"]
    for roi in ("early_visual", "semantic"):
        # the null refits the decoders on every run-preserving relabelling, so the tiny
        # run's few test shots give p near 0.01 for the mean AUC, not lower
        assert float(ds["concept_mean_auc_p"].sel(roi=roi)) < 0.05, roi
        assert float(ds["concept_map_p"].sel(roi=roi)) < 0.1, roi
        assert float(auc.sel(roi=roi)) > float(auc.sel(roi="noise")), roi
    table = next((tiny_run / "results" / "summary").rglob("scores.tsv"))
    df = pd.read_csv(table, sep="\t", na_values="n/a", dtype={"subject": str})
    rows = df[df["analysis"] == "concept_decoding_fmri"]
    assert set(rows["roi"]) == {"early_visual", "semantic", "noise", "all"}
    assert (table.parent / "plots" / "decoding_fmri_concepts.png").is_file()


def test_summary_table_has_eeg_encoding_time_courses(tiny_run: Path) -> None:
    table = next((tiny_run / "results" / "summary").rglob("scores.tsv"))
    df = pd.read_csv(table, sep="\t", na_values="n/a", dtype={"subject": str})
    eeg = df[df["analysis"] == "eeg_encoding"]
    subjects = sorted(set(eeg["subject"]) - {"group"})
    assert subjects and set(eeg["model"]) == {"visual", "semantic"}
    peaks = eeg[eeg["metric"] == "peak_latency"]
    assert len(peaks) == 2 * (len(subjects) + 1)  # per subject and of the group mean
    run_config = yaml.safe_load((table.parent / "config.yaml").read_text())
    tmin, tmax = epoch_window(run_config["preprocess_eeg"])
    assert peaks["value"].between(tmin, tmax).all()
    channels = eeg[(eeg["metric"] == "mean_r") & (eeg["statistic"] == "value")]
    assert "all" in set(channels["roi"]) and channels["roi"].nunique() > 10
    plots = table.parent / "plots"
    assert {p.name for p in plots.glob("eeg_encoding_*.png")} == {
        "eeg_encoding_visual_r.png",
        "eeg_encoding_semantic_r.png",
    }


def test_stored_encoders_reproduce_the_test_predictions(tiny_run: Path) -> None:
    """Every encoding store's fitted model, applied to its test runs' aligned features
    (and their nuisance bases), gives back the stored y_pred."""
    from neuroflow.encoding.stored import predict_run

    stores = sorted((tiny_run / "results" / "encoding").glob("*/sub-*_encoding.zarr"))
    assert stores
    for store in stores:
        enc = xr.open_zarr(store).load()
        inputs = [Path(rec["path"]) for rec in enc.attrs[PROVENANCE_KEY]["inputs"]]
        inputs = [p if p.is_absolute() else tiny_run / p for p in inputs]

        def store_of(run_key: str, stage_dir: str, inputs=inputs) -> list[Path]:
            return [p for p in inputs if stage_dir in p.parts and p.name.startswith(run_key)]

        predictions = []
        for group in enc.attrs["repeat_runs"]:
            per_repeat = []
            for key in group:
                (brain,) = store_of(key, "preprocess_fmri")
                feats = {}
                for space in enc.attrs["feature_spaces"]:
                    extractor = space.split(":")[0]
                    (path,) = [
                        p
                        for p in store_of(key, "align_features")
                        if p.parent.parent.name.startswith(f"{extractor}-")
                    ]
                    feats[space] = xr.open_zarr(path)
                run = xr.open_zarr(brain)
                basis = run["nuisance_basis"].values if "nuisance_basis" in run else None
                variants = {
                    s: f["hrf_variant"].values
                    for s, f in feats.items()
                    if "hrf_variant" in f.coords
                }
                arrays = {s: f["features"].values for s, f in feats.items()}
                per_repeat.append(predict_run(enc, arrays, variants=variants, nuisance=basis))
            predictions.append(np.mean(per_repeat, axis=0))
        np.testing.assert_allclose(
            np.concatenate(predictions),
            enc["y_pred"].values,
            rtol=1e-4,
            atol=1e-4,
            err_msg=str(store),
        )


def test_provenance_chain_reaches_raw_inputs(tiny_run: Path) -> None:
    scores = next((tiny_run / "results" / "evaluation").rglob("*_scores.zarr"))
    encoding = Path(read_provenance(scores)["inputs"][0]["path"])
    assert read_provenance(tiny_run / encoding)["stage"].startswith("encoding/")
    proc = _neuroflow(tiny_run, "inspect", str(scores.relative_to(tiny_run)))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "Arrays:" in out and "dims=('voxel',)" in out
    assert "Provenance chain:" in out
    for stage in ("evaluation/", "encoding/", "preprocess_fmri", "align_features/", "demo"):
        assert f"stage={stage}" in out, stage


def test_export_in_the_formats_of_the_field(tiny_run: Path, tmp_path: Path) -> None:
    import json

    import mne
    import nibabel as nib

    out = tmp_path / "export"
    proc = _neuroflow(tiny_run, "export", "results", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    # one voxel-wise map per statistic, placed where the store's voxel indices say
    (scores,) = (tiny_run / "results" / "evaluation").glob("visual-*/sub-01_scores.zarr")
    ds = xr.open_zarr(scores)
    img = nib.load(out / "sub-01" / "func" / "sub-01_task-movie_model-visual_stat-r_statmap.nii.gz")
    data = np.asarray(img.dataobj)
    ijk = np.stack([ds[c].values for c in "ijk"], axis=1)
    np.testing.assert_allclose(data[tuple(ijk.T)], ds["r"].values, rtol=1e-6)
    fdr = nib.load(next((out / "sub-01" / "func").glob("*visual_desc-fdr_stat-r_statmap.nii.gz")))
    kept = np.asarray(fdr.dataobj)[tuple(ijk.T)]
    assert (kept[~ds["significant"].values] == 0).all()
    sidecar = json.loads(
        next((out / "sub-01" / "func").glob("*visual_stat-r_statmap.json")).read_text()
    )
    assert sidecar["Sources"] == [scores.relative_to(tiny_run / "results").as_posix()]
    assert img.header.get_xyzt_units() == ("mm", "sec")
    assert int(img.header["qform_code"]) == int(img.header["sform_code"]) > 0
    description = json.loads((out / "dataset_description.json").read_text())
    assert description["DatasetType"] == "derivative"
    assert description["GeneratedBy"][0]["Name"] == "neuroflow"
    assert sidecar["NeuroflowVersion"] == scores.parent.name.rsplit("-", 1)[1]
    # epochs and evoked responses that MNE reads back
    (epo_store,) = (tiny_run / "results" / "preprocess_eeg").glob("*/sub-01/*_epo.zarr")
    epochs = mne.read_epochs(next((out / "sub-01" / "eeg").glob("*_epo.fif")), verbose="error")
    np.testing.assert_allclose(
        epochs.get_data(), xr.open_zarr(epo_store)["epochs"].values, rtol=1e-5, atol=1e-12
    )
    assert set(epochs.metadata["stimulus"]) == set(xr.open_zarr(epo_store)["stimulus"].values)
    filters = xr.open_zarr(epo_store).attrs["filters"]
    assert epochs.info["highpass"] == pytest.approx(filters["l_freq"] or 0.0)
    assert epochs.info["lowpass"] == pytest.approx(filters["h_freq"] or epochs.info["sfreq"] / 2)
    evokeds = mne.read_evokeds(next((out / "sub-01" / "eeg").glob("*_ave.fif")), verbose="error")
    assert {e.comment for e in evokeds} == set(epochs.event_id)
    # features as arrays with their stimulus order, and the summary with its sidecar
    (minilm,) = (tiny_run / "results" / "features").glob("minilm-*/*.zarr")
    features = np.load(out / "features" / "minilm" / f"{minilm.stem}.npy")
    np.testing.assert_array_equal(features, xr.open_zarr(minilm)["features"].values)
    order = pd.read_csv(out / "features" / "minilm" / f"{minilm.stem}_stimuli.tsv", sep="\t")
    assert order["stimulus"].tolist() == [str(s) for s in xr.open_zarr(minilm)["stimulus"].values]
    (table,) = (tiny_run / "results" / "summary").glob("*/scores.tsv")
    assert (out / "summary" / "scores.tsv").read_bytes() == table.read_bytes()
    columns = json.loads((out / "summary" / "scores.json").read_text())
    assert "Pearson r" in columns["metric"]["Levels"]["mean_r"]


def test_inspect_rejects_non_artifact(tmp_path: Path) -> None:
    proc = _neuroflow(tmp_path, "inspect", str(tmp_path))
    assert proc.returncode == 2
    assert "is not a neuroflow artifact" in proc.stderr


def test_versions_and_gc_after_a_change(tiny_changed_copy: Path) -> None:
    """The tiny run, then a run with ``encoding.alphas.num`` 4 (``tiny_changed_copy``)."""
    config = yaml.safe_load((tiny_changed_copy / "config.yaml").read_text())
    assert config["encoding"]["alphas"] == {**TINY_CONFIG["encoding"]["alphas"], "num": 4}
    args = ("--configfile", "config.yaml", "--schema", str(SCHEMA))
    proc = _neuroflow(tiny_changed_copy, "versions", "encoding", *args)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith((" *", "  "))]
    visual = [line for line in lines if "visual-" in line]
    assert len(visual) == 2 and sum(line.startswith(" *") for line in visual) == 1
    assert "alphas.num=4" in proc.stdout and "alphas.num=5" in proc.stdout
    # the first run's versions are kept while that run counts as recent...
    dry = _neuroflow(tiny_changed_copy, "gc", "--dry-run", *args)
    assert dry.returncode == 0 and "would remove" not in dry.stdout
    assert "kept, used by the run of" in dry.stdout
    # ...and go once only the last run does
    args = (*args, "--keep-runs", "1", "--keep-days", "0")
    dry = _neuroflow(tiny_changed_copy, "gc", "--dry-run", *args)
    assert dry.returncode == 0 and "would remove" in dry.stdout
    old = [Path(line.split()[2]) for line in dry.stdout.splitlines() if "would remove" in line]
    assert old and all((tiny_changed_copy / p).exists() for p in old)
    assert _neuroflow(tiny_changed_copy, "gc", *args).returncode == 0
    assert not any((tiny_changed_copy / p).exists() for p in old)
    assert planned_jobs(tiny_changed_copy) == {}


def test_misspelt_key_fails_before_any_job(tmp_path: Path) -> None:
    config = copy.deepcopy(TINY_CONFIG)
    config["encoding"]["alpha"] = config["encoding"].pop("alphas")
    write_config(tmp_path / "config.yaml", config)
    proc = snakemake(tmp_path, "-n", check=False)
    assert proc.returncode != 0
    text = proc.stdout + proc.stderr
    assert "Unknown key 'encoding.alpha'" in text and "Did you mean 'alphas'?" in text
    assert not (tmp_path / "results").exists()


def test_wrong_type_names_key_and_value(tmp_path: Path) -> None:
    config = copy.deepcopy(TINY_CONFIG)
    config["demo"]["n_subjects"] = "two"
    write_config(tmp_path / "config.yaml", config)
    proc = snakemake(tmp_path, "-n", check=False)
    assert proc.returncode != 0
    text = proc.stdout + proc.stderr
    assert "'demo.n_subjects'" in text and "must be an integer, got 'two'" in text


def test_snakemake_lint_is_clean() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--lint", "-s", str(REPO / "Snakefile")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Congratulations" in proc.stdout + proc.stderr


def test_killed_job_leaves_no_store_downstream_accepts(tiny_copy: Path) -> None:
    """A store replaced by an interrupted write's leftovers is simply missing."""
    store = next((tiny_copy / "results" / "encoding").rglob("*_encoding.zarr"))
    partial = store.with_name(f".{store.name}.partial-deadbeef")
    store.rename(partial)
    jobs = planned_jobs(tiny_copy, str(store.relative_to(tiny_copy)))
    assert jobs == {"fit_encoding": 1}
    assert np.all([not p.name.startswith(".") for p in _stores(tiny_copy)])


def test_demo_data_refuses_a_folder_with_other_files(tmp_path: Path) -> None:
    folder = tmp_path / "thesis"
    folder.mkdir()
    (folder / "chapter1.tex").write_text("precious")
    proc = _neuroflow(REPO, "demo-data", str(folder))
    assert proc.returncode == 2
    assert "already holds files that neuroflow did not write" in proc.stderr
    assert "--force" in proc.stderr
    assert (folder / "chapter1.tex").read_text() == "precious"


def _files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` but the provenance marker and Snakemake's timestamp."""
    skip = {".neuroflow.json", ".snakemake_timestamp"}
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name not in skip
    }


def test_demo_data_command_writes_the_demo_of_a_config(tiny_run: Path, tmp_path: Path) -> None:
    """`neuroflow demo-data --configfile FILE` writes the dataset a run of FILE generates."""
    proc = _neuroflow(tmp_path, "demo-data", "demo", "--configfile", str(tiny_run / "config.yaml"))
    assert proc.returncode == 0, proc.stderr
    meta = json.loads((tmp_path / "demo" / ".neuroflow.json").read_text())
    assert meta["stage"] == "demo"
    (generated,) = (tiny_run / "results" / "demo").iterdir()
    assert meta["version"] == json.loads((generated / ".neuroflow.json").read_text())["version"]
    written = _files(tmp_path / "demo")
    assert "dataset_description.json" in written
    assert written == _files(generated)
    # --seed replaces the config's seed: another dataset, another version
    proc = _neuroflow(
        tmp_path, "demo-data", "seed3", "--seed", "3", "--configfile", str(tiny_run / "config.yaml")
    )
    assert proc.returncode == 0, proc.stderr
    reseeded = _files(tmp_path / "seed3")
    assert reseeded.keys() == written.keys() and reseeded != written
    assert (
        json.loads((tmp_path / "seed3" / ".neuroflow.json").read_text())["version"]
        != (meta["version"])
    )


def test_in_silico_ranking_follows_the_planted_drive(tiny_run: Path) -> None:
    """The demo's never-shown pool, ranked by the visual model: the early-visual ROI as
    the planted image-statistics drive ranks it, the noise ROI unrelated to it."""
    from scipy.stats import spearmanr

    (store,) = sorted((tiny_run / "results" / "predict").glob("visual-*/sub-01_pool.zarr"))
    ds = xr.open_zarr(store)
    (truth,) = sorted(
        (tiny_run / "results" / "demo").glob("*/derivatives/groundtruth/sub-01/*_pool.tsv")
    )
    planted = pd.read_csv(truth, sep="\t").set_index("stim_file")
    drive = planted.loc[[str(s) for s in ds["stimulus"].values], "early_visual_visual"]
    response = ds["roi_response"].to_pandas()
    early = spearmanr(response["early_visual"], drive)[0]
    noise = spearmanr(response["noise"], drive)[0]
    print(f"pool ranking vs planted drive: early_visual rho {early:.3f}, noise rho {noise:.3f}")
    # with no relation, the rank correlation over 48 stimuli has a standard deviation of
    # 0.15 (the generated movie of test_predict_geometry_workflow.py gives 0.99)
    assert early > 0.5, early
    assert noise < early, (early, noise)
    table = pd.read_csv(store.with_name("sub-01_pool_ranking.tsv"), sep="\t")
    rows = table[table["roi"] == "early_visual"]
    top = drive[rows[rows["direction"] == "top"]["stimulus"]]
    bottom = drive[rows[rows["direction"] == "bottom"]["stimulus"]]
    assert len(top) == len(bottom) == 4 and len(drive) == 48
    assert top.mean() > bottom.mean(), (top, bottom)


def planted_eeg_drive(demo_root: Path, subject: str, stimuli: list[str]) -> pd.DataFrame:
    """The planted visual amplitude of each pool image at each channel (µV up to a scale):
    the image's standardised statistics through the subject's visual weights and
    topographies, as the demo's EEG simulation mixes them, re-referenced to the average
    of the recorded channels as the default preprocessing does."""
    from neuroflow.demo import load_ground_truth

    truth = load_ground_truth(demo_root)
    pool, shown = truth["pool_features"], truth["stimuli"]
    row = {str(s): i for i, s in enumerate(pool["pool_stimulus"])}
    raw = pool["pool_visual"][[row[s] for s in stimuli]]
    z = (raw - shown["visual_mean"]) / shown["visual_std"]
    eeg = truth["subject"][subject]["eeg"]
    drive = z @ eeg["weights_visual"] @ eeg["topographies_visual"]
    drive -= drive.mean(axis=1, keepdims=True)
    return pd.DataFrame(drive, index=stimuli, columns=[str(c) for c in eeg["ch_names"]])


def test_in_silico_eeg_ranking_follows_the_planted_drive(tiny_run: Path) -> None:
    """The visual EEG model's predicted evoked response to the never-shown pool ranks
    the images as the planted visual amplitude does where the planted topography is
    strongest; the semantic model's does not. Each model's ranking window sits on its
    planted latency (visual 100 ms, semantic 400 ms)."""
    from scipy.stats import spearmanr

    (truth,) = sorted((tiny_run / "results" / "demo").glob("*/derivatives/groundtruth"))
    stores = {
        model: xr.open_zarr(
            next((tiny_run / "results" / "predict_eeg").glob(f"{model}-*/sub-01_pool.zarr"))
        )
        for model in ("visual", "semantic")
    }
    ds = stores["visual"]
    stimuli = [str(s) for s in ds["stimulus"].values]
    drive = planted_eeg_drive(truth.parents[1], "01", stimuli)[list(ds["channel"].values)]
    strong = drive.std().idxmax()
    rho = {
        model: spearmanr(store["channel_response"].to_pandas()[strong], drive[strong])[0]
        for model, store in stores.items()
    }
    windows = {model: store.attrs["latency_window"] for model, store in stores.items()}
    print(f"EEG pool ranking vs the planted visual drive at {strong}: {rho}, windows {windows}")
    # over 48 stimuli an unrelated ranking has a rank correlation of s.d. 0.15
    assert rho["visual"] > 0.8, rho
    assert abs(rho["semantic"]) < rho["visual"] - 0.3, rho
    for model, latency in (("visual", 0.1), ("semantic", 0.4)):
        low, high = windows[model]
        assert low - 0.03 <= latency <= high + 0.03, (model, windows[model])
    assert list(ds["roi"].values) == ["gfp"]
    (sheet_dir,) = sorted(
        (tiny_run / "results" / "predict_eeg").glob("visual-*/sub-01_pool_contact_sheets")
    )
    assert (sheet_dir / "gfp.png").is_file()
