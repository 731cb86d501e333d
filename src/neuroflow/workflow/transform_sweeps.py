"""Transform sweeps: one extractor variant, and one model, per value of a stimulus transform.

An extractor entry whose ``transforms.blur_sigma`` is a list (``[0, 1, 2, 4]``) stands for
one extractor per value. :func:`expand_transform_sweeps` replaces it, before anything is
planned (and before layer sweeps, :mod:`neuroflow.workflow.sweeps`), by entries named
``<name>__blur_sigma_<value>`` (``.`` written ``p``: ``blur_sigma_0p5``), each with one
value, and renames every use of the extractor:

- an encoding model (``encoding.models``, and ``eeg_encoding.models``) whose feature spaces
  name it becomes one model per value, ``<model>__blur_sigma_<value>``, reading that
  value's extractor (a model may use one swept extractor);
- ``decoding.feature_spaces`` and ``rsa.feature_spaces`` list every variant in its place.

Every variant is then an ordinary extractor and every variant model an ordinary model:
its own version, jobs, stores and summary rows. The ``transform_sweep`` job gathers the
summary rows back into one table and plots score against the transform's value (the
effect of blur on alignment).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from neuroflow.config import ConfigError

__all__ = ["SWEPT_TRANSFORMS", "TransformVariant", "expand_transform_sweeps", "variant_suffix"]

#: Transforms whose value may be a list of values to sweep.
SWEPT_TRANSFORMS = ("blur_sigma",)


@dataclass(frozen=True)
class TransformVariant:
    """One value of a transform sweep.

    Attributes
    ----------
    sweep : str
        The swept extractor entry's name.
    extractor : str
        The variant's extractor name.
    transform : str
        The swept transform (``"blur_sigma"``).
    value : float
        Its value in this variant.
    models : tuple of str
        The variant's encoding models, as ``(base model, variant model)`` pairs flattened
        to ``"base=variant"`` strings.
    """

    sweep: str
    extractor: str
    transform: str
    value: float
    models: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """Plain values, for rule parameters and tables."""
        return {
            "sweep": self.sweep,
            "extractor": self.extractor,
            "transform": self.transform,
            "value": self.value,
            "models": list(self.models),
        }


def variant_suffix(transform: str, value: float) -> str:
    """``<transform>_<value>`` with only ``[A-Za-z0-9_]``: ``blur_sigma_0p5``, ``blur_sigma_2``.

    Parameters
    ----------
    transform : str
        The swept transform.
    value : float
        One of its values.

    Returns
    -------
    suffix : str
    """
    text = f"{float(value):g}".replace(".", "p").replace("-", "m").replace("+", "")
    return f"{transform}_{text}"


def _swept(entry: Mapping[str, Any]) -> tuple[str, list[float]] | None:
    """The swept transform of an extractor entry and its values (None: no sweep)."""
    transforms = entry.get("transforms") or {}
    swept = [t for t in SWEPT_TRANSFORMS if isinstance(transforms.get(t), list)]
    if not swept:
        return None
    if len(swept) > 1:
        raise ConfigError(
            f"`features.extractors` entry {entry['name']!r} must sweep one transform, got "
            f"lists for {swept} instead."
        )
    values = [float(v) for v in transforms[swept[0]]]
    if not values or len(set(values)) != len(values):
        raise ConfigError(
            f"`features.extractors` entry {entry['name']!r}: `transforms.{swept[0]}` must be "
            f"a number or a list of distinct numbers, got {transforms[swept[0]]!r} instead."
        )
    return swept[0], values


def _space_extractor(space: str) -> str:
    return space.split(":", 1)[0]


def _rename_space(space: str, variant: str) -> str:
    _, sep, layer = space.partition(":")
    return f"{variant}{sep}{layer}"


def _expand_models(
    models: Mapping[str, Any],
    variants: Mapping[str, list[tuple[str, float]]],
    section: str,
    taken: set[str],
    record: dict[str, list[str]],
) -> dict[str, Any]:
    """One model per value for each model reading a swept extractor."""
    out: dict[str, Any] = {}
    for name, entry in models.items():
        spaces = list(entry.get("feature_spaces") or [])
        swept = sorted({_space_extractor(s) for s in spaces} & set(variants))
        if not swept:
            out[name] = copy.deepcopy(entry)
            continue
        if len(swept) > 1:
            raise ConfigError(
                f"`{section}.{name}` must read at most one transform-swept extractor, got "
                f"{swept} instead."
            )
        sweep = swept[0]
        for variant, _value in variants[sweep]:
            model = f"{name}__{variant.removeprefix(sweep + '__')}"
            if model in models or model in out or model in taken:
                raise ConfigError(
                    f"`{section}.{name}`: the model name {model!r} of the variant {variant!r} "
                    "is already taken; rename the model or that entry."
                )
            out[model] = {
                **copy.deepcopy(entry),
                "feature_spaces": [
                    _rename_space(s, variant) if _space_extractor(s) == sweep else s for s in spaces
                ],
            }
            record.setdefault(variant, []).append(f"{name}={model}")
    return out


def _expand_spaces(spaces: Sequence[str], variants: Mapping[str, list[tuple[str, float]]]) -> list:
    out: list[str] = []
    for space in spaces:
        name = _space_extractor(space)
        if name in variants:
            out += [_rename_space(space, v) for v, _ in variants[name]]
        else:
            out.append(space)
    return out


def expand_transform_sweeps(
    config: Mapping[str, Any],
) -> tuple[Mapping[str, Any], dict[str, list[TransformVariant]]]:
    """Replace every transform-swept extractor by one extractor (and model) per value.

    Parameters
    ----------
    config : dict
        The whole validated config.

    Returns
    -------
    config : dict
        ``config`` itself when nothing is swept; else a deep copy with the variants in
        place of each swept entry (in its position), the models and the decoding and RSA
        feature spaces renamed as described in the module notes.
    sweeps : dict of str to list of TransformVariant
        Swept extractor name -> its variants, in the order of the values.

    Raises
    ------
    ConfigError
        When an entry sweeps two transforms, repeats a value, a model reads two swept
        extractors, or a variant's name is taken.
    """
    entries = config["features"]["extractors"]
    found = {e["name"]: s for e in entries if (s := _swept(e)) is not None}
    if not found:
        return config, {}
    out = copy.deepcopy(dict(config))
    names = {e["name"] for e in entries}
    variants: dict[str, list[tuple[str, float]]] = {}
    extractors = []
    for entry in entries:
        if entry["name"] not in found:
            extractors.append(copy.deepcopy(entry))
            continue
        transform, values = found[entry["name"]]
        for value in values:
            variant = f"{entry['name']}__{variant_suffix(transform, value)}"
            if variant in names:
                raise ConfigError(
                    f"`features.extractors`: the variant name {variant!r} of "
                    f"{entry['name']!r} is already an entry's name; rename one of them."
                )
            transforms = {**entry["transforms"], transform: value}
            extractors.append({**copy.deepcopy(entry), "name": variant, "transforms": transforms})
            variants.setdefault(entry["name"], []).append((variant, value))
    out["features"] = {**out["features"], "extractors": extractors}
    record: dict[str, list[str]] = {}
    models = out["encoding"]["models"]
    out["encoding"] = {
        **out["encoding"],
        "models": _expand_models(models, variants, "encoding.models", set(), record),
    }
    eeg_models = (out.get("eeg_encoding") or {}).get("models") or {}
    if eeg_models:
        out["eeg_encoding"] = {
            **out["eeg_encoding"],
            "models": _expand_models(eeg_models, variants, "eeg_encoding.models", set(), record),
        }
    for section in ("decoding", "rsa"):
        spaces = (out.get(section) or {}).get("feature_spaces")
        if spaces:
            out[section] = {**out[section], "feature_spaces": _expand_spaces(spaces, variants)}
    sweeps = {
        name: [
            TransformVariant(
                name, variant, found[name][0], value, tuple(dict.fromkeys(record.get(variant, [])))
            )
            for variant, value in pairs
        ]
        for name, pairs in variants.items()
    }
    return out, sweeps
