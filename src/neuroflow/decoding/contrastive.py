"""Contrastive (CLIP-style) decoder from brain responses to a frozen feature space.

A linear map (or a one-hidden-layer MLP) projects standardised brain responses into the
space of the stimulus features; both sides are L2-normalised and the symmetric InfoNCE
loss (cross-entropy of brain→stimulus and stimulus→brain similarities, scaled by a
learnable temperature) pulls each response toward its own stimulus. The feature space
is frozen. Training uses training stimuli only; a validation split of the training
stimuli (whole stimuli, so repeats do not leak) stops training when its loss stops
improving, and the best weights are kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import lazy_loader
import numpy as np

from neuroflow.models import resolve_device

torch = lazy_loader.load("torch")

__all__ = ["ContrastiveDecoder", "contrastive_options", "fit_contrastive", "info_nce"]


def info_nce(brain: torch.Tensor, features: torch.Tensor, log_scale: torch.Tensor) -> torch.Tensor:
    """Symmetric InfoNCE loss of paired embeddings.

    Parameters
    ----------
    brain : Tensor, shape (n_items, n_dims)
        Projected brain responses.
    features : Tensor, shape (n_items, n_dims)
        Features of each item's stimulus (row ``i`` pairs with ``brain[i]``).
    log_scale : Tensor, shape ()
        Log of the inverse temperature.

    Returns
    -------
    loss : Tensor, shape ()
        Mean of the brain→stimulus and stimulus→brain cross-entropies.
    """
    b = torch.nn.functional.normalize(brain, dim=1)
    f = torch.nn.functional.normalize(features, dim=1)
    logits = log_scale.exp() * b @ f.T
    target = torch.arange(b.shape[0], device=b.device)
    ce = torch.nn.functional.cross_entropy
    return 0.5 * (ce(logits, target) + ce(logits.T, target))


@dataclass
class ContrastiveDecoder:
    """A trained projection of brain responses into a feature space.

    Attributes
    ----------
    model : torch.nn.Module
        The projection (on CPU after training).
    x_mean, x_scale : ndarray, shape (n_brain,)
        Standardisation of the brain responses.
    temperature : float
        Learned temperature (inverse of the logit scale).
    history : dict of str to list of float
        ``train_loss`` and ``val_loss`` per epoch.
    best_epoch : int
        Epoch whose weights were kept.
    """

    model: torch.nn.Module
    x_mean: np.ndarray
    x_scale: np.ndarray
    temperature: float
    history: dict[str, list[float]] = field(default_factory=dict)
    best_epoch: int = 0

    def transform(self, X: np.ndarray) -> np.ndarray:
        """Project brain responses into the feature space.

        Parameters
        ----------
        X : array-like, shape (n_items, n_brain)
            Brain responses.

        Returns
        -------
        Z : ndarray of float32, shape (n_items, n_features)
        """
        Xs = (np.asarray(X, dtype=np.float64) - self.x_mean) / self.x_scale
        with torch.no_grad():
            return self.model(torch.as_tensor(Xs, dtype=torch.float32)).numpy()


def _make_model(n_in: int, n_out: int, hidden: int | None) -> torch.nn.Module:
    if not hidden:
        return torch.nn.Linear(n_in, n_out)
    return torch.nn.Sequential(
        torch.nn.Linear(n_in, hidden), torch.nn.GELU(), torch.nn.Linear(hidden, n_out)
    )


def _validation_split(
    stimuli: np.ndarray, fraction: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    uniq = np.unique(stimuli)
    n_val = max(1, round(fraction * uniq.size))
    if uniq.size - n_val < 2:
        raise ValueError(
            f"`val_fraction` {fraction} leaves fewer than 2 training stimuli of {uniq.size}."
        )
    val_ids = rng.choice(uniq, size=n_val, replace=False)
    is_val = np.isin(stimuli, val_ids)
    return np.flatnonzero(~is_val), np.flatnonzero(is_val)


def fit_contrastive(
    X: np.ndarray,
    F: np.ndarray,
    stimuli: Sequence[str] | np.ndarray,
    *,
    hidden: int | None = None,
    max_epochs: int = 300,
    patience: int = 20,
    lr: float = 1e-3,
    weight_decay: float = 1e-2,
    batch_size: int = 256,
    val_fraction: float = 0.2,
    init_temperature: float = 0.07,
    seed: int = 0,
    device: str = "auto",
) -> ContrastiveDecoder:
    """Train a contrastive projection on training stimuli, with early stopping.

    Parameters
    ----------
    X : array-like, shape (n_items, n_brain)
        Brain responses of the training items.
    F : array-like, shape (n_items, n_features)
        Frozen features of each item's stimulus.
    stimuli : array-like of str, shape (n_items,)
        Stimulus of each item; the validation split holds whole stimuli.
    hidden : int | None
        Hidden units of an MLP; ``None`` or 0 for a linear map.
    max_epochs, patience : int
        Epoch budget and epochs without validation improvement before stopping.
    lr, weight_decay : float
        AdamW settings.
    batch_size : int
        Stimuli per step. Each epoch draws one presentation per training stimulus, so
        no batch holds two copies of the same target.
    val_fraction : float
        Share of training stimuli held out for early stopping, in ``(0, 1)``.
    init_temperature : float
        Initial temperature (learnable, clamped to ``[0.01, 1]``).
    seed : int
        Seed of initialisation, splits and batches.
    device : str
        ``"auto"`` (CUDA when present), ``"cpu"`` or ``"cuda"``.

    Returns
    -------
    decoder : ContrastiveDecoder
    """
    X = np.asarray(X, dtype=np.float64)
    F = np.asarray(F, dtype=np.float64)
    stimuli = np.asarray([str(v) for v in np.asarray(stimuli).ravel()], dtype=str)
    if X.ndim != 2 or F.ndim != 2 or X.shape[0] != F.shape[0] or stimuli.shape != (X.shape[0],):
        raise ValueError(
            "`X` (n_items, n_brain), `F` (n_items, n_features) and `stimuli` (n_items,) must "
            f"agree, got {X.shape}, {F.shape} and {stimuli.shape} instead."
        )
    if not 0 < val_fraction < 1:
        raise ValueError(f"`val_fraction` must be in (0, 1), got {val_fraction!r} instead.")
    dev = resolve_device(device)
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    train, val = _validation_split(stimuli, val_fraction, rng)
    x_mean, x_scale = X[train].mean(axis=0), X[train].std(axis=0)
    x_scale = np.where(x_scale > 0, x_scale, 1.0)
    Xs = torch.as_tensor((X - x_mean) / x_scale, dtype=torch.float32, device=dev)
    Ft = torch.as_tensor(F, dtype=torch.float32, device=dev)
    model = _make_model(X.shape[1], F.shape[1], hidden).to(dev)
    log_scale = torch.nn.Parameter(torch.tensor(np.log(1.0 / init_temperature), device=dev))
    opt = torch.optim.AdamW(
        [{"params": model.parameters()}, {"params": [log_scale], "weight_decay": 0.0}],
        lr=lr,
        weight_decay=weight_decay,
    )
    by_stim_train = {s: train[stimuli[train] == s] for s in np.unique(stimuli[train])}
    val_one = np.array([val[stimuli[val] == s][0] for s in np.unique(stimuli[val])])
    history: dict[str, list[float]] = {"train_loss": [], "val_loss": []}
    best, best_epoch, best_state, waited = np.inf, 0, None, 0
    val_t = torch.as_tensor(val, device=dev)
    stim_val = stimuli[val]
    for epoch in range(int(max_epochs)):
        model.train()
        # one random presentation per stimulus, so no batch holds duplicate targets
        items = np.array([rng.choice(idx) for idx in by_stim_train.values()])
        rng.shuffle(items)
        losses = []
        for start in range(0, items.size, batch_size):
            idx = torch.as_tensor(items[start : start + batch_size], device=dev)
            if idx.numel() < 2:
                continue
            opt.zero_grad()
            loss = info_nce(model(Xs[idx]), Ft[idx], log_scale)
            loss.backward()
            opt.step()
            with torch.no_grad():
                log_scale.clamp_(0.0, float(np.log(100.0)))
            losses.append(float(loss.detach()))
        model.eval()
        with torch.no_grad():
            # average repeats of each validation stimulus before scoring
            z = model(Xs[val_t])
            zs = torch.stack(
                [z[torch.as_tensor(stim_val == s)].mean(0) for s in np.unique(stim_val)]
            )
            val_loss = float(info_nce(zs, Ft[torch.as_tensor(val_one, device=dev)], log_scale))
        history["train_loss"].append(float(np.mean(losses)) if losses else np.nan)
        history["val_loss"].append(val_loss)
        if val_loss < best - 1e-6:
            best, best_epoch, waited = val_loss, epoch, 0
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            best_scale = float(log_scale.detach())
        else:
            waited += 1
            if waited >= patience:
                break
    if best_state is not None:
        model.load_state_dict(best_state)
    model = model.cpu().eval()
    return ContrastiveDecoder(
        model=model,
        x_mean=x_mean,
        x_scale=x_scale,
        temperature=float(np.exp(-best_scale)),
        history=history,
        best_epoch=best_epoch,
    )


def contrastive_options(config: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments of :func:`fit_contrastive` from the ``decoding.contrastive`` section.

    Parameters
    ----------
    config : dict
        ``hidden`` (0 for a linear map), ``max_epochs``, ``patience``, ``lr``,
        ``weight_decay``, ``val_fraction`` and ``device``.

    Returns
    -------
    options : dict
    """
    keys = ("max_epochs", "patience", "lr", "weight_decay", "val_fraction", "device")
    return {"hidden": config["hidden"] or None, **{k: config[k] for k in keys}}
