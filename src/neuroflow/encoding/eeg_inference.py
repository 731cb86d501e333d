"""Inference on EEG encoding maps: cluster permutation tests and bootstrap peak intervals.

An EEG encoding model is scored by the Pearson r, over stimuli, between each stimulus's
predicted and observed (repeat-averaged) response, at every channel × latency. Taking
the largest of thousands of such r values, or the latency where their channel mean
peaks, says little without a null that accounts for that search. This module gives:

* :func:`cluster_permutation_test`: a cluster-mass test over channel adjacency × time
  (Maris & Oostenveld, 2007), as :func:`mne.stats.permutation_cluster_1samp_test`
  forms clusters (the adjacency comes from :func:`mne.channels.find_ch_adjacency` and
  :func:`mne.stats.combine_adjacency`; without channel positions, clusters run along
  latency within each channel). The r map is turned into the t statistic of a
  correlation, ``t = r sqrt((n - 2) / (1 - r²))``; targets whose t exceeds the
  one-sided cluster-forming threshold are grouped into clusters of adjacent targets,
  whose mass is the sum of their t. The null moves the features between the scored
  stimuli: for a held-out test set (one model fitted on other stimuli) that permutes
  the predictions; for cross-validated predictions every outer fold's model is refitted
  with the moved features (:class:`FoldRefit`, the folds and each fold's penalties
  kept), since a stimulus's response also trains the other folds' models and
  permuting predictions alone gives too narrow a null. The largest cluster mass of
  every permuted map bounds the family-wise error over all channels and latencies: a
  cluster's p-value is ``(1 + #{permuted maps whose largest mass >= its mass}) / (1 +
  n_permutations)``.
* :func:`peak_course` and :func:`bootstrap_peak_latency`: the peak latency is where the
  largest r over channels peaks, at or after the onset (:mod:`neuroflow.peaks`); a
  focal response (an occipital P1 on a few of 64 channels) stands out there, while the
  mean over channels dilutes it below the noise of the mean. Its interval is the
  percentile interval of that latency over ``n`` resamplings of the stimuli with
  replacement.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse
from scipy import stats
from scipy.sparse.csgraph import connected_components

from neuroflow.models.selection import select_penalty
from neuroflow.peaks import peak_index

__all__ = [
    "ADJACENCY_MODES",
    "ClusterTest",
    "FoldRefit",
    "bootstrap_peak_latency",
    "channel_adjacency",
    "cluster_forming_threshold",
    "cluster_permutation_test",
    "correlation_t",
    "find_clusters",
    "peak_course",
    "target_adjacency",
]

#: ``inference.adjacency`` values: channel neighbours x latency when positions allow,
#: or latency only (clusters never join two channels).
ADJACENCY_MODES = ("auto", "time")
#: Tolerance of mass comparisons (masses are sums of float64 t values).
_MASS_TOL = 1e-9


@dataclass(frozen=True)
class ClusterTest:
    """Outcome of :func:`cluster_permutation_test`.

    Attributes
    ----------
    t_obs : ndarray of float64, shape (n_latencies, n_channels)
        The correlation t statistic of every target (0 where r is undefined).
    labels : ndarray of int64, shape (n_latencies, n_channels)
        Cluster of every target, 1 for the largest mass, 2 for the next...; 0 outside.
    masses : ndarray of float64, shape (n_clusters,)
        Sum of ``t_obs`` over each cluster, in decreasing order.
    p_values : ndarray of float64, shape (n_clusters,)
        Family-wise p-value of each cluster (NaN without permutations).
    null_max_mass : ndarray of float64, shape (n_permutations,)
        Largest cluster mass of every permuted map (0 when it has none).
    threshold : float
        Cluster-forming threshold on ``t_obs``.
    adjacency : str
        ``"channel x latency"`` or ``"latency"``: what joined targets into clusters.
    """

    t_obs: np.ndarray
    labels: np.ndarray
    masses: np.ndarray
    p_values: np.ndarray
    null_max_mass: np.ndarray
    threshold: float
    adjacency: str

    def target_p(self) -> np.ndarray:
        """p-value of each target's cluster, NaN outside clusters (n_latencies, n_channels)."""
        p = np.full(self.labels.shape, np.nan)
        inside = self.labels > 0
        p[inside] = self.p_values[self.labels[inside] - 1]
        return p


def correlation_t(r: np.ndarray, n: int) -> np.ndarray:
    """t statistic of Pearson correlations over ``n`` pairs, ``r sqrt((n - 2) / (1 - r²))``.

    Parameters
    ----------
    r : array-like, shape (...)
        Correlations; NaN (undefined) gives 0.
    n : int
        Number of pairs (at least 3).

    Returns
    -------
    t : ndarray of float64, shape (...)
        Finite: ``|r| = 1`` is clipped just below 1.
    """
    if n < 3:
        raise ValueError(f"`n` must be at least 3 stimuli, got {n} instead.")
    r = np.clip(np.nan_to_num(np.asarray(r, dtype=np.float64), nan=0.0), -1 + 1e-12, 1 - 1e-12)
    return r * np.sqrt((n - 2) / (1.0 - r**2))


def cluster_forming_threshold(p: float, n: int) -> float:
    """The t a correlation over ``n`` pairs must exceed to be one-sided significant at ``p``.

    Parameters
    ----------
    p : float
        One-sided p-value in (0, 1).
    n : int
        Number of pairs (at least 3).

    Returns
    -------
    t : float
        ``t.ppf(1 - p, n - 2)`` (Student's t with ``n - 2`` degrees of freedom).
    """
    if not 0 < p < 1:
        raise ValueError(f"`cluster_threshold` must be in (0, 1), got {p!r} instead.")
    if n < 3:
        raise ValueError(f"`n` must be at least 3 stimuli, got {n} instead.")
    return float(stats.t.ppf(1.0 - p, n - 2))


def channel_adjacency(
    positions: np.ndarray | None, names: Sequence[str]
) -> scipy.sparse.csr_array | None:
    """Which channels neighbour each other, as MNE finds them, or ``None`` without positions.

    Parameters
    ----------
    positions : ndarray, shape (n_channels, 3) | None
        Sensor positions (m, head frame); ``None`` or any non-finite row means unknown.
    names : sequence of str, shape (n_channels,)
        Channel names (a layout MNE ships for them is used when it has one, else a
        Delaunay triangulation of the positions; see
        :func:`mne.channels.find_ch_adjacency`).

    Returns
    -------
    adjacency : scipy.sparse.csr_array of bool, shape (n_channels, n_channels) | None
        Symmetric, with the diagonal set.
    """
    import mne

    names = [str(n) for n in names]
    if positions is None:
        return None
    positions = np.asarray(positions, dtype=np.float64)
    if positions.shape != (len(names), 3):
        raise ValueError(
            f"`positions` must have shape ({len(names)}, 3), got {positions.shape} instead."
        )
    if not np.isfinite(positions).all() or len(names) < 4:
        return None
    info = mne.create_info(names, 1000.0, "eeg")
    montage = mne.channels.make_dig_montage(
        dict(zip(names, positions, strict=True)), coord_frame="head"
    )
    with mne.utils.use_log_level("error"):
        info.set_montage(montage)
        adjacency, found = mne.channels.find_ch_adjacency(info, "eeg")
    order = [list(found).index(n) for n in names]
    adjacency = scipy.sparse.csr_array(adjacency)[order][:, order]
    return scipy.sparse.csr_array(adjacency + scipy.sparse.eye_array(len(names)) > 0)


def target_adjacency(
    n_latencies: int, channels: scipy.sparse.sparray | None, n_channels: int
) -> scipy.sparse.csr_array:
    """Adjacency of the (latency, channel) targets, flattened latency-major.

    Parameters
    ----------
    n_latencies : int
        Latencies; consecutive ones are adjacent.
    channels : scipy.sparse array, shape (n_channels, n_channels) | None
        Channel neighbours (:func:`channel_adjacency`); ``None``: no two channels are
        adjacent (clusters along latency only).
    n_channels : int
        Channels.

    Returns
    -------
    adjacency : scipy.sparse.csr_array, shape (n_latencies * n_channels,) * 2
        Target ``l * n_channels + c`` is (latency ``l``, channel ``c``), as
        :func:`mne.stats.combine_adjacency` lays them out.
    """
    from mne.stats import combine_adjacency

    if channels is None:
        channels = scipy.sparse.csr_array((n_channels, n_channels), dtype=np.float64)
    if channels.shape != (n_channels, n_channels):
        raise ValueError(
            f"`channels` must have shape ({n_channels}, {n_channels}), got {channels.shape} "
            "instead."
        )
    return scipy.sparse.csr_array(combine_adjacency(int(n_latencies), channels))


def find_clusters(
    stat: np.ndarray, threshold: float, adjacency: scipy.sparse.csr_array
) -> tuple[np.ndarray, np.ndarray]:
    """Clusters of adjacent targets whose statistic exceeds a threshold, and their masses.

    Parameters
    ----------
    stat : ndarray, shape (n_latencies, n_channels)
        Statistic of every target.
    threshold : float
        Targets with ``stat > threshold`` form clusters.
    adjacency : scipy.sparse.csr_array, shape (n_targets, n_targets)
        From :func:`target_adjacency`.

    Returns
    -------
    labels : ndarray of int64, shape (n_latencies, n_channels)
        1.. in decreasing order of mass (ties in order of first target), 0 outside.
    masses : ndarray of float64, shape (n_clusters,)
        Sum of ``stat`` over each cluster, decreasing.
    """
    stat = np.asarray(stat, dtype=np.float64)
    flat = stat.ravel()
    if adjacency.shape != (flat.size, flat.size):
        raise ValueError(
            f"`adjacency` must have shape ({flat.size}, {flat.size}), got {adjacency.shape} "
            "instead."
        )
    above = np.flatnonzero(flat > threshold)
    labels = np.zeros(flat.size, dtype=np.int64)
    if above.size == 0:
        return labels.reshape(stat.shape), np.zeros(0)
    sub = adjacency[above][:, above]
    n, comp = connected_components(sub, directed=False)
    masses = np.bincount(comp, weights=flat[above], minlength=n)
    order = np.argsort(-masses, kind="stable")
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(1, n + 1)
    labels[above] = rank[comp]
    return labels.reshape(stat.shape), masses[order]


def peak_course(r: np.ndarray) -> np.ndarray:
    """The largest r over channels at every latency (NaN where no channel has one).

    Parameters
    ----------
    r : array-like, shape (..., n_latencies, n_channels)
        Scores per latency and channel.

    Returns
    -------
    course : ndarray of float64, shape (..., n_latencies)
    """
    r = np.asarray(r, dtype=np.float64)
    finite = np.isfinite(r)
    best = np.where(finite, r, -np.inf).max(axis=-1)
    return np.where(finite.any(axis=-1), best, np.nan)


def _standardized(values: np.ndarray) -> np.ndarray:
    """Columns centred and scaled to unit norm (constant columns become 0), float64."""
    x = np.asarray(values, dtype=np.float64)
    x = x - x.mean(axis=0)
    norm = np.sqrt((x**2).sum(axis=0))
    return np.divide(x, norm, out=np.zeros_like(x), where=norm > 0)


def _check_pair(y_pred: np.ndarray, y_obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    y_pred = np.asarray(y_pred)
    y_obs = np.asarray(y_obs)
    if y_pred.ndim != 3 or y_pred.shape != y_obs.shape:
        raise ValueError(
            "`y_pred` and `y_obs` must have one shape (n_stimuli, n_latencies, n_channels), "
            f"got {y_pred.shape} and {y_obs.shape} instead."
        )
    if y_pred.shape[0] < 3:
        raise ValueError(f"At least 3 stimuli are needed, got {y_pred.shape[0]} instead.")
    return y_pred, y_obs


class FoldRefit:
    """The cross-validated ridge predictions, recomputed with features moved between stimuli.

    Permuting which stimulus carries which features and refitting every outer fold's
    model is what makes the permutation null of cross-validated scores exact: a
    stimulus's response is training data for the other folds' models, so permuting the
    predictions alone (without refitting) leaves the observed r map about twice as
    variable as its null, and the family-wise error far above its level. The refit is
    done in closed form from per-stimulus sums of the epochs, with the penalty each
    fold's model chose for each target (:func:`neuroflow.models.ridge_cv` minimises
    ``||Z b - y||² + alpha ||b||²`` on the training epochs' standardised features
    ``Z`` and centred responses), at about ``3 * n_features * n_stimuli * n_targets``
    operations per permutation.

    Parameters
    ----------
    features : ndarray, shape (n_stimuli, n_features)
        Raw features of every stimulus the fits saw; the scored stimuli first.
    sums : ndarray, shape (n_stimuli, n_targets)
        Sum of each stimulus's epochs (responses, any units).
    counts : ndarray of int, shape (n_stimuli,)
        Epochs of each stimulus.
    folds : ndarray of int, shape (n_stimuli,)
        Outer fold of each scored stimulus (``0 .. n_folds - 1``), -1 for stimuli that
        are only ever trained on (after the scored ones).
    alphas : ndarray, shape (n_folds, n_targets)
        The penalty each fold's model chose for each target.
    standardize : bool
        Whether the fits scaled the features to unit SD (over their training epochs).
    alpha_grid : ndarray, shape (n_alphas,) | None
        The candidate penalties. Given with ``inner`` and ``squares``, every refit
        chooses its penalties again by the inner cross-validation, as
        :func:`neuroflow.models.ridge_cv` does with ``scoring="r2"`` (epoch-level R² of
        the validation stimuli, averaged over inner folds, ties to the largest penalty):
        penalties tuned to the observed pairing would otherwise give the observed map an
        edge over the permuted ones. This costs about ``n_inner_folds * n_alphas * n_val *
        min(n_features, n_train) * n_targets`` operations per outer fold and permutation
        (``bench/bench_eeg_null.py``). ``None``: the permutations keep ``alphas``.
    inner : list of list of ndarray of int | None
        Per outer fold, the stimuli (rows) of each inner validation fold.
    squares : ndarray, shape (n_stimuli, n_targets) | None
        Sum of squares of each stimulus's epochs.
    """

    def __init__(
        self,
        features: np.ndarray,
        sums: np.ndarray,
        counts: np.ndarray,
        folds: np.ndarray,
        alphas: np.ndarray,
        standardize: bool,
        *,
        alpha_grid: np.ndarray | None = None,
        inner: Sequence[Sequence[np.ndarray]] | None = None,
        squares: np.ndarray | None = None,
    ) -> None:
        self.features = np.asarray(features, dtype=np.float64)
        self.sums = np.asarray(sums, dtype=np.float64)
        self.counts = np.asarray(counts, dtype=np.float64)
        self.folds = np.asarray(folds)
        self.alphas = np.asarray(alphas, dtype=np.float64)
        self.standardize = bool(standardize)
        n = self.features.shape[0]
        if self.sums.shape[0] != n or self.counts.shape != (n,) or self.folds.shape != (n,):
            raise ValueError(
                f"`sums`, `counts` and `folds` must have {n} rows like `features`, got "
                f"{self.sums.shape}, {self.counts.shape} and {self.folds.shape} instead."
            )
        scored = self.folds >= 0
        self.n_scored = int(scored.sum())
        if not scored[: self.n_scored].all():
            raise ValueError("The scored stimuli (`folds` >= 0) must come first.")
        self.fold_ids = np.unique(self.folds[scored])
        if self.alphas.shape != (self.fold_ids.size, self.sums.shape[1]):
            raise ValueError(
                f"`alphas` must have shape ({self.fold_ids.size}, {self.sums.shape[1]}), got "
                f"{self.alphas.shape} instead."
            )
        # what a permutation never changes: the responses summed over each training set
        self._train_sums = [self.sums[self.folds != k].sum(axis=0) for k in self.fold_ids]
        self.alpha_grid = None if alpha_grid is None else np.asarray(alpha_grid, np.float64)
        self._inner: list[list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = []
        if self.alpha_grid is not None:
            if inner is None or squares is None or len(inner) != self.fold_ids.size:
                raise ValueError(
                    "`inner` (one list of validation folds per outer fold) and `squares` "
                    "must be given with `alpha_grid`."
                )
            squares = np.asarray(squares, dtype=np.float64)
            for k, val_sets, train_sum in zip(self.fold_ids, inner, self._train_sums, strict=True):
                mean = train_sum / self.counts[self.folds != k].sum()
                parts = []
                for val in val_sets:
                    val = np.asarray(val)
                    n_val = self.counts[val].sum()
                    # sum of squares of the centred validation epochs, and about their mean
                    total = squares[val].sum(0) - 2 * mean * self.sums[val].sum(0) + n_val * mean**2
                    centre = self.sums[val].sum(0) / n_val - mean
                    parts.append((val, total, total - n_val * centre**2))
                self._inner.append(parts)
        self.reselects = self.alpha_grid is not None

    def predict(self, order: np.ndarray | None = None) -> np.ndarray:
        """Predictions of the scored stimuli when scored stimulus ``i`` has the features
        of scored stimulus ``order[i]``.

        Parameters
        ----------
        order : ndarray of int, shape (n_scored,) | None
            A permutation of the scored stimuli; ``None`` keeps the observed features.

        Returns
        -------
        y_pred : ndarray of float64, shape (n_scored, n_targets)
            Centred on each fold's training mean (no intercept).
        """
        features = self.features
        if order is not None:
            features = features.copy()
            features[: self.n_scored] = self.features[np.asarray(order)]
        weighted = None  # (n_features, n_targets), all stimuli: for the primal form only
        out = np.empty((self.n_scored, self.sums.shape[1]))
        for i, (k, train_sum) in enumerate(zip(self.fold_ids, self._train_sums, strict=True)):
            held = self.folds == k
            train = ~held
            c = self.counts[train]
            mean = c @ features[train] / c.sum()
            centred = features - mean
            scale = np.sqrt(c @ centred[train] ** 2 / c.sum()) if self.standardize else None
            scale = np.ones_like(mean) if scale is None else np.where(scale > 0, scale, 1.0)
            z = centred / scale
            if z.shape[1] > int(train.sum()):  # the kernel form needs no Gram matrix
                alphas = self.alphas[i] if not self.reselects else self._choose_dual(i, z, train)
                out[held[: self.n_scored]] = self._dual(z, c, train, held, train_sum, alphas)
                continue
            if weighted is None:
                weighted = features.T @ self.sums
            gram = (z * self.counts[:, None])[train].T @ z[train]
            # z[train].T @ centred responses, from the sum over all stimuli less the
            # held-out ones (the centring drops out: the counts weigh z to 0 mean)
            cross = weighted - features[held].T @ self.sums[held] - np.outer(mean, train_sum)
            cross /= scale[:, None]
            alphas = self.alphas[i] if not self.reselects else self._choose(i, z, gram, cross)
            lam, vec = np.linalg.eigh(gram)
            coef = (vec.T @ cross) / (lam[:, None] + alphas[None, :])
            out[held[: self.n_scored]] = (z[held] @ vec) @ coef
        return out

    def _dual(
        self,
        z: np.ndarray,
        counts: np.ndarray,
        train: np.ndarray,
        held: np.ndarray,
        train_sum: np.ndarray,
        alphas: np.ndarray,
    ) -> np.ndarray:
        """Held-out predictions of one fold from the stimulus-space (kernel) form.

        With more features than training stimuli, ``(A'A + alpha I)^-1 A' u`` equals
        ``A' (A A' + alpha I)^-1 u`` (``A = sqrt(counts) z``, ``u`` the centred sums over
        ``sqrt(counts)``), so the eigendecomposition is of the training stimuli's
        ``(n_train, n_train)`` kernel instead of the ``(n_features, n_features)`` Gram
        matrix: the same predictions for a wide layer at a fraction of the cost.

        Parameters
        ----------
        z : ndarray, shape (n_stimuli, n_features)
            Features centred (and scaled) on the fold's training epochs.
        counts : ndarray, shape (n_train,)
            Epochs of each training stimulus.
        train, held : ndarray of bool, shape (n_stimuli,)
            The fold's training and held-out stimuli.
        train_sum : ndarray, shape (n_targets,)
            Responses summed over the training epochs.
        alphas : ndarray, shape (n_targets,)
            Penalty of each target.

        Returns
        -------
        y_pred : ndarray, shape (n_held, n_targets)
        """
        root = np.sqrt(counts)
        a = z[train] * root[:, None]
        lam, vec = np.linalg.eigh(a @ a.T)
        mean = train_sum / counts.sum()
        u = (self.sums[train] - counts[:, None] * mean) / root[:, None]
        coef = (vec.T @ u) / (np.clip(lam, 0.0, None)[:, None] + alphas[None, :])
        return (z[held] @ a.T @ vec) @ coef

    def _choose(self, i: int, z: np.ndarray, gram: np.ndarray, cross: np.ndarray) -> np.ndarray:
        """Penalty per target of outer fold ``i`` by its inner cross-validation (R²), each
        inner fit solved in feature space (the ``(n_features, n_features)`` Gram matrix)."""
        mean = self._train_sums[i] / self.counts[self.folds != self.fold_ids[i]].sum()
        scores = np.zeros((self.alpha_grid.size, cross.shape[1]))
        for val, total, ss_tot in self._inner[i]:
            c = self.counts[val]
            yv = self.sums[val] - c[:, None] * mean  # centred epochs summed per stimulus
            zv = z[val]
            lam, vec = np.linalg.eigh(gram - (zv * c[:, None]).T @ zv)
            coef = vec.T @ (cross - zv.T @ yv)  # (p, T) in the inner fit's eigenbasis
            scores += self._validation_r2(zv @ vec, coef, lam, c, yv, total, ss_tot)
        return self.alpha_grid[select_penalty(scores / len(self._inner[i]), self.alpha_grid)]

    def _choose_dual(self, i: int, z: np.ndarray, train: np.ndarray) -> np.ndarray:
        """As :meth:`_choose`, each inner fit solved in stimulus space (the kernel of its
        training stimuli, a block of the outer fold's kernel): exact for layers with more
        features than training stimuli, at ``n_stimuli`` rather than ``n_features`` cost."""
        mean = self._train_sums[i] / self.counts[train].sum()
        rows = np.flatnonzero(train)
        kernel = z[rows] @ z[rows].T  # (n_train, n_train)
        position = np.full(train.size, -1)
        position[rows] = np.arange(rows.size)
        scores = np.zeros((self.alpha_grid.size, self.sums.shape[1]))
        for val, total, ss_tot in self._inner[i]:
            keep = np.ones(rows.size, dtype=bool)
            keep[position[val]] = False
            fit = rows[keep]
            root = np.sqrt(self.counts[fit])
            lam, vec = np.linalg.eigh(kernel[np.ix_(keep, keep)] * np.outer(root, root))
            u = (self.sums[fit] - self.counts[fit, None] * mean) / root[:, None]
            basis = (kernel[np.ix_(position[val], keep)] * root[None, :]) @ vec
            c = self.counts[val]
            yv = self.sums[val] - c[:, None] * mean
            lam = np.clip(lam, 0.0, None)
            scores += self._validation_r2(basis, vec.T @ u, lam, c, yv, total, ss_tot)
        return self.alpha_grid[select_penalty(scores / len(self._inner[i]), self.alpha_grid)]

    def _validation_r2(
        self,
        basis: np.ndarray,
        coef: np.ndarray,
        lam: np.ndarray,
        counts: np.ndarray,
        yv: np.ndarray,
        total: np.ndarray,
        ss_tot: np.ndarray,
    ) -> np.ndarray:
        """Epoch-level validation R² of every candidate penalty of one inner fit.

        The fit's validation predictions are ``basis @ (w * coef)`` with ``w = 1 / (lam +
        alpha)``, so the validation error is ``total - 2 w.(coef * basis'yv) + |R (w *
        coef)|²`` where ``R`` is the triangular factor of ``sqrt(counts) basis``: at most
        ``n_val * m * n_targets`` operations per penalty, no ``m * m * n_targets`` array.

        Parameters
        ----------
        basis : ndarray, shape (n_val, m)
            Validation stimuli in the inner fit's eigenbasis.
        coef : ndarray, shape (m, n_targets)
            The fit's cross-products in that basis.
        lam : ndarray, shape (m,)
            Its eigenvalues.
        counts : ndarray, shape (n_val,)
            Epochs of each validation stimulus.
        yv : ndarray, shape (n_val, n_targets)
            Their centred epochs, summed per stimulus.
        total, ss_tot : ndarray, shape (n_targets,)
            Sum of squares of the centred validation epochs, and about their mean.

        Returns
        -------
        r2 : ndarray, shape (n_alphas, n_targets)
            0 where the validation epochs do not vary.
        """
        w = 1.0 / (lam[None, :] + self.alpha_grid[:, None])  # (alpha, m)
        factor = np.linalg.qr(np.sqrt(counts)[:, None] * basis, mode="r")
        fitted = (factor[None, :, :] * w[:, None, :]) @ coef  # (alpha, k, T), k <= n_val
        sse = np.einsum("akt,akt->at", fitted, fitted)
        linear = w @ (coef * (basis.T @ yv))
        linear *= 2.0
        sse -= linear
        sse += total
        varies = ss_tot > 0
        with np.errstate(divide="ignore"):
            sse *= np.where(varies, -1.0 / ss_tot, 0.0)
        sse += varies  # 1 - sse / ss_tot, in place
        return sse


def cluster_permutation_test(
    y_pred: np.ndarray,
    y_obs: np.ndarray,
    adjacency: scipy.sparse.csr_array,
    *,
    n_permutations: int,
    threshold: float,
    seed: int = 0,
    refit: FoldRefit | None = None,
    adjacency_name: str = "channel x latency",
) -> ClusterTest:
    """Cluster-mass permutation test of the encoding r map (see the module notes).

    Parameters
    ----------
    y_pred : ndarray, shape (n_stimuli, n_latencies, n_channels)
        Predicted response of every scored stimulus.
    y_obs : ndarray, shape (n_stimuli, n_latencies, n_channels)
        Its observed (repeat-averaged) response.
    adjacency : scipy.sparse.csr_array, shape (n_targets, n_targets)
        From :func:`target_adjacency`.
    n_permutations : int
        Permuted maps (0: clusters without p-values).
    threshold : float
        One-sided cluster-forming p-value of each target's correlation
        (:func:`cluster_forming_threshold`).
    seed : int
        Seed of the permutations.
    refit : FoldRefit | None
        For cross-validated predictions: each permutation moves the features between
        the scored stimuli and refits the folds' models, and the observed map is
        recomputed the same way (``y_pred`` is then only checked for its shape).
        ``None``: the predictions come from one model fitted on other stimuli (a
        held-out test set), and permutations move the predictions between the scored
        stimuli.
    adjacency_name : str
        What the adjacency joins, recorded in the result.

    Returns
    -------
    result : ClusterTest
    """
    y_pred, y_obs = _check_pair(y_pred, y_obs)
    n, n_lat, n_ch = y_pred.shape
    if isinstance(n_permutations, bool) or not isinstance(n_permutations, int | np.integer):
        raise ValueError(f"`n_permutations` must be an int >= 0, got {n_permutations!r} instead.")
    if n_permutations < 0:
        raise ValueError(f"`n_permutations` must be an int >= 0, got {n_permutations} instead.")
    if refit is not None and refit.n_scored != n:
        raise ValueError(f"`refit` predicts {refit.n_scored} stimuli, `y_pred` has {n} instead.")
    t_crit = cluster_forming_threshold(threshold, n)
    zy = _standardized(y_obs.reshape(n, -1))
    observed = y_pred.reshape(n, -1) if refit is None else refit.predict()
    zp = _standardized(observed)
    t_obs = correlation_t((zp * zy).sum(axis=0), n).reshape(n_lat, n_ch)
    labels, masses = find_clusters(t_obs, t_crit, adjacency)
    rng = np.random.default_rng(seed)
    null_max = np.zeros(n_permutations)
    for i in range(n_permutations):
        order = rng.permutation(n)
        permuted = zp[order] if refit is None else _standardized(refit.predict(order))
        r = np.einsum("nt,nt->t", permuted, zy)
        _, null_masses = find_clusters(correlation_t(r, n).reshape(n_lat, n_ch), t_crit, adjacency)
        null_max[i] = max(null_masses.max(initial=0.0), 0.0)
    if n_permutations:
        ranked = np.sort(null_max)
        below = np.searchsorted(ranked, masses - _MASS_TOL, side="left")
        p_values = (1.0 + n_permutations - below) / (1.0 + n_permutations)
    else:
        p_values = np.full(masses.shape, np.nan)
    return ClusterTest(
        t_obs=t_obs,
        labels=labels,
        masses=masses,
        p_values=p_values,
        null_max_mass=null_max,
        threshold=t_crit,
        adjacency=adjacency_name,
    )


def bootstrap_peak_latency(
    y_pred: np.ndarray,
    y_obs: np.ndarray,
    latencies: np.ndarray,
    *,
    n_bootstraps: int,
    level: float = 0.95,
    seed: int = 0,
    block_targets: int = 2048,
) -> tuple[np.ndarray, np.ndarray]:
    """Peak latency of the largest r over channels in resamplings of the stimuli.

    Parameters
    ----------
    y_pred, y_obs : ndarray, shape (n_stimuli, n_latencies, n_channels)
        Predicted and observed (repeat-averaged) responses of the scored stimuli.
    latencies : ndarray, shape (n_latencies,)
        Seconds; the peak is searched at latencies ``>= 0`` only.
    n_bootstraps : int
        Resamplings of the stimuli with replacement (0: no interval).
    level : float
        Coverage of the percentile interval, in (0, 1).
    seed : int
        Seed of the resampling.
    block_targets : int
        Targets (whole latencies of channels) resampled at once: memory holds about
        ``6 * n_bootstraps * block_targets`` floats.

    Returns
    -------
    peaks : ndarray of float64, shape (n_bootstraps,)
        Peak latency (s) of every resampling (NaN where no r is defined at or after the
        onset).
    interval : ndarray of float64, shape (2,)
        Lower and upper percentile limits (NaN without resamplings).
    """
    y_pred, y_obs = _check_pair(y_pred, y_obs)
    if not 0 < level < 1:
        raise ValueError(f"`ci_level` must be in (0, 1), got {level!r} instead.")
    n, n_lat, n_ch = y_pred.shape
    latencies = np.asarray(latencies, dtype=np.float64)
    if latencies.shape != (n_lat,):
        raise ValueError(f"`latencies` must have shape ({n_lat},), got {latencies.shape} instead.")
    if isinstance(n_bootstraps, bool) or not isinstance(n_bootstraps, int | np.integer):
        raise ValueError(f"`n_bootstraps` must be an int >= 0, got {n_bootstraps!r} instead.")
    if n_bootstraps < 1:
        if n_bootstraps < 0:
            raise ValueError(f"`n_bootstraps` must be an int >= 0, got {n_bootstraps} instead.")
        return np.zeros(0), np.full(2, np.nan)
    rng = np.random.default_rng(seed)
    # share of each stimulus in every resample, (n_bootstraps, n)
    weights = (
        np.stack(
            [np.bincount(rng.integers(0, n, n), minlength=n) for _ in range(n_bootstraps)]
        ).reshape(n_bootstraps, n)
        / n
    )
    # centred, unit-norm columns keep the weighted moments well conditioned in float32
    p = _standardized(y_pred.reshape(n, -1)).reshape(n, n_lat, n_ch).astype(np.float32)
    y = _standardized(y_obs.reshape(n, -1)).reshape(n, n_lat, n_ch).astype(np.float32)
    weights = weights.astype(np.float32)
    course = np.full((n_bootstraps, n_lat), np.nan)
    step = max(1, block_targets // n_ch)
    for start in range(0, n_lat, step):
        sl = slice(start, min(start + step, n_lat))
        pb, yb = p[:, sl].reshape(n, -1), y[:, sl].reshape(n, -1)
        sp, sy, spp, syy, spy = (weights @ m for m in (pb, yb, pb * pb, yb * yb, pb * yb))
        cov = (spy - sp * sy).astype(np.float64)
        var = ((spp - sp**2) * (syy - sy**2)).astype(np.float64)
        ok = var > 1e-30
        r = np.where(ok, cov / np.sqrt(np.where(ok, var, 1.0)), np.nan)
        course[:, sl] = peak_course(r.reshape(n_bootstraps, -1, n_ch))
    index = np.asarray(peak_index(course, latencies)).reshape(n_bootstraps)
    peaks = np.where(index >= 0, latencies[np.maximum(index, 0)], np.nan)
    finite = peaks[np.isfinite(peaks)]
    if finite.size == 0:
        return peaks, np.full(2, np.nan)
    tail = 100 * (1 - level) / 2
    return peaks, np.percentile(finite, [tail, 100 - tail])
