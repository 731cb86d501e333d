"""The decode_eeg_cross_subject stage on small synthetic epochs stores."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from scipy.stats import ortho_group

from neuroflow.artifacts import open_dataset, write_dataset
from neuroflow.decoding.cross_subject import euclidean_alignment
from neuroflow.decoding.cross_subject_stage import (
    cross_subject_dataset,
    decode_eeg_cross_subject,
    load_units,
    resolve_cross_subject_config,
)
from neuroflow.evaluation.analysis_plotting import plot_cross_subject
from neuroflow.evaluation.analysis_summary import cross_subject_rows
from neuroflow.evaluation.summary import TABLE_COLUMNS, summary_table
from neuroflow.variables import undescribed

CHANNELS = [f"E{i}" for i in range(7)]
TIMES = np.linspace(-0.1, 0.5, 19)
#: Samples of the planted effect (0.1 to 0.3 s).
EFFECT = (TIMES > 0.09) & (TIMES < 0.31)
CFG = {
    "decim": 1,
    "cross_subject": {"window": [0.1, 0.3], "bin_width": 0.1},
}


def _store(
    tmp_path, rng, subject, n, pattern, *, session=None, channels=CHANNELS, extra=0, head=None
):
    """An average-referenced epochs store: the shared effect through the subject's mixing.

    ``n`` epochs alternate between conditions "a" and "b" ("b" carries the effect); ``extra``
    more epochs of condition "c" follow. The store lists ``channels`` (names of
    :data:`CHANNELS` in any order, and others, which hold independent noise). The
    mixing is drawn from ``head`` (a seed: stores of one head share it), else from ``rng``.
    """
    n_ch = len(CHANNELS)
    own = rng if head is None else np.random.default_rng(head)
    rotation = ortho_group.rvs(n_ch, random_state=int(own.integers(1 << 30)))
    mixing = (rotation * np.exp(own.normal(0, 1.0, n_ch))) @ rotation.T
    y = np.r_[np.arange(n) % 2, np.full(extra, 2)]
    sources = rng.standard_normal((y.size, n_ch, TIMES.size))
    sources[np.ix_(y == 1, np.arange(n_ch), np.flatnonzero(EFFECT))] += pattern[:, None]
    data = np.einsum("cd,edt->ect", mixing, sources)
    rows = {name: data[:, i] for i, name in enumerate(CHANNELS)}
    data = np.stack(
        [rows[c] if c in rows else rng.standard_normal(data[:, 0].shape) for c in channels],
        axis=1,
    )
    data -= data.mean(axis=1, keepdims=True)  # average reference: one null direction
    conditions = np.array(["a", "b", "c"], dtype=object)[y]
    ds = xr.Dataset(
        {"epochs": (("epoch", "channel", "time"), (1e-5 * data).astype(np.float32))},
        coords={
            "stimulus": ("epoch", conditions),
            "condition": ("epoch", conditions),
            "channel": np.array(channels, dtype=object),
            "time": TIMES,
        },
        attrs={"entities": {"subject": subject, "session": session}},
    )
    name = f"sub-{subject}" + (f"_ses-{session}" if session else "") + "_epo.zarr"
    return write_dataset(ds, tmp_path / name, provenance={})


def _pattern(rng: np.random.Generator) -> np.ndarray:
    pattern = rng.standard_normal(len(CHANNELS))
    return 3.0 * pattern / np.linalg.norm(pattern)


@pytest.fixture
def stores(tmp_path, rng):
    """Four subjects with uneven numbers of epochs; sub-03 has its channels in another
    order plus one more, sub-02 a third condition."""
    pattern = _pattern(rng)
    return [
        _store(tmp_path, rng, "01", 56, pattern),
        _store(tmp_path, rng, "02", 48, pattern, extra=6),
        _store(tmp_path, rng, "03", 62, pattern, channels=[*CHANNELS[::-1], "E7"]),
        _store(tmp_path, rng, "04", 50, pattern),
    ]


def test_alignment_within_the_span_of_referenced_epochs(rng: np.random.Generator) -> None:
    mixing = rng.standard_normal((6, 6)) + 3 * np.eye(6)
    epochs = np.einsum("cd,edt->ect", mixing, rng.standard_normal((40, 6, 17)))
    epochs -= epochs.mean(axis=1, keepdims=True)
    with pytest.raises(ValueError, match=r"got 1 null direction\(s\).*or pass rank='auto'"):
        euclidean_alignment(epochs)
    aligned, _ = euclidean_alignment(epochs, rank="auto")
    mean_cov = np.einsum("ect,edt->cd", aligned, aligned) / (40 * 17)
    projector = np.eye(6) - np.full((6, 6), 1 / 6)  # the identity on the referenced span
    np.testing.assert_allclose(mean_cov, projector, atol=1e-10)
    with pytest.raises(ValueError, match="`rank` must be 'full' or 'auto', got 'half'"):
        euclidean_alignment(epochs, rank="half")


def test_stage_store_summary_rows_and_figure(tmp_path, stores) -> None:
    out = decode_eeg_cross_subject(
        epochs=stores, output=tmp_path / "cross.zarr", config=CFG, provenance={}
    )
    ds = open_dataset(out)
    assert undescribed(ds) == []
    assert list(ds["held_out"].values) == ["01", "02", "03", "04"]
    assert list(ds["alignment"].values) == ["none", "euclidean"]
    assert list(ds["classifier"].values) == ["epoch_lda"]
    # the shared channels, in the first subject's order; sub-03's extra one is left out
    assert list(ds["channel"].values) == CHANNELS
    assert ds.attrs["dropped_channels"] == ["E7"]
    assert ds.attrs["classes"] == ["a", "b"] and ds.attrs["dropped_classes"] == ["c"]
    assert ds.attrs["cv"] == "leave-one-subject-out" and ds.attrs["held_out_unit"] == "subject"
    assert ds.attrs["window"] == pytest.approx([TIMES[EFFECT][0], TIMES[EFFECT][-1]])
    assert ds["cross_subject_score"].dims == ("held_out", "alignment", "time")
    assert ds["cross_subject_epoch_score"].dims == ("held_out", "alignment", "classifier")
    np.testing.assert_array_equal(ds["cross_subject_chance"].values, 0.5)
    assert list(ds["cross_subject_n_epochs"].values) == [56, 48, 62, 50]
    in_effect = ds["cross_subject_score"].isel(time=EFFECT).mean("time")
    aligned = in_effect.sel(alignment="euclidean").values
    assert aligned.min() > 0.7, aligned  # every held-out subject, well above chance
    outside = ds["cross_subject_score"].sel(alignment="euclidean").isel(time=~EFFECT)
    assert abs(float(outside.mean()) - 0.5) < 0.08
    gain = aligned.mean() - in_effect.sel(alignment="none").values.mean()
    assert gain > 0.05, gain
    whole = ds["cross_subject_epoch_score"].sel(classifier="epoch_lda")
    assert whole.sel(alignment="euclidean").values.min() > 0.7, whole.values
    np.testing.assert_allclose(
        ds["cross_subject_score_mean"].values, ds["cross_subject_score"].mean("held_out").values
    )

    table = summary_table([cross_subject_rows(ds)])
    assert list(table.columns) == list(TABLE_COLUMNS)
    assert set(table["analysis"]) == {"cross_subject_none", "cross_subject_euclidean"}
    assert set(table["model"]) == {"time_resolved", "epoch_lda"}
    group = table[(table["subject"] == "group") & (table["model"] == "epoch_lda")]
    assert set(group["statistic"]) == {"mean"} and set(group["n_subjects"]) == {4}
    (value,) = group[group["analysis"] == "cross_subject_euclidean"]["value"]
    assert value == pytest.approx(float(whole.sel(alignment="euclidean").mean()))
    window = table[
        (table["metric"] == "window_balanced_accuracy") & (table["subject"] == "02")
    ].set_index("analysis")
    assert window.loc["cross_subject_euclidean", "value"] == pytest.approx(aligned[1])
    assert set(window["chance"]) == {0.5}
    latency = table[(table["metric"] == "peak_latency_s") & (table["subject"] == "group")]
    assert all(0.05 < v < 0.35 for v in latency["value"])

    png = plot_cross_subject(
        ds["time"].values,
        {a: ds["cross_subject_score"].sel(alignment=a).values for a in ("none", "euclidean")},
        {a: ds["cross_subject_epoch_score"].sel(alignment=a).values for a in ("none", "euclidean")},
        tmp_path / "plots" / "decoding_cross_subject.png",
        classifiers=["epoch_lda"],
    )
    assert png.stat().st_size > 1000


def test_leave_one_session_out_and_other_classifiers(tmp_path, rng) -> None:
    pattern = _pattern(rng)
    stores = [
        _store(tmp_path, rng, "01", 40, pattern, session="a", head=1),
        _store(tmp_path, rng, "01", 46, pattern, session="b", head=1),
        _store(tmp_path, rng, "01", 42, pattern, session="c", head=1),
        _store(tmp_path, rng, "02", 40, pattern, session="a"),
    ]
    units = load_units(stores, "leave-one-session-out")
    assert [u.label for u in units] == ["01_ses-a", "01_ses-b", "01_ses-c", "02_ses-a"]
    cfg = {
        "decim": 2,
        "cross_subject": {
            "cv": "leave-one-session-out",
            "alignment": "none",
            "classifiers": ["epoch_lda", "tangent_space"],
            "window": None,
            "bin_width": None,
        },
    }
    ds = cross_subject_dataset(units, cfg)
    # sub-02 has one session: nothing to train on, it is left out
    assert list(ds["held_out"].values) == ["01_ses-a", "01_ses-b", "01_ses-c"]
    assert list(ds["session"].values) == ["a", "b", "c"]
    assert ds.attrs["skipped"] == {"02_ses-a": "a single session, nothing to train on"}
    assert list(ds["alignment"].values) == ["none"] and "cross_subject_score" not in ds
    assert list(ds["classifier"].values) == ["epoch_lda", "tangent_space"]
    assert ds.sizes["time"] == TIMES[::2].size
    scores = ds["cross_subject_epoch_score"].values
    assert np.isfinite(scores).all() and scores.min() > 0.55, scores
    rows = cross_subject_rows(ds)
    assert set(rows["analysis"]) == {"cross_session_none"}
    # one row per subject (its sessions averaged) and the group mean
    assert set(rows["subject"]) == {"01", "group"}
    (value,) = rows[(rows["subject"] == "01") & (rows["model"] == "tangent_space")]["value"]
    assert value == pytest.approx(scores[:, 0, 1].mean())


@pytest.mark.parametrize(
    ("cross_subject", "match"),
    [
        ({"cv": "leave-one-run-out"}, r"`decoding.cross_subject.cv` must be one of leave-one-s"),
        ({"alignment": "riemann"}, r"`decoding.cross_subject.alignment` must be one of euc"),
        ({"classifiers": ["svm"]}, r"`decoding.cross_subject.classifiers` must be a non-empty"),
        ({"classifiers": []}, r"`decoding.cross_subject.classifiers` must be a non-empty"),
        ({"target": "trial_type"}, r"`decoding.cross_subject.target` must be 'condition'"),
        ({"window": [0.5, 0.1]}, r"`decoding.cross_subject.window` must be \[tmin, tmax\]"),
        ({"bin_width": 0}, r"`decoding.cross_subject.bin_width` must be a positive number"),
        ({"windows": [0, 1]}, r"Unknown key 'decoding\.cross_subject\.windows'"),
    ],
)  # fmt: skip
def test_config_errors_name_the_key(cross_subject, match) -> None:
    with pytest.raises(ValueError, match=match):
        resolve_cross_subject_config({"cross_subject": cross_subject})


def test_bad_inputs_name_the_stores(tmp_path, rng) -> None:
    pattern = _pattern(rng)
    one = _store(tmp_path, rng, "01", 30, pattern)
    with pytest.raises(ValueError, match=r"at least 2 subjects, got sub-01 only \(stores \["):
        decode_eeg_cross_subject(
            epochs=[one], output=tmp_path / "x.zarr", config=CFG, provenance={}
        )
    other = _store(tmp_path / "b", rng, "02", 30, pattern, channels=["E0", "X1", "X2"])
    with pytest.raises(ValueError, match=r"share at least 2 channels .* got 1 shared channel"):
        decode_eeg_cross_subject(
            epochs=[one, other], output=tmp_path / "x.zarr", config=CFG, provenance={}
        )
    late = xr.open_zarr(_store(tmp_path / "c", rng, "03", 30, pattern)).load()
    late = late.assign_coords(time=TIMES + 0.05)
    moved = write_dataset(late, tmp_path / "c" / "sub-03_moved_epo.zarr", provenance={})
    with pytest.raises(ValueError, match=r"sub-03_moved_epo.zarr: field `time` must match"):
        decode_eeg_cross_subject(
            epochs=[one, moved], output=tmp_path / "x.zarr", config=CFG, provenance={}
        )
    stimulus = {**CFG, "cross_subject": {**CFG["cross_subject"], "target": "stimulus"}}
    only_a = xr.open_zarr(_store(tmp_path / "d", rng, "04", 30, pattern)).load()
    only_a = only_a.assign_coords(stimulus=("epoch", np.full(30, "a", dtype=object)))
    only_a = write_dataset(only_a, tmp_path / "d" / "sub-04_a_epo.zarr", provenance={})
    with pytest.raises(ValueError, match=r"must give at least 2 classes that every held-out"):
        decode_eeg_cross_subject(
            epochs=[one, only_a], output=tmp_path / "x.zarr", config=stimulus, provenance={}
        )
    assert not (tmp_path / "x.zarr").exists()
