"""One name per layer and per layer model: the identifier and its file-system-safe form.

A layer of an extractor is named ``<extractor>:<layer>`` (``efficientnet:blocks.7``),
where ``<layer>`` is the layer's store name: the name its feature store is written
under (``blocks.7.zarr``), made once by the extractor from the module or output it
reads (:func:`neuroflow.features.torch_module.store_name` turns the PyTorch module
``_blocks.7`` into ``blocks.7``). The model a layer sweep fits on that layer is named
the same way after its sweep (``<sweep>:<layer>``, e.g. ``deep:blocks.7``).

Where a name must also be a file or folder name, an encoding model's name or a
Snakemake wildcard value, the identifier is written in its one file-system-safe form,
:func:`file_form`, with ``__`` in place of ``:`` (``efficientnet__blocks.7``). The two
forms are the only spellings of a layer in stores, folder and file names,
``scores.tsv``, report labels and exports; the store name itself appears verbatim in
both, and alone only where its extractor stands beside it (the ``layer`` column next
to ``extractor``, a feature store inside its extractor's folder).
"""

from __future__ import annotations

import re

__all__ = [
    "FILE_SEPARATOR",
    "LAYER_NAME",
    "SEPARATOR",
    "file_form",
    "layer_id",
]

#: Between an extractor (or sweep) and its layer in an identifier.
SEPARATOR = ":"
#: What :data:`SEPARATOR` becomes in the file-system-safe form.
FILE_SEPARATOR = "__"
#: A layer's store name: letters, digits, ``.`` and ``-``, never an underscore (so the
#: last ``__`` of a file form separates the owner from the layer).
LAYER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.\-]*$")
#: Characters a file-system-safe form keeps; any other becomes ``-``.
_UNSAFE = re.compile(r"[^A-Za-z0-9_.+\-]")


def layer_id(owner: str, layer: str) -> str:
    """The identifier of ``layer`` of an extractor or a layer sweep.

    Parameters
    ----------
    owner : str
        The extractor entry's name (``efficientnet``) or the sweep's model name.
    layer : str
        The layer's store name (``blocks.7``, ``avg-pooling``, ``depth-0.5``).

    Returns
    -------
    identifier : str
        ``<owner>:<layer>``.
    """
    if not owner or SEPARATOR in owner:
        raise ValueError(
            f"`owner` must be a non-empty name without {SEPARATOR!r}, got {owner!r} instead."
        )
    if not LAYER_NAME.match(layer):
        raise ValueError(
            f"`layer` must be a store name (letters, digits, '.' and '-', starting with a "
            f"letter or digit), got {layer!r} instead."
        )
    return f"{owner}{SEPARATOR}{layer}"


def file_form(name: str) -> str:
    """The file-system-safe form of an identifier (or of any label of one).

    Parameters
    ----------
    name : str
        An identifier (``efficientnet:blocks.7``), a plain name (``visual``) or several
        joined by ``+`` (``visual+minilm:embedding``).

    Returns
    -------
    form : str
        ``name`` with ``__`` for each ``:`` and ``-`` for any other character outside
        ``[A-Za-z0-9_.+-]``: ``efficientnet__blocks.7``; a plain name is returned as it
        is.
    """
    return _UNSAFE.sub("-", str(name).replace(SEPARATOR, FILE_SEPARATOR)) or "x"
