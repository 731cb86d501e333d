"""Registry of stimulus feature extractors.

An extractor is a class registered with :func:`register_extractor`. It declares
the stimulus modalities it accepts and, once built from a configuration entry,
the layers it can return. The stage code only talks to extractors through the
:class:`Extractor` interface, so new models plug in with one decorator::

    @register_extractor("my_model", modalities=("image",))
    class MyModel(Extractor):
        def layer_names(self): ...
        def extract(self, batch): ...

Class methods check an entry's own settings when the configuration is read
(:meth:`Extractor.check_entry`) and, for extractors whose layers depend on the
model's structure, name the layers before any model is built
(:meth:`Extractor.planned_layer_names`). Both run when a configuration is
checked or planned, so neither may import or call code the configuration names.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

__all__ = [
    "MODALITIES",
    "Extractor",
    "ExtractorInfo",
    "available_extractors",
    "check_modality",
    "get_extractor",
    "register_extractor",
]

#: Stimulus modalities an extractor can declare.
MODALITIES = ("image", "video", "text", "audio")

#: Modules whose import registers the built-in extractors.
_BUILTIN_MODULES = (
    "neuroflow.features.hf",
    "neuroflow.features.hf_audio",
    "neuroflow.features.sentence",
    "neuroflow.features.baselines",
    "neuroflow.features.events",
    "neuroflow.features.torch_module",
    "neuroflow.features.clip",
    "neuroflow.features.video",
)


@dataclass(frozen=True)
class ExtractorInfo:
    """What the registry knows about one extractor.

    Attributes
    ----------
    name : str
        Registry key used in configuration entries (``extractor: <name>``).
    modalities : tuple of str
        Stimulus modalities the extractor accepts.
    cls : type
        The :class:`Extractor` subclass.
    """

    name: str
    modalities: tuple[str, ...]
    cls: type[Extractor]


_REGISTRY: dict[str, ExtractorInfo] = {}


class Extractor(ABC):
    """Interface of a feature extractor built from one configuration entry.

    Parameters
    ----------
    config : dict
        The extractor's configuration entry, defaults filled in.
    modality : str
        Modality of the stimuli it will receive (one of its ``modalities``).

    Notes
    -----
    ``extract`` receives a list of loaded stimuli (see
    :mod:`neuroflow.stimuli` for each modality's type) and returns one
    ``(n_batch, n_features)`` float array per requested layer.

    Frame-level video features (``frame_rate`` set) go through
    ``extract_frames`` (a batch of sampled frames, one row each) or, for
    extractors with ``needs_all_frames`` (temporal filters such as motion
    energy), through ``extract_clip`` (every frame of one clip, rows at the
    sampled frames). Extractors that support neither cannot sample frames.

    Extractors whose rows at sampled times read the preceding ``window_s``
    seconds of the stimulus list the modalities they do it for in
    ``window_modalities`` and implement ``extract_windows`` (see
    :mod:`neuroflow.features.windows`): a batch of clips of ``window_length()``
    frames, each frame passed once through ``prepare_frame``, or a batch of
    audio windows.
    """

    #: Registry name, set by :func:`register_extractor`.
    name: ClassVar[str] = ""
    #: Accepted modalities, set by :func:`register_extractor`.
    modalities: ClassVar[tuple[str, ...]] = ()
    #: Layers used when the entry leaves ``layers`` unset.
    default_layers: ClassVar[tuple[str | Mapping[str, int | float], ...]] = ({"depth": 1.0},)
    #: The only layers a weight-free extractor has (empty for models).
    fixed_layers: ClassVar[tuple[str, ...]] = ()
    #: Frame-level features need every frame of a clip (``extract_clip``).
    needs_all_frames: ClassVar[bool] = False
    #: Modalities whose rows at ``frame_rate`` read a window of the stimulus (``extract_windows``).
    window_modalities: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config: Mapping[str, Any], modality: str) -> None:
        check_modality(self.name, modality)
        self.config = dict(config)
        self.modality = modality

    @classmethod
    def check_entry(cls, entry: dict[str, Any]) -> None:
        """Check, and complete, an entry's extractor-specific settings before any model loads.

        Called by :func:`neuroflow.features.config.fill_entry` once the defaults
        are filled and before ``layers: null`` takes :attr:`default_layers`, so
        it may fill keys left null (e.g. from a named preset).

        Parameters
        ----------
        entry : dict
            The entry, defaults filled in; completed in place.
        """
        return None

    @classmethod
    def planned_layer_names(cls, entry: Mapping[str, Any]) -> list[str] | None:
        """Layer names of an entry when the model, not ``layers`` alone, decides them.

        Parameters
        ----------
        entry : dict
            The entry, defaults filled in (see :func:`neuroflow.features.config.fill_entry`).

        Returns
        -------
        names : list of str | None
            What :meth:`layer_names` will return once the model is loaded; None
            (the default) means one name per ``layers`` entry (see
            :func:`neuroflow.features.config.layer_name`).
        """
        return None

    @abstractmethod
    def layer_names(self) -> list[str]:
        """Names of the layers ``extract`` returns, in configuration order."""

    @abstractmethod
    def extract(self, batch: Sequence[Any]) -> dict[str, np.ndarray]:
        """Features of one batch of stimuli.

        Parameters
        ----------
        batch : list
            Loaded stimuli of the extractor's modality.

        Returns
        -------
        features : dict of str to ndarray, shape (n_batch, n_features)
            One array per layer name.
        """

    def extract_frames(self, frames: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
        """Features of individual video frames, one row per frame.

        Parameters
        ----------
        frames : list of ndarray, shape (H, W, 3)
            Float32 RGB frames in [0, 1], transformed, possibly from several clips.

        Returns
        -------
        features : dict of str to ndarray, shape (n_frames, n_features)
            One array per layer name.
        """
        raise ValueError(
            f"Extractor {self.name!r} has no frame-level features; set `frame_rate: null` or "
            "use hf_vision, torch_module, image_statistics or motion_energy."
        )

    def extract_clip(
        self, frames: Iterable[np.ndarray], *, fps: float, indices: np.ndarray
    ) -> dict[str, np.ndarray]:
        """Features of one clip at chosen frames, computed from all of its frames.

        Parameters
        ----------
        frames : iterable of ndarray, shape (H, W, 3)
            Every frame of the clip in order (float32 RGB in [0, 1], transformed).
        fps : float
            The clip's frame rate.
        indices : ndarray of int, shape (n_samples,)
            Frames whose features are returned.

        Returns
        -------
        features : dict of str to ndarray, shape (n_samples, n_features)
            One array per layer name.
        """
        raise ValueError(f"Extractor {self.name!r} has no clip-level frame features.")

    def window_length(self) -> int:
        """Frames per video window (``extract_windows`` on videos).

        Returns
        -------
        n_frames : int
            Frames of each clip given to :meth:`extract_windows`.
        """
        raise ValueError(f"Extractor {self.name!r} has no windowed video features.")

    def prepare_frame(self, frame: np.ndarray) -> np.ndarray:
        """Model input of one video frame of a window, computed once per decoded frame.

        Parameters
        ----------
        frame : ndarray, shape (H, W, 3)
            Float32 RGB in [0, 1], transformed.

        Returns
        -------
        prepared : ndarray
            What :meth:`extract_windows` receives for this frame (the frame itself
            unless overridden).
        """
        return frame

    def extract_windows(self, windows: Sequence[Any]) -> dict[str, np.ndarray]:
        """Features of a batch of windows, one row each.

        Parameters
        ----------
        windows : list
            Video windows: ndarray, shape (window_length(), ...), the prepared
            frames (see :meth:`prepare_frame`) in time order. Audio windows:
            :class:`neuroflow.stimuli.audio.Audio` of ``window_s`` seconds
            ending at each row's time.

        Returns
        -------
        features : dict of str to ndarray, shape (n_windows, n_features)
            One array per layer name.
        """
        raise ValueError(
            f"Extractor {self.name!r} has no windowed features; set `frame_rate: null` or use "
            "hf_video (videos) or hf_audio (audio)."
        )

    def feature_names(self, layer: str, n_features: int) -> list[str] | None:
        """Names of a layer's features, where the extractor knows them.

        Called once the first batch is extracted. Named features (image statistics,
        motion-energy channels, word counts) become the ``feature_name`` coordinate
        of the store; a model's units have none.

        Parameters
        ----------
        layer : str
            A name of :meth:`layer_names`.
        n_features : int
            Width of the layer's rows.

        Returns
        -------
        names : list of str | None
            ``n_features`` names, or None (the default) for unnamed features.
        """
        return None

    def describe(self) -> dict[str, Any]:
        """Facts for provenance and store attributes (model id, weights, layers).

        Returns
        -------
        info : dict
            At least ``extractor`` and ``layers``; model extractors add
            ``model``, ``weights``, ``weights_sha256`` and per-layer details.
        """
        return {"extractor": self.name, "layers": {n: {"name": n} for n in self.layer_names()}}


def register_extractor(
    name: str, *, modalities: Sequence[str]
) -> Callable[[type[Extractor]], type[Extractor]]:
    """Class decorator that adds an extractor to the registry.

    Parameters
    ----------
    name : str
        Registry key.
    modalities : sequence of str
        Accepted modalities, a subset of :data:`MODALITIES`.

    Returns
    -------
    decorator : callable
        Registers the class and returns it unchanged.
    """
    bad = [m for m in modalities if m not in MODALITIES]
    if bad or not modalities:
        raise ValueError(
            f"`modalities` must be a non-empty subset of {MODALITIES}, got {list(modalities)} "
            "instead."
        )

    def decorator(cls: type[Extractor]) -> type[Extractor]:
        if not (isinstance(cls, type) and issubclass(cls, Extractor)):
            raise TypeError(f"{cls!r} must subclass Extractor to be registered.")
        if name in _REGISTRY and _REGISTRY[name].cls is not cls:
            raise ValueError(f"An extractor named {name!r} is already registered.")
        cls.name = name
        cls.modalities = tuple(modalities)
        _REGISTRY[name] = ExtractorInfo(name=name, modalities=tuple(modalities), cls=cls)
        return cls

    return decorator


def _load_builtins() -> None:
    for module in _BUILTIN_MODULES:
        importlib.import_module(module)


def available_extractors() -> dict[str, tuple[str, ...]]:
    """Registered extractors and the modalities each accepts.

    Returns
    -------
    extractors : dict of str to tuple of str
        Registry name to accepted modalities, sorted by name.
    """
    _load_builtins()
    return {name: _REGISTRY[name].modalities for name in sorted(_REGISTRY)}


def get_extractor(name: str) -> ExtractorInfo:
    """Look up a registered extractor.

    Parameters
    ----------
    name : str
        Registry key.

    Returns
    -------
    info : ExtractorInfo
        Name, modalities and class.
    """
    _load_builtins()
    if name not in _REGISTRY:
        raise ValueError(f"`extractor` must be one of {sorted(_REGISTRY)}, got {name!r} instead.")
    return _REGISTRY[name]


def check_modality(extractor: str, modality: str, *, source: str = "") -> None:
    """Fail clearly when an extractor does not accept a modality.

    Parameters
    ----------
    extractor : str
        Registry key.
    modality : str
        Stimulus modality.
    source : str
        Where the modality came from, appended to the message (e.g. the file
        extension it was inferred from).
    """
    info = get_extractor(extractor)
    if modality not in info.modalities:
        where = f" ({source})" if source else ""
        raise ValueError(
            f"Extractor {extractor!r} accepts {', '.join(info.modalities)} stimuli, got "
            f"modality {modality!r}{where} instead. Choose an extractor for {modality} or set "
            "`modality` to one it accepts (e.g. `modality: text` to use the captions)."
        )
