"""Event-related studies in memory, cleaned and modelled as the workflow does, for
error-rate studies of the evaluation's significance tests over many seeds.

One subject, a few runs of short image events (onsets 3.5-6.5 s apart, HRF-convolved):

- planted responses: a ``visual`` ROI responds to every image, scaled by two image
  statistics; a ``category`` ROI responds to ``animal`` images only; every other brain
  voxel carries no response;
- noise: AR(1) with a coefficient per voxel (0.2-0.6), slow cosine drifts;
- head motion: random walks with a jerk at every image onset (stimulus-locked), leaking
  into every voxel through the six motion parameters, several times more strongly at
  the brain's edge than at its centre;
- cleaning: each run's constant, cosine drifts and six motion parameters projected out
  of the BOLD and of the design (``filter_design``), the basis kept as the prediction
  store's ``test_nuisance`` is;
- models: ridge fits on the training runs of four feature sets (``visual``,
  ``category``, ``full``, and ``unrelated``: random image features), predicting the
  held-out runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from dataset_shapes._common import ar1, ellipsoid, hrf_convolve

#: Feature columns of every model: 0 evoked, 1-2 image statistics, 3 animal, 4-6 random.
MODELS = {"visual": [0, 1, 2], "category": [3], "full": [0, 1, 2, 3], "unrelated": [4, 5, 6]}


@dataclass
class EventRelatedStudy:
    """Held-out runs of one simulated subject and every model's prediction of them.

    Attributes
    ----------
    y_test : ndarray, shape (n_test_times, n_voxels)
        Cleaned held-out BOLD (runs concatenated).
    y_pred : dict of str to ndarray, shape (n_test_times, n_voxels)
        Each model's prediction of ``y_test``.
    nuisance : ndarray, shape (n_test_times, n_nuisance)
        Orthonormal basis projected out of the held-out runs (block-diagonal over runs).
    segments : list of int
        Length of every held-out run.
    planted : ndarray of bool, shape (n_voxels,)
        Voxels with a planted response.
    roi : ndarray of str, shape (n_voxels,)
        ``visual``, ``category`` or ``other``.
    edge : ndarray, shape (n_voxels,)
        Distance of each voxel from the brain's centre (0 centre, about 1 at the edge).
    tr : float
        Repetition time (s).
    """

    y_test: np.ndarray
    y_pred: dict[str, np.ndarray]
    nuisance: np.ndarray
    segments: list[int]
    planted: np.ndarray
    roi: np.ndarray
    edge: np.ndarray
    tr: float


def _onsets(rng: np.random.Generator, n_volumes: int, tr: float) -> np.ndarray:
    onsets, t = [], float(rng.uniform(4.0, 6.0))
    while t < n_volumes * tr - 16.0:
        onsets.append(t)
        t += float(rng.uniform(3.5, 6.5))
    return np.array(onsets)


def _ridge_predict(x_train, y_train, x_test, alpha: float) -> np.ndarray:
    gram = x_train.T @ x_train + alpha * np.eye(x_train.shape[1])
    return x_test @ np.linalg.solve(gram, x_train.T @ y_train)


def simulate_event_related(
    seed: int,
    *,
    n_runs: int = 5,
    n_test_runs: int = 2,
    n_volumes: int = 100,
    tr: float = 2.0,
    grid_shape: tuple[int, int, int] = (9, 10, 8),
    snr: float = 0.3,
    motion_leak: float = 2.0,
    ridge_alpha: float = 10.0,
) -> EventRelatedStudy:
    """Simulate, clean and model one subject's event-related study.

    Parameters
    ----------
    seed : int
        Seed of every random draw.
    n_runs, n_test_runs : int
        Runs, and how many of the last ones are held out.
    n_volumes : int
        Volumes per run.
    tr : float
        Repetition time (s).
    grid_shape : tuple of int
        Grid holding the ellipsoidal brain.
    snr : float
        Variance of the planted response over that of the noise, in planted voxels;
        0 plants nothing.
    motion_leak : float
        Standard deviation of the motion artefact at the brain's edge, in noise SDs
        (a quarter of it at the centre).
    ridge_alpha : float
        Ridge penalty of every model.

    Returns
    -------
    study : EventRelatedStudy
    """
    rng = np.random.default_rng(seed)
    brain = ellipsoid(grid_shape, (0.0, 0.0, 0.0), (0.95, 0.95, 0.95))
    visual = ellipsoid(grid_shape, (0.0, -0.5, -0.1), (0.45, 0.35, 0.45)) & brain
    category = ellipsoid(grid_shape, (0.0, 0.45, 0.2), (0.4, 0.3, 0.4)) & brain & ~visual
    axes = np.meshgrid(*[np.linspace(-1.0, 1.0, n) for n in grid_shape], indexing="ij")
    edge = np.sqrt(sum(a**2 for a in axes))[brain] / 0.95
    roi = np.full(int(brain.sum()), "other", dtype=object)
    roi[visual[brain]] = "visual"
    roi[category[brain]] = "category"
    n_vox = roi.size
    leak = rng.standard_normal((6, n_vox)) * (0.25 + 0.75 * edge**3) * motion_leak
    gains = np.exp(0.3 * rng.standard_normal(n_vox))
    phi = rng.uniform(0.2, 0.6, n_vox)

    runs = []
    for _ in range(n_runs):
        onsets = _onsets(rng, n_volumes, tr)
        n_events = onsets.size
        values = np.column_stack(
            [
                np.ones(n_events),
                rng.standard_normal((n_events, 2)),  # image statistics
                (rng.uniform(size=n_events) < 0.5).astype(float),  # animal
                rng.standard_normal((n_events, 3)),  # features unrelated to the brain
            ]
        )
        design = hrf_convolve(values, onsets, np.ones(n_events), n_volumes, tr, oversampling=10)
        steps = rng.standard_normal((n_volumes, 6)) * 0.2
        steps[np.minimum((onsets // tr).astype(int), n_volumes - 1), 2] += 1.0
        motion = np.cumsum(steps, axis=0)
        motion = (motion - motion.mean(0)) / motion.std(0)
        frames = np.arange(n_volumes)
        cosines = np.cos(np.pi * (frames[:, None] + 0.5) * np.arange(1, 4) / n_volumes)
        noise = np.column_stack([ar1(rng, n_volumes, 1, p)[:, 0] for p in phi])
        bold = noise + 2.0 * cosines @ rng.standard_normal((3, n_vox)) + motion @ leak / np.sqrt(6)
        basis, _ = np.linalg.qr(np.column_stack([np.ones(n_volumes), cosines, motion]))
        runs.append((design, bold, basis))

    response = np.zeros((n_vox, 4))
    response[roi == "visual", :3] = [0.6, 1.0, 0.7]
    response[roi == "category", 3] = 1.0
    planted = response.any(axis=1) & (snr > 0)
    if planted.any():
        courses = np.concatenate([d[:, :4] for d, _, _ in runs]) @ response[planted].T
        scale = np.sqrt(snr) * gains[planted] / courses.std(axis=0)
        for design, bold, _ in runs:
            bold[:, planted] += design[:, :4] @ response[planted].T * scale

    def clean(a: np.ndarray, q: np.ndarray) -> np.ndarray:
        return a - q @ (q.T @ a)

    train, test = runs[: n_runs - n_test_runs], runs[n_runs - n_test_runs :]
    x_train = np.concatenate([clean(d, q) for d, _, q in train])
    y_train = np.concatenate([clean(b, q) for _, b, q in train])
    x_test = np.concatenate([clean(d, q) for d, _, q in test])
    y_test = np.concatenate([clean(b, q) for _, b, q in test])
    nuisance = np.zeros((y_test.shape[0], sum(q.shape[1] for *_, q in test)))
    row = col = 0
    for *_, q in test:
        nuisance[row : row + q.shape[0], col : col + q.shape[1]] = q
        row, col = row + q.shape[0], col + q.shape[1]
    y_pred = {
        name: _ridge_predict(x_train[:, cols], y_train, x_test[:, cols], ridge_alpha)
        for name, cols in MODELS.items()
    }
    return EventRelatedStudy(
        y_test=y_test,
        y_pred=y_pred,
        nuisance=nuisance,
        segments=[n_volumes] * n_test_runs,
        planted=planted,
        roi=roi.astype(str),
        edge=edge,
        tr=tr,
    )
