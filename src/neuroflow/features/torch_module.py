"""PyTorch modules built by a Python function or read from TorchScript, read with forward hooks.

An entry gets its model in one of three ways, never from the network:

- ``builder: "package.module:function"`` (a dotted attribute path may follow the
  colon, e.g. ``"efficientnet_lite_pytorch:EfficientNet.from_name"``), called
  with ``builder_kwargs`` under a random state seeded with ``seed``;
  ``weights_file`` then loads a state dict saved with ``torch.save`` (the bare
  state dict, or one nested under a ``"state_dict"`` or ``"model"`` key).
  ``weights: random`` keeps the seeded initialisation (the untrained control)
  and ignores ``weights_file``. The module must lie in a folder of
  ``features.code_dirs`` or in a distribution of ``features.trusted_packages``
  (see :mod:`neuroflow.features.trust`); only the extraction job imports it;
- ``torchscript: path``: a program saved with ``torch.export.save`` (a
  ``.pt2`` file, read with ``torch.export.load``) or a TorchScript file saved
  with ``torch.jit.save`` (any other suffix; torch deprecates the format, so
  such a file is read with a warning saying how to re-save it as ``.pt2``),
  weights included;
- ``model: efficientnet-lite0``: a packaged preset, which fills in the builder,
  its weights file, the input transform and default layers (see
  :data:`neuroflow.features.presets.PRESETS`).

Planning never builds a model: module names, globs, ``"all"``, ``{index}`` and
``{depth}`` are resolved against the module names a preset ships (see
:func:`shipped_structure`); a ``builder`` entry names its modules exactly (or
``"output"``), and the extraction job checks them against the built model.

Layers are read with forward hooks during one forward pass per batch (one per
image size when the images of a batch differ in size). A ``layers`` entry is

- a module name of ``named_modules()`` (``"features.3"``, ``"_blocks.7"``), or the
  layer name made from one (``"blocks.7"``, see :func:`store_name`): the name of
  the layer's store and its identifier ``<extractor>:blocks.7``
  (:mod:`neuroflow.names`);
- a glob over the module names (``"features.*"``, matched with
  :func:`fnmatch.fnmatchcase`; ``*`` also crosses dots);
- ``"all"``: every leaf module (one without child modules);
- ``{index: i}``: the ``i``-th leaf module in ``named_modules()`` order
  (negative values count from the end), or ``{depth: f}``: the leaf module at
  fraction ``f`` of that list, ``floor(f * (n_leaves - 1) + 0.5)``;
- ``"output"``: the model's return value, or ``"output.<k>"``: item ``k`` of a
  returned tuple, list or dict. Exported and TorchScript programs run no
  Python hooks, so these are their only layers.

Each output is pooled to one row per image: maps ``(N, C, H, W)`` (and ``(N,
C, ...)`` with more dims) by a mean over the positions, token sequences ``(N,
T, C)`` with ``pooling`` over the tokens, ``(N, C)`` outputs as they are. A
module returning a tuple or list gives its first item; a module called more
than once per forward pass gives its last call's output.

Store names are the module names with the leading and trailing underscores of
each dotted part dropped and the other underscores turned into hyphens
(``_blocks.3._depthwise_conv`` -> ``blocks.3.depthwise-conv``), since layer
names in result paths hold only letters, digits, ``.`` and ``-``;
``describe()`` keeps the module name of each store.

The model is built by :mod:`neuroflow.features.torch_build`.
"""

from __future__ import annotations

import copy
import difflib
import importlib.metadata
import importlib.resources
import json
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

import lazy_loader
import numpy as np

from neuroflow.features.hf import _video_means, select_device, select_dtype
from neuroflow.features.layers import layer_spec, pool
from neuroflow.features.presets import PRESETS, preset_weights
from neuroflow.features.registry import Extractor, register_extractor
from neuroflow.features.torch_build import build_module
from neuroflow.features.trust import BUILDER_RE
from neuroflow.names import LAYER_NAME

torch = lazy_loader.load("torch")


__all__ = [
    "ALL",
    "OUTPUT",
    "TorchModuleExtractor",
    "module_names",
    "pool_output",
    "prepare_images",
    "select_layers",
    "shipped_structure",
    "store_name",
]


logger = logging.getLogger(__name__)


#: Layer of the model's return value (``"output.<k>"``: one item of it).
OUTPUT = "output"


#: Layer selector of every leaf module.
ALL = "all"


_BUILDER_RE = BUILDER_RE


_LAYER_RE = LAYER_NAME


_GLOB_CHARS = "*?["


_STRUCTURE_HINT = (
    "Name the modules exactly in `layers` (e.g. `layers: ['features.3', 'head']`, as "
    "`[name for name, _ in model.named_modules()]` lists them) or use 'output'; planning "
    "never builds a model to learn its module names."
)


def module_names(model: torch.nn.Module) -> tuple[list[str], list[str]]:
    """Names of a model's modules and of its leaf modules.

    Parameters
    ----------
    model : torch.nn.Module
        Any module (TorchScript included).

    Returns
    -------
    names : list of str
        Every submodule in ``named_modules()`` order, the root left out.
    leaves : list of str
        Those without child modules, in the same order.
    """
    names, leaves = [], []
    for name, module in model.named_modules():
        if not name:
            continue
        names.append(name)
        if next(iter(module.children()), None) is None:
            leaves.append(name)
    return names, leaves


def store_name(module: str) -> str:
    """Layer name (result paths) of a module name.

    Parameters
    ----------
    module : str
        A name from ``named_modules()``, or ``"output"`` / ``"output.<k>"``.

    Returns
    -------
    name : str
        Leading and trailing underscores of each dotted part dropped, other
        underscores turned into hyphens (``"_blocks.3._bn2"`` ->
        ``"blocks.3.bn2"``).
    """
    name = ".".join(part.strip("_").replace("_", "-") for part in module.split("."))
    if not _LAYER_RE.match(name) or ".." in name or name.endswith("."):
        raise ValueError(
            f"Module {module!r} gives no usable layer name (letters, digits, '.' and '-', got "
            f"{name!r}); select it with another name or wrap it in a module with a plainer name."
        )
    return name


def _is_output(name: str) -> bool:
    return name == OUTPUT or name.startswith(OUTPUT + ".")


def _needs_model(spec: Any) -> bool:
    """Whether the modules a ``layers`` entry selects depend on the model's structure."""
    kind, value = layer_spec(spec)
    return kind != "name" or value == ALL or any(c in str(value) for c in _GLOB_CHARS)


@dataclass(frozen=True)
class _Layer:
    """One selected layer: store name, module name, the entry that chose it, leaf position."""

    name: str
    module: str
    spec: Any
    index: int | None = None


def _leaf_index(kind: str, value: int | float, leaves: Sequence[str]) -> int:
    n = len(leaves)
    if n == 0:
        raise ValueError("`layers` entries {index: i} and {depth: f} need leaf modules, got none.")
    if kind == "depth":
        return math.floor(float(value) * (n - 1) + 0.5)
    index = int(value) + n if int(value) < 0 else int(value)
    if not 0 <= index < n:
        raise ValueError(
            f"`index` of a `layers` entry must lie in [-{n}, {n - 1}] for a model with {n} leaf "
            f"modules, got {value} instead."
        )
    return index


def select_layers(
    layers: Sequence[Any],
    names: Sequence[str] | None,
    leaves: Sequence[str] | None,
) -> list[_Layer]:
    """Modules (and model outputs) the ``layers`` entries select, in order.

    Parameters
    ----------
    layers : list
        The entry's ``layers`` (see the module docstring).
    names : list of str | None
        Module names (see :func:`module_names`); None when unknown, in which
        case only exact names are allowed and not checked.
    leaves : list of str | None
        Leaf module names.

    Returns
    -------
    selected : list
        One item per layer with ``name`` (store name), ``module``, ``spec``
        and ``index`` (position among the leaves for index and depth entries).
    """
    selected: list[_Layer] = []
    for spec in layers:
        kind, value = layer_spec(spec)
        if names is None or leaves is None:
            if _needs_model(spec):
                raise ValueError(f"`layers` entry {spec!r} needs the model's module names.")
            selected.append(_Layer(store_name(str(value)), str(value), spec))
            continue
        if kind != "name":
            index = _leaf_index(kind, value, leaves)
            selected.append(_Layer(store_name(leaves[index]), leaves[index], spec, index))
        elif value == ALL:
            selected += [_Layer(store_name(m), m, spec, i) for i, m in enumerate(leaves)]
        elif any(c in str(value) for c in _GLOB_CHARS):
            matches = [m for m in names if fnmatchcase(m, str(value))]
            if not matches:
                raise ValueError(
                    f"`layers` entry {value!r} matches no module name; names start with "
                    f"{list(names[:8])}."
                )
            selected += [_Layer(store_name(m), m, spec) for m in matches]
        elif _is_output(str(value)) or value in names:
            selected.append(_Layer(store_name(str(value)), str(value), spec))
        elif len(named := [m for m in names if store_name(m) == value]) == 1:
            # a layer's store name (``blocks.7``) selects the module it is made from
            selected.append(_Layer(str(value), named[0], spec))
        elif named:
            raise ValueError(
                f"`layers` entry {value!r} is the layer name of modules {named}; select one "
                "of them by its module name."
            )
        else:
            close = difflib.get_close_matches(str(value), list(names), n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ValueError(
                f"`layers` entry {value!r} names no module of the model.{hint} Module names start "
                f"with {list(names[:8])}; use a glob such as '{names[0] if names else 'x'}*' or "
                "'all' to select several."
            )
    seen: dict[str, str] = {}
    for layer in selected:
        if layer.name in seen:
            what = (
                f"module {layer.module!r} more than once"
                if seen[layer.name] == layer.module
                else f"modules {seen[layer.name]!r} and {layer.module!r}, which share the layer "
                f"name {layer.name!r}"
            )
            raise ValueError(f"`layers` must select each layer once, got {what}.")
        seen[layer.name] = layer.module
    return selected


def shipped_structure(entry: Mapping[str, Any]) -> tuple[list[str], list[str]] | None:
    """Module names of a packaged preset's model, read from the file neuroflow ships.

    Parameters
    ----------
    entry : dict
        The entry, preset applied (see :func:`neuroflow.features.config.fill_entry`).

    Returns
    -------
    structure : tuple of (list of str, list of str) | None
        Every module name and the leaf module names (see :func:`module_names`)
        when the entry builds a preset's model with the preset's own
        ``builder_kwargs``; None otherwise.
    """
    preset = PRESETS.get(str(entry.get("model")))
    if (
        preset is None
        or entry.get("torchscript") is not None
        or entry.get("builder") != preset["builder"]
        or dict(entry.get("builder_kwargs") or {}) != preset["builder_kwargs"]
    ):
        return None
    text = importlib.resources.files("neuroflow").joinpath("data", preset["structure"]).read_text()
    data = json.loads(text)
    return list(data["modules"]), list(data["leaves"])


def _check_size(value: Any, key: str) -> None:
    if value is None:
        return
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return
    if (
        isinstance(value, list | tuple)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value)
    ):
        return
    raise ValueError(
        f"`input.{key}` must be a positive int, [height, width] or None, got {value!r} instead."
    )


def _check_input(spec: Mapping[str, Any]) -> None:
    _check_size(spec["resize"], "resize")
    _check_size(spec["center_crop"], "center_crop")
    mean, std = spec["mean"], spec["std"]
    if (mean is None) != (std is None):
        raise ValueError(
            f"`input.mean` and `input.std` must be given together, got mean {mean!r} and std "
            f"{std!r} instead."
        )
    for key, values in (("mean", mean), ("std", std)):
        if values is None:
            continue
        if (
            not isinstance(values, list | tuple)
            or len(values) != 3
            or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
        ):
            raise ValueError(
                f"`input.{key}` must be three numbers (red, green, blue), got {values!r} instead."
            )
    if std is not None and not all(v > 0 for v in std):
        raise ValueError(f"`input.std` must be positive, got {std!r} instead.")


def _apply_preset(entry: dict[str, Any]) -> None:
    name = entry["model"]
    if name not in PRESETS:
        raise ValueError(
            f"`model` must name a packaged preset ({', '.join(map(repr, PRESETS))}) when "
            f"`builder` and `torchscript` are null, got {name!r} instead; or set `builder: "
            "'package.module:function'` or `torchscript: path`."
        )
    preset = PRESETS[name]
    entry["builder"] = preset["builder"]
    if not entry["builder_kwargs"]:
        entry["builder_kwargs"] = copy.deepcopy(preset["builder_kwargs"])
    if entry["weights_file"] is None and entry["weights"] == "pretrained":
        entry["weights_file"] = preset_weights(name, preset)
    entry["input"] = {
        key: copy.deepcopy(preset["input"][key]) if value is None else value
        for key, value in entry["input"].items()
    }
    if entry["layers"] is None:
        entry["layers"] = list(preset["layers"])


def prepare_images(images: Sequence[np.ndarray], spec: Mapping[str, Any]) -> list[torch.Tensor]:
    """Resize, centre-crop and normalise images as an entry's ``input`` says.

    Parameters
    ----------
    images : list of ndarray, shape (H, W, 3)
        Float RGB in [0, 1] (after the entry's ``transforms``).
    spec : dict
        ``resize`` (int: shorter side in px, aspect kept; or [height, width];
        bilinear with antialiasing), ``center_crop`` (int or [height, width])
        and ``mean`` / ``std`` (per channel), each None to skip; in that order.

    Returns
    -------
    pixels : list of Tensor, shape (3, H', W')
        Float32, one per image.
    """
    out = []
    for image in images:
        pixels = torch.from_numpy(np.ascontiguousarray(image, dtype=np.float32)).permute(2, 0, 1)
        resize = spec.get("resize")
        if resize is not None:
            h, w = pixels.shape[1:]
            if isinstance(resize, int):
                scale = resize / min(h, w)
                size = (max(1, round(h * scale)), max(1, round(w * scale)))
            else:
                size = (int(resize[0]), int(resize[1]))
            pixels = torch.nn.functional.interpolate(
                pixels[None], size=size, mode="bilinear", align_corners=False, antialias=True
            )[0]
        crop = spec.get("center_crop")
        if crop is not None:
            ch, cw = (crop, crop) if isinstance(crop, int) else (int(crop[0]), int(crop[1]))
            h, w = pixels.shape[1:]
            if ch > h or cw > w:
                raise ValueError(
                    f"`input.center_crop` must fit in the image, got {[ch, cw]} for an image of "
                    f"{[h, w]} instead; set `input.resize` to at least the crop size."
                )
            top, left = (h - ch) // 2, (w - cw) // 2
            pixels = pixels[:, top : top + ch, left : left + cw]
        if spec.get("mean") is not None:
            mean = torch.tensor(spec["mean"], dtype=torch.float32).view(3, 1, 1)
            std = torch.tensor(spec["std"], dtype=torch.float32).view(3, 1, 1)
            pixels = (pixels - mean) / std
        out.append(pixels.contiguous())
    return out


def pool_output(output: torch.Tensor, pooling: str) -> torch.Tensor:
    """Pool one layer's output to one row per item.

    Parameters
    ----------
    output : Tensor, shape (N,), (N, C), (N, T, C), (N, C, H, W) or (N, C, ...)
        A module's output for a batch of ``N`` images.
    pooling : str
        Pooling over the tokens of ``(N, T, C)`` outputs (see
        :func:`neuroflow.features.layers.pool`); maps are averaged over their
        positions (``"mean"`` or ``"patch_mean"``).

    Returns
    -------
    pooled : Tensor, shape (N, n_features)
        Float32.
    """
    if output.ndim == 0:
        raise ValueError("A layer output must have a batch dim, got a scalar.")
    if output.ndim == 1:
        return output.float()[:, None]
    if output.ndim == 2:
        return output.float()
    if output.ndim > 4:
        output = output.reshape(*output.shape[:2], -1, 1)
    return pool(output, pooling)


def _first_tensor(output: Any, module: str) -> torch.Tensor:
    if isinstance(output, list | tuple) and output:
        output = output[0]
    if not isinstance(output, torch.Tensor):
        raise ValueError(
            f"Module {module!r} returns {type(output).__name__}, not a tensor; select another "
            "module (e.g. one of its children)."
        )
    return output


def _output_item(result: Any, name: str) -> torch.Tensor:
    if name == OUTPUT:
        if isinstance(result, torch.Tensor):
            return result
        raise ValueError(
            f"Layer 'output' needs a model returning a tensor, got {type(result).__name__}; name "
            "its items 'output.0', 'output.1', ... (or 'output.<key>' for a dict) instead."
        )
    key = name.removeprefix(OUTPUT + ".")
    item: Any
    if isinstance(result, Mapping) and key in result:
        item = result[key]
    elif isinstance(result, list | tuple) and key.isdigit() and int(key) < len(result):
        item = result[int(key)]
    else:
        size = f"{len(result)} items" if isinstance(result, list | tuple | Mapping) else "no items"
        raise ValueError(
            f"Layer {name!r} names no item of the model's output ({type(result).__name__} with "
            f"{size})."
        )
    if not isinstance(item, torch.Tensor):
        raise ValueError(f"Layer {name!r} is {type(item).__name__}, not a tensor.")
    return item


@register_extractor("torch_module", modalities=("image", "video"))
class TorchModuleExtractor(Extractor):
    """Any ``torch.nn.Module`` on images or video frames, read with forward hooks.

    See the module docstring for the model sources, layer selectors, pooling
    and store names. Images go through ``input`` (resize, centre crop,
    normalisation) after the entry's ``transforms``; videos are represented by
    ``frames_per_video`` evenly spaced frames whose features are averaged, or,
    with ``frame_rate`` set, by one row per sampled frame.
    """

    default_layers = (OUTPUT,)

    @classmethod
    def check_entry(cls, entry: dict[str, Any]) -> None:
        if entry["builder"] is None and entry["torchscript"] is None:
            _apply_preset(entry)
        if entry["builder"] is not None and entry["torchscript"] is not None:
            raise ValueError(
                f"`builder` and `torchscript` are exclusive, got both ({entry['builder']!r} and "
                f"{entry['torchscript']!r})."
            )
        if entry["builder"] is not None and not _BUILDER_RE.match(str(entry["builder"])):
            raise ValueError(
                f"`builder` must be 'package.module:function', got {entry['builder']!r} instead."
            )
        if not isinstance(entry["builder_kwargs"], Mapping):
            raise ValueError(
                f"`builder_kwargs` must be a mapping, got {entry['builder_kwargs']!r} instead."
            )
        for key in ("weights_file", "torchscript"):
            value = entry[key]
            if value is not None and (not isinstance(value, str) or not value):
                raise ValueError(f"`{key}` must be a file path or None, got {value!r} instead.")
        _check_input(entry["input"])
        if entry["torchscript"] is not None:
            given = [k for k in ("weights_file", "builder_kwargs") if entry[k]]
            if given or entry["weights"] == "random":
                raise ValueError(
                    "`weights_file`, `builder_kwargs` and `weights: random` need `builder`; a "
                    f"`torchscript` file holds its weights, got {given or ['weights: random']}."
                )
            for spec in entry["layers"] or []:
                kind, value = layer_spec(spec)
                if kind != "name" or not _is_output(str(value)):
                    raise ValueError(
                        "`layers` of a `torchscript` entry must be 'output' or 'output.<k>' "
                        f"(exported and TorchScript programs run no forward hooks), got {spec!r} "
                        "instead; "
                        "export a module returning the outputs you need."
                    )
        for spec in entry["layers"] or []:
            layer_spec(spec)

    @classmethod
    def planned_layer_names(cls, entry: Mapping[str, Any]) -> list[str] | None:
        layers = entry["layers"]
        if not any(_needs_model(spec) for spec in layers):
            return [layer.name for layer in select_layers(layers, None, None)]
        structure = shipped_structure(entry)
        if structure is None:
            needs = [spec for spec in layers if _needs_model(spec)]
            source = entry["builder"] or entry["torchscript"]
            raise ValueError(
                f"`layers` of `features.extractors` entry {entry['name']!r} must name modules "
                f"exactly for a model of {source!r}, got {needs} (globs, 'all', index or depth) "
                f"instead. {_STRUCTURE_HINT}"
            )
        return [layer.name for layer in select_layers(layers, *structure)]

    def __init__(self, config: Mapping[str, Any], modality: str) -> None:
        super().__init__(config, modality)
        self.device = select_device(self.config["device"])
        self.dtype = select_dtype(self.config["dtype"], self.device)
        model, self.source = build_module(self.config)
        names, leaves = module_names(model)
        self.n_leaves = len(leaves)
        self.layers = select_layers(self.config["layers"], names, leaves)
        planned = shipped_structure(self.config)
        from_structure = any(_needs_model(spec) for spec in self.config["layers"])
        if from_structure and planned is not None and list(planned[0]) != names:
            raise ValueError(
                f"The model of `model: {self.config['model']}` has other module names than "
                "neuroflow ships for it (another version of its package?); reinstall the "
                f"versions of {', '.join(PRESETS[self.config['model']]['packages'])} neuroflow "
                "names."
            )
        model = model.to(self.device, self.dtype)
        # An exported program is traced in one mode and cannot switch to eval().
        self.model = model if self.source["exported"] else model.eval()
        # Convolutions run on channels-last batches at up to twice the speed of
        # channels-first ones on CPU (oneDNN) and with tensor cores on GPU.
        self.channels_last = any(isinstance(m, torch.nn.Conv2d) for m in self.model.modules())
        modules = dict(self.model.named_modules())
        self._outputs: dict[str, torch.Tensor] = {}
        self._calls: dict[str, int] = {}
        self.n_calls: dict[str, int] = {}
        self.shapes: dict[str, list[int]] = {}
        for layer in self.layers:
            if not _is_output(layer.module):
                modules[layer.module].register_forward_hook(self._hook(layer))

    def _hook(self, layer: _Layer) -> Callable[..., None]:
        def hook(module: torch.nn.Module, args: Any, output: Any) -> None:
            tensor = _first_tensor(output, layer.module)
            self.shapes[layer.name] = list(tensor.shape[1:])
            self._outputs[layer.name] = pool_output(tensor, self.config["pooling"])
            self._calls[layer.name] = self._calls.get(layer.name, 0) + 1

        return hook

    def forward(self, pixels: torch.Tensor) -> dict[str, torch.Tensor]:
        """Pooled outputs of every layer for one batch, from one forward pass.

        Parameters
        ----------
        pixels : Tensor, shape (n_batch, 3, H, W)
            Prepared images (see :func:`prepare_images`).

        Returns
        -------
        features : dict of str to Tensor, shape (n_batch, n_features)
            One float32 tensor per layer name.
        """
        self._outputs, self._calls = {}, {}
        pixels = pixels.to(self.device, self.dtype)
        if self.channels_last and pixels.ndim == 4:
            pixels = pixels.contiguous(memory_format=torch.channels_last)
        with torch.inference_mode():
            result = self.model(pixels)
            for layer in self.layers:
                if _is_output(layer.module):
                    item = _output_item(result, layer.module)
                    self.shapes[layer.name] = list(item.shape[1:])
                    self._outputs[layer.name] = pool_output(item, self.config["pooling"])
                    self._calls[layer.name] = 1
        missing = [layer.module for layer in self.layers if layer.name not in self._outputs]
        if missing:
            raise ValueError(
                f"Module(s) {missing} gave no output in the forward pass; `layers` must name "
                "modules the model's forward calls."
            )
        self.n_calls.update(self._calls)
        return {layer.name: self._outputs[layer.name] for layer in self.layers}

    def layer_names(self) -> list[str]:
        return [layer.name for layer in self.layers]

    def extract_frames(self, frames: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
        pixels = prepare_images(frames, self.config["input"])
        groups: dict[tuple[int, ...], list[int]] = {}
        for i, p in enumerate(pixels):
            groups.setdefault(tuple(p.shape), []).append(i)
        rows: dict[str, list[np.ndarray]] = {name: [] for name in self.layer_names()}
        order: list[int] = []
        widths: dict[str, tuple[int, tuple[int, ...]]] = {}
        for shape, members in groups.items():
            features = self.forward(torch.stack([pixels[i] for i in members]))
            for name, values in features.items():
                width = values.shape[1]
                if name in widths and widths[name][0] != width:
                    raise ValueError(
                        f"Layer {name!r} gives {widths[name][0]} features for images of "
                        f"{list(widths[name][1][1:])} px and {width} for {list(shape[1:])} px; "
                        "set `input.center_crop` (or `input.resize: [height, width]`) so that "
                        "every image has one size."
                    )
                widths[name] = (width, shape)
                rows[name].append(values.cpu().numpy())
            order += members
        inverse = np.argsort(np.asarray(order), kind="stable")
        return {name: np.concatenate(parts)[inverse] for name, parts in rows.items()}

    def extract(self, batch: Sequence[Any]) -> dict[str, np.ndarray]:
        if self.modality != "video":
            return self.extract_frames(list(batch))
        return _video_means(batch, self.config["frames_per_video"], self.extract_frames)

    def describe(self) -> dict[str, Any]:
        layers = {}
        for layer in self.layers:
            layers[layer.name] = {
                "name": layer.name,
                "module": layer.module,
                "spec": layer.spec,
                "index": layer.index,
                "n_blocks": None,
                "n_leaves": self.n_leaves,
                "output_shape": self.shapes.get(layer.name),
                "calls_per_forward": self.n_calls.get(layer.name),
            }
        seeded = self.source["weights_source"] == "state_dict"
        model = self.config["model"]
        if model not in PRESETS or self.config["builder"] != PRESETS[model]["builder"]:
            model = self.config["builder"] or f"torchscript:{self.source['path']}"
        return {
            "extractor": self.name,
            "model": model,
            "model_path": self.source["path"],
            "builder": self.config["builder"],
            "builder_kwargs": dict(self.config["builder_kwargs"]),
            "torchscript": self.source["path"] if self.config["torchscript"] else None,
            "weights_file": self.source["path"] if self.config["builder"] else None,
            "weights": self.config["weights"],
            "seed": self.config["seed"] if seeded else None,
            "weights_sha256": self.source["weights_sha256"],
            "weights_source": self.source["weights_source"],
            "builder_file": self.source["builder_file"],
            "builder_sha256": self.source["builder_sha256"],
            "input": dict(self.config["input"]),
            "pooling": self.config["pooling"],
            "device": str(self.device),
            "compute_dtype": str(self.dtype).removeprefix("torch."),
            "memory_format": "channels_last" if self.channels_last else "contiguous",
            "layers": layers,
        }
