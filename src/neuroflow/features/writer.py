"""Writing a feature store a block of rows at a time: raw rows streamed into one zarr
store per layer in chunks of about :data:`CHUNK_BYTES`, the reduction (PCA or random
projection) fitted on the training rows only and applied block by block, and the
attributes written last, so a store is whole only once every row is in.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from neuroflow.artifacts import (
    consolidated_metadata_allowed,
    fixed_width_strings,
    jsonable,
)
from neuroflow.features.rows import _Layout
from neuroflow.stimuli.files import (
    read_stimulus_ids,
)

__all__ = ["CHUNK_BYTES"]


#: Target size of one chunk of the features array, in bytes.
CHUNK_BYTES = 4 * 2**20


class _RowWriter:
    """Write rows of a 2-D float array in order, one whole chunk at a time.

    Parameters
    ----------
    path : Path
        Zarr store (created at the first write with the ``stimulus`` and
        ``feature`` coordinates).
    ids : sequence of str
        Stimulus ids (the rows).
    dtype : str
        Storage dtype.
    coords : dict of str to (ndarray, dict) | None
        Further coordinates on the ``stimulus`` dim: values, shape
        ``(n_rows,)``, and attributes.
    feature_coords : dict of str to (ndarray, dict) | None
        Coordinates on the ``feature`` dim: values, shape ``(n_features,)``,
        and attributes.
    feature_names : callable | None
        Called with the row width at the first write; the names it returns (one
        per feature, or None) become the ``feature_name`` coordinate.
    """

    def __init__(
        self,
        path: Path,
        ids: Sequence[str],
        dtype: str,
        coords: Mapping[str, tuple[np.ndarray, dict]] | None = None,
        feature_coords: Mapping[str, tuple[np.ndarray, dict]] | None = None,
        feature_names: Callable[[int], Sequence[str] | None] | None = None,
    ) -> None:
        self.path = path
        self.feature_names = feature_names
        self.ids = list(ids)
        self.coords = dict(coords or {})
        self.feature_coords = dict(feature_coords or {})
        self.dtype = np.dtype(dtype)
        self.array: Any = None
        self.buffer: list[np.ndarray] = []
        self.buffered = 0
        self.written = 0
        self.chunk_rows = 0

    def _create(self, n_features: int) -> None:
        import zarr
        from zarr.codecs import BloscCodec

        names = self.feature_names(n_features) if self.feature_names is not None else None
        if names is not None:
            if len(names) != n_features:
                raise ValueError(
                    f"Feature names must be one per feature ({n_features}), got {len(names)}."
                )
            self.feature_coords["feature_name"] = (np.array(list(names), dtype=object), {})
        coords = xr.Dataset(
            coords={
                "stimulus": ("stimulus", np.array(self.ids, dtype=object)),
                "feature": ("feature", np.arange(n_features)),
                **{
                    name: ("stimulus", values, dict(attrs))
                    for name, (values, attrs) in self.coords.items()
                },
                **{
                    name: ("feature", values, dict(attrs))
                    for name, (values, attrs) in self.feature_coords.items()
                },
            }
        )
        with consolidated_metadata_allowed():
            coords = fixed_width_strings(coords)
            coords.to_zarr(str(self.path), mode="w", zarr_format=3, consolidated=False)
        per_row = max(n_features * self.dtype.itemsize, 1)
        self.chunk_rows = int(min(len(self.ids), max(1, CHUNK_BYTES // per_row)))
        group = zarr.open_group(str(self.path), mode="a")
        self.array = group.create_array(
            "features",
            shape=(len(self.ids), n_features),
            chunks=(self.chunk_rows, n_features),
            dtype=self.dtype,
            dimension_names=["stimulus", "feature"],
            fill_value=np.nan,
            compressors=BloscCodec(cname="lz4", clevel=5, shuffle="shuffle"),
        )

    def write(self, rows: np.ndarray) -> None:
        rows = np.asarray(rows)
        if rows.ndim != 2:
            raise ValueError(f"Feature rows must be 2-D, got shape {rows.shape} instead.")
        if self.array is None:
            self._create(rows.shape[1])
        if rows.shape[1] != self.array.shape[1]:
            raise ValueError(
                f"Every batch must have {self.array.shape[1]} features, got {rows.shape[1]}."
            )
        self.buffer.append(rows.astype(self.dtype, copy=False))
        self.buffered += rows.shape[0]
        if self.buffered >= self.chunk_rows:
            self._flush(final=False)

    def _flush(self, *, final: bool) -> None:
        if not self.buffer:
            return
        block = np.concatenate(self.buffer) if len(self.buffer) > 1 else self.buffer[0]
        n = block.shape[0] if final else (block.shape[0] // self.chunk_rows) * self.chunk_rows
        if n:
            self.array[self.written : self.written + n] = block[:n]
            self.written += n
        rest = block[n:]
        self.buffer = [rest] if rest.shape[0] else []
        self.buffered = rest.shape[0]

    def close(self) -> None:
        self._flush(final=True)
        if self.array is None or self.written != len(self.ids):
            raise RuntimeError(
                f"{self.path}: wrote {self.written} of {len(self.ids)} stimulus rows."
            )


def _row_blocks(n_rows: int, block: int, minimum: int) -> list[tuple[int, int]]:
    edges = [*list(range(0, n_rows, block)), n_rows]
    blocks = list(itertools.pairwise(edges))
    if len(blocks) > 1 and blocks[-1][1] - blocks[-1][0] < minimum:
        blocks[-2] = (blocks[-2][0], blocks[-1][1])
        blocks.pop()
    return blocks


def _fit_reducer(raw: Any, train_rows: np.ndarray, spec: Mapping[str, Any]) -> tuple[Any, dict]:
    n_comp = int(spec["n_components"])
    n_features = raw.shape[1]
    if spec["method"] == "random_projection":
        from sklearn.random_projection import SparseRandomProjection

        reducer = SparseRandomProjection(
            n_components=n_comp, dense_output=True, random_state=int(spec["seed"])
        )
        reducer.fit(np.zeros((1, n_features), dtype=np.float32))
        return reducer, {}
    from sklearn.decomposition import IncrementalPCA

    if n_comp > min(len(train_rows), n_features):
        raise ValueError(
            f"`reduction.n_components` must be at most min(n_train, n_features) = "
            f"{min(len(train_rows), n_features)}, got {n_comp} instead."
        )
    reducer = IncrementalPCA(n_components=n_comp)
    block = max(4 * n_comp, CHUNK_BYTES // max(4 * n_features, 1))
    for start, stop in _row_blocks(len(train_rows), block, n_comp):
        rows = np.sort(train_rows[start:stop])
        reducer.partial_fit(np.asarray(raw.get_orthogonal_selection((rows, slice(None)))))
    info = {"explained_variance_ratio": reducer.explained_variance_ratio_.tolist()}
    return reducer, info


def _train_rows(
    ids: Sequence[str],
    train_ids: Sequence[str] | Sequence[os.PathLike] | None,
    sources: Sequence[str] | None = None,
) -> np.ndarray:
    if train_ids is None:
        raise ValueError(
            "`train_ids` must list the training stimuli when `reduction.method` is 'pca' (the PCA "
            "is fitted on them only), got None instead."
        )
    if train_ids and all(isinstance(t, os.PathLike) for t in train_ids):
        # Events tables of the training runs: their stimuli are the training ids.
        train_ids = read_stimulus_ids(list(train_ids))
    position: dict[str, list[int]] = {stim: [i] for i, stim in enumerate(ids)}
    for i, source in enumerate(sources or []):
        # A frame or word row belongs to the training set when its clip or narrative does.
        position.setdefault(source, []).append(i)
    missing = [t for t in train_ids if t not in position]
    if missing:
        raise ValueError(
            f"`train_ids` must be among the extracted stimuli, got unknown ids {missing[:5]} "
            "instead."
        )
    rows = np.unique([i for t in train_ids for i in position[t]])
    if rows.size == 0:
        raise ValueError("`train_ids` must name at least one stimulus, got none.")
    return rows


def _finalize(path: Path, attrs: Mapping[str, Any], var_attrs: Mapping[str, Any]) -> None:
    import zarr

    from neuroflow.stage_warnings import with_job_warnings

    group = zarr.open_group(str(path), mode="a")
    group.attrs.update(jsonable(with_job_warnings(attrs)))  # + the job's warnings so far
    group["features"].attrs.update(jsonable(dict(var_attrs)))
    with consolidated_metadata_allowed():
        zarr.consolidate_metadata(str(path))


def _reduce(
    raw: Any,
    path: Path,
    layout: _Layout,
    rows_train: np.ndarray | None,
    reduction: Mapping[str, Any],
    entry: Mapping[str, Any],
) -> dict[str, Any]:
    rows_fit = rows_train if rows_train is not None else np.arange(raw.shape[0])
    reducer, info = _fit_reducer(raw, rows_fit, reduction)
    writer = _RowWriter(path, layout.ids, entry["storage_dtype"], layout.coords)
    block = max(1, CHUNK_BYTES // max(4 * raw.shape[1], 1))
    for start in range(0, raw.shape[0], block):
        chunk = np.asarray(raw[start : start + block], dtype=np.float32)
        writer.write(reducer.transform(chunk).astype(np.float32))
    writer.close()
    return {"n_features_in": int(raw.shape[1]), **info}
