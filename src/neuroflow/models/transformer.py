"""A multimodal transformer encoder trained across subjects (TRIBE-class).

Frozen stimulus features of several spaces (video, audio and text models, at any
depth; standardised by the caller) feed one projector per space (linear, layer norm,
GELU, dropout);
the projected spaces are concatenated (then mixed by a linear layer) or summed, given
learned temporal positions, and encoded by a transformer over a window of
``window_trs`` TRs (``causal``: the TR and the ones before it; ``centred``: around it).
A learned temporal read-out (one weight per window position and hidden unit, a learned
haemodynamic response) pools the window, a shared output layer follows, and a linear
head per subject maps it to that subject's targets (subjects may have different
numbers of voxels). With ``heads: subject_embedding`` every subject shares one head
instead and a learned subject embedding is added to the tokens (all subjects must then
have the same targets, e.g. parcels).

Training (:func:`train_encoder`): targets z-scored per subject and target with the
training runs' statistics; each batch holds windows of one subject; modality dropout
zeroes a whole feature space per sample (never all of them); AdamW with a one-cycle
schedule; early stopping on the mean validation Pearson r over held-out training runs
(the last ``validation_runs`` of each subject), then, with ``refit``, the same model
trained again from its seed on every training run for the chosen number of epochs (the
validation runs are then data too); one model per seed, ensembled by averaging
predictions (:func:`predict`).

Test-time modality ablation (:func:`predict` with ``drop``) zeroes one space's
projection, as modality dropout does in training.
"""

from __future__ import annotations

import copy
import logging
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from neuroflow.config.transformer_options import DEFAULT_OPTIONS, resolve_options
from neuroflow.progress import Progress

from ._device import resolve_device

__all__ = [
    "DEFAULT_OPTIONS",
    "MultimodalEncoder",
    "SubjectData",
    "TrainedEncoder",
    "TrainingCurve",
    "predict",
    "resolve_options",
    "train_encoder",
    "window_index",
]

logger = logging.getLogger(__name__)


@dataclass
class SubjectData:
    """One subject's runs, as the encoder sees them.

    Attributes
    ----------
    name : str
        Subject label.
    features : list of dict of str to ndarray
        Per run, every feature space's aligned features, shape (n_times, n_features).
    targets : list of ndarray | None
        Per run, the BOLD, shape (n_times, n_targets); ``None`` for prediction only.
    """

    name: str
    features: list[dict[str, np.ndarray]]
    targets: list[np.ndarray] | None = None


def window_index(n_times: int, window: int, mode: str) -> tuple[np.ndarray, np.ndarray]:
    """Rows of a run's features that every TR's window holds.

    Parameters
    ----------
    n_times : int
        TRs of the run.
    window : int
        TRs per window.
    mode : {"causal", "centred"}
        ``causal``: TRs ``t - window + 1 .. t``; ``centred``: ``t - window // 2 ..
        t + (window - 1) // 2``.

    Returns
    -------
    index : ndarray of int, shape (n_times, window)
        Row of each window position, clipped into the run.
    valid : ndarray of bool, shape (n_times, window)
        Whether the position lies inside the run (outside: padding, masked).
    """
    start = -(window - 1) if mode == "causal" else -(window // 2)
    rows = np.arange(n_times)[:, None] + start + np.arange(window)[None, :]
    valid = (rows >= 0) & (rows < n_times)
    return np.clip(rows, 0, max(n_times - 1, 0)), valid


class HostDropout(nn.Module):
    """Dropout whose masks on the CPU come from NumPy's PCG64 generator.

    Same operation as :class:`torch.nn.Dropout` (each element zeroed with probability
    ``p`` in training, the others scaled by ``1 / (1 - p)``), but a CPU mask is drawn by
    NumPy, about 2.5 times faster than torch's CPU Bernoulli sampling (a 64 x 12 x 128
    batch: 0.24 ms against 0.61 ms); the demo's default transformer encoder (two seeds,
    one thread) trains about 10 % faster. Tensors on another device use
    :func:`torch.nn.functional.dropout`. The generator is shared by every dropout of a
    model, so one seed fixes all masks.

    Parameters
    ----------
    p : float
        Probability of zeroing an element.
    generator : numpy.random.Generator
        Source of the CPU masks.
    """

    def __init__(self, p: float, generator: np.random.Generator) -> None:
        super().__init__()
        self.p = float(p)
        self.generator = generator

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Drop elements of ``x`` (any shape) in training; identity in evaluation."""
        if not self.training or self.p == 0.0:
            return x
        if x.device.type != "cpu":
            return nn.functional.dropout(x, self.p, training=True)
        keep = self.generator.random(tuple(x.shape), dtype=np.float32) >= self.p
        scale = torch.from_numpy(keep).to(dtype=x.dtype).mul_(1.0 / (1.0 - self.p))
        return x * scale

    def extra_repr(self) -> str:
        return f"p={self.p}"


class MultimodalEncoder(nn.Module):
    """Projectors, transformer over a window of TRs, read-out and subject heads.

    Parameters
    ----------
    dims : dict of str to int
        Feature space -> its number of features (in input order).
    n_targets : dict of str to int
        Subject -> its number of targets.
    options : dict
        Resolved options (:func:`resolve_options`).
    """

    def __init__(
        self, dims: Mapping[str, int], n_targets: Mapping[str, int], options: Mapping[str, Any]
    ) -> None:
        super().__init__()
        hidden, p = int(options["hidden"]), float(options["dropout"])
        # one mask generator for every dropout, seeded from torch's (manual_seed fixes it)
        masks = np.random.default_rng(int(torch.randint(2**62, (1,)).item()))
        self.spaces = list(dims)
        self.subjects = list(n_targets)
        self.window = int(options["window_trs"])
        self.combine = str(options["combine"])
        self.projectors = nn.ModuleDict(
            {
                space: nn.Sequential(
                    nn.Linear(d, hidden), nn.LayerNorm(hidden), nn.GELU(), HostDropout(p, masks)
                )
                for space, d in dims.items()
            }
        )
        self.mix = (
            nn.Linear(hidden * len(dims), hidden) if self.combine == "concat" else nn.Identity()
        )
        self.position = nn.Parameter(torch.zeros(self.window, hidden))
        nn.init.normal_(self.position, std=0.02)
        self.shared_head = options["heads"] == "subject_embedding"
        self.subject_embedding = (
            nn.Embedding(len(self.subjects), hidden) if self.shared_head else None
        )
        layer = nn.TransformerEncoderLayer(
            hidden,
            int(options["n_heads"]),
            dim_feedforward=2 * hidden,
            dropout=p,
            activation="gelu",
            batch_first=True,
            norm_first=True,
        )
        self.encoder = nn.TransformerEncoder(
            layer, int(options["n_layers"]), enable_nested_tensor=False
        )
        for block in self.encoder.layers:  # attention weights keep torch's dropout
            for name in ("dropout", "dropout1", "dropout2"):
                setattr(block, name, HostDropout(p, masks))
        self.readout = nn.Parameter(torch.full((self.window, hidden), 1.0 / self.window))
        self.output = nn.Sequential(
            nn.LayerNorm(hidden), nn.Linear(hidden, hidden), nn.GELU(), HostDropout(p, masks)
        )
        if self.shared_head:
            sizes = set(n_targets.values())
            if len(sizes) != 1:
                raise ValueError(
                    "`transformer.heads: subject_embedding` needs the same targets in every "
                    f"subject, got {dict(n_targets)} instead; use heads: per_subject."
                )
            self.heads = nn.ModuleDict({"shared": nn.Linear(hidden, sizes.pop())})
        else:
            self.heads = nn.ModuleDict({s: nn.Linear(hidden, n) for s, n in n_targets.items()})

    def forward(
        self,
        features: Mapping[str, torch.Tensor],
        valid: torch.Tensor,
        subject: str,
        keep: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Predict one subject's targets at the windows' TRs.

        Parameters
        ----------
        features : dict of str to Tensor, each shape (batch, window, n_features)
            Every space's features over each window.
        valid : Tensor of bool, shape (batch, window)
            Window positions inside the run.
        subject : str
            Whose targets to predict.
        keep : Tensor of float, shape (batch, n_spaces) | None
            1 to keep a space's projection, 0 to drop it (modality dropout or ablation);
            ``None`` keeps all.

        Returns
        -------
        prediction : Tensor, shape (batch, n_targets of the subject)
        """
        parts = []
        for k, space in enumerate(self.spaces):
            z = self.projectors[space](features[space])
            if keep is not None:
                z = z * keep[:, k, None, None]
            parts.append(z)
        tokens = torch.cat(parts, dim=-1) if self.combine == "concat" else sum(parts)
        tokens = self.mix(tokens) + self.position
        if self.subject_embedding is not None:
            index = torch.tensor(self.subjects.index(subject), device=tokens.device)
            tokens = tokens + self.subject_embedding(index)
        tokens = tokens * valid[..., None]
        encoded = self.encoder(tokens, src_key_padding_mask=~valid)
        encoded = torch.nan_to_num(encoded) * valid[..., None]
        pooled = (encoded * self.readout).sum(dim=1)
        head = self.heads["shared" if self.shared_head else subject]
        return head(self.output(pooled))


@dataclass
class TrainingCurve:
    """What one seed's training went through, per epoch.

    Attributes
    ----------
    train_loss : list of float
        Mean training loss.
    val_r : list of float
        Mean validation Pearson r over subjects (each the mean over its targets).
    val_r_subject : list of list of float
        Per epoch, each subject's mean validation r.
    lr : list of float
        Learning rate at the epoch's end.
    seconds : list of float
        Wall time of the epoch (training and validation).
    train_seconds : list of float
        Wall time of the epoch's training steps alone.
    best_epoch : int
        Epoch (0-based) with the best validation r.
    n_samples : int
        Training windows per epoch (without the validation runs).
    val_r_targets : dict of str to ndarray, shape (n_targets,)
        Per validated subject, the Pearson r of every target on its validation runs at
        the best epoch (before any refit).
    refit_loss : list of float
        Training loss of each epoch of the refit on every training run (empty without
        a refit).
    """

    train_loss: list[float] = field(default_factory=list)
    val_r: list[float] = field(default_factory=list)
    val_r_subject: list[list[float]] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    train_seconds: list[float] = field(default_factory=list)
    best_epoch: int = -1
    n_samples: int = 0
    val_r_targets: dict[str, np.ndarray] = field(default_factory=dict)
    refit_loss: list[float] = field(default_factory=list)


@dataclass
class TrainedEncoder:
    """Trained models (one per seed) with the statistics to use them.

    Attributes
    ----------
    models : list of MultimodalEncoder
        One per seed, on the CPU, in evaluation mode.
    seeds : list of int
    curves : list of TrainingCurve
    options : dict
    target_mean, target_scale : dict of str to ndarray, shape (n_targets,)
        Per subject, the training statistics of its targets.
    spaces : list of str
    device : str
        Where it was trained.
    """

    models: list[MultimodalEncoder]
    seeds: list[int]
    curves: list[TrainingCurve]
    options: dict[str, Any]
    target_mean: dict[str, np.ndarray]
    target_scale: dict[str, np.ndarray]
    spaces: list[str]
    device: str


# ----------------------------------------------------------------------------- data
@dataclass
class _Windows:
    """One subject's runs as tensors: concatenated features and, per TR, its window."""

    subject: str
    features: dict[str, torch.Tensor]  # space -> (n_rows, n_features)
    index: torch.Tensor  # (n_samples, window) rows into features
    valid: torch.Tensor  # (n_samples, window)
    targets: torch.Tensor | None  # (n_samples, n_targets), z-scored


def _windows(
    data: SubjectData,
    runs: Sequence[int],
    spaces: Sequence[str],
    options: Mapping[str, Any],
    stats: tuple[np.ndarray, np.ndarray] | None,
) -> _Windows:
    """Stack the chosen runs of one subject into window tensors (CPU)."""
    feats: dict[str, list[np.ndarray]] = {s: [] for s in spaces}
    index, valid, targets = [], [], []
    offset = 0
    for r in runs:
        n = next(iter(data.features[r].values())).shape[0]
        for s in spaces:
            feats[s].append(np.asarray(data.features[r][s], dtype=np.float32))
        rows, ok = window_index(n, int(options["window_trs"]), str(options["window"]))
        index.append(rows + offset)
        valid.append(ok)
        offset += n
        if stats is not None and data.targets is not None:
            targets.append((np.asarray(data.targets[r], dtype=np.float32) - stats[0]) / stats[1])
    return _Windows(
        subject=data.name,
        features={s: torch.from_numpy(np.concatenate(v)) for s, v in feats.items()},
        index=torch.from_numpy(np.concatenate(index)),
        valid=torch.from_numpy(np.concatenate(valid)),
        targets=torch.from_numpy(np.concatenate(targets)) if targets else None,
    )


def _gather(w: _Windows, rows: torch.Tensor, device: torch.device) -> dict[str, torch.Tensor]:
    """Every space's features over the windows of ``rows`` (batch, window, n_features)."""
    idx = w.index[rows.to(w.index.device)]
    return {s: f[idx].to(device) for s, f in w.features.items()}


def _to_device(w: _Windows, device: torch.device) -> _Windows:
    """The same windows with every tensor on ``device`` (gathered there, copied once)."""
    if device.type == "cpu":
        return w
    return _Windows(
        subject=w.subject,
        features={s: f.to(device) for s, f in w.features.items()},
        index=w.index.to(device),
        valid=w.valid.to(device),
        targets=None if w.targets is None else w.targets.to(device),
    )


def _target_stats(data: SubjectData, runs: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Mean and SD (1 where constant) of a subject's targets over ``runs``."""
    assert data.targets is not None
    y = np.concatenate([np.asarray(data.targets[r], dtype=np.float64) for r in runs])
    sd = y.std(axis=0)
    return y.mean(axis=0).astype(np.float32), np.where(sd > 0, sd, 1.0).astype(np.float32)


# ----------------------------------------------------------------------------- training
def _loss(pred: torch.Tensor, target: torch.Tensor, kind: str) -> torch.Tensor:
    """Mean squared error, or 1 - the mean Pearson r over targets (across the batch)."""
    if kind == "mse":
        return torch.mean((pred - target) ** 2)
    p = pred - pred.mean(dim=0)
    t = target - target.mean(dim=0)
    r = (p * t).sum(0) / (p.norm(dim=0) * t.norm(dim=0) + 1e-8)
    return 1.0 - r.mean()


def _keep_mask(
    n: int, n_spaces: int, p: float, generator: torch.Generator, drop: int | None = None
) -> torch.Tensor:
    """(n, n_spaces) of 0/1: each space dropped with probability ``p``, never all."""
    if drop is not None:
        keep = torch.ones(n, n_spaces)
        keep[:, drop] = 0.0
        return keep
    keep = (torch.rand(n, n_spaces, generator=generator) >= p).float()
    none = keep.sum(1) == 0
    if none.any():
        pick = torch.randint(0, n_spaces, (int(none.sum()),), generator=generator)
        keep[none.nonzero()[:, 0], pick] = 1.0
    return keep


def _batches(
    sizes: Mapping[str, int], batch_size: int, generator: torch.Generator
) -> list[tuple[str, torch.Tensor]]:
    """One epoch of (subject, sample rows) batches: each subject's samples shuffled and
    cut into batches (a remainder shorter than half a batch joins the last full one, so
    that no batch is too small for a correlation loss), the batches of all subjects
    shuffled together."""
    out = []
    for subject, n in sizes.items():
        order = torch.randperm(n, generator=generator)
        starts = list(range(0, n, batch_size))
        if len(starts) > 1 and n - starts[-1] < batch_size // 2:
            starts.pop()  # a short remainder joins the batch before it
        ends = [*starts[1:], n]
        out += [(subject, order[a:b]) for a, b in zip(starts, ends, strict=True)]
    perm = torch.randperm(len(out), generator=generator).tolist()
    return [out[i] for i in perm]


@torch.no_grad()
def _predict_windows(
    model: MultimodalEncoder,
    w: _Windows,
    device: torch.device,
    batch_size: int,
    drop: int | None = None,
) -> np.ndarray:
    """Predictions (z-scored units) at every window of one subject, shape (n, n_targets)."""
    model.eval()
    out = []
    n_spaces = len(model.spaces)
    for start in range(0, w.index.shape[0], batch_size):
        rows = torch.arange(start, min(start + batch_size, w.index.shape[0]))
        keep = None if drop is None else _keep_mask(len(rows), n_spaces, 0.0, None, drop)
        pred = model(
            _gather(w, rows, device),
            w.valid[rows.to(w.valid.device)].to(device),
            w.subject,
            None if keep is None else keep.to(device),
        )
        out.append(pred.float().cpu().numpy())
    return np.concatenate(out)


def _target_r(pred: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Pearson r per target (constant targets or predictions count as 0), (n_targets,)."""
    p = pred - pred.mean(0)
    t = target - target.mean(0)
    den = np.linalg.norm(p, axis=0) * np.linalg.norm(t, axis=0)
    return np.divide((p * t).sum(0), den, out=np.zeros(p.shape[1]), where=den > 0)


def _train_one(
    seed: int,
    train: Mapping[str, _Windows],
    val: Mapping[str, _Windows],
    dims: Mapping[str, int],
    options: Mapping[str, Any],
    device: torch.device,
) -> tuple[MultimodalEncoder, TrainingCurve]:
    """Train one model; return it (best validation epoch, on the CPU) and its curve."""
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    n_targets = {s: int(w.targets.shape[1]) for s, w in train.items()}
    model = MultimodalEncoder(dims, n_targets, options).to(device)
    sizes = {s: int(w.index.shape[0]) for s, w in train.items()}
    batch_size, epochs = int(options["batch_size"]), int(options["epochs"])
    steps = sum(math.ceil(n / batch_size) for n in sizes.values())
    opt = torch.optim.AdamW(
        model.parameters(), lr=float(options["lr"]), weight_decay=float(options["weight_decay"])
    )
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=float(options["lr"]), total_steps=max(epochs * steps, 1)
    )
    amp = bool(options["mixed_precision"]) and device.type == "cuda"
    curve = TrainingCurve(n_samples=sum(sizes.values()))
    best, best_state, stale = -np.inf, copy.deepcopy(model.state_dict()), 0
    n_spaces = len(dims)
    # every batch of every epoch (an early stop ends it sooner)
    progress = Progress(epochs * steps, f"transformer training (seed {seed})", "batches")
    for epoch in range(epochs):
        start = time.perf_counter()
        model.train()
        total, count = 0.0, 0
        for subject, rows in _batches(sizes, batch_size, generator):
            w = train[subject]
            keep = _keep_mask(len(rows), n_spaces, float(options["modality_dropout"]), generator)
            rows = rows.to(w.index.device)
            with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=amp):
                pred = model(_gather(w, rows, device), w.valid[rows], subject, keep.to(device))
            loss = _loss(pred.float(), w.targets[rows], str(options["loss"]))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            schedule.step()
            total = total + loss.detach() * len(rows)
            count += len(rows)
            progress.update()
        trained_at = time.perf_counter()
        per_target = {
            s: _target_r(
                _predict_windows(model, v, device, 4 * batch_size), v.targets.cpu().numpy()
            )
            for s, v in val.items()
        }
        per_subject = [float(r.mean()) for r in per_target.values()]
        score = float(np.mean(per_subject)) if per_subject else float("nan")
        curve.train_loss.append(float(total) / max(count, 1))
        curve.val_r.append(score)
        curve.val_r_subject.append(per_subject)
        curve.lr.append(float(schedule.get_last_lr()[0]))
        curve.seconds.append(time.perf_counter() - start)
        curve.train_seconds.append(trained_at - start)
        if not per_subject or score > best + 1e-6:
            best, best_state, stale = score, copy.deepcopy(model.state_dict()), 0
            curve.best_epoch = epoch
            curve.val_r_targets = per_target
        else:
            stale += 1
            if stale >= int(options["patience"]):
                logger.info(
                    "seed %d: early stop at epoch %d (best %d).", seed, epoch, curve.best_epoch
                )
                break
    progress.close()
    model.load_state_dict(best_state)
    return model.cpu().eval(), curve


def _split_validation(
    subjects: Sequence[SubjectData], n_val: int
) -> dict[str, tuple[list[int], list[int]]]:
    """Per subject, (training runs, validation runs): its last ``n_val`` runs validate
    when it has more than ``n_val`` runs, else it trains on all and is not validated."""
    out = {}
    for data in subjects:
        runs = list(range(len(data.features)))
        if n_val and len(runs) > n_val:
            out[data.name] = (runs[:-n_val], runs[-n_val:])
        else:
            out[data.name] = (runs, [])
    return out


def _check_subjects(subjects: Sequence[SubjectData], spaces: Sequence[str]) -> dict[str, int]:
    """Feature dims per space; errors for missing spaces, shape or NaN mismatches."""
    if not subjects:
        raise ValueError("`subjects` must hold at least one subject, got none instead.")
    dims: dict[str, int] = {}
    for data in subjects:
        if data.targets is None or len(data.targets) != len(data.features):
            raise ValueError(
                f"sub-{data.name}: `targets` must hold one array per run "
                f"({len(data.features)}), got {None if data.targets is None else len(data.targets)}"
                " instead."
            )
        for r, (feats, y) in enumerate(zip(data.features, data.targets, strict=True)):
            missing = [s for s in spaces if s not in feats]
            if missing:
                raise ValueError(f"sub-{data.name} run {r}: feature spaces {missing} missing.")
            for s in spaces:
                x = feats[s]
                if x.ndim != 2 or x.shape[0] != y.shape[0]:
                    raise ValueError(
                        f"sub-{data.name} run {r}: features {s!r} must be (n_times="
                        f"{y.shape[0]}, n_features), got {x.shape} instead."
                    )
                if dims.setdefault(s, x.shape[1]) != x.shape[1]:
                    raise ValueError(
                        f"sub-{data.name} run {r}: features {s!r} must have {dims[s]} "
                        f"columns, got {x.shape[1]} instead."
                    )
            if not (np.isfinite(y).all() and all(np.isfinite(feats[s]).all() for s in spaces)):
                raise ValueError(f"sub-{data.name} run {r}: features or targets hold NaN/inf.")
    return {s: dims[s] for s in spaces}


def train_encoder(
    subjects: Sequence[SubjectData], spaces: Sequence[str], options: Mapping[str, Any] | None
) -> TrainedEncoder:
    """Train the multimodal encoder across subjects, one model per seed.

    Parameters
    ----------
    subjects : list of SubjectData
        Every subject's TRAINING runs (features and targets); held-out test runs must
        not be given. The last ``validation_runs`` runs of each subject with more runs
        than that are used for early stopping only.
    spaces : list of str
        Feature spaces, in the order of the projectors.
    options : dict | None
        See :data:`DEFAULT_OPTIONS`.

    Returns
    -------
    trained : TrainedEncoder
        The models (their best validation epoch, or with ``refit`` the refit on every
        training run for that many epochs; the last epoch when no subject could be
        validated), curves and target statistics (over the runs the final models saw).
    """
    opts = resolve_options(options)
    spaces = list(spaces)
    dims = _check_subjects(subjects, spaces)
    device = resolve_device(opts["device"])
    split = _split_validation(subjects, int(opts["validation_runs"]))
    # with a refit the final models see the validation runs: their statistics too
    stats_runs = {
        d.name: [*split[d.name][0], *(split[d.name][1] if opts["refit"] else [])] for d in subjects
    }
    stats = {d.name: _target_stats(d, stats_runs[d.name]) for d in subjects}
    train = {d.name: _windows(d, split[d.name][0], spaces, opts, stats[d.name]) for d in subjects}
    val = {
        d.name: _windows(d, split[d.name][1], spaces, opts, stats[d.name])
        for d in subjects
        if split[d.name][1]
    }
    if not val:
        logger.warning(
            "No subject has a validation run: training runs all %d epochs.", opts["epochs"]
        )
    models, curves = [], []
    train = {s: _to_device(w, device) for s, w in train.items()}
    val = {s: _to_device(w, device) for s, w in val.items()}
    was = torch.are_deterministic_algorithms_enabled()
    wanted = bool(opts["deterministic"]) and device.type == "cpu"
    if wanted != was:
        torch.use_deterministic_algorithms(wanted)
    refit = bool(opts["refit"]) and bool(val)
    if refit:
        full = {
            d.name: _to_device(
                _windows(d, [*split[d.name][0], *split[d.name][1]], spaces, opts, stats[d.name]),
                device,
            )
            for d in subjects
        }
    try:
        for seed in opts["seeds"]:
            model, curve = _train_one(seed, train, val, dims, opts, device)
            if refit:
                # the validation runs have chosen the number of epochs: train again on
                # every training run for that many, as the final model
                epochs = {**opts, "epochs": curve.best_epoch + 1}
                model, again = _train_one(seed, full, {}, dims, epochs, device)
                curve.refit_loss = again.train_loss
            models.append(model)
            curves.append(curve)
    finally:
        if wanted != was:
            torch.use_deterministic_algorithms(was)
    return TrainedEncoder(
        models=models,
        seeds=list(opts["seeds"]),
        curves=curves,
        options=opts,
        target_mean={s: m for s, (m, _) in stats.items()},
        target_scale={s: sd for s, (_, sd) in stats.items()},
        spaces=spaces,
        device=str(device),
    )


def predict(
    trained: TrainedEncoder,
    data: SubjectData,
    *,
    drop: str | None = None,
    per_seed: bool = False,
    device: str | None = None,
) -> np.ndarray:
    """Predict one subject's targets for every run of ``data`` (in original units).

    Parameters
    ----------
    trained : TrainedEncoder
    data : SubjectData
        The subject (one the encoder was trained on) and its runs' features.
    drop : str | None
        A feature space to leave out (its projection zeroed), for modality ablation.
    per_seed : bool
        Return each seed's prediction instead of their mean.
    device : str | None
        Where to compute (see :func:`~neuroflow.models.resolve_device`); ``None``: where
        the encoder was trained when that device is available, else the CPU.

    Returns
    -------
    prediction : ndarray, shape (n_times, n_targets) or (n_seeds, n_times, n_targets)
        Runs concatenated in order; the ensemble is the mean over seeds.
    """
    if data.name not in trained.target_mean:
        raise ValueError(
            f"`data.name` must be a subject the encoder was trained on "
            f"({sorted(trained.target_mean)}), got {data.name!r} instead."
        )
    if drop is not None and drop not in trained.spaces:
        raise ValueError(f"`drop` must be one of {trained.spaces}, got {drop!r} instead.")
    opts = trained.options
    runs = list(range(len(data.features)))
    w = _windows(data, runs, trained.spaces, opts, None)
    k = None if drop is None else trained.spaces.index(drop)
    if device is None:
        device = trained.device if trained.device == "cpu" or torch.cuda.is_available() else "cpu"
    dev = resolve_device(device)
    w = _to_device(w, dev)
    preds = []
    for model in trained.models:
        preds.append(_predict_windows(model.to(dev), w, dev, 4 * int(opts["batch_size"]), k))
        model.cpu()
    preds = np.stack(preds)
    preds = preds * trained.target_scale[data.name] + trained.target_mean[data.name]
    return preds.astype(np.float32) if per_seed else preds.mean(axis=0).astype(np.float32)
