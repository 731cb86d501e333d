"""The ``events`` extractor (condition codes and modulators) and ``stimulus_events`` selection."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from neuroflow.artifacts import open_dataset, write_dataset
from neuroflow.features.align import align_features
from neuroflow.features.config import fill_entry, layer_names
from neuroflow.features.events import (
    event_feature_rows,
    events_spec,
    feature_names,
    level_text,
    mean_event_rows,
)
from neuroflow.features.extract import extract_features
from neuroflow.features.registry import available_extractors
from neuroflow.io.events import events_from_store
from neuroflow.stimuli.files import read_stimulus_ids
from neuroflow.stimuli.text import read_transcript

NAMES = ["stim_type=FAMOUS", "stim_type=SCRAMBLED", "stim_type=UNFAMILIAR", "response_time"]


def _tsv(path: Path, columns: list[str], rows: list[list[object]]) -> Path:
    """An events table with CRLF line ends."""
    lines = ["\t".join(columns)] + ["\t".join(str(c) for c in row) for row in rows]
    path.write_bytes(("\r\n".join(lines) + "\r\n").encode())
    return path


def _fmri_events(tmp_path: Path) -> Path:
    """A run: faces with response times, a 20 s rest block (stim_type n/a), a repeat."""
    return _tsv(
        tmp_path / "sub-01_task-faces_run-1_events.tsv",
        ["onset", "duration", "stim_type", "response_time", "trigger", "stim_file"],
        [
            [0.0, 1.0, "FAMOUS", 0.5, 5, "func/f1.bmp"],
            [2.0, 1.0, "UNFAMILIAR", "n/a", 13, "func/u1.bmp"],
            [4.0, 1.0, "SCRAMBLED", 0.7, 17, "func/s1.bmp"],
            [6.0, 20.0, "n/a", "n/a", "n/a", "func/i999.bmp"],
            [26.0, 1.0, "FAMOUS", 0.9, 5, "func/f1.bmp"],
        ],
    )


def _eeg_events(tmp_path: Path) -> Path:
    """A recording without stim_file: ids come from trial_type."""
    return _tsv(
        tmp_path / "sub-01_task-faces_eeg_events.tsv",
        ["onset", "duration", "trial_type", "stim_type", "response_time"],
        [
            [0.0, 0, "face", "FAMOUS", 0.3],
            [1.0, 0, "scrambled", "SCRAMBLED", "n/a"],
            [2.0, 0, "face", "UNFAMILIAR", 0.6],
        ],
    )


def _extract(tmp_path: Path, tables: list[Path], name: str = "ev", **events) -> Path:
    spec = {"categorical": ["stim_type"], "numeric": ["response_time"], **events}
    stimulus_events = spec.pop("stimulus_events", None)
    out = extract_features(
        stimuli_dir=tmp_path / "no-stimuli-needed",
        stimulus_ids=tables,
        output=tmp_path / name,
        config={"name": name, "extractor": "events", "batch_size": 4, "events": spec},
        provenance={"stage": "extract_features"},
        stimulus_events=stimulus_events,
    )
    assert list(out) == ["events"]
    return out["events"]


def test_events_extractor_is_registered_with_one_fixed_layer():
    assert "events" in available_extractors()
    entry = fill_entry({"extractor": "events", "events": {"categorical": ["stim_type"]}})
    assert layer_names(entry) == ["events"]
    assert entry["events"]["name_column"] == "trial_type"
    with pytest.raises(ValueError, match=r"`layers` of 'events' must be \['events'\]"):
        fill_entry(
            {
                "extractor": "events",
                "layers": [{"depth": 1.0}],
                "events": {"categorical": ["stim_type"]},
            }
        )


def test_events_config_errors():
    with pytest.raises(ValueError, match=r"`events\.categorical` or `events\.numeric` must name"):
        fill_entry({"extractor": "events"})
    with pytest.raises(ValueError, match=r"`reduction\.method` must be 'none' with `extractor: ev"):
        fill_entry(
            {
                "extractor": "events",
                "events": {"numeric": ["rt"]},
                "reduction": {"method": "pca"},
            }
        )
    with pytest.raises(ValueError, match=r"must not share columns, got \['rt'\]"):
        events_spec({"categorical": ["rt"], "numeric": ["rt"]})
    with pytest.raises(ValueError, match=r"`events\.levels` keys must be columns of"):
        events_spec({"categorical": ["stim_type"], "levels": {"trigger": {"5": "x"}}})
    with pytest.raises(ValueError, match=r"`events\.categorical` must be a list of column names"):
        events_spec({"categorical": "stim_type"})
    with pytest.raises(ValueError, match=r"features\.extractors\[\]\.events\.colour"):
        fill_entry({"extractor": "events", "events": {"colour": ["x"]}})
    # Other extractors keep the default (empty) block and need nothing.
    assert fill_entry({"extractor": "image_statistics"})["events"]["categorical"] == []


def test_level_text_normalises_numbers():
    assert [level_text(v) for v in ("5", "5.0", 5.0, " 0.25 ", "n/a", "", float("nan"))] == [
        "5",
        "5",
        "5",
        "0.25",
        "n/a",
        "n/a",
        "n/a",
    ]
    assert level_text("FAMOUS") == "FAMOUS"


def test_extract_events_store(tmp_path):
    path = _extract(tmp_path, [_fmri_events(tmp_path), _eeg_events(tmp_path)])
    ds = open_dataset(path)
    assert ds["features"].dims == ("stimulus", "feature")
    assert list(ds["stimulus"].values) == [
        "func/f1.bmp",
        "func/u1.bmp",
        "func/s1.bmp",
        "func/i999.bmp",
        "face",
        "scrambled",
    ]
    assert list(ds["feature_name"].values) == NAMES
    expected = np.array(
        [
            [1, 0, 0, 0.7],  # two FAMOUS events, response times 0.5 and 0.9
            [0, 0, 1, 0],  # response time n/a -> 0
            [0, 1, 0, 0.7],
            [0, 0, 0, 0],  # the rest block evokes nothing
            [0.5, 0, 0.5, 0.45],  # one FAMOUS and one UNFAMILIAR "face"
            [0, 1, 0, 0],
        ]
    )
    np.testing.assert_allclose(ds["features"].values, expected, rtol=1e-6)
    assert ds.attrs["extractor"] == "events"
    assert ds.attrs["feature_set"] == "ev"
    assert ds.attrs["layer"] == "events"
    assert ds.attrs["row_unit"] == "stimulus"
    assert ds.attrs["modality"] == "events"
    assert ds.attrs["events"]["categorical"] == ["stim_type"]
    assert ds.attrs["neuroflow"]["stage"] == "extract_features"
    assert ds.attrs["neuroflow"]["extra"]["features"]["describe"]["feature_names"] == NAMES


def test_levels_merge_and_numeric_levels(tmp_path):
    table = _fmri_events(tmp_path)
    path = _extract(
        tmp_path,
        [table],
        "merged",
        categorical=["stim_type", "trigger"],
        numeric=[],
        levels={"stim_type": {"FAMOUS": "face", "UNFAMILIAR": "face"}},
    )
    ds = open_dataset(path)
    # Upper case sorts before lower case; numeric levels sort by value (5 < 13 < 17).
    assert list(ds["feature_name"].values) == [
        "stim_type=SCRAMBLED",
        "stim_type=face",
        "trigger=5",
        "trigger=13",
        "trigger=17",
    ]
    np.testing.assert_allclose(
        ds["features"].values,
        [[0, 1, 1, 0, 0], [0, 1, 0, 1, 0], [1, 0, 0, 0, 1], [0, 0, 0, 0, 0]],
    )


def test_events_stimulus_events_filter_in_extraction(tmp_path):
    tables = [_fmri_events(tmp_path), _eeg_events(tmp_path)]
    path = _extract(tmp_path, tables, "sel", stimulus_events={"exclude": {"stim_type": ["n/a"]}})
    ids = list(open_dataset(path)["stimulus"].values)
    assert "func/i999.bmp" not in ids and len(ids) == 5
    path = _extract(tmp_path, tables, "fam", stimulus_events={"select": {"stim_type": ["FAMOUS"]}})
    ds = open_dataset(path)
    # Events without a stim_file still count (id_column=None): "face" keeps its FAMOUS event.
    assert list(ds["stimulus"].values) == ["func/f1.bmp", "face"]
    assert list(ds["feature_name"].values) == ["stim_type=FAMOUS", "response_time"]
    np.testing.assert_allclose(ds["features"].values, [[1, 0.7], [1, 0.3]], rtol=1e-6)


def test_events_extraction_errors(tmp_path):
    table = _fmri_events(tmp_path)
    with pytest.raises(ValueError, match=r"`events.categorical` names column 'colour', which no"):
        _extract(tmp_path, [table], "a", categorical=["colour"])
    with pytest.raises(ValueError, match=r"columns: \['onset', 'duration', 'stim_type'"):
        _extract(tmp_path, [table], "b", categorical=["colour"])
    bad = _tsv(
        tmp_path / "bad_events.tsv",
        ["onset", "duration", "stim_type", "response_time", "stim_file"],
        [[0, 1, "FAMOUS", 0.4, "a.bmp"], [1, 1, "FAMOUS", "fast", "b.bmp"]],
    )
    with pytest.raises(
        ValueError, match=r"bad_events\.tsv, row 2: `response_time` .* got 'fast' instead"
    ):
        _extract(tmp_path, [bad], "c")
    nameless = _tsv(tmp_path / "nameless.tsv", ["onset", "stim_type"], [[0, "FAMOUS"]])
    with pytest.raises(ValueError, match=r"nameless\.tsv: the events table has neither"):
        _extract(tmp_path, [nameless], "d")
    with pytest.raises(TypeError, match="must be one or more events-table paths"):
        _extract(tmp_path, ["func/f1.bmp"], "e")
    assert not (tmp_path / "c" / "events.zarr").exists()


def test_event_feature_rows_per_event():
    table = pd.DataFrame(
        {
            "stim_type": ["FAMOUS", "n/a", "UNFAMILIAR", "OTHER"],
            "response_time": ["0.5", "n/a", "1e-1", "2"],
        },
        index=[3, 4, 7, 8],
    )
    spec = events_spec({"categorical": ["stim_type"], "numeric": ["response_time"]})
    rows = event_feature_rows(table, spec, NAMES)
    assert rows.shape == (4, 4)
    np.testing.assert_array_equal(rows[:, :3], [[1, 0, 0], [0, 0, 0], [0, 0, 1], [0, 0, 0]])
    np.testing.assert_allclose(rows[:, 3], [0.5, np.nan, 0.1, 2.0])
    np.testing.assert_allclose(mean_event_rows(rows), [0.25, 0, 0.25, 2.6 / 3])
    assert feature_names([table], spec) == [
        "stim_type=FAMOUS",
        "stim_type=OTHER",
        "stim_type=UNFAMILIAR",
        "response_time",
    ]
    table.loc[7, "response_time"] = "slow"
    with pytest.raises(ValueError, match=r"run\.tsv, row 8: `response_time`"):
        event_feature_rows(table, spec, NAMES, where="run.tsv")
    with pytest.raises(ValueError, match="Feature name 'colour=red' must be"):
        event_feature_rows(table, spec, ["colour=red"])


def _run_store(tmp_path: Path, name: str = "run.zarr") -> Path:
    """An fMRI run store as the fMRI stage writes it (every event, typed columns)."""
    n_times, tr = 9, 2.0
    brain = xr.Dataset(
        {
            "bold": (("time", "voxel"), np.zeros((n_times, 7))),
            "event_onset": ("event", np.array([0.0, 2.0, 4.0, 6.0, 12.0, 15.0])),
            "event_duration": ("event", np.array([2.0, 2.0, 2.0, 4.0, 0.0, 1.0])),
            "stim_file": (
                "event",
                np.array(
                    ["func/f1.bmp", "func/f1.bmp", "func/u1.bmp", "func/i999.bmp", "", ""],
                    dtype=object,
                ),
            ),
            "trial_type": (
                "event",
                np.array(["", "", "", "", "scrambled", ""], dtype=object),
            ),
            "event_stim_type": (
                "event",
                np.array(
                    ["FAMOUS", "FAMOUS", "UNFAMILIAR", "n/a", "SCRAMBLED", "FAMOUS"], dtype=object
                ),
            ),
            "event_response_time": ("event", np.array([0.5, 0.9, np.nan, np.nan, 0.4, 0.2])),
            "event_trigger": ("event", np.array([5.0, 5.0, 13.0, np.nan, 17.0, 5.0])),
        },
        coords={"time": np.arange(n_times) * tr},
        attrs={"tr": tr},
    )
    return write_dataset(brain, tmp_path / name, provenance={"stage": "preprocess_fmri"})


def test_event_table_from_run_store(tmp_path):
    table = events_from_store(open_dataset(_run_store(tmp_path)))
    assert set(table.columns) == {
        "onset",
        "duration",
        "stim_file",
        "trial_type",
        "stim_type",
        "response_time",
        "trigger",
    }
    assert list(table["response_time"]) == ["0.5", "0.9", "n/a", "n/a", "0.4", "0.2"]
    assert [level_text(v) for v in table["trigger"]] == ["5", "5", "13", "n/a", "17", "5"]


def test_align_events_store_per_event(tmp_path):
    features = _extract(tmp_path, [_fmri_events(tmp_path), _eeg_events(tmp_path)])
    out = align_features(
        features=features,
        brain=_run_store(tmp_path),
        output=tmp_path / "aligned.zarr",
        config={},
        provenance={"stage": "align_features"},
    )
    ds = open_dataset(out)
    x = ds["features"].values
    assert x.shape == (9, 4)
    expected = np.zeros((9, 4))
    expected[0] = [1, 0, 0, 0.5]  # each event's own response time, not the stimulus mean 0.7
    expected[1] = [1, 0, 0, 0.9]
    expected[2] = [0, 0, 1, 0]  # response time n/a -> 0
    expected[6] = [0, 1, 0, 0.4]  # an impulse without stim_file, named by trial_type
    # TRs 3-4: the rest block (zeros); TR 7: an event with no id is not placed.
    np.testing.assert_allclose(x, expected, rtol=1e-6, atol=1e-7)
    assert ds.attrs["n_events"] == 5
    assert ds.attrs["source"]["extractor"] == "events"


def test_align_events_store_with_stimulus_events(tmp_path):
    features = _extract(tmp_path, [_fmri_events(tmp_path), _eeg_events(tmp_path)])
    out = align_features(
        features=features,
        brain=_run_store(tmp_path),
        output=tmp_path / "aligned.zarr",
        config={"aggregation": "sum"},
        provenance={},
        stimulus_events={"select": {"trigger": [5]}},
    )
    ds = open_dataset(out)
    x = ds["features"].values
    expected = np.zeros((9, 4))
    expected[0] = [1, 0, 0, 0.5]
    expected[1] = [1, 0, 0, 0.9]
    np.testing.assert_allclose(x, expected, rtol=1e-6, atol=1e-7)
    assert ds.attrs["n_events"] == 2


def _stimulus_store(tmp_path: Path) -> Path:
    feats = xr.Dataset(
        {"features": (("stimulus", "feature"), np.array([[1.0, 0.0, 2.0], [0.0, 3.0, 1.0]]))},
        coords={"stimulus": np.array(["a.png", "b.png"], dtype=object), "feature": [0, 1, 2]},
    )
    return write_dataset(feats, tmp_path / "f.zarr", provenance={"stage": "extract_features"})


def test_align_stimulus_store_with_stimulus_events(tmp_path):
    brain = xr.Dataset(
        {
            "bold": (("time", "voxel"), np.zeros((7, 5))),
            "event_onset": ("event", np.array([0.0, 3.0, 6.0, 9.0])),
            "event_duration": ("event", np.array([3.0, 3.0, 3.0, 3.0])),
            "stim_file": ("event", np.array(["a.png", "rest.png", "b.png", "a.png"], dtype=object)),
            "trial_type": ("event", np.array(["img", "rest", "img", "img"], dtype=object)),
            "event_trigger": ("event", np.array([1.0, 999.0, 2.0, 1.0])),
        },
        coords={"time": np.arange(7) * 3.0},
        attrs={"tr": 3.0},
    )
    bpath = write_dataset(brain, tmp_path / "run.zarr", provenance={})
    common = {"features": _stimulus_store(tmp_path), "brain": bpath, "provenance": {}}
    with pytest.raises(ValueError, match=r"\['rest\.png'\] have no features"):
        align_features(output=tmp_path / "x.zarr", config={}, **common)
    for spec in ({"exclude": {"trigger": [999]}}, {"select": {"trial_type": ["img"]}}):
        out = align_features(output=tmp_path / "y.zarr", config={}, stimulus_events=spec, **common)
        ds = open_dataset(out)
        expected = np.zeros((7, 3))
        expected[0], expected[2], expected[3] = [1, 0, 2], [0, 3, 1], [1, 0, 2]
        np.testing.assert_allclose(ds["features"].values, expected)
        assert ds.attrs["n_events"] == 3
    with pytest.raises(ValueError, match="names column 'colour', which the table does not have"):
        align_features(
            output=tmp_path / "z.zarr",
            config={},
            stimulus_events={"select": {"colour": ["red"]}},
            **common,
        )


def test_stimulus_events_in_read_stimulus_ids(tmp_path):
    table = _fmri_events(tmp_path)
    assert read_stimulus_ids(table) == [
        "func/f1.bmp",
        "func/u1.bmp",
        "func/s1.bmp",
        "func/i999.bmp",
    ]
    rest = {"exclude": {"stim_type": ["n/a"]}}
    assert read_stimulus_ids(table, stimulus_events=rest) == [
        "func/f1.bmp",
        "func/u1.bmp",
        "func/s1.bmp",
    ]
    famous = {"select": {"trigger": ["5.0"]}}
    assert read_stimulus_ids([table], stimulus_events=famous) == ["func/f1.bmp"]
    # A list of ids has no table to select from.
    assert read_stimulus_ids(["x", "y"], stimulus_events=famous) == ["x", "y"]


def test_stimulus_events_in_extraction_of_files(image_stimuli, tmp_path):
    folder, ids = image_stimuli
    table = _tsv(
        tmp_path / "events.tsv",
        ["onset", "duration", "trial_type", "stim_file"],
        [[i, 1, "rest" if i == 2 else "img", stim] for i, stim in enumerate(ids[:4])],
    )
    out = extract_features(
        stimuli_dir=folder,
        stimulus_ids=[table],
        output=tmp_path / "img",
        config={"extractor": "image_statistics"},
        provenance={},
        stimulus_events={"exclude": {"trial_type": ["rest"]}},
    )
    ds = open_dataset(out["output"])
    assert list(ds["stimulus"].values) == [ids[0], ids[1], ids[3]]


def test_stimulus_events_in_read_transcript(tmp_path):
    table = _tsv(
        tmp_path / "story_events.tsv",
        ["onset", "duration", "trial_type", "word", "stim_file"],
        [
            [0.0, 0.1, "fixation", "n/a", "n/a"],
            [0.5, 0.2, "word", "once", "story.wav"],
            [0.9, 0.2, "practice", "test", "story.wav"],
            [1.3, 0.3, "word", "upon", "story.wav"],
        ],
    )
    words = read_transcript([table], stimuli_dir=tmp_path)
    assert list(words["word"]) == ["once", "test", "upon"]
    words = read_transcript(
        [table], stimuli_dir=tmp_path, stimulus_events={"exclude": {"trial_type": ["practice"]}}
    )
    assert list(words["word"]) == ["once", "upon"]
    np.testing.assert_allclose(words["word_onset"], [0.0, 0.8])
