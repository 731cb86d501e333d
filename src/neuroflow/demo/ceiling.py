"""Noise ceilings of the demo's test movie after the default fMRI cleaning.

A perfect model can at best predict the noiseless signal as it survives cleaning:
detrending, the cosine high-pass and confound regression are one projection ``P_i``
per test run (:func:`neuroflow.preprocessing.fmri.clean.clean_signals`), which also
removes the part of the signal that lies in the nuisance span. The ceilings are
therefore computed with the same function, the default ``preprocess_fmri`` section and
the confounds tables the demo writes, so that they cannot drift from the pipeline.

For voxel ``v`` with noiseless test signal ``s``, repeats ``i = 1..n``, AR(1) noise
``e_i`` (variance ``sigma**2``, correlation matrix ``R``) and nuisance ``m_i`` (drift
plus motion, fixed as drawn)::

    t = mean_i P_i s                      # cleaned signal, averaged like the data
    u = mean_i P_i m_i                    # nuisance left over by cleaning
    E|noise|**2 = sigma**2 / n**2 * sum_i trace(P_i R)
    ceiling_mean = |t| / sqrt(|t|**2 + |u|**2 + E|noise|**2)

(all vectors have zero mean, since ``P_i`` removes the constant). ``ceiling_single``
is the same for one repeat. Per-run z-scoring rescales each repeat by nearly the same
factor and is ignored in the expectation; the realized value applies it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["CleaningModel", "cleaned_ceilings", "cleaning_models"]

#: Cleaned signal power below this fraction of the raw power counts as none.
_RTOL = 1e-12


class CleaningModel:
    """The default cleaning of one run, applied to arbitrary (time, voxel) arrays.

    Parameters
    ----------
    tr : float
        Repetition time in seconds.
    n_volumes : int
        Volumes in the run.
    config : dict
        A resolved ``preprocess_fmri`` section.
    confounds : path-like | None
        The run's confounds table.
    """

    def __init__(
        self, *, tr: float, n_volumes: int, config: Mapping[str, Any], confounds: Path | None
    ) -> None:
        from ..preprocessing.fmri.confounds import (
            non_steady_state_count,
            read_confounds_table,
            select_confounds,
        )

        table = read_confounds_table(confounds, n_volumes) if confounds is not None else None
        drop = config["drop_volumes"]
        self.n_drop = non_steady_state_count(table) if drop == "auto" else int(drop)
        selected = select_confounds(path=confounds, n_volumes=n_volumes, config=config["confounds"])
        regressors = selected.table.to_numpy(float)[self.n_drop :]
        outliers = selected.outliers[self.n_drop :]
        if outliers.any():
            spikes = np.zeros((regressors.shape[0], int(outliers.sum())))
            spikes[np.flatnonzero(outliers), np.arange(spikes.shape[1])] = 1.0
            regressors = np.hstack([regressors, spikes])
        self.confounds = regressors if regressors.shape[1] else None
        filt = config["high_pass"]["filter"]
        self.filter = None if filt == "none" else filt
        self.high_pass = config["high_pass"]["cutoff_hz"] if self.filter else None
        self.low_pass = config["low_pass_hz"] if filt == "butterworth" else None
        self.detrend_order = config["detrend_order"]
        self.standardize = bool(config["standardize"])
        self.tr = float(tr)

    def __call__(self, signals: np.ndarray, *, standardize: bool = False) -> np.ndarray:
        """Clean ``signals``, shape (n_volumes, n_columns), into (n_kept, n_columns)."""
        from ..preprocessing.fmri.clean import clean_signals

        return clean_signals(
            np.asarray(signals, np.float64)[self.n_drop :],
            t_r=self.tr,
            detrend_order=self.detrend_order,
            filter=self.filter,
            high_pass=self.high_pass,
            low_pass=self.low_pass,
            confounds=self.confounds,
            standardize=standardize,
        )


def cleaning_models(
    *,
    tr: float,
    n_volumes: int,
    confounds: Sequence[Path | None],
    config: Mapping[str, Any] | None = None,
) -> list[CleaningModel]:
    """The ``preprocess_fmri`` cleaning of each run (the default one unless given).

    Parameters
    ----------
    tr : float
        Repetition time in seconds.
    n_volumes : int
        Volumes per run.
    confounds : sequence of path-like | None
        Each run's confounds table (``None`` where the demo writes none).
    config : dict | None
        A possibly partial ``preprocess_fmri`` section; ``None`` uses the defaults.

    Returns
    -------
    models : list of CleaningModel
        One per run.
    """
    from ..preprocessing.fmri.stage import resolve_config

    resolved = resolve_config(config)
    return [
        CleaningModel(tr=tr, n_volumes=n_volumes, config=resolved, confounds=c) for c in confounds
    ]


def _ar1_correlation(n_times: int, phi: float) -> np.ndarray:
    """AR(1) correlation matrix ``phi ** |a - b|``, shape (n_times, n_times)."""
    lag = np.abs(np.subtract.outer(np.arange(n_times), np.arange(n_times)))
    return phi ** lag.astype(float)


def _ratio(power: np.ndarray, noise: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """``sqrt(power / (power + noise))``, 0 where ``power`` is at most ``floor``."""
    alive = power > floor
    return np.sqrt(np.divide(power, power + noise, out=np.zeros_like(power), where=alive))


def _corr(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson correlation of matching columns, shape (n_columns,); 0 for constant ones."""
    a = a - a.mean(axis=0)
    b = b - b.mean(axis=0)
    den = np.sqrt((a**2).sum(axis=0) * (b**2).sum(axis=0))
    return np.divide((a * b).sum(axis=0), den, out=np.zeros(a.shape[1]), where=den > 0)


#: Voxels per block of :func:`cleaned_ceilings` (the demo's grids fit in one).
_CHUNK = 16384


def cleaned_ceilings(
    *,
    signal: np.ndarray,
    noise: Sequence[np.ndarray],
    nuisance: Sequence[np.ndarray],
    models: Sequence[CleaningModel],
    noise_sd: float,
    ar_coef: float,
) -> dict[str, np.ndarray]:
    """Expected and realized ceilings of the test repeats after cleaning.

    Parameters
    ----------
    signal : ndarray, shape (n_volumes, n_voxels)
        Noiseless signal of the test movie (identical in every repeat), in PSC.
    noise : sequence of ndarray, shape (n_volumes, n_voxels)
        AR noise of each repeat as drawn, in PSC.
    nuisance : sequence of ndarray, shape (n_volumes, n_voxels)
        Drift plus motion of each repeat as drawn, in PSC.
    models : sequence of CleaningModel
        The cleaning of each repeat.
    noise_sd : float
        Stationary standard deviation of the AR noise.
    ar_coef : float
        AR(1) coefficient of the noise.

    Returns
    -------
    ceilings : dict of str to ndarray, shape (n_voxels,)
        ``ceiling_single`` and ``ceiling_mean`` (expected correlation of the cleaned
        signal with one cleaned repeat / the mean of the cleaned repeats) and
        ``ceiling_realized`` (the drawn single-repeat correlation, z-scored as the
        stage does, averaged over repeats). Zero where the cleaned signal is constant.
    """
    n_rep = len(models)
    if not (len(noise) == len(nuisance) == n_rep) or n_rep == 0:
        raise ValueError(
            f"`noise`, `nuisance` and `models` must have one entry per repeat (>= 1), got "
            f"{len(noise)}, {len(nuisance)} and {n_rep} instead."
        )
    n_voxels = signal.shape[1]
    if n_voxels > _CHUNK:
        # per-voxel quantities: a chunk of voxels at a time keeps whole-brain grids in memory
        parts = [
            cleaned_ceilings(
                signal=signal[:, cols],
                noise=[e[:, cols] for e in noise],
                nuisance=[x[:, cols] for x in nuisance],
                models=models,
                noise_sd=noise_sd,
                ar_coef=ar_coef,
            )
            for cols in (slice(i, i + _CHUNK) for i in range(0, n_voxels, _CHUNK))
        ]
        return {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}
    n_volumes = signal.shape[0]
    corr = _ar1_correlation(n_volumes, ar_coef)
    cleaned = [m(signal) for m in models]
    left = [m(x) for m, x in zip(models, nuisance, strict=True)]
    noise_trace = [float(np.trace(m(corr)[:, m.n_drop :])) for m in models]
    raw_power = ((signal - signal.mean(axis=0)) ** 2).sum(axis=0)
    floor = _RTOL * raw_power
    single = [
        _ratio((c**2).sum(axis=0), (u**2).sum(axis=0) + noise_sd**2 * trace, floor)
        for c, u, trace in zip(cleaned, left, noise_trace, strict=True)
    ]
    same_length = len({c.shape[0] for c in cleaned}) == 1
    target = np.mean(cleaned, axis=0) if same_length else cleaned[0]
    left_mean = np.mean(left, axis=0) if same_length else left[0]
    e_noise = noise_sd**2 * sum(noise_trace) / n_rep**2
    mean = _ratio((target**2).sum(axis=0), (left_mean**2).sum(axis=0) + e_noise, floor)
    realized = [
        np.where(
            (c**2).sum(axis=0) > floor,
            _corr(c, m(signal + e + x, standardize=m.standardize)),
            0.0,
        )
        for c, m, e, x in zip(cleaned, models, noise, nuisance, strict=True)
    ]
    return {
        "ceiling_single": np.mean(single, axis=0),
        "ceiling_mean": mean,
        "ceiling_realized": np.mean(realized, axis=0),
    }
