"""The multimodal transformer encoder: windows, options, training and prediction."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from neuroflow.models.transformer import (
    HostDropout,
    MultimodalEncoder,
    SubjectData,
    _batches,
    _keep_mask,
    _windows,
    predict,
    resolve_options,
    train_encoder,
    window_index,
)

#: A tiny model that trains in a few seconds on one CPU core.
TINY = {
    "hidden": 16,
    "n_layers": 1,
    "n_heads": 2,
    "window_trs": 4,
    "epochs": 6,
    "patience": 3,
    "batch_size": 32,
    "seeds": [3],
    "device": "cpu",
    "dropout": 0.0,
}


def _lagged(x: np.ndarray, lag: int) -> np.ndarray:
    """``x`` delayed by ``lag`` rows (zeros first)."""
    return np.vstack([np.zeros((lag, x.shape[1])), x[:-lag]])


def _subjects(rng, n_voxels=(7, 5), n_runs=3, n_times=(61, 53, 47), dims=(3, 4), noise=0.3):
    """Subjects whose first voxels follow space ``a`` two TRs late; the last voxel is noise.

    Every subject has its own voxel count and weights (``weights``, name -> (3, n_voxels))
    and an offset of 5 per subject index; runs have uneven lengths.
    """
    out, weights = [], {}
    for s, n_vox in enumerate(n_voxels):
        w = rng.standard_normal((dims[0], n_vox))
        w[:, -1] = 0.0
        feats, targets = [], []
        for r in range(n_runs):
            n = n_times[r % len(n_times)]
            f = {"a": rng.standard_normal((n, dims[0])), "b": rng.standard_normal((n, dims[1]))}
            y = _lagged(f["a"], 2) @ w + noise * rng.standard_normal((n, n_vox)) + 5.0 * s
            feats.append(f)
            targets.append(y)
        out.append(SubjectData(f"0{s + 1}", feats, targets))
        weights[f"0{s + 1}"] = w
    _subjects.weights = weights
    return out


def test_window_index_causal_and_centred():
    rows, valid = window_index(5, 3, "causal")
    np.testing.assert_array_equal(rows[0], [0, 0, 0])
    np.testing.assert_array_equal(valid[0], [False, False, True])
    np.testing.assert_array_equal(rows[4], [2, 3, 4])
    assert valid[2:].all()
    rows, valid = window_index(5, 4, "centred")
    np.testing.assert_array_equal(rows[2], [0, 1, 2, 3])
    np.testing.assert_array_equal(valid[0], [False, False, True, True])
    np.testing.assert_array_equal(valid[4], [True, True, True, False])


def test_options_are_checked():
    opts = resolve_options({"hidden": 32, "seeds": [1, 2]})
    assert opts["hidden"] == 32 and opts["seeds"] == [1, 2] and opts["loss"] == "mse"
    with pytest.raises(ValueError, match="Did you mean 'window_trs'"):
        resolve_options({"window_tr": 8})
    with pytest.raises(ValueError, match=r"`transformer.loss` must be one of \['mse', 'pearson'\]"):
        resolve_options({"loss": "l1"})
    with pytest.raises(ValueError, match="must be a multiple of `n_heads`"):
        resolve_options({"hidden": 30, "n_heads": 4})
    with pytest.raises(ValueError, match=r"`transformer\.seeds` must be a non-empty list"):
        resolve_options({"seeds": [1, 1]})
    with pytest.raises(ValueError, match=r"`transformer.modality_dropout` must be in \[0, 1\)"):
        resolve_options({"modality_dropout": 1.0})


def test_modality_dropout_never_drops_every_space():
    gen = torch.Generator().manual_seed(0)
    keep = _keep_mask(500, 3, 0.9, gen)
    assert set(np.unique(keep.numpy())) == {0.0, 1.0}
    assert (keep.sum(1) >= 1).all()
    ablated = _keep_mask(4, 3, 0.0, gen, drop=1)
    np.testing.assert_array_equal(ablated.numpy(), [[1, 0, 1]] * 4)


def test_host_dropout_matches_torch_dropout_in_distribution():
    """Share zeroed near p, survivors scaled by 1/(1-p), gradients masked alike, identity
    in evaluation, and the same masks from the same seed."""
    p, shape = 0.3, (37, 11, 23)
    x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
    drop = HostDropout(p, np.random.default_rng(5))
    y = drop(x)
    kept = y != 0
    share = 1.0 - kept.double().mean().item()
    se = np.sqrt(p * (1 - p) / kept.numel())
    assert abs(share - p) < 4 * se, share
    torch.testing.assert_close(y[kept], x[kept] / (1 - p))
    y.sum().backward()
    torch.testing.assert_close(x.grad, kept.double() / (1 - p))
    again = HostDropout(p, np.random.default_rng(5))(x.detach())
    torch.testing.assert_close(again, y.detach())
    assert not torch.equal(drop(x.detach()), y.detach())  # the generator moves on
    # another device keeps torch's dropout: NumPy's generator is not touched
    state = drop.generator.bit_generator.state
    on_meta = drop(torch.empty(shape, device="meta"))
    assert on_meta.device.type == "meta" and on_meta.shape == shape
    assert drop.generator.bit_generator.state == state
    drop.eval()
    assert drop(x) is x
    assert HostDropout(0.0, np.random.default_rng(0))(x) is x
    assert repr(drop) == "HostDropout(p=0.3)"


def test_every_dropout_of_the_encoder_draws_from_one_seeded_generator():
    """Each encoder layer gets its own HostDropout modules, all sharing the model's one
    generator, which torch's seed fixes."""
    opts = resolve_options({})

    def build(seed: int) -> MultimodalEncoder:
        torch.manual_seed(seed)
        return MultimodalEncoder({"a": 3, "b": 5}, {"s": 4}, opts)

    model = build(0)
    drops = [m for m in model.modules() if isinstance(m, HostDropout)]
    # one per projector, three per encoder layer, one in the output layer
    assert len(drops) == 2 + 3 * opts["n_layers"] + 1
    assert len({id(m) for m in drops}) == len(drops)
    assert len({id(m.generator) for m in drops}) == 1
    assert not any(type(m) is torch.nn.Dropout for m in model.modules())
    first = build(0).projectors["a"][3].generator.random(4)
    np.testing.assert_array_equal(first, build(0).projectors["a"][3].generator.random(4))
    assert not np.array_equal(first, build(1).projectors["a"][3].generator.random(4))


def test_training_shapes_determinism_and_curves(rng):
    subjects = _subjects(rng)
    first = train_encoder(subjects, ["a", "b"], TINY)
    again = train_encoder(subjects, ["a", "b"], TINY)
    other = train_encoder(subjects, ["a", "b"], {**TINY, "seeds": [4]})
    test = SubjectData("02", [subjects[1].features[0]])
    pred = predict(first, test)
    assert pred.shape == (61, 5) and pred.dtype == np.float32
    np.testing.assert_array_equal(pred, predict(again, test))  # same seed: same bits
    assert not np.allclose(pred, predict(other, test))
    (curve,) = first.curves
    assert len(curve.train_loss) == len(curve.val_r) <= TINY["epochs"]
    assert 0 <= curve.best_epoch < len(curve.val_r)
    assert np.nanargmax(curve.val_r) == curve.best_epoch
    assert curve.n_samples == 2 * (61 + 53)  # training runs only: the last run validates
    # targets come back in their own units (subject 2 is offset by 5)
    assert abs(float(pred.mean()) - 5.0) < 1.5
    with pytest.raises(ValueError, match=r"`data.name` must be a subject the encoder"):
        predict(first, SubjectData("09", test.features))
    with pytest.raises(ValueError, match=r"`drop` must be one of \['a', 'b'\]"):
        predict(first, test, drop="c")


def _mean_r(pred: np.ndarray, truth: np.ndarray) -> float:
    """Mean Pearson r over the columns."""
    return float(
        np.mean([np.corrcoef(pred[:, v], truth[:, v])[0, 1] for v in range(truth.shape[1])])
    )


@pytest.mark.slow
def test_planted_lagged_signal_is_learned_and_ensembled(rng):
    subjects = _subjects(rng, n_runs=4, n_times=(100, 90, 110, 80), noise=0.3)
    weights = dict(_subjects.weights)
    opts = {**TINY, "epochs": 25, "patience": 6, "seeds": [0, 1], "lr": 5e-3}
    trained = train_encoder(subjects, ["a", "b"], opts)
    fresh = np.random.default_rng(11)
    for data in subjects:
        # new stimuli: the noise-free response of the driven voxels is known
        f = {"a": fresh.standard_normal((90, 3)), "b": fresh.standard_normal((90, 4))}
        truth = (_lagged(f["a"], 2) @ weights[data.name])[:, :-1]
        pred = predict(trained, SubjectData(data.name, [f]))
        seeds = predict(trained, SubjectData(data.name, [f]), per_seed=True)
        assert seeds.shape == (2, 90, truth.shape[1] + 1)
        ensemble = _mean_r(pred[:, :-1], truth)
        assert ensemble > 0.6, ensemble
        for one in seeds:  # the mean of two seeds is no worse than either
            assert ensemble >= _mean_r(one[:, :-1], truth) - 0.01
        # without the space that drives the voxels the prediction carries nothing of it
        dropped = predict(trained, SubjectData(data.name, [f]), drop="a")
        assert abs(_mean_r(dropped[:, :-1], truth)) < 0.3


def test_subject_heads_do_not_leak(rng):
    subjects = _subjects(rng)
    opts = resolve_options(TINY)
    model = MultimodalEncoder({"a": 3, "b": 4}, {"01": 7, "02": 5}, opts)
    w = _windows(subjects[1], [0], ["a", "b"], opts, (np.zeros(5), np.ones(5)))
    rows = torch.arange(16)
    feats = {s: f[w.index[rows]] for s, f in w.features.items()}
    loss = model(feats, w.valid[rows], "02").pow(2).mean()
    loss.backward()
    assert all(p.grad is None or not p.grad.any() for p in model.heads["01"].parameters())
    assert all(p.grad.abs().sum() > 0 for p in model.heads["02"].parameters())
    # changing subject 1's head leaves subject 2's predictions as they were
    model.eval()
    with torch.no_grad():
        before = model(feats, w.valid[rows], "02")
        model.heads["01"].weight.add_(1.0)
        np.testing.assert_array_equal(before, model(feats, w.valid[rows], "02"))


def test_subject_embedding_needs_shared_targets(rng):
    opts = resolve_options({**TINY, "heads": "subject_embedding"})
    with pytest.raises(ValueError, match="needs the same targets in every subject"):
        MultimodalEncoder({"a": 3}, {"01": 7, "02": 5}, opts)
    subjects = _subjects(rng, n_voxels=(6, 6))
    trained = train_encoder(subjects, ["a", "b"], {**TINY, "heads": "subject_embedding"})
    assert list(trained.models[0].heads) == ["shared"]
    one = predict(trained, SubjectData("01", [subjects[0].features[0]]))
    two = predict(trained, SubjectData("02", [subjects[0].features[0]]))
    assert not np.allclose(one - one.mean(0), two - two.mean(0))  # the embedding differs


def test_pearson_loss_and_bad_inputs(rng):
    subjects = _subjects(rng)
    trained = train_encoder(subjects, ["a"], {**TINY, "loss": "pearson", "epochs": 2})
    assert trained.spaces == ["a"] and len(trained.curves[0].train_loss) == 2
    broken = _subjects(rng)
    broken[0].targets[1][3, 2] = np.nan
    with pytest.raises(ValueError, match="sub-01 run 1: features or targets hold NaN"):
        train_encoder(broken, ["a"], TINY)
    short = _subjects(rng)
    short[1].features[0]["a"] = short[1].features[0]["a"][:-1]
    with pytest.raises(ValueError, match=r"sub-02 run 0: features 'a' must be \(n_times=61"):
        train_encoder(short, ["a"], TINY)
    with pytest.raises(ValueError, match=r"sub-01 run 0: feature spaces \['c'\] missing"):
        train_encoder(subjects, ["a", "c"], TINY)


def test_batches_hold_one_subject_and_no_short_remainder():
    gen = torch.Generator().manual_seed(0)
    batches = _batches({"01": 70, "02": 33}, 32, gen)
    sizes = {s: sorted(len(rows) for t, rows in batches if t == s) for s in ("01", "02")}
    assert sizes == {"01": [32, 38], "02": [33]}  # 70 = 32 + 38: the 6 left join a batch
    for subject, n in (("01", 70), ("02", 33)):
        rows = torch.cat([r for t, r in batches if t == subject])
        assert sorted(rows.tolist()) == list(range(n))


def test_refit_trains_again_on_every_run(rng):
    subjects = _subjects(rng)
    refit = train_encoder(subjects, ["a", "b"], TINY)
    plain = train_encoder(subjects, ["a", "b"], {**TINY, "refit": False})
    (curve,) = refit.curves
    assert len(curve.refit_loss) == curve.best_epoch + 1
    assert plain.curves[0].refit_loss == [] and len(plain.curves[0].val_r) >= 1
    # validation r per target at the best epoch, for every validated subject
    assert sorted(curve.val_r_targets) == ["01", "02"]
    assert curve.val_r_targets["01"].shape == (7,)
    test = SubjectData("01", [subjects[0].features[0]])
    assert not np.allclose(predict(refit, test), predict(plain, test))
    # the statistics come from every run the final model saw
    y = np.concatenate(subjects[0].targets)
    np.testing.assert_allclose(refit.target_mean["01"], y.mean(0), rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_training_logs_its_progress(rng, caplog):
    import logging
    import re

    subjects = _subjects(rng, n_voxels=(4,), n_runs=2, n_times=(43, 37))
    options = {**TINY, "epochs": 5, "patience": 10, "validation_runs": 0, "batch_size": 16}
    with caplog.at_level(logging.INFO, logger="neuroflow.progress"):
        train_encoder(subjects, ["a", "b"], options)
    lines = [r.getMessage() for r in caplog.records if r.name == "neuroflow.progress"]
    # every batch of the 5 epochs counted: a line per 10 %
    assert len(lines) == 10, lines
    assert all(line.startswith("transformer training (seed 3): ") for line in lines)
    assert all(re.search(r"% \(\d+/\d+ batches\), [\d,.]+/s, ", line) for line in lines)
    assert all(" left (" in line for line in lines[:-1]) and ", done (" in lines[-1]
