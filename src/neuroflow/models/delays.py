"""Hemodynamic delays applied to stimulus features, one run at a time.

Both functions are pure: an array of shape (n_times, n_features) for ONE run goes in,
a delayed array comes out. Samples before the start of the run are zeros, so nothing
leaks across run boundaries; apply them per run and concatenate afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = [
    "ENCODER_HRF_LIBRARY",
    "SHIFTED_HRF_MODELS",
    "TR_HRF_MODELS",
    "apply_delays",
    "delay_variants",
    "fir_delays",
    "hrf_convolve",
    "variant_delays",
]

#: SPM's canonical HRF (which peaks at 5 s) moved in time: name -> (model, shift in s).
#: An HRF library of them covers the peak times of human responses (about 4-7 s).
SHIFTED_HRF_MODELS: dict[str, tuple[str, float]] = {
    "spm peak 4 s": ("spm", -1.0),
    "spm peak 6 s": ("spm", 1.0),
    "spm peak 7 s": ("spm", 2.0),
}

#: HRF models :func:`hrf_convolve` applies to features sampled once per TR.
TR_HRF_MODELS = ("glover", "spm", *SHIFTED_HRF_MODELS)

#: The encoder's default HRF library (``encoding.delays.hrf_model``): Glover's HRF and
#: SPM's peaking at 4, 5, 6 and 7 s. Per voxel the encoder keeps the model that
#: cross-validates best on the training runs, so that a feature space is not scored by how
#: well one canonical shape fits a voxel (on generated movies: at least 0.95 of an oracle
#: given each voxel's HRF, against 0.72-0.85 with Glover's alone when responses peak at
#: 4-7 s; ``bench/bench_ranking_fidelity.py``).
ENCODER_HRF_LIBRARY = ("glover", "spm peak 4 s", "spm", "spm peak 6 s", "spm peak 7 s")


def fir_delays(X: np.ndarray, lags: Sequence[int]) -> np.ndarray:
    """Stack time-shifted copies of the features (finite impulse response model).

    Parameters
    ----------
    X : ndarray, shape (n_times, n_features)
        Features of one run.
    lags : sequence of int
        Shifts in samples (TRs); a positive lag ``d`` makes row ``t`` of the copy hold
        ``X[t - d]``. Missing rows are zeros.

    Returns
    -------
    X_delayed : ndarray, shape (n_times, n_features * len(lags))
        Copies in the order of ``lags``: columns ``[i * n_features, (i + 1) * n_features)``
        hold the copy shifted by ``lags[i]``.
    """
    X = _check_2d(X)
    lags = [int(d) for d in lags]
    if not lags:
        raise ValueError("`lags` must hold at least one int, got an empty sequence instead.")
    if len(set(lags)) != len(lags):
        raise ValueError(f"`lags` must not repeat values, got {lags} instead.")
    n_times, n_features = X.shape
    out = np.zeros((n_times, n_features * len(lags)), dtype=X.dtype)
    for i, lag in enumerate(lags):
        block = out[:, i * n_features : (i + 1) * n_features]
        if abs(lag) >= n_times:
            continue
        if lag >= 0:
            block[lag:] = X[: n_times - lag]
        else:
            block[:lag] = X[-lag:]
    return out


def hrf_convolve(
    X: np.ndarray, tr: float, *, hrf_model: str = "glover", time_length: float = 32.0
) -> np.ndarray:
    """Convolve the features with a canonical hemodynamic response function.

    Parameters
    ----------
    X : ndarray, shape (n_times, n_features)
        Features of one run, sampled once per TR.
    tr : float
        Repetition time in seconds.
    hrf_model : str
        One of :data:`TR_HRF_MODELS`: a canonical HRF from
        :mod:`nilearn.glm.first_level` (``"glover"``, ``"spm"``), or SPM's moved to peak
        at 4, 6 or 7 s (:data:`SHIFTED_HRF_MODELS`; nilearn's ``onset``).
    time_length : float
        Length of the HRF kernel in seconds.

    Returns
    -------
    X_conv : ndarray, shape (n_times, n_features)
        Causal convolution, truncated to the run (samples before onset are zeros).
    """
    from nilearn.glm.first_level import glover_hrf, spm_hrf

    X = _check_2d(X)
    if not (isinstance(tr, int | float) and tr > 0):
        raise ValueError(f"`tr` must be a positive float, got {tr!r} instead.")
    if hrf_model not in TR_HRF_MODELS:
        raise ValueError(f"`hrf_model` must be one of {TR_HRF_MODELS}, got {hrf_model!r} instead.")
    canonical, shift = SHIFTED_HRF_MODELS.get(hrf_model, (hrf_model, 0.0))
    make = glover_hrf if canonical == "glover" else spm_hrf
    kernel = make(float(tr), oversampling=1, time_length=time_length, onset=shift)
    kernel = kernel / kernel.sum()
    if X.shape[0] == 0:
        return X.copy()
    # scipy.signal takes ~0.5 s to import: planning never filters
    from scipy.signal import lfilter

    conv = lfilter(kernel, [1.0], X.astype(np.float64), axis=0)  # causal, zero initial state
    return conv.astype(X.dtype, copy=False)


def apply_delays(X: np.ndarray, spec: dict, tr: float) -> np.ndarray:
    """Apply the ``delays`` configuration to the features of one run.

    Parameters
    ----------
    X : ndarray, shape (n_times, n_features)
        Features of one run.
    spec : dict
        ``{"method": "fir", "lags": [...]}``, ``{"method": "hrf", "hrf_model": ...}`` or
        ``{"method": "none"}``.
    tr : float
        Repetition time in seconds (used by ``"hrf"``).

    Returns
    -------
    X_delayed : ndarray, shape (n_times, n_out)
        ``n_out`` is ``n_features * len(lags)`` for FIR, else ``n_features``.
    """
    method = spec.get("method", "fir")
    if method == "fir":
        return fir_delays(X, spec.get("lags", [1, 2, 3, 4]))
    if method == "hrf":
        return hrf_convolve(X, tr, hrf_model=spec.get("hrf_model", "glover"))
    if method == "none":
        return _check_2d(X).copy()
    raise ValueError(f"`delays.method` must be 'fir', 'hrf' or 'none', got {method!r} instead.")


def delay_variants(spec: dict) -> list[dict]:
    """One ``delays`` specification per HRF model of a library.

    Parameters
    ----------
    spec : dict
        A ``delays`` section. With ``method: hrf``, ``hrf_model`` may be a list of
        :data:`TR_HRF_MODELS` (an HRF library, whose models the encoder fits one at a time
        and chooses among per target on the training runs).

    Returns
    -------
    specs : list of dict
        ``spec`` with one ``hrf_model`` each, in the library's order; ``[spec]`` when
        there is no library (a list of one model becomes that model).
    """
    models = spec.get("hrf_model")
    if spec.get("method") != "hrf" or not isinstance(models, list | tuple):
        return [dict(spec)]
    if not models:
        raise ValueError("`delays.hrf_model` must name at least one HRF model, got [] instead.")
    unknown = [m for m in models if m not in TR_HRF_MODELS]
    if unknown or len(set(models)) != len(models):
        raise ValueError(
            f"`delays.hrf_model` must list distinct models of {TR_HRF_MODELS}, got "
            f"{list(models)} instead."
        )
    return [{**spec, "hrf_model": str(m)} for m in models]


def variant_delays(spec: dict, variant: int) -> dict:
    """The ``delays`` of HRF model ``variant`` of ``spec``'s library (``spec`` without one)."""
    specs = delay_variants(spec)
    return specs[variant] if len(specs) > 1 else specs[0]


def _check_2d(X: np.ndarray) -> np.ndarray:
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"`X` must be 2-D (n_times, n_features), got shape {X.shape} instead.")
    return X
