"""Identification of held-out stimuli from single-trial betas (``decode_fmri``)."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from neuroflow.artifacts import write_dataset
from neuroflow.decoding.fmri import decode_fmri
from neuroflow.decoding.fmri_identification import identify_stimuli, session_splits


def _world(rng, n_train=60, n_test=9, n_rep=3, n_vox=23, n_feat=5, snr=2.0):
    """Betas that are a linear map of each stimulus's features, plus noise."""
    train = [f"tr{i}" for i in range(n_train)]
    test = [f"te{i}" for i in range(n_test)]
    stimuli = np.array(train + [s for s in test for _ in range(n_rep)])
    F = {s: rng.standard_normal(n_feat) for s in train + test}
    W = rng.standard_normal((n_feat, n_vox))
    X = np.stack([F[s] @ W for s in stimuli]) * snr + rng.standard_normal((len(stimuli), n_vox))
    return X, stimuli, np.stack([F[s] for s in stimuli]), np.isin(stimuli, test)


def test_planted_map_is_identified(rng):
    X, stim, F, test = _world(rng)
    kw = {"alphas": [0.1, 1.0, 10.0, 100.0], "n_splits": 5, "standardize": True, "seed": 0}
    res = identify_stimuli(X, stim, F, test, top_k=[1, 5], n_permutations=200, **kw)
    top1, top5, rank = res["metrics"][0]
    assert res["decoders"] == ["ridge"] and res["n_test"] == 9
    assert top1 > 0.6 and top5 == 1.0 and rank < 2.0
    assert res["chance"][0] == pytest.approx(1 / 9)
    # 9 test stimuli in a row: 8 rotations and 9 reflections of their order, the
    # smallest p is 1 / 18; the null's other rows are NaN
    assert res["p"][0, 0] == pytest.approx(1 / 18)
    assert np.isfinite(res["null"][0, :, 2]).sum() == 17 and np.isnan(res["null"][0, 17:]).all()
    # features unrelated to the responses: chance
    shuffled = rng.permutation(F)
    res = identify_stimuli(X, stim, shuffled, test, top_k=[1, 20], n_permutations=200, **kw)
    assert res["p"][0, 0] > 0.01
    assert np.isnan(res["metrics"][0, 1])  # top-20 of 9 test stimuli is undefined


def test_stage_per_roi(tmp_path, rng):
    X, stim, F, _ = _world(rng, n_vox=20, n_test=12)  # 12 in a row: p down to 1 / 24
    X[:, 10:] = rng.standard_normal((len(stim), 10))  # the second ROI carries nothing
    betas = xr.Dataset(
        {"betas": (("trial", "voxel"), X.astype(np.float32))},
        coords={
            "stimulus": ("trial", np.array(stim, dtype=object)),
            "roi": ("voxel", np.array(["v1"] * 10 + ["other"] * 10, dtype=object)),
        },
        attrs={"entities": {"subject": "07"}},
    )
    store = write_dataset(betas, tmp_path / "betas.zarr", provenance={})
    unique, first = np.unique(stim, return_index=True)
    feats = xr.Dataset(
        {"features": (("stimulus", "feature"), F[first])},
        coords={"stimulus": ("stimulus", np.array(unique, dtype=object))},
        attrs={"feature_set": "planted"},
    )
    fstore = write_dataset(feats, tmp_path / "f.zarr", provenance={})
    config = {
        "identification": {"n_permutations": 100, "top_k": [1, 5]},
        "contrastive": {"max_epochs": 150, "lr": 0.01},
    }
    out = decode_fmri(
        brain=[store], features={"planted": fstore}, output=tmp_path / "o.zarr", config=config,
        provenance={},
    )  # fmt: skip
    ds = xr.open_zarr(out)
    assert list(ds["roi"].values) == ["other", "v1", "all"]
    p = ds["identification_p"].sel(subject="07", feature_space="planted", metric="top1")
    assert list(ds["decoder"].values) == ["ridge", "contrastive"]
    assert (p.sel(roi="v1") < 0.05).all() and (p.sel(roi="other") > 0.05).all()
    assert ds.attrs["patterns"] == "trials" and "concept_map" not in ds
    with pytest.raises(ValueError, match="must name at least one feature store"):
        decode_fmri(
            brain=[store], features={}, output=tmp_path / "x.zarr", config={}, provenance={}
        )


def _movie_runs(tmp_path, rng, *, n_runs=4, n_events=37, tr=1.0, n_vox=(11, 14)):
    """Run stores of a block movie: ROI ``sig`` holds each shot's features and concept,
    ROI ``noise`` nothing; every event lasts 6 s, responses are box-shaped after 3 s.

    Returns the store paths, the features store and the annotation table.
    """
    n_feat, concepts = 6, ["dog", "cat", "car"]
    shots = [f"shots/s{i:03d}.png" for i in range(n_runs * n_events)]
    feats = {s: rng.standard_normal(n_feat) for s in shots}
    label = {s: concepts[i % 3] for i, s in enumerate(rng.permutation(shots))}
    concept_axis = {c: 1.5 * rng.standard_normal(n_vox[0]) for c in concepts}
    W = rng.standard_normal((n_feat, n_vox[0]))
    paths = []
    for r in range(n_runs):
        ids = shots[r * n_events : (r + 1) * n_events]
        onsets = np.arange(n_events) * 6.0
        n_t = int(onsets[-1] + 12)
        t = np.arange(n_t) * tr
        bold = rng.standard_normal((n_t, sum(n_vox))).astype(np.float32)
        for s, on in zip(ids, onsets, strict=True):
            inside = (t >= on + 3) & (t < on + 9)
            bold[inside, : n_vox[0]] += feats[s] @ W + concept_axis[label[s]]
        ds = xr.Dataset(
            {
                "bold": (("time", "voxel"), bold),
                "event_onset": (("event",), onsets),
                "event_duration": (("event",), np.full(n_events, 6.0)),
                "stim_file": (("event",), np.array(ids, dtype=object)),
                "trial_type": (("event",), np.array(["shot"] * n_events, dtype=object)),
            },
            coords={
                "time": t,
                "roi": ("voxel", np.array(["sig"] * n_vox[0] + ["noise"] * n_vox[1], dtype=object)),
            },
            attrs={"entities": {"subject": "03", "run": str(r + 1)}, "tr": tr},
        )
        paths.append(write_dataset(ds, tmp_path / f"run-{r + 1}.zarr", provenance={}))
    fstore = write_dataset(
        xr.Dataset(
            {"features": (("stimulus", "feature"), np.stack([feats[s] for s in shots]))},
            coords={"stimulus": ("stimulus", np.array(shots, dtype=object))},
            attrs={"feature_set": "planted"},
        ),
        tmp_path / "f.zarr",
        provenance={},
    )
    table = tmp_path / "concepts.tsv"
    table.write_text("stim_file\tconcepts\n" + "".join(f"{s}\t{label[s]};shot\n" for s in shots))
    return paths, fstore, table


def test_events_of_runs_identify_and_decode_concepts(tmp_path, rng):
    paths, fstore, table = _movie_runs(tmp_path, rng)
    config = {
        "identification": {"n_permutations": 99, "top_k": [1, 5]},
        "contrastive": {"enabled": False},
        "fmri": {"hrf_lag": 3.0, "concepts": {"n_permutations": 99, "min_count": 3}},
    }
    out = decode_fmri(
        brain=paths,
        features={"planted": fstore},
        output=tmp_path / "o.zarr",
        config=config,
        provenance={},
        patterns="events",
        concepts=table,
    )
    ds = xr.open_zarr(out)
    assert ds.attrs["patterns"] == "events" and ds.attrs["concept_folds"] == {"03": "run"}
    # no repeats: a seeded fifth of the shots is held out
    assert int(ds["n_test_stimuli"].sel(subject="03")) == round(0.2 * 4 * 37)
    rank = ds["identification"].sel(subject="03", feature_space="planted", metric="mean_rank")
    chance = float(
        ds["identification_chance"].sel(
            subject="03", roi="sig", feature_space="planted", metric="mean_rank"
        )
    )
    assert float(rank.sel(roi="sig", decoder="ridge")) < 0.3 * chance
    assert 0.7 * chance < float(rank.sel(roi="noise", decoder="ridge")) < 1.3 * chance
    # "shot" labels every stimulus: no negatives, left out
    assert sorted(ds["concept"].values) == ["car", "cat", "dog"]
    auc = ds["concept_auc"].sel(subject="03")
    assert (auc.sel(roi="sig") > 0.9).all()
    assert abs(float(ds["concept_mean_auc"].sel(subject="03", roi="noise")) - 0.5) < 0.15
    assert float(ds["concept_map_p"].sel(subject="03", roi="sig")) == pytest.approx(0.01)
    assert float(ds["concept_map_chance"].sel(subject="03")) == pytest.approx(1 / 3, abs=0.01)
    # summary rows: ridge identification and the concept means, with chance levels
    from neuroflow.evaluation.analysis_summary import fmri_decoding_rows

    rows = fmri_decoding_rows(ds)
    concept = rows[rows["analysis"] == "concept_decoding_fmri"]
    assert set(concept["metric"]) == {"mean_auc", "mean_average_precision"}
    assert set(concept["roi"]) == {"sig", "noise", "all"}
    assert (concept[concept["metric"] == "mean_auc"]["chance"] == 0.5).all()
    assert set(rows["analysis"]) == {"identification_fmri", "concept_decoding_fmri"}


def test_concepts_only_and_bad_inputs(tmp_path, rng):
    paths, fstore, table = _movie_runs(tmp_path, rng, n_runs=2, n_events=25)
    config = {"fmri": {"hrf_lag": 3.0, "concepts": {"n_permutations": 0, "min_count": 3}}}
    out = decode_fmri(
        brain=paths, features={}, output=tmp_path / "c.zarr", config=config,
        provenance={}, patterns="events", concepts=table,
    )  # fmt: skip
    ds = xr.open_zarr(out)
    assert "identification" not in ds and ds["concept_auc"].sizes["concept"] == 3
    assert np.isnan(ds["concept_map_p"]).all()  # no permutations, no p-values
    with pytest.raises(ValueError, match="must name at least one feature store"):
        decode_fmri(
            brain=paths, features={}, output=tmp_path / "x.zarr", config=config,
            provenance={}, patterns="events",
        )  # fmt: skip
    bad = tmp_path / "bad.tsv"
    bad.write_text("stim_file\tlabel\nshots/s000.png\tdog\n")
    with pytest.raises(ValueError, match=r"bad.tsv: the annotation table must have a `concept`"):
        decode_fmri(
            brain=paths, features={}, output=tmp_path / "y.zarr", config=config,
            provenance={}, patterns="events", concepts=bad,
        )  # fmt: skip
    nan = xr.open_zarr(paths[0]).load()
    nan["bold"][3, 2] = np.nan
    broken = write_dataset(nan, tmp_path / "nan.zarr", provenance={})
    with pytest.raises(ValueError, match=r"nan.zarr: field `bold` must be finite"):
        decode_fmri(
            brain=[broken, paths[1]], features={"planted": fstore}, output=tmp_path / "z.zarr",
            config=config, provenance={}, patterns="events",
        )  # fmt: skip
    assert not (tmp_path / "z.zarr").exists()


def _parcel_subjects(tmp_path, rng, n_subjects=3, n_parcels=17, n_shots=90):
    """Parcel time series of one movie seen by every subject: the first 8 parcels carry
    the same feature map in every subject (with its own offset and scale), the rest noise.
    """
    n_feat = 5
    shots = [f"shots/p{i:03d}.png" for i in range(n_shots)]
    feats = {s: rng.standard_normal(n_feat) for s in shots}
    W = rng.standard_normal((n_feat, 8))
    names = np.array([f"parcel_{k:02d}" for k in range(n_parcels)], dtype=object)
    paths = []
    for sub in range(n_subjects):
        order = rng.permutation(n_parcels)  # parcels stored in another order per subject
        onsets = np.arange(n_shots) * 4.0
        t = np.arange(int(onsets[-1] + 8))
        bold = rng.standard_normal((len(t), n_parcels))
        for s, on in zip(shots, onsets, strict=True):
            inside = (t >= on + 2) & (t < on + 6)
            bold[inside, :8] += 1.5 * feats[s] @ W
        bold = bold * rng.uniform(1, 20, n_parcels) + rng.uniform(-50, 50, n_parcels)
        ds = xr.Dataset(
            {
                "bold": (("time", "voxel"), bold[:, order].astype(np.float32)),
                "event_onset": (("event",), onsets),
                "event_duration": (("event",), np.full(n_shots, 4.0)),
                "stim_file": (("event",), np.array(shots, dtype=object)),
            },
            coords={"time": t.astype(float), "roi": ("voxel", names[order])},
            attrs={"entities": {"subject": f"0{sub + 1}"}, "target_kind": "parcel"},
        )
        paths.append(write_dataset(ds, tmp_path / f"sub-{sub + 1}.zarr", provenance={}))
    fstore = write_dataset(
        xr.Dataset(
            {"features": (("stimulus", "feature"), np.stack([feats[s] for s in shots]))},
            coords={"stimulus": ("stimulus", np.array(shots, dtype=object))},
        ),
        tmp_path / "f.zarr",
        provenance={},
    )
    return paths, fstore


def test_leave_one_subject_out_on_shared_parcels(tmp_path, rng):
    paths, fstore = _parcel_subjects(tmp_path, rng)
    config = {
        "identification": {"n_permutations": 99, "top_k": [1, 5]},
        "contrastive": {"enabled": False},
        "fmri": {"hrf_lag": 2.0, "cv": "leave-one-subject-out"},
    }
    out = decode_fmri(
        brain=paths, features={"planted": fstore}, output=tmp_path / "o.zarr",
        config=config, provenance={}, patterns="events",
    )  # fmt: skip
    ds = xr.open_zarr(out)
    assert ds.attrs["cv"] == "leave-one-subject-out" and ds.attrs["shared_targets"] == 17
    assert list(ds["roi"].values) == ["all"]  # parcels: only all of them together
    rank = ds["identification"].sel(roi="all", metric="mean_rank", decoder="ridge")
    chance = float(ds["identification_chance"].sel(metric="mean_rank").max())
    # every held-out subject is identified by a decoder of the other subjects
    assert (rank < 0.5 * chance).all(), rank.values
    assert (ds["identification_p"].sel(roi="all", metric="mean_rank") < 0.05).all()
    # within subject works on the same data; a subject alone cannot be left out
    within = decode_fmri(
        brain=paths, features={"planted": fstore}, output=tmp_path / "w.zarr",
        config={**config, "fmri": {"hrf_lag": 2.0}}, provenance={}, patterns="events",
    )  # fmt: skip
    assert xr.open_zarr(within).attrs["cv"] == "within-subject"
    with pytest.raises(ValueError, match=r"leave-one-subject-out` needs 2\+ subjects, got 1"):
        decode_fmri(
            brain=paths[:1], features={"planted": fstore}, output=tmp_path / "x.zarr",
            config=config, provenance={}, patterns="events",
        )  # fmt: skip
    voxels = xr.open_zarr(paths[0]).load()
    voxels.attrs["target_kind"] = "voxel"
    bad = write_dataset(voxels, tmp_path / "vox.zarr", provenance={})
    with pytest.raises(ValueError, match=r"vox.zarr: `decoding.fmri.cv: leave-one-subject-out`"):
        decode_fmri(
            brain=[bad, paths[1]], features={"planted": fstore}, output=tmp_path / "y.zarr",
            config=config, provenance={}, patterns="events",
        )  # fmt: skip


def test_concepts_of_other_stimuli_are_skipped_not_fatal(tmp_path, rng, caplog):
    """An annotation table naming none of the decoded stimuli (e.g. frames of a movie)."""
    paths, fstore, _ = _movie_runs(tmp_path, rng, n_runs=2, n_events=25)
    other = tmp_path / "other.tsv"
    other.write_text("stim_file\tconcept\nimages/a.png\tdog\nimages/b.png\tcat\n")
    config = {
        "identification": {"n_permutations": 9},
        "contrastive": {"enabled": False},
        "fmri": {"hrf_lag": 3.0},
    }
    with caplog.at_level("WARNING"):
        out = decode_fmri(
            brain=paths, features={"planted": fstore}, output=tmp_path / "o.zarr",
            config=config, provenance={}, patterns="events", concepts=other,
        )  # fmt: skip
    ds = xr.open_zarr(out)
    assert "identification" in ds and "concept_auc" not in ds
    assert "sub-03: concept decoding skipped, none of its 50 decoded stimuli" in caplog.text


def test_session_splits_hold_out_session_and_stimulus():
    stimuli = np.array(["a", "b", "c", "a", "d", "b", "e", "a", "f", "b", "g", "h"])
    sessions = np.array(["1", "1", "1", "2", "2", "2", "2", "3", "3", "3", "3", "3"])
    splits = session_splits(stimuli, sessions)
    assert list(splits) == ["1", "2", "3"]
    test_ids = {"a", "b"}  # the most-presented stimuli, at most half of all
    for ses, (train, test) in splits.items():
        assert set(stimuli[test]) <= test_ids and (sessions[test] == ses).all()
        assert not set(stimuli[train]) & test_ids and not (sessions[train] == ses).any()
    np.testing.assert_array_equal(splits["1"][1], [True, True, *[False] * 10])
    np.testing.assert_array_equal(stimuli[splits["1"][0]], ["d", "e", "f", "g", "h"])
    assert session_splits(stimuli, np.full(stimuli.size, "1")) == {}
    with pytest.raises(ValueError, match=r"one label per presentation \(12\), got 3 instead"):
        session_splits(stimuli, sessions[:3])


def _session_trials(tmp_path, rng, n_train=(41, 37), n_test=12, n_rep=4, n_vox=(12, 9)):
    """A single-trial store of two sessions: ROI ``v1`` maps each stimulus's features
    (with a session offset and scale), ROI ``other`` is noise; the test stimuli are
    shown ``n_rep`` times across both sessions, the others once."""
    n_feat = 5
    test = [f"te{i}" for i in range(n_test)]
    train = [[f"s{k}_tr{i}" for i in range(n)] for k, n in enumerate(n_train)]
    F = {s: rng.standard_normal(n_feat) for s in test + train[0] + train[1]}
    W = rng.standard_normal((n_feat, n_vox[0]))
    stim, runs, rows = [], [], []
    for k in range(2):
        shown = train[k] + [t for t in test for _ in range(n_rep // 2)]
        shown = list(rng.permutation(shown))
        x = rng.standard_normal((len(shown), sum(n_vox)))
        x[:, : n_vox[0]] += 2.0 * np.stack([F[s] for s in shown]) @ W
        rows.append(x * (1 + k) + 5.0 * k)  # a session's own scale and offset
        stim += shown
        runs += [f"ses-0{k + 1}_task-img_run-{1 + i % 2}" for i in range(len(shown))]
    betas = xr.Dataset(
        {"betas": (("trial", "voxel"), np.concatenate(rows).astype(np.float32))},
        coords={
            "stimulus": ("trial", np.array(stim, dtype=object)),
            "run": ("trial", np.array(runs, dtype=object)),
            "roi": ("voxel", np.array(["v1"] * n_vox[0] + ["other"] * n_vox[1], dtype=object)),
        },
        attrs={"entities": {"subject": "05"}},
    )
    store = write_dataset(betas, tmp_path / "betas.zarr", provenance={})
    ids = sorted(F)
    fstore = write_dataset(
        xr.Dataset(
            {"features": (("stimulus", "feature"), np.stack([F[s] for s in ids]))},
            coords={"stimulus": ("stimulus", np.array(ids, dtype=object))},
        ),
        tmp_path / "f.zarr",
        provenance={},
    )
    return store, fstore


def test_leave_one_session_out_on_single_trials(tmp_path, rng):
    store, fstore = _session_trials(tmp_path, rng)
    config = {
        "identification": {"n_permutations": 99, "top_k": [1, 5]},
        "contrastive": {"enabled": False},
        "fmri": {"cv": "leave-one-session-out"},
    }
    out = decode_fmri(
        brain=[store], features={"planted": fstore}, output=tmp_path / "o.zarr",
        config=config, provenance={},
    )  # fmt: skip
    ds = xr.open_zarr(out).load()
    assert ds.attrs["cv"] == "leave-one-session-out" and ds.attrs["held_out_unit"] == "session"
    assert list(ds["session"].values) == ["01", "02"]
    assert ds["identification_session"].dims == (
        "subject", "session", "roi", "feature_space", "decoder", "metric"
    )  # fmt: skip
    assert list(ds["n_test_stimuli_session"].sel(subject="05").values) == [12, 12]
    assert int(ds["n_test_stimuli"].sel(subject="05")) == 24
    sessions = ds["identification_session"].sel(subject="05", decoder="ridge")
    # the subject's score is the mean of its held-out sessions' scores
    np.testing.assert_allclose(
        ds["identification"].sel(subject="05", decoder="ridge"), sessions.mean("session")
    )
    p = ds["identification_session_p"].sel(subject="05", decoder="ridge", metric="mean_rank")
    assert (p.sel(roi="v1") < 0.05).all(), p.values
    # the smallest p: 23 rotations and reflections of 12 test stimuli in a row
    p_mean = ds["identification_p"].sel(roi="v1", metric="mean_rank")
    np.testing.assert_allclose(p_mean, 1 / 24)
    assert (ds["identification_p"].sel(roi="other", metric="mean_rank") > 0.05).all()
    rank = sessions.sel(roi="v1", metric="mean_rank", feature_space="planted")
    chance = ds["identification_chance"].sel(roi="v1", metric="mean_rank").max()
    assert (rank < 0.6 * float(chance)).all(), (rank.values, float(chance))


def test_leave_one_session_out_on_runs_and_without_sessions(tmp_path, rng, caplog):
    paths, fstore, _ = _movie_runs(tmp_path, rng, n_runs=4, n_events=31)
    config = {
        "identification": {"n_permutations": 49, "top_k": [1]},
        "contrastive": {"enabled": False},
        "fmri": {"hrf_lag": 3.0, "cv": "leave-one-session-out"},
    }
    with pytest.raises(ValueError, match=r"run-1.zarr: `decoding.fmri.cv: leave-one-session-out`"):
        decode_fmri(
            brain=paths, features={"planted": fstore}, output=tmp_path / "x.zarr",
            config=config, provenance={}, patterns="events",
        )  # fmt: skip
    assert not (tmp_path / "x.zarr").exists()
    sessioned = []
    for k, path in enumerate(paths):
        ds = xr.open_zarr(path).load()
        ds.attrs["entities"] = {**ds.attrs["entities"], "session": "ab"[k // 2]}
        sessioned.append(write_dataset(ds, tmp_path / f"ses-{k}.zarr", provenance={}))
    with caplog.at_level("INFO"):
        out = decode_fmri(
            brain=sessioned, features={"planted": fstore}, output=tmp_path / "o.zarr",
            config=config, provenance={}, patterns="events",
        )  # fmt: skip
    ds = xr.open_zarr(out)
    assert list(ds["session"].values) == ["a", "b"]
    n_test = ds["n_test_stimuli_session"].sel(subject="03").values
    assert n_test.sum() == int(ds["n_test_stimuli"].sel(subject="03")) and (n_test >= 2).all()
    p = ds["identification_session_p"].sel(subject="03", roi="sig", metric="top1")
    assert (p < 0.05).all(), p.values
    assert (ds["identification_p"].sel(roi="noise", metric="top1") > 0.05).all()


def test_group_rows_of_identification_and_concepts(rng):
    """Group means per ROI, with a one-sided t-test of the subjects' scores beyond chance."""
    from scipy.stats import ttest_1samp

    from neuroflow.evaluation.analysis_summary import fmri_decoding_rows, group_t_test

    subjects, rois, metrics = ["01", "02", "03", "04"], ["v1", "all"], ["top1", "mean_rank"]
    ident = rng.uniform(0.1, 0.5, (4, 2, 1, 1, 2))
    ident[1, 0] = np.nan  # a region subject 02 lacks
    chance = np.broadcast_to([0.1, 10.5], (4, 2, 1, 2)).copy()
    auc = 0.5 + 0.05 * rng.standard_normal((4, 2))
    ds = xr.Dataset(
        {
            "identification": (("subject", "roi", "feature_space", "decoder", "metric"), ident),
            "identification_p": (("subject", "roi", "feature_space", "decoder", "metric"), ident),
            "identification_chance": (("subject", "roi", "feature_space", "metric"), chance),
            "concept_mean_auc": (("subject", "roi"), auc),
            "concept_mean_auc_p": (("subject", "roi"), auc),
            "concept_map": (("subject", "roi"), auc - 0.2),
            "concept_map_p": (("subject", "roi"), auc),
            "concept_map_chance": (("subject",), np.full(4, 0.3)),
        },
        coords={
            "subject": subjects, "roi": rois, "feature_space": ["vis:late"],
            "decoder": ["ridge"], "metric": metrics,
        },
    )  # fmt: skip
    rows = fmri_decoding_rows(ds)
    group = rows[rows["subject"] == "group"].set_index(["analysis", "roi", "metric"])
    assert (group["statistic"] == "mean").all() and len(group) == 2 * 2 + 2 * 2
    top1 = group.loc[("identification_fmri", "v1", "top1")]
    values = ident[[0, 2, 3], 0, 0, 0, 0]
    assert top1["n_subjects"] == 3 and top1["value"] == pytest.approx(values.mean())
    assert top1["chance"] == pytest.approx(0.1)
    expected = ttest_1samp(values - 0.1, 0.0, alternative="greater").pvalue
    assert top1["p_value"] == pytest.approx(expected)
    rank = group.loc[("identification_fmri", "all", "mean_rank")]  # lower is better
    expected = ttest_1samp(10.5 - ident[:, 1, 0, 0, 1], 0.0, alternative="greater").pvalue
    assert rank["n_subjects"] == 4 and rank["p_value"] == pytest.approx(expected)
    assert rank["p_value"] < 1e-4  # mean ranks far below chance are far better
    auc_row = group.loc[("concept_decoding_fmri", "v1", "mean_auc")]
    expected = ttest_1samp(auc[:, 0] - 0.5, 0.0, alternative="greater").pvalue
    assert auc_row["chance"] == 0.5 and auc_row["p_value"] == pytest.approx(expected)
    assert np.isnan(group.loc[("concept_decoding_fmri", "v1", "mean_average_precision")]["p_value"])
    assert np.isnan(group_t_test(np.array([0.2, np.nan])))  # one subject: no test
    assert np.isnan(group_t_test(np.array([0.2, 0.2, 0.2])))  # no spread: no test


def test_identification_logs_its_progress(tmp_path, rng, caplog):
    import logging
    import re

    X, stim, F, _ = _world(rng, n_train=30, n_test=6, n_vox=16)
    rois = np.array(["v1", "v2", "v3", "v4"] * 4, dtype=object)
    betas = xr.Dataset(
        {"betas": (("trial", "voxel"), X.astype(np.float32))},
        coords={"stimulus": ("trial", np.array(stim, dtype=object)), "roi": ("voxel", rois)},
        attrs={"entities": {"subject": "03"}},
    )
    store = write_dataset(betas, tmp_path / "betas.zarr", provenance={})
    unique, first = np.unique(stim, return_index=True)
    spaces = {}
    for name, cols in (("a", slice(0, 3)), ("b", slice(2, 5))):
        feats = xr.Dataset(
            {"features": (("stimulus", "feature"), F[first][:, cols])},
            coords={"stimulus": ("stimulus", np.array(unique, dtype=object))},
        )
        spaces[name] = write_dataset(feats, tmp_path / f"{name}.zarr", provenance={})
    config = {"identification": {"n_permutations": 5}, "contrastive": {"enabled": False}}
    with caplog.at_level(logging.INFO, logger="neuroflow.progress"):
        decode_fmri(
            brain=[store], features=spaces, output=tmp_path / "o.zarr", config=config,
            provenance={},
        )  # fmt: skip
    lines = [r.getMessage() for r in caplog.records if r.name == "neuroflow.progress"]
    lines = [line for line in lines if line.startswith("sub-03: stimulus identification: ")]
    # 5 regions (4 ROIs and all voxels) x 2 feature spaces, each a tenth of the job
    assert len(lines) == 10, lines
    assert all(re.search(r"% \(\d+/10 region x feature space\), [\d,.]+/s, ", s) for s in lines)
    assert all(" left (" in line for line in lines[:-1]) and ", done (" in lines[-1]
