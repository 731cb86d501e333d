"""Layer sweeps: one encoding model per layer of one extractor.

An entry of ``encoding.models`` with ``layer_sweep: true`` and one feature space naming
an extractor (``feature_spaces: [effnet]``) stands for one model per layer that the
extractor writes. :func:`expand_layer_sweeps` replaces it, before anything is planned,
by models named ``<sweep>__<layer>`` (the file-system-safe form of the identifier
``<sweep>:<layer>``, :func:`neuroflow.names.file_form`; the layer's store name kept
as it is), each with the feature space ``<extractor>:<layer>`` and the sweep entry's
other settings. Every layer model is then
an ordinary model: its own version, jobs, stores and summary rows, so adding a layer
refits only that layer. The summary groups them back into a layer × ROI table
(:mod:`neuroflow.evaluation.layer_sweep`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from neuroflow.config import ConfigError
from neuroflow.names import file_form, layer_id

__all__ = ["SweepLayer", "expand_layer_sweeps", "sweep_model_name"]


@dataclass(frozen=True)
class SweepLayer:
    """One layer model of a sweep.

    Attributes
    ----------
    sweep : str
        Name of the sweep entry in ``encoding.models``.
    model : str
        Name of the layer's encoding model.
    extractor : str
        The swept extractor entry.
    layer : str
        The layer's store name.
    position : int
        Index of the layer in the extractor's layer order (input side first).
    depth : float
        Relative position among the swept layers: 0 for the first, 1 for the last
        (0 when there is one).
    """

    sweep: str
    model: str
    extractor: str
    layer: str
    position: int
    depth: float

    def as_dict(self) -> dict[str, Any]:
        """Plain values, for rule parameters and tables."""
        return {
            "sweep": self.sweep,
            "model": self.model,
            "extractor": self.extractor,
            "layer": self.layer,
            "position": self.position,
            "depth": self.depth,
        }


def sweep_model_name(sweep: str, layer: str) -> str:
    """Name of the encoding model of ``layer`` in ``sweep``: ``<sweep>__<layer>``.

    Parameters
    ----------
    sweep : str
        Sweep entry name (``[A-Za-z0-9_]+``).
    layer : str
        Layer store name (e.g. ``blocks.4``, ``depth-0.5``).

    Returns
    -------
    name : str
        The file-system-safe form of ``<sweep>:<layer>`` (``blocks.4`` gives
        ``<sweep>__blocks.4``).
    """
    return file_form(layer_id(sweep, layer))


def expand_layer_sweeps(
    config: Mapping[str, Any], layers_of: Callable[[str], list[str]]
) -> tuple[dict[str, Any], dict[str, list[SweepLayer]]]:
    """Replace every ``layer_sweep`` model by one model per layer.

    Parameters
    ----------
    config : dict
        The whole validated config.
    layers_of : callable
        Extractor name -> its layer store names, in extraction order.

    Returns
    -------
    config : dict
        A deep copy whose ``encoding.models`` has the layer models in place of each
        sweep (in the sweep's position) and no ``layer_sweep`` key.
    sweeps : dict of str to list of SweepLayer
        Sweep name -> its layers in order.

    Raises
    ------
    ConfigError
        When a sweep does not name exactly one extractor, or a layer model's name is
        taken by another model or by another layer.
    """
    models = config["encoding"]["models"]
    out = copy.deepcopy(dict(config))
    expanded: dict[str, Any] = {}
    sweeps: dict[str, list[SweepLayer]] = {}
    for name, entry in models.items():
        if not entry.get("layer_sweep"):
            # `layer_sweep: false` (the schema's default) is dropped: the stages never see it
            expanded[name] = {k: copy.deepcopy(v) for k, v in entry.items() if k != "layer_sweep"}
            continue
        spaces = list(entry["feature_spaces"])
        if len(spaces) != 1 or ":" in spaces[0]:
            raise ConfigError(
                f"`encoding.models.{name}.layer_sweep` needs exactly one feature space naming "
                f'an extractor ("<extractor>", every layer of which is swept), got {spaces} '
                "instead."
            )
        extractor = spaces[0]
        layers = list(layers_of(extractor))
        layer_models = []
        for position, layer in enumerate(layers):
            model = sweep_model_name(name, layer)
            if model in models or model in expanded:
                raise ConfigError(
                    f"`encoding.models.{name}`: the layer model name {model!r} of layer "
                    f"{layer!r} is already taken; rename the sweep or that model."
                )
            settings = {k: copy.deepcopy(v) for k, v in entry.items() if k != "layer_sweep"}
            expanded[model] = {**settings, "feature_spaces": [layer_id(extractor, layer)]}
            depth = position / (len(layers) - 1) if len(layers) > 1 else 0.0
            layer_models.append(SweepLayer(name, model, extractor, layer, position, depth))
        sweeps[name] = layer_models
    out["encoding"] = {**out["encoding"], "models": expanded}
    return out, sweeps
