"""The layer × ROI table of a sweep chooses each ROI's layer on training data only, and sets
encoding and RSA side by side per ROI."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from neuroflow.evaluation.layer_agreement import (
    ALIGNMENT_COLUMNS,
    metric_agreement,
    plot_metric_agreement,
)
from neuroflow.evaluation.layer_sweep import (
    LAYER_SWEEP_COLUMNS,
    N_SELECTION_BOOTSTRAPS,
    SELECTED_LAYER,
    analysis_sweep_table,
    best_layer_frequencies,
    choose_best_layers,
    encoding_sweep_table,
    plot_layer_sweep,
    stage_of,
)

LAYERS = ["blocks.0", "blocks.4", "avg-pooling"]
SWEEP = [
    {
        "sweep": "cnn",
        "model": f"cnn__{i}",
        "extractor": "effnet",
        "layer": layer,
        "position": i,
        "depth": i / 2,
    }
    for i, layer in enumerate(LAYERS)
]
ROI = np.array(["early"] * 5 + ["late"] * 7 + [""] * 3, dtype=object)


def _store(model, subject, r_by_roi, cv_by_roi, rng):
    r = np.zeros(ROI.size)
    cv = np.zeros(ROI.size)
    for roi, value in r_by_roi.items():
        r[roi == ROI] = value + 0.01 * rng.standard_normal((roi == ROI).sum())
    for roi, value in cv_by_roi.items():
        cv[roi == ROI] = value
    return xr.Dataset(
        {"r": ("voxel", r), "cv_score": ("voxel", cv)},
        coords={"roi": ("voxel", ROI)},
        attrs={"model": model, "subject": subject},
    )


@pytest.fixture
def stores(rng):
    out = []
    # test r peaks at blocks.4 for `early` and at the last layer for `late`; the training
    # cross-validation agrees for `late` but prefers blocks.0 for `early` in subject 02
    late_cv = [0.0, 0.1, 0.4]
    early_cv = {"01": [0.1, 0.3, 0.2], "02": [0.5, 0.3, 0.2]}
    cv = {
        subject: [{"early": e, "late": x} for e, x in zip(values, late_cv, strict=True)]
        for subject, values in early_cv.items()
    }
    test = [{"early": 0.2, "late": 0.05}, {"early": 0.4, "late": 0.1}, {"early": 0.3, "late": 0.5}]
    for subject in ("01", "02"):
        for layer, model in enumerate(s["model"] for s in SWEEP):
            ds = _store(model, subject, test[layer], cv[subject][layer], rng)
            out.append(("evaluation", f"results/evaluation/{model}-0123456789/sub-{subject}", ds))
    other = _store("visual", "01", {"early": 0.9}, {"early": 0.9}, rng)
    out.append(("evaluation", "results/evaluation/visual-0123456789/sub-01", other))
    return out


def _best(table, subject, roi, stage="evaluation"):
    rows = table[(table["stage"] == stage) & (table["subject"] == subject) & (table["roi"] == roi)]
    best = rows[rows["best"]]
    assert len(best) == 1
    return best.iloc[0]


def test_best_layer_follows_the_training_score_not_the_test_score(stores):
    table = encoding_sweep_table(stores, SWEEP)
    assert tuple(table.columns) == LAYER_SWEEP_COLUMNS
    assert set(table["subject"]) == {"01", "02", "group"}  # the other model is ignored
    assert set(table["metric"]) == {"r"}
    # (2 subjects + group) x 3 layers x ROIs early, late and all, + 3 `selected` rows
    assert len(table) == 3 * 3 * 3 + 3
    assert _best(table, "01", "early")["layer"] == "blocks.4"
    assert _best(table, "02", "early")["layer"] == "blocks.0"  # not the test-best layer
    assert _best(table, "02", "late")["layer"] == "avg-pooling"
    group = _best(table, "group", "early")
    # training means 0.3, 0.3, 0.2: a tie goes to the earlier layer
    assert group["layer"] == "blocks.0" and group["n_subjects"] == 2
    np.testing.assert_allclose(group["selection_score"], 0.3)
    late = table[
        (table["subject"] == "group") & (table["roi"] == "late") & (table["layer"] != "selected")
    ]
    np.testing.assert_allclose(late["score"], [0.05, 0.1, 0.5], atol=0.01)
    np.testing.assert_allclose(late["depth"], [0.0, 0.5, 1.0])
    # the honest "best layer" figure: the mean test r at each subject's own choice
    selected = table[(table["layer"] == SELECTED_LAYER) & (table["roi"] == "early")].iloc[0]
    np.testing.assert_allclose(selected["score"], (0.4 + 0.2) / 2, atol=0.01)
    assert selected["subject"] == "group" and selected["n_subjects"] == 2
    n = table[(table["subject"] == "01") & (table["roi"] == "all")]["n_targets"]
    assert (n == ROI.size).all()
    assert set(table["selected_on"]) == {"cross-validation on the training runs"}


def _summary(values):
    """Summary-table rows of an RSA analysis: values[subject][layer] per ROI."""
    rows = []
    for subject, per_layer in values.items():
        for layer, score in per_layer.items():
            label = f"cnn:{layer}" if layer != "last" else "cnn"
            for roi, shift in (("V1", 0.0), ("IT", 0.1)):
                # RSA rows name the extractor and keep "<extractor>:<layer>" in `layer`;
                # identification rows keep it in `feature_space`
                common = {"subject": subject, "roi": roi, "statistic": "value"}
                rows.append(
                    {
                        **common,
                        "analysis": "rsa",
                        "metric": "spearman",
                        "value": score + shift,
                        "feature_space": "cnn",
                        "layer": label,
                    }
                )
                rows.append(
                    {
                        **common,
                        "analysis": "identification_fmri",
                        "metric": "top1",
                        "value": 2 * score + shift,
                        "feature_space": label,
                        "layer": "",
                    }
                )
    # rows that form no sweep: a one-layer extractor, a rank metric, group rows
    rows.append({**rows[0], "feature_space": "minilm", "layer": "minilm"})
    rows.append({**rows[0], "metric": "mean_rank"})
    rows.append({**rows[0], "subject": "group", "statistic": "mean"})
    return pd.DataFrame(rows)


def test_analysis_layers_are_chosen_on_the_other_subjects():
    order = {"cnn": ["a", "b", "c", "last"], "minilm": ["embedding"]}
    values = {
        "01": {"a": 0.1, "b": 0.5, "last": 0.2},
        "02": {"a": 0.2, "b": 0.1, "last": 0.3},
        "03": {"a": 0.3, "b": 0.4, "last": 0.1},
    }
    both = analysis_sweep_table(_summary(values), order)
    assert set(both["stage"]) == {"rsa", "identification_fmri"}
    assert set(both["extractor"]) == {"cnn"}
    ident = both[(both["stage"] == "identification_fmri") & (both["layer"] != SELECTED_LAYER)]
    assert set(ident["metric"]) == {"top1"} and len(ident) == 3 * 2 * (3 + 1)
    table = both[both["stage"] == "rsa"]
    assert set(table["metric"]) == {"spearman"}
    # depth among the compared layers (c was not compared)
    v1 = table[(table["subject"] == "01") & (table["roi"] == "V1")]
    assert v1["layer"].tolist() == ["a", "b", "last"]
    np.testing.assert_allclose(v1["depth"], [0.0, 0.5, 1.0])
    # subject 01's selection: the mean of 02 and 03 per layer (0.25, 0.25, 0.2)
    np.testing.assert_allclose(v1["selection_score"], [0.25, 0.25, 0.2])
    assert _best(table, "01", "V1", "rsa")["layer"] == "a"
    assert _best(table, "02", "V1", "rsa")["layer"] == "b"  # (0.1 + 0.3) / 2 = 0.2 vs 0.45
    selected = table[(table["layer"] == SELECTED_LAYER) & (table["roi"] == "V1")].iloc[0]
    # each subject's score at the layer the others chose: 01 a, 02 b, 03 b
    np.testing.assert_allclose(selected["score"], (0.1 + 0.1 + 0.4) / 3)
    group = table[(table["subject"] == "group") & (table["layer"] != SELECTED_LAYER)]
    assert not group["best"].any() and group["selection_score"].isna().all()
    assert set(table["selected_on"]) == {"the other subjects"}


def test_one_subject_chooses_no_analysis_layer():
    table = analysis_sweep_table(_summary({"01": {"a": 0.1, "b": 0.5}}), {"cnn": ["a", "b"]})
    table = table[table["stage"] == "rsa"]
    assert len(table) == 2 * 2 + 2 * 2  # subject and group rows, no `selected` rows
    assert not table["best"].any()
    assert analysis_sweep_table(pd.DataFrame(), {"cnn": ["a"]}).empty


def test_single_trial_models_join_their_sweep(stores):
    trial = [
        ("trial_evaluation", path, ds.assign_attrs(model=f"{ds.attrs['model']}_trials"))
        for stage, path, ds in stores
        if ds.attrs["model"].startswith("cnn")
    ]
    table = encoding_sweep_table(trial, SWEEP)
    assert set(table["stage"]) == {"trial_evaluation"}
    assert set(table["selected_on"]) == {"cross-validation on the training stimuli"}
    assert _best(table, "02", "early", "trial_evaluation")["layer"] == "blocks.0"
    # a run-based store whose model merely ends like a trial model is not renamed
    odd = [("evaluation", path, ds) for _, path, ds in trial]
    assert encoding_sweep_table(odd, SWEEP).empty


def test_ties_and_missing_scores():
    table = pd.DataFrame(
        {
            "stage": "evaluation",
            "sweep": "s",
            "metric": "r",
            "subject": "01",
            "roi": ["a", "a", "b", "b"],
            "position": [0, 1, 0, 1],
            "selection_score": [0.2, 0.2, np.nan, np.nan],
        }
    )
    assert choose_best_layers(table).tolist() == [True, False, False, False]


def test_a_score_store_without_cv_score_is_an_error(stores):
    stage, path, ds = stores[0]
    with pytest.raises(ValueError, match=r"sub-01: variable `cv_score` is missing"):
        encoding_sweep_table([(stage, path, ds.drop_vars("cv_score"))], SWEEP)
    assert encoding_sweep_table([], SWEEP).empty


def test_depth_plot_marks_the_chosen_layers(stores):
    table = encoding_sweep_table(stores, SWEEP)
    fig = plot_layer_sweep(table, stage="evaluation", sweep="cnn", metric="r")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["all", "early", "late"]
    markers = [line for line in ax.get_lines() if line.get_marker() == "o"]
    chosen = [line for line in markers if len(line.get_xdata()) == 1]
    assert len(chosen) == 3  # one chosen layer per ROI
    with pytest.raises(ValueError, match=r"No group rows for sweep 'x'"):
        plot_layer_sweep(table, stage="evaluation", sweep="x", metric="r")


def test_stage_of_a_score_store():
    assert stage_of("results/trial_evaluation/m-0123456789/sub-01_scores.zarr") == (
        "trial_evaluation"
    )


ALIGN_LAYERS = ["l0", "l1", "l2", "l3"]


def _group_rows(stage, sweep, extractor, metric, roi, scores, selection=None, subject="group"):
    """Layer-sweep rows of one ROI; NaN scores leave a layer out."""
    rows = []
    for position, (layer, score) in enumerate(zip(ALIGN_LAYERS, scores, strict=True)):
        if score is None:
            continue
        rows.append(
            {
                "stage": stage,
                "sweep": sweep,
                "extractor": extractor,
                "layer": layer,
                "position": position,
                "depth": position / 3,
                "subject": subject,
                "roi": roi,
                "metric": metric,
                "n_targets": np.nan,
                "n_subjects": 2,
                "score": score,
                "selection_score": np.nan if selection is None else selection[position],
                "selected_on": "",
                "best": False,
            }
        )
    return rows


@pytest.fixture
def alignment_table(rng):
    enc = ("evaluation", "cnn_layers", "cnn", "r")
    rsa = ("rsa", "cnn", "cnn", "spearman")
    rows = [
        # V1: both peak at l2 (the encoding by its training score), same rank order
        *_group_rows(*enc, "V1", [0.1, 0.3, 0.5, 0.4], [0.05, 0.2, 0.35, 0.3]),
        *_group_rows(*rsa, "V1", [0.05, 0.2, 0.3, 0.25]),
        # IT: opposite orders; the training score picks l1 although the test r peaks at l3
        *_group_rows(*enc, "IT", [0.1, 0.2, 0.3, 0.4], [0.1, 0.4, 0.2, 0.3]),
        *_group_rows(*rsa, "IT", [0.4, 0.3, 0.2, 0.1]),
        # MT: encoding only; FFA: RSA at two layers (l1 NaN, l2 not compared)
        *_group_rows(*enc, "MT", [0.1, 0.2, 0.3, 0.4], [0.1, 0.2, 0.3, 0.4]),
        *_group_rows(*enc, "FFA", [0.3, 0.2, 0.1, 0.2], [0.3, 0.2, 0.1, 0.2]),
        *_group_rows(*rsa, "FFA", [0.1, np.nan, None, 0.3]),
        # a second comparison with constant similarities: no rank correlation, tie -> l0
        *_group_rows("rsa", "cnn", "cnn", "tau-a", "V1", [0.2, 0.2, 0.2, 0.2]),
        # RSA of an extractor without an encoding sweep
        *_group_rows("rsa", "vit", "vit", "spearman", "V1", [0.1, 0.2, 0.3, 0.4]),
    ]
    # per-subject and `selected` rows are not the group's per-layer scores
    noise = list(rng.uniform(-1, 1, size=4))
    rows += _group_rows(*enc, "V1", noise, noise, subject="01")
    rows += _group_rows(*rsa, "IT", noise[::-1], subject="01")
    rows += [{**rows[0], "layer": SELECTED_LAYER, "position": np.nan, "score": 9.0}]
    return pd.DataFrame(rows, columns=list(LAYER_SWEEP_COLUMNS))


def test_metric_agreement_per_roi(alignment_table):
    out = metric_agreement(alignment_table)
    assert tuple(out.columns) == ALIGNMENT_COLUMNS
    assert set(out["sweep"]) == {"cnn_layers"} and set(out["extractor"]) == {"cnn"}
    assert set(out["encoding_stage"]) == {"evaluation"}
    rows = out.set_index(["rsa_metric", "roi"])
    # ROIs with one of the two metrics only have no row
    assert sorted(rows.index) == [
        ("spearman", "FFA"),
        ("spearman", "IT"),
        ("spearman", "V1"),
        ("tau-a", "V1"),
    ]
    rows = rows.loc["spearman"]
    v1, it, ffa = rows.loc["V1"], rows.loc["IT"], rows.loc["FFA"]
    assert v1["n_layers"] == 4 and it["n_layers"] == 4
    np.testing.assert_allclose(v1["spearman_rho"], 1.0)
    np.testing.assert_allclose(it["spearman_rho"], -1.0)
    assert (v1["best_layer_encoding"], v1["best_layer_rsa"], v1["agree"]) == ("l2", "l2", True)
    # the encoding's best layer follows its training score (l1), not the test r (l3)
    assert (it["best_layer_encoding"], it["best_layer_rsa"], it["agree"]) == ("l1", "l0", False)
    # two shared layers: no rank correlation, best layers still compared
    assert ffa["n_layers"] == 2 and np.isnan(ffa["spearman_rho"])
    assert (ffa["best_layer_encoding"], ffa["best_layer_rsa"], ffa["agree"]) == ("l0", "l3", False)


def test_metric_agreement_with_constant_scores_and_nothing_shared(alignment_table):
    table = alignment_table.assign(metric=alignment_table["metric"].replace("spearman", "x"))
    table = table[table["metric"] != "x"]
    (row,) = metric_agreement(table).itertuples(index=False)
    assert (row.rsa_metric, row.roi, row.n_layers) == ("tau-a", "V1", 4)
    assert np.isnan(row.spearman_rho)  # constant similarities
    assert row.best_layer_rsa == "l0" and row.best_layer_encoding == "l2" and not row.agree
    # no encoding score at the training data: no encoding layer, agreement unknown
    blind = table.assign(selection_score=np.nan)
    (row,) = metric_agreement(blind).itertuples(index=False)
    assert row.best_layer_encoding is None and pd.isna(row.agree)
    # no RSA, or no sweep at all: only the header
    for part in (table[table["stage"] != "rsa"], table.iloc[:0]):
        empty = metric_agreement(part)
        assert empty.empty and tuple(empty.columns) == ALIGNMENT_COLUMNS
    with pytest.raises(ValueError, match=r"must be a layer-sweep table .* lacks \['extractor'\]"):
        metric_agreement(table.drop(columns="extractor"))


def test_alignment_plot_marks_both_best_layers(alignment_table):
    fig = plot_metric_agreement(alignment_table, sweep="cnn_layers")
    # ROIs FFA, IT, V1 x comparisons spearman, tau-a (FFA and IT have no tau-a panel)
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in panels] == [
        "FFA (spearman): rho n/a (2 layers)",
        "IT (spearman): rho = -1.00",
        "V1 (spearman): rho = 1.00",
        "V1 (tau-a): rho n/a (4 layers)",
    ]
    # per panel a curve and a filled best layer on each of its two axes
    filled = [
        line
        for ax in fig.axes
        for line in ax.get_lines()
        if len(line.get_xdata()) == 1 and line.get_markerfacecolor() != "white"
    ]
    assert len(filled) == 2 * len(panels)
    with pytest.raises(ValueError, match=r"No ROI of sweep 'cnn' has both"):
        plot_metric_agreement(alignment_table, sweep="cnn")


def test_summary_without_sweeps_writes_only_the_headers(tmp_path):
    from neuroflow.evaluation.report import _write_layer_sweeps

    alignment = tmp_path / "alignment_metrics.tsv"
    _write_layer_sweeps(
        [], pd.DataFrame(), [], {}, tmp_path / "layer_sweep.tsv", tmp_path, (), alignment
    )
    assert alignment.read_text().strip().split("\t") == list(ALIGNMENT_COLUMNS)
    assert (tmp_path / "layer_sweep.tsv").read_text().strip().split("\t") == list(
        LAYER_SWEEP_COLUMNS
    )
    assert not list(tmp_path.glob("*.png"))


# --- selection uncertainty of the best layer --------------------------------------------


def test_a_clear_winner_is_chosen_in_nearly_every_resample():
    rng = np.random.default_rng(1)
    depth = np.array([0.0, 0.4, 0.7, 1.0])
    scores = np.array([0.1, 0.2, 0.6, 0.3]) + 0.05 * rng.standard_normal((7, 4))
    scores[2, 0] = np.nan  # a missing score is left out of the mean
    frequency, interval = best_layer_frequencies([scores], depth)
    assert frequency.sum() == pytest.approx(1.0)
    assert frequency[2] > 0.98
    np.testing.assert_array_equal(interval, [0.7, 0.7])


def test_a_tie_splits_the_selection():
    rng = np.random.default_rng(2)
    depth = np.array([0.0, 0.5, 1.0])
    # layers 0 and 2 tie (equal means over 11 subjects), layer 1 far behind
    base = 0.3 + 0.1 * rng.standard_normal(11)
    noise = 0.05 * rng.standard_normal(11)
    scores = np.stack([base, base - 0.5, base + noise - noise.mean()], axis=1)
    frequency, interval = best_layer_frequencies([scores], depth)
    assert 0.3 < frequency[0] < 0.7 and 0.3 < frequency[2] < 0.7, frequency
    assert frequency[1] == 0
    np.testing.assert_array_equal(interval, [0.0, 1.0])
    # resampling each subject's targets: 2 subjects of 40 and 25 targets
    blocks = [np.array([0.2, 0.2, 0.1]) + 0.3 * rng.standard_normal((n, 3)) for n in (40, 25)]
    frequency, _ = best_layer_frequencies(blocks, depth, n_bootstraps=400, seed=3)
    assert frequency[0] > 0.1 and frequency[1] > 0.1, frequency
    with pytest.raises(ValueError, match=r"`blocks` must hold arrays of shape \(n_units >= 1, 3\)"):
        best_layer_frequencies([np.ones((4, 2))], depth)


def test_the_sweep_tables_carry_the_selection_uncertainty(stores):
    # 2 subjects: each subject's targets (voxels) are resampled for the encoding sweep
    table = encoding_sweep_table(stores, SWEEP)
    group = table[(table["subject"] == "group") & (table["layer"] != SELECTED_LAYER)]
    assert set(group["selection_resampled"]) == {"targets"}
    late = group[group["roi"] == "late"]
    # training scores 0.0, 0.1, 0.4 in every voxel: the last layer always wins
    np.testing.assert_allclose(late["selection_frequency"], [0, 0, 1])
    np.testing.assert_allclose(late[["best_depth_lower", "best_depth_upper"]], [[1, 1]] * 3)
    sums = group.groupby("roi")["selection_frequency"].sum()
    np.testing.assert_allclose(sums, 1.0)
    subjects = table[table["subject"] != "group"]
    assert subjects["selection_frequency"].isna().all()
    assert subjects["selection_resampled"].isna().all()
    # 3 subjects: the analysis sweep resamples them
    values = {
        "01": {"a": 0.1, "b": 0.5, "last": 0.2},
        "02": {"a": 0.2, "b": 0.6, "last": 0.3},
        "03": {"a": 0.3, "b": 0.4, "last": 0.1},
    }
    rsa = analysis_sweep_table(_summary(values), {"cnn": ["a", "b", "last"]})
    rsa = rsa[(rsa["stage"] == "rsa") & (rsa["subject"] == "group") & (rsa["roi"] == "V1")]
    per_layer = rsa[rsa["layer"] != SELECTED_LAYER]
    assert per_layer["selection_frequency"].tolist() == [0.0, 1.0, 0.0]
    assert set(rsa["selection_resampled"]) == {"subjects"}
    assert rsa["best_depth_lower"].tolist() == [0.5] * len(rsa)
    # one subject: nothing to resample
    one = analysis_sweep_table(_summary({"01": values["01"]}), {"cnn": ["a", "b", "last"]})
    assert one["selection_frequency"].isna().all() and one["selection_resampled"].isna().all()


def test_depth_plot_draws_the_interval_of_the_best_depth(stores):
    table = encoding_sweep_table(stores, SWEEP)
    ax = plot_layer_sweep(table, stage="evaluation", sweep="cnn", metric="r").axes[0]
    assert f"over {N_SELECTION_BOOTSTRAPS} resamples of the targets" in ax.get_title()
    labels = [t.get_text() for t in ax.texts]
    assert len(labels) == 3 and all(label.endswith("%") for label in labels)
    assert "100%" in labels  # `late`: the last layer in every resample


def _pivot_selection(subjects: pd.DataFrame, criterion: str) -> pd.DataFrame:
    """Reference: the selection columns from one pandas pivot per group."""
    keys = ["stage", "sweep", "metric", "roi"]
    rows = []
    for key, part in subjects.groupby(keys, sort=False, dropna=False):
        scores = part.pivot_table(
            index="subject", columns="position", values=criterion, aggfunc="mean", dropna=False
        ).sort_index(axis=1)
        positions = scores.columns.to_numpy()
        depth = part.groupby("position")["depth"].first().reindex(positions).to_numpy(float)
        frequency, interval = np.full(positions.size, np.nan), np.full(2, np.nan)
        if len(scores) >= 3:
            frequency, interval = best_layer_frequencies([scores.to_numpy(float)], depth)
        rows += [
            {**dict(zip(keys, key, strict=True)), "position": p, "selection_frequency": f}
            | {"best_depth_lower": interval[0], "best_depth_upper": interval[1]}
            for p, f in zip(positions, frequency, strict=True)
        ]
    return pd.DataFrame(rows)


def test_selection_uncertainty_equals_a_pivot_per_group():
    """Groups of 1 to 4 subjects, positions missing in some groups and subjects, repeated
    rows averaged, NaN scores and depths: the same table as one pivot per group."""
    from neuroflow.evaluation.layer_sweep import _selection_uncertainty

    rng = np.random.default_rng(11)
    rows = []
    for g, (stage, roi) in enumerate([("rsa", "V1"), ("rsa", "V4"), ("evaluation", "V1")] * 2):
        metric = "r" if g < 3 else "r2"
        for subject in ["03", "01", "04", "02"][: 1 + g % 4]:
            for position in rng.permutation(5)[: 3 + g % 3]:
                for _ in range(1 + (position == 2)):
                    rows.append(
                        {
                            "stage": stage,
                            "sweep": "cnn" if g % 2 else "vit",
                            "metric": metric,
                            "roi": roi,
                            "subject": subject,
                            "position": int(position),
                            "depth": np.nan if (g, position) == (2, 0) else position / 4,
                            "score": rng.normal() if rng.random() > 0.1 else np.nan,
                        }
                    )
    subjects = pd.DataFrame(rows)
    got = _selection_uncertainty(subjects, "score", None).drop(columns="selection_resampled")
    pd.testing.assert_frame_equal(got, _pivot_selection(subjects, "score"))
    assert got["selection_frequency"].notna().any() and got["selection_frequency"].isna().any()
