"""Damaged or unsupported stimulus files and captions tables fail feature extraction early,
with the file (and the events row that names it) in the message."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from neuroflow.features.extract import extract_features
from neuroflow.features.stimuli import (
    first_row_naming,
    infer_modality,
    load_stimulus,
    read_captions,
)


def _events(path: Path, stim_files: list[str]) -> Path:
    rows = [f"{2.5 * i}\t1.0\t{s}" for i, s in enumerate(stim_files)]
    path.write_text("onset\tduration\tstim_file\n" + "\n".join(rows) + "\n")
    return path


def _extract(root: Path, ids, tmp_path: Path, **kwargs):
    return extract_features(
        stimuli_dir=root,
        stimulus_ids=ids,
        output=tmp_path / "out",
        config={"extractor": "image_statistics", **kwargs.pop("config", {})},
        provenance={},
        **kwargs,
    )


@pytest.mark.parametrize("damage", ["random bytes", "cut in half"])
def test_unreadable_png_fails_before_any_feature(image_stimuli, tmp_path, rng, damage):
    folder, ids = image_stimuli
    bad = folder / ids[4]
    if damage == "random bytes":
        bad.write_bytes(rng.bytes(500))
    else:
        bad.write_bytes(bad.read_bytes()[: bad.stat().st_size // 2])
    with pytest.raises(
        ValueError,
        match=rf"Stimulus image {re.escape(str(bad))} must be an image Pillow can read",
    ):
        _extract(folder, ids, tmp_path)
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").glob("*.zarr"))


def test_truncated_jpeg_named_when_decoded(tmp_path, rng):
    from PIL import Image

    path = tmp_path / "photo.jpg"
    Image.fromarray((rng.random((21, 19, 3)) * 255).astype(np.uint8)).save(path, quality=95)
    path.write_bytes(path.read_bytes()[:-200])  # the end of the scan is missing
    with pytest.raises(ValueError, match=r"Stimulus image .*photo.jpg must be an image Pillow"):
        load_stimulus("photo.jpg", modality="image", stimuli_dir=tmp_path, transforms={})


def test_unsupported_extension_names_the_events_row_and_the_extensions(image_stimuli, tmp_path):
    folder, ids = image_stimuli
    (folder / "notes.docx").write_bytes(b"PK\x03\x04 not an image")
    table = _events(tmp_path / "sub-01_task-x_events.tsv", [ids[0], ids[1], "notes.docx"])
    with pytest.raises(
        ValueError,
        match=rf"Stimulus file 'notes.docx' \(stim_file in {re.escape(str(table))}, row 3\) "
        r"must have an extension neuroflow reads, got '.docx' instead. Supported: image .png "
        r".*; audio .wav; text .txt",
    ):
        _extract(folder, [table], tmp_path)
    assert first_row_naming([table], ids[1]) == f"{table}, row 2"
    assert first_row_naming([table], "other.png") is None
    with pytest.raises(ValueError, match=r"'x.xyz' must have .* got '.xyz' instead"):
        infer_modality(["a.png", "x.xyz"])


def test_unsupported_file_forced_to_image_modality(image_stimuli, tmp_path):
    folder, ids = image_stimuli
    (folder / "data.xyz").write_text("0 1 2 3\n")
    with pytest.raises(ValueError, match=r"Stimulus image .*data.xyz must be an image Pillow"):
        _extract(folder, [ids[0], "data.xyz"], tmp_path, config={"modality": "image"})


def test_unreadable_audio_is_named(tmp_path, rng):
    (tmp_path / "tone.wav").write_bytes(rng.bytes(300))
    with pytest.raises(ValueError, match=r"Stimulus audio .*tone.wav must be a PCM or float WAV"):
        load_stimulus("tone.wav", modality="audio", stimuli_dir=tmp_path, transforms={})


def test_captions_table_problems(tmp_path):
    path = tmp_path / "captions.tsv"
    path.write_text("stim_file\tdescription\na.png\ta red square\n")
    with pytest.raises(
        ValueError,
        match=r"Captions table .*captions.tsv must have column\(s\) \['stim_file', 'caption'\], "
        r"got columns \['stim_file', 'description'\] instead",
    ):
        read_captions(path)
    path.write_text("stim_file\tcaption\na.png\tred\na.png\tblue\n")
    with pytest.raises(ValueError, match=r"must give each stim_file one caption, got 2 rows"):
        read_captions(path)
    with pytest.raises(FileNotFoundError, match=r"Captions table .*missing.tsv does not exist"):
        read_captions(tmp_path / "missing.tsv")
