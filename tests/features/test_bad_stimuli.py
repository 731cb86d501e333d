"""Damaged or unsupported stimulus files and captions tables fail feature extraction early,
with the file (and the events row that names it) in the message; stim_files that lead
outside the dataset are refused, never read."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from neuroflow.features.extract import extract_features
from neuroflow.stimuli.files import (
    escaping_links,
    first_row_naming,
    infer_modality,
    linked_outside,
    resolve_stimulus_files,
    stim_file_escape,
    stimulus_roots,
)
from neuroflow.stimuli.load import load_stimulus
from neuroflow.stimuli.text import read_captions, stimulus_texts


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


# --------------------------------------------------------------------------- containment
@pytest.mark.parametrize(
    ("stim", "reason"),
    [
        ("faces/f01.png", None),
        ("f01.png", None),
        ("faces\\f01.png", None),
        ("..hidden/f..01.png", None),  # dots inside names are not components
        ("/elsewhere/outside.png", "an absolute path"),
        ("\\\\server\\share\\x.png", "an absolute path"),
        ("C:\\stimuli\\x.png", "an absolute path"),
        ("c:x.png", "an absolute path"),
        ("../../../outside.png", "a path with '..'"),
        ("faces/../f01.png", "a path with '..'"),
        ("faces\\..\\..\\x.png", "a path with '..'"),
    ],
)
def test_stim_file_escape(stim, reason):
    assert stim_file_escape(stim) == reason


@pytest.fixture
def outside(tmp_path_factory) -> Path:
    """An image outside the dataset (in a folder of its own)."""
    from PIL import Image

    path = tmp_path_factory.mktemp("elsewhere") / "outside.png"
    Image.fromarray(np.full((9, 8, 3), 200, np.uint8)).save(path)
    return path


@pytest.mark.parametrize("missing", ["error", "skip"])
def test_stim_files_leaving_the_folder_are_refused(image_stimuli, outside, tmp_path, missing):
    folder, ids = image_stimuli
    (tmp_path / "outside.png").write_bytes(outside.read_bytes())  # in the dataset, not stimuli/
    for stim, reason in (
        (str(outside), "an absolute path"),
        ("../outside.png", "a path with '..'"),
        (f"faces/../../{outside.parent.name}/outside.png", "a path with '..'"),
    ):
        with pytest.raises(
            ValueError,
            match=rf"stim_file {re.escape(repr(stim))} must be a path relative to the stimuli "
            rf"folder {re.escape(str(folder))}, got {reason} instead",
        ):
            resolve_stimulus_files([ids[0], stim], folder, missing=missing)
    with pytest.raises(ValueError, match=r"'\.\./outside\.png' must be a path relative to"):
        load_stimulus("../outside.png", modality="image", stimuli_dir=folder, transforms={})


def test_absolute_stim_file_fails_extraction_with_nothing_written(image_stimuli, outside, tmp_path):
    folder, ids = image_stimuli
    table = _events(tmp_path / "sub-01_task-x_events.tsv", [ids[0], str(outside), ids[1]])
    with pytest.raises(ValueError, match=rf"stim_file {re.escape(repr(str(outside)))} must be"):
        _extract(folder, [table], tmp_path)
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_links_leading_outside_the_dataset_are_refused(image_stimuli, outside, tmp_path):
    folder, ids = image_stimuli
    (folder / "linked.png").symlink_to(outside)
    (folder / "elsewhere").symlink_to(outside.parent, target_is_directory=True)
    for stim in ("linked.png", "old/linked.png", "elsewhere/outside.png"):
        with pytest.raises(
            ValueError,
            match=rf"Stimulus file .* \(stim_file {re.escape(repr(stim))}\) must lie inside the "
            rf"dataset \({re.escape(str(tmp_path.resolve()))}\), got a link to "
            rf"{re.escape(str(outside.resolve()))} instead",
        ):
            resolve_stimulus_files([ids[0], stim], folder)
    with pytest.raises(ValueError, match=r"must lie inside the dataset"):
        load_stimulus("linked.png", modality="image", stimuli_dir=folder, transforms={})
    (folder / "story.txt").symlink_to(outside.with_name("story.txt"))
    outside.with_name("story.txt").write_text("a secret")
    with pytest.raises(ValueError, match=r"stim_file 'story.txt'\) must lie inside the dataset"):
        stimulus_texts(["story.txt"], stimuli_dir=folder, captions=None)
    # what the plan sees without resolving every file: the links and the ids behind them
    assert escaping_links(folder) == {
        ("linked.png",): outside.resolve(),
        ("elsewhere",): outside.parent.resolve(),
        ("story.txt",): outside.with_name("story.txt").resolve(),
    }
    assert linked_outside(
        [ids[0], "linked.png", "old/linked.png", "elsewhere/outside.png", "gone.png"], folder
    ) == {
        "linked.png": outside.resolve(),
        "old/linked.png": outside.resolve(),
        "elsewhere/outside.png": outside.resolve(),
    }


def test_links_inside_the_dataset_are_read(image_stimuli, tmp_path, tmp_path_factory):
    folder, ids = image_stimuli
    # git-annex keeps the contents under the dataset's .git and links stimuli/ to them
    store = tmp_path / ".git" / "annex" / "objects" / "key.png"
    store.parent.mkdir(parents=True)
    (folder / ids[0]).rename(store)
    (folder / ids[0]).symlink_to(store)
    found = resolve_stimulus_files(ids, folder)
    assert found[ids[0]] == folder / ids[0]
    assert load_stimulus(ids[0], modality="image", stimuli_dir=folder, transforms={}).ndim == 3
    assert escaping_links(folder) == {}
    # a stimuli folder that is itself a link (kept on another disk) holds its files
    elsewhere = tmp_path_factory.mktemp("disk") / "stimuli"
    folder.rename(elsewhere)
    folder.symlink_to(elsewhere, target_is_directory=True)
    assert stimulus_roots(folder)[0] == elsewhere.resolve()
    assert set(resolve_stimulus_files(ids[1:], folder)) == set(ids[1:])
