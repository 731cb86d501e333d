"""Pools of never-shown stimuli: reading them, what can read them, extracting their features."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from neuroflow.artifacts import PROVENANCE_KEY, build_provenance, open_dataset
from neuroflow.demo._io import write_png
from neuroflow.features.image_statistics import FEATURE_NAMES, image_statistics
from neuroflow.features.pools import (
    StimulusPool,
    extract_pool_features,
    pool_extractor_problem,
    pool_kind,
    pool_path,
    read_stimulus_pool,
)

STATS = {"name": "stats", "extractor": "image_statistics"}


def _images(folder: Path, names: list[str], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Write one small random PNG of uneven size per relative name; return the arrays."""
    out = {}
    for i, name in enumerate(names):
        image = (rng.random((9 + 2 * i, 13 + i, 3)) * 255).astype(np.uint8)
        write_png(folder / name, image)
        out[name] = image
    return out


def _tsv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["\t".join(header), *("\t".join(row) for row in rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def stimuli(tmp_path: Path, rng: np.random.Generator) -> Path:
    """A stimuli folder whose ``pool`` holds PNGs at two depths, a hidden PNG and a text file."""
    stimuli = tmp_path / "stimuli"
    _images(
        stimuli / "pool",
        ["z.png", "a.png", "sub/b.png", "sub/deeper/c.png", ".hidden.png", "sub/.hidden.png"],
        rng,
    )
    (stimuli / "pool" / "notes.txt").write_text("not a stimulus\n", encoding="utf-8")
    return stimuli


# --- pool_kind and pool_path ------------------------------------------------------------------


def test_pool_kind():
    assert pool_kind({"folder": "pool", "glob": None}) == "image"
    assert pool_kind({"sentences": "s.tsv", "folder": None}) == "text"


@pytest.mark.parametrize(
    ("spec", "got"),
    [
        ({"folder": "pool", "sentences": "s.tsv"}, r"\['folder', 'sentences'\]"),
        ({}, r"\[\]"),
        ({"folder": None, "sentences": None, "glob": "*.png"}, r"\[\]"),
    ],
)
def test_pool_kind_needs_exactly_one_source(spec, got):
    with pytest.raises(
        ValueError,
        match=rf"predict\.stimulus_sets\.novel must give exactly one of folder and "
        rf"sentences, got {got} instead",
    ):
        pool_kind(spec, "novel")
    with pytest.raises(ValueError, match=r"predict\.stimulus_sets\.novel must give exactly"):
        read_stimulus_pool("novel", spec, ".")


def test_pool_path(tmp_path, monkeypatch):
    assert pool_path("pool/x", tmp_path) == tmp_path / "pool" / "x"
    assert pool_path(tmp_path / "elsewhere", "/not/used") == tmp_path / "elsewhere"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert pool_path("~/pool", "/not/used") == tmp_path / "home" / "pool"


# --- image pools -------------------------------------------------------------------------------


def test_image_pool_default_glob_reads_the_top_level(stimuli):
    pool = read_stimulus_pool("novel", {"folder": "pool"}, stimuli)
    assert isinstance(pool, StimulusPool)
    assert (pool.name, pool.kind) == ("novel", "image")
    assert pool.folder == stimuli / "pool"  # relative to the stimuli folder
    assert pool.ids == ("a.png", "z.png")  # sorted; no hidden file, no text file
    assert dict(pool.captions) == {}


def test_image_pool_recursive_glob_gives_sorted_posix_paths(stimuli):
    pool = read_stimulus_pool("novel", {"folder": "pool", "glob": "**/*.png"}, stimuli)
    assert pool.ids == ("a.png", "sub/b.png", "sub/deeper/c.png", "z.png")


def test_image_pool_absolute_folder_ignores_stimuli_dir(stimuli, tmp_path):
    pool = read_stimulus_pool("novel", {"folder": str(stimuli / "pool")}, tmp_path / "nowhere")
    assert pool.folder == stimuli / "pool"
    assert pool.ids == ("a.png", "z.png")


def test_image_pool_captions_are_restricted_to_the_ids(stimuli):
    _tsv(
        stimuli / "pool_captions.tsv",
        ["stim_file", "caption", "extra"],
        [
            ["z.png", "a zebra", "1"],
            ["sub/b.png", "not in the pool", "2"],
            ["a.png", "an apple", "3"],
        ],
    )
    spec = {"folder": "pool", "captions": "pool_captions.tsv"}
    pool = read_stimulus_pool("novel", spec, stimuli)
    assert pool.ids == ("a.png", "z.png")
    assert dict(pool.captions) == {"a.png": "an apple", "z.png": "a zebra"}
    assert list(pool.captions) == ["a.png", "z.png"]


def test_captions_table_inside_the_folder_is_no_stimulus(stimuli):
    captions = _tsv(
        stimuli / "pool" / "captions.tsv",
        ["stim_file", "caption"],
        [["a.png", "an apple"], ["notes.txt", "some notes"], ["z.png", "a zebra"]],
    )
    spec = {"folder": "pool", "glob": "*", "captions": str(captions)}
    pool = read_stimulus_pool("novel", spec, stimuli)
    assert pool.ids == ("a.png", "notes.txt", "z.png")  # not captions.tsv, not .hidden.png
    assert pool.captions["notes.txt"] == "some notes"


def test_captions_must_cover_every_file(stimuli):
    captions = _tsv(stimuli / "caps.tsv", ["stim_file", "caption"], [["z.png", "a zebra"]])
    with pytest.raises(
        ValueError,
        match=rf"The captions table {captions} must have a row for every file of the pool, "
        r"got none for 1 of 2 \(first: a\.png\)",
    ):
        read_stimulus_pool("novel", {"folder": "pool", "captions": "caps.tsv"}, stimuli)


def test_captions_stim_file_must_be_unique(stimuli):
    rows = [["a.png", "an apple"], ["z.png", "a zebra"], ["a.png", "another apple"]]
    _tsv(stimuli / "caps.tsv", ["stim_file", "caption"], rows)
    with pytest.raises(
        ValueError, match=r"caps\.tsv: column 'stim_file' must hold unique values, got 'a\.png'"
    ):
        read_stimulus_pool("novel", {"folder": "pool", "captions": "caps.tsv"}, stimuli)


@pytest.mark.parametrize("empty", ["", "n/a", "  "])
def test_captions_must_not_be_empty(stimuli, empty):
    rows = [["a.png", "an apple"], ["z.png", empty]]
    _tsv(stimuli / "caps.tsv", ["stim_file", "caption"], rows)
    with pytest.raises(
        ValueError,
        match=r"caps\.tsv: column 'caption' must not be empty or n/a, got 1 such row\(s\) "
        r"\(first: data row 2\)",
    ):
        read_stimulus_pool("novel", {"folder": "pool", "captions": "caps.tsv"}, stimuli)


def test_captions_table_needs_its_columns(stimuli):
    _tsv(stimuli / "caps.tsv", ["stim_file", "text"], [["a.png", "an apple"]])
    with pytest.raises(
        ValueError,
        match=r"must have the column\(s\) \['stim_file', 'caption'\], got "
        r"\['stim_file', 'text'\] instead",
    ):
        read_stimulus_pool("novel", {"folder": "pool", "captions": "caps.tsv"}, stimuli)


def test_missing_captions_table(stimuli):
    with pytest.raises(FileNotFoundError, match=r"The captions table .*nope\.tsv does not exist"):
        read_stimulus_pool("novel", {"folder": "pool", "captions": "nope.tsv"}, stimuli)


def test_missing_folder_names_the_setting(tmp_path):
    with pytest.raises(
        FileNotFoundError,
        match=rf"predict\.stimulus_sets\.novel\.folder must be an existing folder, got "
        rf"{tmp_path / 'absent'} instead",
    ):
        read_stimulus_pool("novel", {"folder": "absent"}, tmp_path)


def test_folder_that_is_a_file(stimuli):
    with pytest.raises(FileNotFoundError, match=r"stimulus_sets\.novel\.folder must be"):
        read_stimulus_pool("novel", {"folder": "pool/a.png"}, stimuli)


@pytest.mark.parametrize("glob", ["*.jpg", "sub/*.PNG", "**/.hidden.png"])
def test_glob_matching_nothing(stimuli, glob):
    with pytest.raises(
        ValueError,
        match=rf"predict\.stimulus_sets\.novel\.glob must match files in .*pool, got no "
        rf"match for '{glob.replace('*', '[*]')}' instead",
    ):
        read_stimulus_pool("novel", {"folder": "pool", "glob": glob}, stimuli)


# --- sentence pools ----------------------------------------------------------------------------


def test_sentences_without_ids_get_numbered_ids(tmp_path):
    _tsv(tmp_path / "sents.tsv", ["sentence"], [["the cat sat"], ["a dog ran"], ["birds fly"]])
    pool = read_stimulus_pool("sents", {"sentences": "sents.tsv"}, tmp_path)
    assert (pool.kind, pool.folder) == ("text", None)
    assert pool.ids == ("sentence-0001", "sentence-0002", "sentence-0003")
    assert dict(pool.captions) == {
        "sentence-0001": "the cat sat",
        "sentence-0002": "a dog ran",
        "sentence-0003": "birds fly",
    }


def test_sentences_with_ids_are_sorted_by_id(tmp_path):
    rows = [["s2 ", "second one", "x"], ["s1", "first one", "y"], ["s10", "tenth", "z"]]
    table = _tsv(tmp_path / "t" / "sents.tsv", ["stim_id", "sentence", "other"], rows)
    pool = read_stimulus_pool("sents", {"sentences": str(table)}, tmp_path / "unused")
    assert pool.ids == ("s1", "s10", "s2")  # ids are stripped
    assert dict(pool.captions) == {"s1": "first one", "s10": "tenth", "s2": "second one"}
    assert list(pool.captions) == list(pool.ids)


def test_sentence_ids_must_be_unique(tmp_path):
    _tsv(tmp_path / "s.tsv", ["stim_id", "sentence"], [["a", "one"], ["b", "two"], ["a", "3"]])
    with pytest.raises(
        ValueError, match=r"s\.tsv: column 'stim_id' must hold unique values, got 'a' twice"
    ):
        read_stimulus_pool("sents", {"sentences": "s.tsv"}, tmp_path)


def test_sentences_table_needs_a_sentence_column(tmp_path):
    _tsv(tmp_path / "s.tsv", ["stim_id", "text"], [["a", "one"]])
    with pytest.raises(
        ValueError,
        match=r"The sentences table .*s\.tsv must have the column\(s\) \['sentence'\], got "
        r"\['stim_id', 'text'\] instead",
    ):
        read_stimulus_pool("sents", {"sentences": "s.tsv"}, tmp_path)


def test_sentences_must_not_be_empty(tmp_path):
    _tsv(tmp_path / "s.tsv", ["sentence"], [["one"], ["n/a"], ["three"]])
    with pytest.raises(ValueError, match=r"column 'sentence' must not be empty or n/a"):
        read_stimulus_pool("sents", {"sentences": "s.tsv"}, tmp_path)


def test_sentences_table_needs_rows(tmp_path):
    _tsv(tmp_path / "s.tsv", ["sentence"], [])
    with pytest.raises(ValueError, match=r"The sentences table .*s\.tsv must have rows"):
        read_stimulus_pool("sents", {"sentences": "s.tsv"}, tmp_path)


def test_missing_sentences_table(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"The sentences table .*s\.tsv does not exist"):
        read_stimulus_pool("sents", {"sentences": "s.tsv"}, tmp_path)


# --- pool_extractor_problem --------------------------------------------------------------------


def test_image_statistics_reads_an_image_pool():
    assert pool_extractor_problem(STATS, "image", False) is None
    assert pool_extractor_problem(STATS, "image", True) is None


@pytest.mark.parametrize(
    ("entry", "kind", "has_captions", "reason"),
    [
        (
            {"name": "ev", "extractor": "events", "events": {"categorical": ["trial_type"]}},
            "image",
            True,
            r"extractor 'ev' reads events tables, not stimuli",
        ),
        (
            {"name": "words", "extractor": "sentence_transformer", "text_source": "transcript"},
            "text",
            False,
            r"extractor 'words' reads word-by-word transcripts",
        ),
        (
            {**STATS, "reduction": {"method": "pca", "n_components": 3}},
            "image",
            False,
            r"extractor 'stats' reduces its features with a PCA fitted on the dataset's "
            r"training stimuli",
        ),
        (
            {"name": "minilm", "extractor": "sentence_transformer"},
            "image",
            False,
            r"extractor 'minilm' reads text and the pool has no captions table",
        ),
        (STATS, "text", False, r"extractor 'stats' does not read text stimuli"),
        (
            {"name": "mel", "extractor": "mel_spectrogram"},
            "image",
            True,
            r"extractor 'mel' does not read image stimuli",
        ),
    ],
)
def test_pool_extractor_problem_reasons(entry, kind, has_captions, reason):
    problem = pool_extractor_problem(entry, kind, has_captions)
    assert problem is not None and re.match(reason, problem), problem


def test_text_extractors_read_captioned_image_pools():
    entry = {"name": "minilm", "extractor": "sentence_transformer"}
    assert pool_extractor_problem(entry, "image", True) is None
    assert pool_extractor_problem(entry, "text", False) is None
    random_projection = {**STATS, "reduction": {"method": "random_projection"}}
    assert pool_extractor_problem(random_projection, "image", False) is None


@pytest.mark.parametrize(
    ("entry", "kind"),
    [
        # an image model on a table of sentences: there is no image to read
        ({**STATS, "modality": "image"}, "text"),
        # an audio model on a folder of images: there is no sound to read
        ({"name": "mel", "extractor": "mel_spectrogram", "modality": "audio"}, "image"),
    ],
    ids=["image-entry-on-sentences", "audio-entry-on-images"],
)
def test_a_set_modality_the_pool_cannot_give_is_a_problem(entry, kind):
    problem = pool_extractor_problem(entry, kind, False)
    assert problem is not None and repr(entry["name"]) in problem


def test_pool_extractor_problem_checks_the_entry():
    with pytest.raises(ValueError, match=r"`text_source` must be one of"):
        pool_extractor_problem({**STATS, "text_source": "subtitles"}, "image", False)


# --- extract_pool_features ---------------------------------------------------------------------


def _provenance() -> dict:
    return build_provenance(
        stage="pool_features/x", version="0123456789", config={}, format_version=1
    )


def test_extract_image_statistics_of_a_pool(tmp_path, rng):
    stimuli = tmp_path / "stimuli"
    names = ["e.png", "b.png", "sub/a.png", "sub/f.png", "c.png", "g.png", "sub/deep/d.png"]
    images = _images(stimuli / "pool", names, rng)
    rows = [[name, f"picture {i}"] for i, name in enumerate(names)]
    _tsv(stimuli / "caps.tsv", ["stim_file", "caption"], rows)
    spec = {"folder": "pool", "glob": "**/*.png", "captions": "caps.tsv"}
    pool = read_stimulus_pool("novel", spec, stimuli)
    assert len(pool.ids) == 7 and pool.ids == tuple(sorted(names))

    store = tmp_path / "out" / "stats" / "output.zarr"
    paths = extract_pool_features(
        pool=pool, output={"output": store}, config=STATS, provenance=_provenance()
    )
    assert paths == {"output": store}
    assert store.is_dir()
    ds = open_dataset(store)
    assert ds["features"].dims == ("stimulus", "feature")
    assert ds["stimulus"].values.tolist() == list(pool.ids)
    assert ds["features"].shape == (7, len(FEATURE_NAMES))
    assert ds["feature_name"].values.tolist() == list(FEATURE_NAMES)
    assert ds.attrs["modality"] == "image"
    assert ds.attrs[PROVENANCE_KEY]["stage"] == "pool_features/x"
    assert ds.attrs[PROVENANCE_KEY]["version"] == "0123456789"
    expected = image_statistics([images[i] for i in pool.ids])
    np.testing.assert_allclose(ds["features"].values, expected, rtol=1e-5, atol=1e-6)


def test_extract_a_text_extractor_from_captions_and_sentences(tmp_path, rng):
    stimuli = tmp_path / "stimuli"
    _images(stimuli / "pool", ["b.png", "a.png"], rng)
    _tsv(stimuli / "caps.tsv", ["stim_file", "caption"], [["b.png", "two words"], ["a.png", "x"]])
    _tsv(stimuli / "s.tsv", ["sentence"], [["one two three"], ["four"], ["five six"]])
    entry = {"name": "wr", "extractor": "word_rate"}
    for spec, ids, counts in (
        ({"folder": "pool", "captions": "caps.tsv"}, ["a.png", "b.png"], [1, 2]),
        ({"sentences": "s.tsv"}, ["sentence-0001", "sentence-0002", "sentence-0003"], [3, 1, 2]),
    ):
        pool = read_stimulus_pool("novel", spec, stimuli)
        store = tmp_path / "out" / pool.kind / "output.zarr"
        extract_pool_features(
            pool=pool, output={"output": store}, config=entry, provenance=_provenance()
        )
        ds = open_dataset(store)
        assert ds["stimulus"].values.tolist() == ids
        np.testing.assert_array_equal(ds["features"].values[:, 0], counts)
        assert ds.attrs["modality"] == "text"


@pytest.mark.parametrize(
    ("entry", "spec", "reason"),
    [
        (STATS, {"sentences": "s.tsv"}, r"extractor 'stats' does not read text stimuli"),
        (
            {"name": "minilm", "extractor": "sentence_transformer"},
            {"folder": "pool"},
            r"extractor 'minilm' reads text and the pool has no captions table",
        ),
    ],
)
def test_extract_refuses_a_pool_the_extractor_cannot_read(tmp_path, rng, entry, spec, reason):
    _images(tmp_path / "pool", ["a.png", "b.png", "c.png"], rng)
    _tsv(tmp_path / "s.tsv", ["sentence"], [["one"], ["two"]])
    pool = read_stimulus_pool("my_pool", spec, tmp_path)
    store = tmp_path / "out" / "output.zarr"
    with pytest.raises(
        ValueError, match=rf"Stimulus set 'my_pool' cannot be extracted: {reason}\."
    ):
        extract_pool_features(
            pool=pool, output={"output": store}, config=entry, provenance=_provenance()
        )
    assert not store.exists()


def test_files_in_hidden_folders_are_not_stimuli(stimuli):
    _images(stimuli / "pool" / ".cache", ["x.png"], np.random.default_rng(3))
    pool = read_stimulus_pool("novel", {"folder": "pool", "glob": "**/*.png"}, stimuli)
    assert pool.ids == ("a.png", "sub/b.png", "sub/deeper/c.png", "z.png")
