"""Quality control of one fMRI run: metrics against independent computations, figures."""

from __future__ import annotations

import re

import nibabel as nib
import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LinearRegression

from neuroflow.artifacts import open_dataset, write_dataset
from neuroflow.preprocessing.fmri.stage import preprocess_fmri_run
from neuroflow.qc.fmri import fmri_qc_dataset
from neuroflow.qc.fmri_figures import fmri_qc_figures
from neuroflow.qc.fmri_metrics import (
    CONFOUND_SETS,
    confound_set,
    power_framewise_displacement,
    temporal_snr,
    variance_explained,
)
from neuroflow.variables import undescribed

PROV = {"stage": "preprocess_fmri", "version": "test"}
SHAPE = (7, 9, 6)
N_VOLUMES = 53
TR = 1.7
N_NSS = 2
MOTION = ["trans_x", "trans_y", "trans_z", "rot_x", "rot_y", "rot_z"]
CONSTANT_VOXEL = (3, 4, 3)
JUMPS = (20, 40)


def _motion(rng: np.random.Generator) -> np.ndarray:
    """Random-walk motion parameters: translations in mm, rotations in rad."""
    scale = np.array([0.03, 0.03, 0.04, 0.0005, 0.0005, 0.0006])
    motion = np.cumsum(rng.normal(0, 1, (N_VOLUMES, 6)) * scale, axis=0)
    motion[JUMPS[0] :, 0] += 1.0  # two sudden moves, the volumes scrubbing flags
    motion[JUMPS[1] :, 4] += 0.02
    return motion


def _hand_fd(motion: np.ndarray) -> np.ndarray:
    """Power et al. (2012) FD, written out term by term."""
    fd = [0.0]
    for t in range(1, len(motion)):
        d = np.abs(motion[t] - motion[t - 1])
        fd.append(d[0] + d[1] + d[2] + 50.0 * (d[3] + d[4] + d[5]))
    return np.array(fd)


def _write_run(folder, rng, *, name="sub-01_task-rest_run-1_bold.nii.gz", n=N_VOLUMES):
    """Small BOLD run with drift, motion and WM/CSF effects, plus its mask and table."""
    folder.mkdir(parents=True, exist_ok=True)
    t = np.arange(n) * TR
    brain = np.zeros(SHAPE, bool)
    brain[1:-1, 1:-1, 1:-1] = True
    motion = _motion(rng)[:n]
    wm_csf = rng.normal(0, 1, (n, 2))
    data = rng.normal(0, 2.0, (*SHAPE, n)) + (800.0 + 200 * rng.random(SHAPE))[..., None]
    data += 4.0 * (t / t[-1])
    data += np.einsum(
        "tc,xyzc->xyzt", motion * [10, 10, 10, 500, 500, 500], rng.normal(0, 1, (*SHAPE, 6))
    )
    data += np.einsum("tc,xyzc->xyzt", wm_csf, rng.normal(0, 1.5, (*SHAPE, 2)))
    data[..., :N_NSS] += 300.0  # non-steady-state volumes
    data[CONSTANT_VOXEL] = 950.0
    affine = np.array([[2.0, 0, 0, -6], [0, 2.2, 0, -9], [0, 0, 2.5, 4], [0, 0, 0, 1]])
    img = nib.Nifti1Image(data.astype(np.float32), affine)
    img.header.set_xyzt_units("mm", "sec")
    img.header["pixdim"][4] = TR
    bold = folder / name
    nib.save(img, bold)
    mask = folder / "mask.nii.gz"
    nib.save(nib.Nifti1Image(brain.astype(np.uint8), affine), mask)
    table = pd.DataFrame(motion, columns=MOTION)
    table["framewise_displacement"] = np.r_[np.nan, _hand_fd(motion)[1:]]
    table["std_dvars"] = np.r_[np.nan, np.abs(rng.normal(1.0, 0.1, n - 1))]
    table["white_matter"] = wm_csf[:, 0]
    table["csf"] = wm_csf[:, 1]
    for v in range(N_NSS):
        table[f"non_steady_state_outlier{v:02d}"] = (np.arange(n) == v).astype(float)
    confounds = folder / "confounds.tsv"
    table.to_csv(confounds, sep="\t", index=False, na_rep="n/a")
    return {"bold": bold, "mask": mask, "confounds": confounds, "table": table, "brain": brain}


def _clean(run, out, config, *, confounds=True):
    return preprocess_fmri_run(
        bold=run["bold"],
        output=out,
        config=config,
        provenance=PROV,
        mask=run["mask"],
        confounds=run["confounds"] if confounds else None,
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    rng = np.random.default_rng(7)
    return _write_run(tmp_path_factory.mktemp("run"), rng)


@pytest.fixture(scope="module")
def with_confounds(run, tmp_path_factory):
    """Default cleaning: motion and WM/CSF regressed, 2 volumes dropped."""
    store = _clean(run, tmp_path_factory.mktemp("clean") / "clean.zarr", {})
    qc = fmri_qc_dataset(bold=run["bold"], clean_store=store, confounds=run["confounds"])
    return {"store": store, "qc": qc}


@pytest.fixture(scope="module")
def without_confounds(run, tmp_path_factory):
    """No confounds table: trends and cosines only, nothing dropped."""
    store = _clean(run, tmp_path_factory.mktemp("bare") / "clean.zarr", {}, confounds=False)
    qc = fmri_qc_dataset(bold=run["bold"], clean_store=store)
    return {"store": store, "qc": qc}


def _raw(run, n_drop=N_NSS):
    return np.asarray(nib.load(run["bold"]).dataobj, np.float64)[..., n_drop:]


def test_layout(run, with_confounds):
    qc = with_confounds["qc"]
    store = open_dataset(with_confounds["store"])
    assert qc.sizes["volume"] == N_VOLUMES - N_NSS
    assert qc.sizes["voxel"] == int(run["brain"].sum())
    np.testing.assert_allclose(qc["time"].values, np.arange(N_NSS, N_VOLUMES) * TR)
    np.testing.assert_allclose(qc["time"].values, store["time"].values)
    for coord in ("voxel", "i", "j", "k", "x", "y", "z"):
        np.testing.assert_array_equal(qc[coord].values, store[coord].values)
    columns = [str(c) for c in qc["confound"].values]
    recorded = next(s for s in store.attrs["steps"] if s["name"] == "confounds")["columns"]
    assert columns == recorded
    assert sorted(columns) == sorted([*MOTION, "white_matter", "csf"])
    sets = dict(zip(columns, qc["confound_set"].values, strict=True))
    assert sets == {**dict.fromkeys(MOTION, "motion"), "white_matter": "wm_csf", "csf": "wm_csf"}
    assert list(qc["nuisance_set"].values) == ["trends", "cosine_drifts", "motion", "wm_csf", "all"]
    assert qc["confounds"].dtype == np.float32
    assert qc["confounds"].dims == ("volume", "confound")
    assert not qc["scrubbed"].values.any()
    assert qc.attrs["n_dropped"] == N_NSS
    assert qc.attrs["tr"] == pytest.approx(TR)
    assert qc.attrs["n_volumes_acquired"] == N_VOLUMES
    assert qc.attrs["mask_shape"] == list(SHAPE)
    assert qc.attrs["fd_source"] == "confounds table"
    assert qc.attrs["entities"] == {"subject": "01", "task": "rest", "run": "1"}
    assert qc.attrs["source_file"] == str(run["bold"])
    assert qc.attrs["clean_store"] == str(with_confounds["store"])
    assert undescribed(qc) == []
    for name, var in qc.data_vars.items():
        if var.dtype.kind == "f":
            assert np.isfinite(var.values).all(), name


def test_mean_tsnr_global_signal_dvars(run, with_confounds):
    qc = with_confounds["qc"]
    raw = _raw(run)
    t = np.arange(raw.shape[-1])
    for v in (0, 5, 17, qc.sizes["voxel"] - 1):
        y = raw[qc["i"].values[v], qc["j"].values[v], qc["k"].values[v]]
        resid = y - np.polyval(np.polyfit(t, y, 1), t)
        assert qc["mean"].values[v] == pytest.approx(y.mean(), rel=1e-6)
        assert qc["tsnr"].values[v] == pytest.approx(y.mean() / resid.std(ddof=1), rel=1e-6)
    # a constant voxel: tSNR and variance removed 0, not inf or NaN
    const = np.flatnonzero(
        (qc["i"].values == CONSTANT_VOXEL[0])
        & (qc["j"].values == CONSTANT_VOXEL[1])
        & (qc["k"].values == CONSTANT_VOXEL[2])
    )
    assert const.size == 1
    assert qc["tsnr"].values[const[0]] == 0.0
    assert (qc["variance_removed"].values[:, const[0]] == 0.0).all()
    inside = raw[qc["i"].values, qc["j"].values, qc["k"].values]  # (voxel, time)
    np.testing.assert_allclose(qc["global_signal"].values, inside.mean(axis=0), rtol=1e-6)
    percent = 100 * inside / inside.mean(axis=1, keepdims=True)
    expected = np.r_[0.0, np.sqrt((np.diff(percent, axis=1) ** 2).mean(axis=0))]
    np.testing.assert_allclose(qc["dvars"].values, expected, rtol=1e-5)


def test_variance_removed_matches_least_squares(run, with_confounds):
    qc = with_confounds["qc"]
    raw = _raw(run)
    motion = run["table"][MOTION].to_numpy()[N_NSS:]
    wm_csf = run["table"][["white_matter", "csf"]].to_numpy()[N_NSS:]
    removed = qc["variance_removed"]
    for v in (0, 3, 11, 40):
        y = raw[qc["i"].values[v], qc["j"].values[v], qc["k"].values[v]]
        for name, x in (("motion", motion), ("wm_csf", wm_csf)):
            r2 = LinearRegression().fit(x, y).score(x, y)
            assert removed.sel(nuisance_set=name).values[v] == pytest.approx(r2, abs=1e-9)
    values = removed.values
    assert ((values >= 0) & (values <= 1)).all()
    everything = removed.sel(nuisance_set="all").values
    assert (everything >= values - 1e-9).all()
    np.testing.assert_allclose(
        qc["variance_removed_median"].values, np.median(values, axis=1), rtol=1e-12
    )
    # the planted motion explains much more than chance
    assert qc["variance_removed_median"].sel(nuisance_set="motion") > 0.3


def test_variance_explained_small_case():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(31, 3))
    y = x @ rng.normal(size=(3, 5)) + rng.normal(size=(31, 5)) + 100
    y[:, 4] = 7.0
    r2 = variance_explained(y, {"x": x, "none": np.zeros((31, 0)), "first": x[:, :1]}, block=2)
    for v in range(4):
        assert r2[0, v] == pytest.approx(LinearRegression().fit(x, y[:, v]).score(x, y[:, v]))
        first = LinearRegression().fit(x[:, :1], y[:, v]).score(x[:, :1], y[:, v])
        assert r2[2, v] == pytest.approx(first)
    assert (r2[1] == 0).all()
    assert (r2[:, 4] == 0).all()
    mean, tsnr = temporal_snr(y, block=3)
    np.testing.assert_allclose(mean, y.mean(axis=0))
    assert tsnr[4] == 0.0
    with pytest.raises(ValueError, match="must have shape"):
        variance_explained(y, {"x": x[:5]})


def test_framewise_displacement(run, with_confounds, tmp_path):
    motion = run["table"][MOTION].to_numpy()
    hand = _hand_fd(motion)
    np.testing.assert_allclose(power_framewise_displacement(motion), hand, rtol=1e-12)
    qc = with_confounds["qc"]
    np.testing.assert_allclose(qc["framewise_displacement"].values, hand[N_NSS:], rtol=1e-9)
    assert qc["framewise_displacement"].attrs["units"] == "mm"
    # without the table's column, FD is computed from the motion parameters
    table = run["table"].drop(columns="framewise_displacement")
    path = tmp_path / "no_fd.tsv"
    table.to_csv(path, sep="\t", index=False, na_rep="n/a")
    computed = fmri_qc_dataset(
        bold=run["bold"], clean_store=with_confounds["store"], confounds=path
    )
    assert computed.attrs["fd_source"] == "motion parameters"
    np.testing.assert_allclose(
        computed["framewise_displacement"].values, qc["framewise_displacement"].values, rtol=1e-9
    )
    # first row n/a -> 0 when no volume is dropped
    kept_all = fmri_qc_dataset(
        bold=run["bold"],
        clean_store=_clean(run, tmp_path / "all.zarr", {"drop_volumes": 0}),
        confounds=run["confounds"],
        preprocess_config={"drop_volumes": 0},
    )
    assert kept_all["framewise_displacement"].values[0] == 0.0
    np.testing.assert_allclose(kept_all["framewise_displacement"].values, hand, rtol=1e-9)


def test_without_confounds(run, without_confounds):
    qc = without_confounds["qc"]
    assert qc.sizes["confound"] == 0
    assert qc["confounds"].shape == (N_VOLUMES, 0)
    assert "framewise_displacement" not in qc
    assert qc.attrs["fd_source"] == "none"
    assert qc.attrs["n_dropped"] == 0
    assert list(qc["nuisance_set"].values) == ["trends", "cosine_drifts", "all"]
    assert undescribed(qc) == []
    # storable as an artifact
    out = write_dataset(qc, run["bold"].parent / "qc_bare.zarr", provenance=PROV)
    back = open_dataset(out)
    assert back.sizes["confound"] == 0
    np.testing.assert_allclose(back["tsnr"].values, qc["tsnr"].values)


@pytest.mark.parametrize("mode", ["regress", "censor"])
def test_scrubbing(mode, run, tmp_path):
    cfg = {"confounds": {"strategy": ["motion", "scrub"], "fd_threshold": 0.5, "scrub_mode": mode}}
    store = _clean(run, tmp_path / "scrub.zarr", cfg)
    qc = fmri_qc_dataset(
        bold=run["bold"], clean_store=store, confounds=run["confounds"], preprocess_config=cfg
    )
    scrub = next(s for s in open_dataset(store).attrs["steps"] if s["name"] == "scrub")
    flagged = qc["volume"].values[qc["scrubbed"].values]
    assert flagged.tolist() == scrub["volumes"]
    assert set(JUMPS) <= set(flagged.tolist())
    assert qc.attrs["fd_threshold"] == 0.5
    assert qc.attrs["scrub_mode"] == mode
    spikes = [c for c in qc["confound"].values if str(c).startswith("motion_outlier")]
    assert len(spikes) == (flagged.size if mode == "regress" else 0)
    assert ("scrub" in list(qc["nuisance_set"].values)) == (mode == "regress")
    removed = qc["variance_removed"]
    assert (removed.values[-1] >= removed.values - 1e-9).all()
    # the R² is over the volumes the cleaning kept
    keep = ~qc["scrubbed"].values if mode == "censor" else np.ones(qc.sizes["volume"], bool)
    raw = _raw(run)[..., keep]
    motion = run["table"][MOTION].to_numpy()[N_NSS:][keep]
    for v in (2, 30):
        y = raw[qc["i"].values[v], qc["j"].values[v], qc["k"].values[v]]
        r2 = LinearRegression().fit(motion, y).score(motion, y)
        assert removed.sel(nuisance_set="motion").values[v] == pytest.approx(r2, abs=1e-9)


def test_config_mismatch_raises(run, with_confounds):
    with pytest.raises(ValueError, match="must select the confounds"):
        fmri_qc_dataset(
            bold=run["bold"],
            clean_store=with_confounds["store"],
            confounds=run["confounds"],
            preprocess_config={"confounds": {"strategy": "none"}},
        )
    with pytest.raises(ValueError, match="detrending"):
        fmri_qc_dataset(
            bold=run["bold"],
            clean_store=with_confounds["store"],
            confounds=run["confounds"],
            preprocess_config={"detrend_order": 2},
        )


def test_bold_mismatch_raises(run, with_confounds, tmp_path):
    other = _write_run(
        tmp_path / "other",
        np.random.default_rng(1),
        name="sub-01_task-rest_run-2_bold.nii.gz",
        n=N_VOLUMES - 3,
    )
    with pytest.raises(ValueError, match=re.escape(str(other["bold"])) + ".*volumes"):
        fmri_qc_dataset(bold=other["bold"], clean_store=with_confounds["store"])
    img = nib.load(run["bold"])
    small = tmp_path / "small_bold.nii.gz"
    nib.save(nib.Nifti1Image(np.asarray(img.dataobj)[:4], img.affine), small)
    with pytest.raises(ValueError, match=re.escape(str(small)) + ".*grid"):
        fmri_qc_dataset(bold=small, clean_store=with_confounds["store"])
    shifted = tmp_path / "shifted_bold.nii.gz"
    nib.save(nib.Nifti1Image(np.asarray(img.dataobj), img.affine + np.eye(4) * 0.5), shifted)
    with pytest.raises(ValueError, match=re.escape(str(shifted)) + ".*affine"):
        fmri_qc_dataset(bold=shifted, clean_store=with_confounds["store"])


def test_nan_in_kept_voxels_raises(run, with_confounds, tmp_path):
    img = nib.load(run["bold"])
    data = np.asarray(img.dataobj).copy()
    data[2, 3, 2, 10] = np.nan
    path = tmp_path / "nan_bold.nii.gz"
    nib.save(nib.Nifti1Image(data, img.affine), path)
    with pytest.raises(ValueError, match=re.escape(str(path)) + ".*NaN"):
        fmri_qc_dataset(bold=path, clean_store=with_confounds["store"], confounds=run["confounds"])


def test_confound_set():
    assert confound_set("trans_x_derivative1_power2") == "motion"
    assert confound_set("rot_z") == "motion"
    assert confound_set("white_matter_power2") == "wm_csf"
    assert confound_set("csf") == "wm_csf"
    assert confound_set("global_signal_derivative1") == "global_signal"
    assert confound_set("a_comp_cor_03") == "compcor"
    assert confound_set("w_comp_cor_00") == "compcor"
    assert confound_set("motion_outlier02") == "scrub"
    assert confound_set("non_steady_state_outlier00") == "scrub"
    assert confound_set("heart_rate") == "custom"
    assert set(CONFOUND_SETS) >= {"motion", "custom"}


@pytest.mark.parametrize("case", ["with_confounds", "without_confounds"])
def test_figures(case, run, request, tmp_path):
    qc = request.getfixturevalue(case)["qc"]
    paths = fmri_qc_figures(qc, bold=run["bold"], out_dir=tmp_path / "fig", prefix="sub-01_run-1")
    kinds = ["mean", "tsnr", "carpet", "motion", "variance_removed"]
    assert paths == [tmp_path / "fig" / f"sub-01_run-1_qc-{k}.png" for k in kinds]
    for path in paths:
        assert path.stat().st_size > 5_000, path.name
    with pytest.raises(ValueError, match="prefix"):
        fmri_qc_figures(qc, bold=run["bold"], out_dir=tmp_path, prefix="")


def test_map_figures_label_their_colour_bars(run, with_confounds):
    from neuroflow.qc import fmri_figures as qc_fmri

    for kind, label in (("mean", "mean signal"), ("tsnr", "tSNR")):
        fig = qc_fmri._FIGURES[kind](with_confounds["qc"], run["bold"])
        assert fig.axes[-1].get_ylabel().startswith(label), kind


def test_stage_entry_point_writes_store_and_figures(run, with_confounds, tmp_path):
    from neuroflow.qc import qc_fmri_run

    out = tmp_path / "sub-01" / "sub-01_run-1_qc.zarr"
    store, plots = qc_fmri_run(
        bold=run["bold"],
        clean_store=with_confounds["store"],
        confounds=run["confounds"],
        preprocess_config={},
        output=out,
        plots=out.with_suffix(""),
        prefix="sub-01_run-1",
        config={"enabled": True, "dpi": 100},
        provenance={"stage": "qc_fmri", "version": "test"},
    )
    assert store == out and plots == out.with_suffix("")
    kinds = ["mean", "tsnr", "carpet", "motion", "variance_removed"]
    assert sorted(p.name for p in plots.iterdir()) == sorted(
        f"sub-01_run-1_qc-{k}.png" for k in kinds
    )
    written = open_dataset(store)
    np.testing.assert_allclose(written["tsnr"].values, with_confounds["qc"]["tsnr"].values)
    assert list(written["confound"].values) == list(with_confounds["qc"]["confound"].values)


def test_variance_explained_logs_its_progress(rng, caplog):
    import logging

    data = rng.standard_normal((31, 47))
    designs = {"motion": rng.standard_normal((31, 3)), "none": np.zeros((31, 0))}
    whole = variance_explained(data, designs)  # one block
    with caplog.at_level(logging.INFO, logger="neuroflow.progress"):
        r2 = variance_explained(data, designs, block=3)
    np.testing.assert_allclose(r2, whole, rtol=1e-12)
    lines = [r.getMessage() for r in caplog.records if r.name == "neuroflow.progress"]
    assert len(lines) == 10, lines  # a line per 10 % of the voxels
    assert all(line.startswith("QC: variance explained by confounds: ") for line in lines)
    assert all(re.search(r"% \(\d+/47 voxels\), [\d,.]+/s, ", line) for line in lines)
    assert all(" left (" in line for line in lines[:-1]) and ", done (" in lines[-1]
