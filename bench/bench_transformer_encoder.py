"""Benchmark the multimodal transformer encoder: epoch time, throughput, memory, prediction.

Measures in one run, on seeded synthetic data (features smooth in time, targets a lagged
linear map of them plus noise; nothing is read from or written to disk):

* a demo-sized problem: 2 subjects x 3 training runs x 400 TRs (the last run of each
  subject validates, for early stopping), 3,000 and 2,600 voxels, feature spaces of 24
  and 384 dims;
* a large problem: 4 subjects x 4 runs x 2,500 TRs x 1,000 parcels, three feature
  spaces of 768 dims (``--small``: 2 subjects x 2 runs x 1,000 TRs x 300 parcels);
* the reference, in the same run: himalaya ``RidgeCV`` fitted to the demo problem
  (FIR-delayed features, lags 1-4, spaces concatenated, 13 alphas, leave-one-run-out),
  one model per subject, the times of both subjects summed;
* the model alone (forward, backward and optimiser step on ready tensors) per batch,
  next to the data gathering and the validation pass, to split an epoch into model and
  data pipeline;
* the same on CUDA with mixed precision when a GPU is available;
* prediction accuracy against banded ridge (:func:`bench_rois`, on the CPU), per ROI,
  on two fixtures of :func:`make_roi_data` (2 subjects x 4 runs x 300 TRs + a test run):
  the linear one, where every ROI responds linearly to lagged features (ridge is the
  right model), and the nonlinear one, whose ``interaction`` ROI responds to the product
  of a visual and a semantic feature (no linear map of the features predicts that
  part). It prints the test r of both and their ratio, transformer / ridge, per ROI and
  seed (``--roi-seeds``, default 0 1 2; ~20 s per seed and fixture).

For each problem: seconds per epoch (median over epochs, validation pass included),
training windows per second, the whole ``train_encoder`` call, ``predict`` on one test
run, and the process's peak resident memory (a high-water mark, so it only grows from
one problem to the next).

Usage::

    python bench/bench_transformer_encoder.py            # demo + large problem, ~1 min
    python bench/bench_transformer_encoder.py --small    # demo + shrunk large, ~25 s
    python bench/bench_transformer_encoder.py --epochs 5 --threads 4
    python bench/bench_transformer_encoder.py --small --roi-seeds 0 1 2 3 4

``--epochs`` sets the epochs of both problems (default 3 for the demo size, 1 for the
large one); ``--threads`` sets ``torch.set_num_threads``. The times above are for one
thread on one core; on a machine shared with other jobs, ``--threads 1`` avoids torch's
threads contending for busy cores, which can make every figure several times slower.
"""

from __future__ import annotations

import argparse
import math
import resource
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from scipy.ndimage import gaussian_filter1d

from neuroflow.evaluation.metrics import pearson_r
from neuroflow.models import banded_ridge_cv, fir_delays, run_splits
from neuroflow.models.transformer import (
    MultimodalEncoder,
    SubjectData,
    _batches,
    _gather,
    _keep_mask,
    _predict_windows,
    _split_validation,
    _target_stats,
    _windows,
    predict,
    resolve_options,
    train_encoder,
)

LAGS = (1, 2, 3, 4)
HRF = np.array([0.4, 1.0, 0.7, 0.3], dtype=np.float32)  # weight of each lag in the targets
ALPHAS = np.logspace(0, 6, 13)
N_LATENT = 16  # rank of the feature -> target map


@dataclass(frozen=True)
class Problem:
    """Size of one synthetic multi-subject problem.

    Attributes
    ----------
    label : str
        Name in the table.
    n_targets : tuple of int
        Voxels (or parcels) of each subject.
    n_runs : int
        Training runs per subject (the last one validates).
    n_trs : int
        TRs per run.
    dims : tuple of (str, int)
        Feature spaces and their dimensions.
    test_trs : int
        TRs of the test run given to ``predict``.
    """

    label: str
    n_targets: tuple[int, ...]
    n_runs: int
    n_trs: int
    dims: tuple[tuple[str, int], ...]
    test_trs: int

    @property
    def spaces(self) -> list[str]:
        """Feature space names, in input order."""
        return [s for s, _ in self.dims]

    def describe(self) -> str:
        """One line describing the problem."""
        vox = "/".join(f"{t:,}" for t in self.n_targets)
        spaces = " + ".join(str(d) for _, d in self.dims)
        return (
            f"{self.label}: {len(self.n_targets)} subjects x {self.n_runs} runs x "
            f"{self.n_trs:,} TRs (last run validates), {vox} targets, features {spaces} dims"
        )


@dataclass
class Result:
    """What one ``train_encoder`` + ``predict`` measurement gave.

    Attributes
    ----------
    label : str
        Problem name.
    device : str
        Device trained on.
    epochs : int
        Epochs run.
    epoch_s : float
        Median seconds per epoch.
    first_epoch_s : float
        Seconds of the first epoch.
    samples : int
        Training windows per epoch.
    train_s : float
        Seconds of the whole ``train_encoder`` call.
    predict_s : float
        Best-of-3 seconds of ``predict`` on one test run.
    test_trs : int
        TRs of that test run.
    val_r : float
        Best mean validation Pearson r.
    rss_mb : float
        Peak resident memory of the process after the measurement, in MB.
    rss_before_mb : float
        Peak resident memory before ``train_encoder`` (data already built), in MB.
    gpu_mb : float | None
        Peak GPU memory allocated by torch, in MB; ``None`` on the CPU.
    """

    label: str
    device: str
    epochs: int
    epoch_s: float
    first_epoch_s: float
    samples: int
    train_s: float
    predict_s: float
    test_trs: int
    val_r: float
    rss_mb: float
    rss_before_mb: float
    gpu_mb: float | None


def _rss_mb() -> float:
    """High-water mark of this process's resident memory, in MB."""
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def _timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, float]:
    """``fn(*args, **kwargs)`` and its wall time in seconds."""
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def _sync(device: torch.device) -> None:
    """Wait for queued CUDA work, so that wall times are complete."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# ----------------------------------------------------------------------------- data
def _smooth_features(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    """Features smooth in time (Gaussian-filtered noise), z-scored per column."""
    x = gaussian_filter1d(rng.standard_normal((n, d), dtype=np.float32), sigma=2.0, axis=0)
    x -= x.mean(0)
    x /= x.std(0) + 1e-6
    return x


def make_data(problem: Problem, seed: int = 0) -> tuple[list[SubjectData], list[SubjectData]]:
    """Synthetic training and test data of ``problem``.

    Every subject sees the same stimulus (the same feature arrays); its targets are a
    rank-16 map of the features, delayed by lags 1-4 with HRF-like weights, times a
    per-target gain in [0, 1], plus unit noise.

    Parameters
    ----------
    problem : Problem
        Sizes.
    seed : int
        Seed of the numpy generator.

    Returns
    -------
    train : list of SubjectData
        Per subject, the training runs (features and targets).
    test : list of SubjectData
        Per subject, one test run of ``problem.test_trs`` TRs (features only).
    """
    rng = np.random.default_rng(seed)
    d_all = sum(d for _, d in problem.dims)
    mix = rng.standard_normal((d_all, N_LATENT)).astype(np.float32) / np.sqrt(d_all)

    def run_features(n: int) -> dict[str, np.ndarray]:
        return {s: _smooth_features(rng, n, d) for s, d in problem.dims}

    train_feats = [run_features(problem.n_trs) for _ in range(problem.n_runs)]
    test_feats = run_features(problem.test_trs)
    train, test = [], []
    for i, n_t in enumerate(problem.n_targets):
        loading = rng.standard_normal((N_LATENT, n_t)).astype(np.float32) / np.sqrt(N_LATENT)
        loading *= rng.uniform(0.0, 1.0, n_t).astype(np.float32)
        targets = []
        for feats in train_feats:
            latent = np.hstack([feats[s] for s in problem.spaces]) @ mix
            delayed = fir_delays(latent, LAGS).reshape(len(latent), len(LAGS), N_LATENT)
            signal = np.einsum("tld,l->td", delayed, HRF) @ loading
            noise = rng.standard_normal(signal.shape, dtype=np.float32)
            targets.append((signal + noise).astype(np.float32))
        name = f"{i + 1:02d}"
        train.append(SubjectData(name=name, features=train_feats, targets=targets))
        test.append(SubjectData(name=name, features=[test_feats]))
    return train, test


def _options(device: str, epochs: int) -> dict[str, Any]:
    """Options of the measured runs: one seed, one validation run, defaults otherwise."""
    return {
        "seeds": [0],
        "validation_runs": 1,
        "device": device,
        "epochs": epochs,
        "mixed_precision": device == "cuda",
    }


# ----------------------------------------------------------------------------- transformer
def bench_transformer(
    problem: Problem,
    train: Sequence[SubjectData],
    test: Sequence[SubjectData],
    options: Mapping[str, Any],
) -> Result:
    """Train the encoder once and time it, then time ``predict`` on one test run.

    Parameters
    ----------
    problem : Problem
        Sizes (for the labels).
    train, test : list of SubjectData
        From :func:`make_data`.
    options : dict
        Encoder options (:func:`_options`).

    Returns
    -------
    result : Result
    """
    device = torch.device(options["device"])
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    rss0 = _rss_mb()
    trained, train_s = _timed(train_encoder, train, problem.spaces, options)
    _sync(device)
    curve = trained.curves[0]
    predict_s = min(_timed(predict, trained, test[0])[1] for _ in range(3))
    return Result(
        label=problem.label,
        device=device.type,
        epochs=len(curve.seconds),
        epoch_s=float(np.median(curve.seconds)),
        first_epoch_s=curve.seconds[0],
        samples=curve.n_samples,
        train_s=train_s,
        predict_s=predict_s,
        test_trs=problem.test_trs,
        val_r=float(np.nanmax(curve.val_r)),
        rss_mb=_rss_mb(),
        rss_before_mb=rss0,
        gpu_mb=(torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None),
    )


def print_results(results: Sequence[Result]) -> None:
    """Print the measurements as a table."""
    print(
        f"  {'problem':<8} {'device':<6} {'epochs':>6} {'s/epoch':>8} {'1st ep':>7} "
        f"{'windows/s':>10} {'train s':>8} {'predict s':>14} {'val r':>6} "
        f"{'peak RSS MB':>16} {'GPU MB':>7}"
    )
    for r in results:
        gpu = "-" if r.gpu_mb is None else f"{r.gpu_mb:.0f}"
        print(
            f"  {r.label:<8} {r.device:<6} {r.epochs:>6d} {r.epoch_s:>8.2f} "
            f"{r.first_epoch_s:>7.2f} {r.samples / r.epoch_s:>10,.0f} {r.train_s:>8.2f} "
            f"{r.predict_s:>7.3f} ({r.test_trs:>4d})"
            f" {r.val_r:>6.3f} {r.rss_mb:>7.0f} (+{r.rss_mb - r.rss_before_mb:>5.0f}) {gpu:>7}"
        )


# ----------------------------------------------------------------------------- epoch split
def _model_step_s(
    dims: Mapping[str, int],
    n_targets: Mapping[str, int],
    options: Mapping[str, Any],
    device: torch.device,
    n_steps: int,
    warmup: int = 3,
) -> float:
    """Median seconds of one training step of the model alone on ready tensors.

    A step is what the training loop does once the batch is gathered: forward (under
    autocast when mixed precision applies), MSE loss, backward, gradient clipping,
    AdamW step.
    """
    opts = resolve_options(options)
    torch.manual_seed(0)
    model = MultimodalEncoder(dims, n_targets, opts).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=float(opts["lr"]))
    batch, window = int(opts["batch_size"]), int(opts["window_trs"])
    subject = next(iter(n_targets))
    feats = {s: torch.randn(batch, window, d, device=device) for s, d in dims.items()}
    valid = torch.ones(batch, window, dtype=torch.bool, device=device)
    keep = torch.ones(batch, len(dims), device=device)
    target = torch.randn(batch, n_targets[subject], device=device)
    amp = bool(opts["mixed_precision"]) and device.type == "cuda"
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(bool(opts["deterministic"]) and device.type == "cpu")
    times = []
    try:
        for _ in range(warmup + n_steps):
            _sync(device)
            t0 = time.perf_counter()
            with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=amp):
                pred = model(feats, valid, subject, keep)
            loss = torch.mean((pred.float() - target) ** 2)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            _sync(device)
            times.append(time.perf_counter() - t0)
    finally:
        torch.use_deterministic_algorithms(was)
    return float(np.median(times[warmup:]))


def epoch_split(
    problem: Problem,
    train: Sequence[SubjectData],
    options: Mapping[str, Any],
    epoch_s: float,
    n_steps: int = 20,
) -> None:
    """Print how an epoch divides into model steps, data gathering and validation.

    The three parts are timed here, one after the other, and compared with their sum
    (their shares) and with the epoch measured by ``train_encoder`` (the difference is
    the loop's own work, the learning-rate schedule and the copy of the best state, and
    timing noise).

    Parameters
    ----------
    problem : Problem
        Sizes (for the label).
    train : list of SubjectData
        Training data, as given to ``train_encoder``.
    options : dict
        Encoder options.
    epoch_s : float
        Measured median epoch time of ``train_encoder`` on this problem.
    n_steps : int
        Model steps timed.
    """
    opts = resolve_options(options)
    device = torch.device(opts["device"])
    spaces = problem.spaces
    split = _split_validation(train, int(opts["validation_runs"]))
    stats = {d.name: _target_stats(d, split[d.name][0]) for d in train}
    tr = {d.name: _windows(d, split[d.name][0], spaces, opts, stats[d.name]) for d in train}
    va = {d.name: _windows(d, split[d.name][1], spaces, opts, stats[d.name]) for d in train}
    dims = dict(problem.dims)
    n_targets = {d.name: int(d.targets[0].shape[1]) for d in train if d.targets is not None}
    batch = int(opts["batch_size"])
    sizes = {s: int(w.index.shape[0]) for s, w in tr.items()}
    n_batches = sum(math.ceil(n / batch) for n in sizes.values())

    step_s = _model_step_s(dims, n_targets, opts, device, n_steps)

    # one epoch of the data pipeline alone: batch order, modality masks, gathering, copy
    generator = torch.Generator().manual_seed(0)
    _sync(device)
    t0 = time.perf_counter()
    for subject, rows in _batches(sizes, batch, generator):
        w = tr[subject]
        keep = _keep_mask(len(rows), len(spaces), float(opts["modality_dropout"]), generator)
        _gather(w, rows, device)
        w.valid[rows].to(device)
        keep.to(device)
        w.targets[rows].to(device)
    _sync(device)
    gather_s = time.perf_counter() - t0

    model = MultimodalEncoder(dims, n_targets, opts).to(device)
    t0 = time.perf_counter()
    for v in va.values():
        _predict_windows(model, v, device, 4 * batch)
    _sync(device)
    val_s = time.perf_counter() - t0

    model_s = step_s * n_batches
    parts = model_s + gather_s + val_s
    print(
        f"  {problem.label} ({device.type}): model alone {1e3 * step_s:.1f} ms/batch "
        f"(forward+backward+step, batch {batch}) x {n_batches} batches = {model_s:.2f} s; "
        f"data gathering {gather_s:.2f} s ({1e3 * gather_s / n_batches:.1f} ms/batch); "
        f"validation pass {val_s:.2f} s"
    )
    print(
        f"    sum {parts:.2f} s (measured epoch {epoch_s:.2f} s, {epoch_s / parts:.2f}x the "
        f"sum): model {model_s / parts:.0%}, gathering {gather_s / parts:.0%}, "
        f"validation {val_s / parts:.0%}"
    )


# ----------------------------------------------------------------------------- reference
def bench_himalaya(
    train: Sequence[SubjectData], spaces: Sequence[str], backend: str = "torch"
) -> tuple[float, float, int]:
    """Fit himalaya ``RidgeCV`` per subject on FIR-delayed, concatenated features.

    Parameters
    ----------
    train : list of SubjectData
        Every run of each subject (the transformer's validation run included), split
        leave-one-run-out for the choice of alpha (per target).
    spaces : list of str
        Feature spaces, concatenated in this order before the delays.
    backend : str
        himalaya backend (``"torch"`` is torch on the CPU, ``"numpy"``).

    Returns
    -------
    seconds : float
        Fit time summed over subjects (delays and z-scoring excluded).
    cv_r2 : float
        Mean over subjects and targets of the best cross-validated R².
    n_features : int
        Columns of the delayed design.
    """
    from himalaya.backend import set_backend
    from himalaya.ridge import RidgeCV
    from himalaya.scoring import r2_score

    backend_module = set_backend(backend, on_error="raise")
    total, scores, n_features = 0.0, [], 0
    try:
        for data in train:
            assert data.targets is not None
            X = np.concatenate(
                [fir_delays(np.hstack([f[s] for s in spaces]), LAGS) for f in data.features]
            )
            Y = np.concatenate(data.targets)
            X = X - X.mean(0)
            Y = (Y - Y.mean(0)) / Y.std(0)
            groups = np.repeat(np.arange(len(data.targets)), [len(y) for y in data.targets])
            model = RidgeCV(
                alphas=ALPHAS,
                cv=run_splits(groups),
                solver_params={"score_func": r2_score, "warn": False},
            )
            _, dt = _timed(model.fit, X, Y)
            total += dt
            scores.append(float(backend_module.to_numpy(model.cv_scores_).mean()))
            n_features = X.shape[1]
    finally:
        set_backend("numpy")
    return total, float(np.mean(scores)), n_features


# ----------------------------------------------------------------------------- test r vs ridge
#: ROIs of :func:`make_roi_data`: the two linear ones, then the interaction one.
ROIS = ("visual", "semantic", "interaction")
#: Share of the interaction ROI's signal variance carried by the product term.
INTERACTION_SHARE = 0.8


@dataclass(frozen=True)
class RoiProblem:
    """Size of one synthetic problem with ROI labels and a held-out test run.

    Attributes
    ----------
    n_targets : tuple of int
        Voxels of each subject, split over :data:`ROIS` in proportions 2:2:3 (rounded).
    n_runs : int
        Training runs per subject (the last one validates the transformer).
    n_trs : int
        TRs per run (training and test).
    dims : tuple of (str, int)
        The two feature spaces, visual then semantic, and their dimensions.
    """

    n_targets: tuple[int, ...] = (42, 35)
    n_runs: int = 4
    n_trs: int = 300
    dims: tuple[tuple[str, int], ...] = (("visual", 8), ("semantic", 12))

    @property
    def spaces(self) -> list[str]:
        """Feature space names, in input order."""
        return [s for s, _ in self.dims]


@dataclass
class RoiData:
    """Training and test data of :func:`make_roi_data`.

    Attributes
    ----------
    train : list of SubjectData
        Per subject, the training runs (features and targets).
    test : list of SubjectData
        Per subject, the test run (features only).
    test_targets : list of ndarray, shapes (n_trs, n_targets of the subject)
        Per subject, the test run's targets.
    rois : list of ndarray of str, shapes (n_targets of the subject,)
        Per subject, the ROI of every target.
    """

    train: list[SubjectData]
    test: list[SubjectData]
    test_targets: list[np.ndarray]
    rois: list[np.ndarray]


def _unit(x: np.ndarray) -> np.ndarray:
    """Columns of ``x`` (n_times, n) centred and scaled to unit variance."""
    x = x - x.mean(0)
    return x / (x.std(0) + 1e-6)


def _hrf(x: np.ndarray) -> np.ndarray:
    """``x`` (n_times, n) delayed by :data:`LAGS` and weighted by :data:`HRF`."""
    delayed = fir_delays(x, LAGS).reshape(len(x), len(LAGS), x.shape[1])
    return np.einsum("tld,l->td", delayed, HRF)


def _roi_labels(n: int) -> np.ndarray:
    """ROI of each of ``n`` targets: :data:`ROIS` in proportions 2:2:3."""
    n_vis = round(2 * n / 7)
    n_sem = round(2 * n / 7)
    return np.array(
        ["visual"] * n_vis + ["semantic"] * n_sem + ["interaction"] * (n - n_vis - n_sem)
    )


def make_roi_data(problem: RoiProblem, seed: int = 0, *, nonlinear: bool = True) -> RoiData:
    """Synthetic multi-subject data whose ROIs respond linearly or not to the features.

    Every subject sees the same stimulus: two feature spaces smooth in time. Per
    subject, ``visual`` voxels respond to a rank-2 linear map of the visual features,
    ``semantic`` voxels to a rank-2 map of the semantic ones. ``interaction`` voxels
    respond, with ``nonlinear``, to the product of one visual and one semantic
    direction (a share :data:`INTERACTION_SHARE` of the signal variance, not linear in
    any TR's features: no linear map of them correlates with it) plus a linear map of
    both spaces (the rest); without ``nonlinear``, to that linear map alone. Each
    signal is delayed by lags 1-4 with HRF-like weights, scaled by a per-voxel gain in
    [0.5, 1.5], and unit noise is added.

    Parameters
    ----------
    problem : RoiProblem
        Sizes.
    seed : int
        Seed of the numpy generator.
    nonlinear : bool
        Plant the product in the ``interaction`` ROI (else that ROI is linear too).

    Returns
    -------
    data : RoiData
    """
    rng = np.random.default_rng(seed)
    (vis, d_vis), (sem, d_sem) = problem.dims
    runs = [
        {s: _smooth_features(rng, problem.n_trs, d) for s, d in problem.dims}
        for _ in range(problem.n_runs + 1)
    ]
    u = rng.standard_normal(d_vis) / np.sqrt(d_vis)
    w = rng.standard_normal(d_sem) / np.sqrt(d_sem)
    data = RoiData([], [], [], [])
    for i, n_t in enumerate(problem.n_targets):
        rois = _roi_labels(n_t)
        maps = {
            "visual": (rng.standard_normal((d_vis, 2)), None),
            "semantic": (None, rng.standard_normal((d_sem, 2))),
            "interaction": (rng.standard_normal((d_vis, 2)), rng.standard_normal((d_sem, 2))),
        }
        loading = {
            roi: rng.standard_normal((2, int((rois == roi).sum()))) / np.sqrt(2) for roi in ROIS
        }
        product_gain = rng.uniform(0.5, 1.5, int((rois == "interaction").sum()))
        gain = rng.uniform(0.5, 1.5, n_t)
        targets = []
        for feats in runs:
            signal = np.zeros((problem.n_trs, n_t))
            for roi in ROIS:
                a, b = maps[roi]
                latent = sum(x @ m for x, m in ((feats[vis], a), (feats[sem], b)) if m is not None)
                part = _unit(latent) @ loading[roi]
                if roi == "interaction" and nonlinear:
                    product = _unit((feats[vis] @ u) * (feats[sem] @ w))[:, None] * product_gain
                    part = (
                        np.sqrt(1 - INTERACTION_SHARE) * part + np.sqrt(INTERACTION_SHARE) * product
                    )
                signal[:, rois == roi] = part
            signal = _hrf(signal) / np.linalg.norm(HRF) * gain
            targets.append((signal + rng.standard_normal(signal.shape)).astype(np.float32))
        name = f"{i + 1:02d}"
        data.train.append(SubjectData(name=name, features=runs[:-1], targets=targets[:-1]))
        data.test.append(SubjectData(name=name, features=runs[-1:]))
        data.test_targets.append(targets[-1])
        data.rois.append(rois)
    return data


def ridge_test_r(data: RoiData, spaces: Sequence[str]) -> list[np.ndarray]:
    """Test Pearson r of banded ridge, fitted per subject on every training run.

    The reference the encoding stage fits: each space FIR-delayed by the planted lags
    (1-4, so ridge knows the true delays), centred with the training means, banded
    ridge with one penalty per space and target chosen leave-one-run-out over
    :data:`ALPHAS`.

    Parameters
    ----------
    data : RoiData
        From :func:`make_roi_data`.
    spaces : list of str
        The feature spaces (bands).

    Returns
    -------
    r : list of ndarray, shapes (n_targets of the subject,)
        Per subject, the test r of every target.
    """
    out = []
    for train, test, y_test in zip(data.train, data.test, data.test_targets, strict=True):
        assert train.targets is not None
        Xs = [np.concatenate([fir_delays(f[s], LAGS) for f in train.features]) for s in spaces]
        Xs_test = [fir_delays(test.features[0][s], LAGS) for s in spaces]
        Y = np.concatenate(train.targets)
        means = [X.mean(0) for X in Xs]
        groups = np.repeat(np.arange(len(train.targets)), [len(y) for y in train.targets])
        fit = banded_ridge_cv(
            [X - m for X, m in zip(Xs, means, strict=True)],
            Y - Y.mean(0),
            alphas=ALPHAS,
            splits=run_splits(groups),
            device="cpu",
        )
        X_test = np.hstack([X - m for X, m in zip(Xs_test, means, strict=True)])
        out.append(pearson_r(y_test, X_test @ fit.coef))
    return out


def transformer_test_r(
    data: RoiData, spaces: Sequence[str], options: Mapping[str, Any]
) -> list[np.ndarray]:
    """Test Pearson r of the transformer encoder trained on every subject at once.

    Parameters
    ----------
    data : RoiData
        From :func:`make_roi_data`.
    spaces : list of str
        The feature spaces.
    options : dict
        Encoder options.

    Returns
    -------
    r : list of ndarray, shapes (n_targets of the subject,)
        Per subject, the test r of every target.
    """
    trained = train_encoder(data.train, spaces, options)
    return [
        pearson_r(y, predict(trained, test))
        for test, y in zip(data.test, data.test_targets, strict=True)
    ]


def roi_means(r: Sequence[np.ndarray], rois: Sequence[np.ndarray]) -> dict[str, float]:
    """Mean test r of every ROI, over its targets in all subjects.

    Parameters
    ----------
    r, rois : list of ndarray, shapes (n_targets of the subject,)
        Per subject, the test r and the ROI of every target.

    Returns
    -------
    means : dict of str to float
        ROI -> mean r, in :data:`ROIS` order.
    """
    r_all, roi_all = np.concatenate(r), np.concatenate(rois)
    return {roi: float(r_all[roi_all == roi].mean()) for roi in ROIS}


#: Encoder options of the ROI comparison (small: a few seconds per fit on one core).
#: Modality dropout is off: with the default 0.2 the encoder learns the cross-modal
#: product far less (the product vanishes whenever one space is dropped).
ROI_OPTIONS: dict[str, Any] = {
    "hidden": 64,
    "n_layers": 1,
    "n_heads": 2,
    "window_trs": 6,
    "epochs": 60,
    "patience": 10,
    "batch_size": 32,
    "modality_dropout": 0.0,
    "refit": False,
    "seeds": [0],
    "device": "cpu",
}


def compare_rois(
    problem: RoiProblem, seed: int, options: Mapping[str, Any], *, nonlinear: bool
) -> dict[str, tuple[float, float]]:
    """Mean test r of the transformer and of banded ridge in every ROI.

    Parameters
    ----------
    problem : RoiProblem
        Sizes.
    seed : int
        Seed of the data (:func:`make_roi_data`).
    options : dict
        Encoder options.
    nonlinear : bool
        Plant the product in the ``interaction`` ROI.

    Returns
    -------
    r : dict of str to (float, float)
        ROI -> (transformer, ridge) mean test r, in :data:`ROIS` order.
    """
    data = make_roi_data(problem, seed, nonlinear=nonlinear)
    ridge = roi_means(ridge_test_r(data, problem.spaces), data.rois)
    transformer = roi_means(transformer_test_r(data, problem.spaces, options), data.rois)
    return {roi: (transformer[roi], ridge[roi]) for roi in ROIS}


def bench_rois(problem: RoiProblem, seeds: Sequence[int], options: Mapping[str, Any]) -> None:
    """Print, per fixture and seed, the transformer/ridge test r ratio of every ROI."""
    print(
        f"\ntest r, transformer / banded ridge, per ROI: {len(problem.n_targets)} subjects "
        f"({'/'.join(map(str, problem.n_targets))} voxels) x {problem.n_runs} runs x "
        f"{problem.n_trs} TRs + 1 test run, features "
        + " + ".join(f"{s} {d}" for s, d in problem.dims)
        + f"; encoder {', '.join(f'{k}={v}' for k, v in options.items() if k != 'device')}"
    )
    header = "  ".join(f"{roi + ' (tr/ridge = x)':>28}" for roi in ROIS)
    for nonlinear in (False, True):
        label = "nonlinear" if nonlinear else "linear"
        print(f"  {'fixture':<9} {'seed':>4}  {header}")
        ratios = []
        for seed in seeds:
            r = compare_rois(problem, seed, options, nonlinear=nonlinear)
            ratios.append([t / ref for t, ref in r.values()])
            cells = "  ".join(f"{t:>11.3f} / {ref:.3f} = {t / ref:4.2f}x" for t, ref in r.values())
            print(f"  {label:<9} {seed:>4}  {cells}", flush=True)
        low = np.min(ratios, axis=0)
        print(f"  {label:<9} {'min':>4}  " + "  ".join(f"{x:>27.2f}x" for x in low))


# ----------------------------------------------------------------------------- main
def demo_problem() -> Problem:
    """The demo-sized problem."""
    return Problem(
        label="demo",
        n_targets=(3000, 2600),
        n_runs=3,
        n_trs=400,
        dims=(("audio", 24), ("text", 384)),
        test_trs=400,
    )


def large_problem(small: bool) -> Problem:
    """The large problem (shrunk with ``small``)."""
    if small:
        return Problem(
            label="large-s",
            n_targets=(300, 300),
            n_runs=2,
            n_trs=1000,
            dims=(("video", 768), ("audio", 768), ("text", 768)),
            test_trs=1000,
        )
    return Problem(
        label="large",
        n_targets=(1000,) * 4,
        n_runs=4,
        n_trs=2500,
        dims=(("video", 768), ("audio", 768), ("text", 768)),
        test_trs=2500,
    )


def run_device(
    device: str,
    problems: Sequence[tuple[Problem, int]],
    data: Mapping[str, tuple[list[SubjectData], list[SubjectData]]],
) -> list[Result]:
    """Measure every problem on ``device``, print the table and the epoch splits."""
    results = [
        bench_transformer(p, *data[p.label], _options(device, epochs)) for p, epochs in problems
    ]
    print_results(results)
    for (p, epochs), r in zip(problems, results, strict=True):
        epoch_split(p, data[p.label][0], _options(device, epochs), r.epoch_s)
    return results


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="shrink the large problem")
    parser.add_argument(
        "--epochs", type=int, default=None, help="epochs of both problems (default 3 / 1)"
    )
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    parser.add_argument(
        "--roi-seeds",
        type=int,
        nargs="*",
        default=[0, 1, 2],
        help="seeds of the per-ROI comparison with banded ridge (none: skip it)",
    )
    args = parser.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    demo, large = demo_problem(), large_problem(args.small)
    epochs_demo = args.epochs or 3
    epochs_large = args.epochs or 1
    problems = [(demo, epochs_demo), (large, epochs_large)]
    opts = resolve_options(_options("cpu", epochs_demo))
    print(
        f"torch {torch.__version__}, threads={torch.get_num_threads()}; encoder hidden="
        f"{opts['hidden']}, n_layers={opts['n_layers']}, window_trs={opts['window_trs']}, "
        f"batch {opts['batch_size']}, seeds [0]"
    )
    for p, epochs in problems:
        print(f"{p.describe()}; {epochs} epoch(s)")

    # the first torch.use_deterministic_algorithms call (made by train_encoder) imports
    # torch._dynamo; pay that once here so that it is not counted as training time
    _, import_s = _timed(
        torch.use_deterministic_algorithms, torch.are_deterministic_algorithms_enabled()
    )
    print(
        f"one-off cost excluded from the timings: {import_s:.2f} s (first "
        "torch.use_deterministic_algorithms call, which imports torch._dynamo)"
    )
    t0 = time.perf_counter()
    data = {p.label: make_data(p, seed=i) for i, (p, _) in enumerate(problems)}
    print(f"synthetic data built in {time.perf_counter() - t0:.1f} s; peak RSS {_rss_mb():.0f} MB")

    print("\nCPU (s/epoch: median, validation pass included; windows/s: training windows)")
    cpu = run_device("cpu", problems, data)

    ridge_s, ridge_r2, n_feat = bench_himalaya(data[demo.label][0], demo.spaces)
    d = cpu[0]
    default_epochs = int(resolve_options(None)["epochs"])
    print(
        f"\nreference: himalaya RidgeCV (torch backend, CPU) on the demo problem, "
        f"{demo.n_runs} runs x {demo.n_trs} TRs, {n_feat} delayed features (lags 1-4), "
        f"{len(ALPHAS)} alphas, leave-one-run-out, both subjects: {ridge_s:.2f} s "
        f"(mean cv R² {ridge_r2:.3f})"
    )
    print(f"  transformer epoch / himalaya ridge fit:                {d.epoch_s / ridge_s:6.2f}x")
    print(
        f"  transformer full training / himalaya ridge fit:        {d.train_s / ridge_s:6.2f}x "
        f"({d.epochs} epochs, {d.train_s:.2f} s)"
    )
    print(
        f"  est. {default_epochs} epochs (default, no early stop) / ridge fit:  "
        f"{default_epochs * d.epoch_s / ridge_s:6.1f}x"
    )

    if torch.cuda.is_available():
        print(f"\nGPU {torch.cuda.get_device_name()} (device: cuda, mixed_precision: True)")
        gpu = run_device("cuda", problems, data)
        for c, g in zip(cpu, gpu, strict=True):
            print(f"  {c.label}: GPU epoch {c.epoch_s / g.epoch_s:.1f}x faster than CPU")
        print(
            f"  demo GPU epoch / himalaya ridge fit (CPU): {gpu[0].epoch_s / ridge_s:.2f}x; "
            f"full training / ridge fit: {gpu[0].train_s / ridge_s:.2f}x"
        )
    else:
        print("\nno GPU available (torch.cuda.is_available() is False): GPU figures not measured")
    if args.roi_seeds:
        bench_rois(RoiProblem(), args.roi_seeds, ROI_OPTIONS)
    print(f"peak RSS at the end {_rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
