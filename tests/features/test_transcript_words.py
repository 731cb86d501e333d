"""Word-by-word transcripts (``text_source: transcript``) and word rate per TR."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from neuroflow.artifacts import open_dataset, write_dataset
from neuroflow.features.align import align_features
from neuroflow.features.config import fill_entry
from neuroflow.features.extract import extract_features
from neuroflow.features.registry import Extractor, register_extractor
from neuroflow.stimuli.text import read_transcript, transcript_texts

WORDS = ["once", "upon", "a", "time", "there", "lived", "a"]
ONSETS = [0.1, 0.5, 0.9, 1.3, 2.2, 2.6, 3.7]
DURATIONS = [0.3, 0.3, 0.2, 0.6, 0.3, 0.5, 0.2]


@register_extractor("test_context_counts", modalities=("text",))
class ContextCounts(Extractor):
    """Number of context words and of own words of each text."""

    default_layers = ("output",)

    def layer_names(self):
        return ["output"]

    def extract(self, batch):
        return {"output": np.array([[len(c.split()), len(t.split())] for c, t in batch])}


def _events(path: Path, rows: list[dict]) -> Path:
    columns = ["onset", "duration", "trial_type", "word", "stim_file"]
    lines = ["\t".join(columns)]
    lines += ["\t".join(str(row.get(c, "n/a")) for c in columns) for row in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def _word_events(tmp_path: Path) -> Path:
    """A run: fixation, seven word events of story.wav, a transcript event, a non-word event."""
    rows = [{"onset": 0.0, "duration": 0.1, "trial_type": "fixation"}]
    rows += [
        {"onset": o, "duration": d, "trial_type": "word", "word": w, "stim_file": "story.wav"}
        for o, d, w in zip(ONSETS, DURATIONS, WORDS, strict=True)
    ]
    rows.append({"onset": 6.0, "duration": 3.0, "trial_type": "story", "stim_file": "tale.tsv"})
    # An event of the narrative that is not a word: ignored.
    rows.append({"onset": 8.0, "duration": 1.0, "trial_type": "end", "stim_file": "story.wav"})
    return _events(tmp_path / "sub-01_task-story_run-1_events.tsv", rows)


def _stimuli(tmp_path: Path) -> Path:
    folder = tmp_path / "stimuli"
    folder.mkdir()
    (folder / "tale.tsv").write_text(
        "word\tonset\tduration\nthe\t0.0\t0.4\nend\t0.5\tn/a\n\tn/a\tn/a\nnow\t1.75\t0.5\n"
    )
    return folder


def test_read_transcript_from_word_events_and_files(tmp_path):
    events, folder = _word_events(tmp_path), _stimuli(tmp_path)
    words = read_transcript([events], stimuli_dir=folder)
    assert words["stimulus"].tolist()[:2] == ["story.wav#w=0", "story.wav#w=1"]
    assert words["stimulus"].tolist()[-3:] == ["tale.tsv#w=0", "tale.tsv#w=1", "tale.tsv#w=2"]
    assert words["word"].tolist() == [*WORDS, "the", "end", "now"]
    np.testing.assert_allclose(words["word_onset"][:7], np.array(ONSETS) - ONSETS[0])
    np.testing.assert_allclose(words["word_onset"][7:], [0.0, 0.5, 1.75])
    np.testing.assert_allclose(words["word_duration"][7:], [0.4, 0.0, 0.5])
    assert words["word_index"].tolist() == [*range(7), 0, 1, 2]
    # The same narrative in a second table is read once.
    again = _events(
        tmp_path / "run-2_events.tsv",
        [{"onset": 0, "duration": 1, "word": "once", "stim_file": "story.wav"}],
    )
    with pytest.raises(ValueError, match=r"word events of stim_file 'story\.wav' differ"):
        read_transcript([events, again], stimuli_dir=folder)
    assert len(read_transcript([events, events], stimuli_dir=folder)) == 10


def test_context_windows_stay_within_each_narrative(tmp_path):
    words = read_transcript([_word_events(tmp_path)], stimuli_dir=_stimuli(tmp_path))
    texts = transcript_texts(words, context_words=2)
    assert texts[0] == ("", "once")
    assert texts[1] == ("once", "upon")
    assert texts[3] == ("upon a", "time")
    assert texts[6] == ("there lived", "a")
    assert texts[7] == ("", "the")  # a new narrative starts without context
    assert texts[9] == ("the end", "now")
    assert all(c == "" for c, _ in transcript_texts(words, context_words=0))


def test_extract_one_row_per_word(tmp_path):
    events, folder = _word_events(tmp_path), _stimuli(tmp_path)
    out = extract_features(
        stimuli_dir=folder,
        stimulus_ids=[events],
        captions=tmp_path / "no-captions.tsv",  # never read for transcripts
        output=tmp_path / "ctx",
        config={
            "extractor": "test_context_counts",
            "text_source": "transcript",
            "context_words": 3,
            "batch_size": 2,
        },
        provenance={},
    )
    ds = open_dataset(out["output"])
    assert ds.sizes["stimulus"] == 10
    assert str(ds["stimulus"].values[4]) == "story.wav#w=4"
    assert [str(w) for w in ds["word"].values[:3]] == ["once", "upon", "a"]
    assert str(ds["source_stimulus"].values[8]) == "tale.tsv"
    assert ds["word_onset"].attrs["units"] == "s"
    np.testing.assert_array_equal(ds["features"].values[:, 0], [0, 1, 2, 3, 3, 3, 3, 0, 1, 2])
    assert ds.attrs["row_unit"] == "word" and ds.attrs["text_source"] == "transcript"
    assert ds.attrs["context_words"] == 3


def _brain(
    tmp_path: Path, events: Path, n_times: int = 6, tr: float = 1.5, word: str = "word"
) -> Path:
    import pandas as pd

    table = pd.read_csv(events, sep="\t", dtype=str, keep_default_na=False)
    ds = xr.Dataset(
        {
            "bold": (("time", "voxel"), np.zeros((n_times, 2))),
            "event_onset": ("event", table["onset"].astype(float).to_numpy()),
            "event_duration": ("event", table["duration"].astype(float).to_numpy()),
            "stim_file": ("event", table["stim_file"].to_numpy(dtype=object)),
            f"event_{word}": ("event", table["word"].to_numpy(dtype=object)),
        },
        coords={"time": np.arange(n_times) * tr},
        attrs={"tr": tr},
    )
    return write_dataset(ds, tmp_path / "run.zarr", provenance={"stage": "preprocess_fmri"})


def test_word_rate_per_tr(tmp_path):
    events, folder = _word_events(tmp_path), _stimuli(tmp_path)
    out = extract_features(
        stimuli_dir=folder,
        stimulus_ids=[events],
        output=tmp_path / "rate",
        config={"extractor": "word_rate", "text_source": "transcript"},
        provenance={},
    )
    aligned = align_features(
        features=out["output"],
        brain=_brain(tmp_path, events),
        output=tmp_path / "a.zarr",
        config={"aggregation": "sum"},
        provenance={},
    )
    got = open_dataset(aligned)["features"].values[:, 0]
    # TRs [0,1.5) [1.5,3) [3,4.5) [4.5,6) [6,7.5) [7.5,9). Story words [0.1, 0.4),
    # [0.5, 0.8), [0.9, 1.1) in TR 0; "time" [1.3, 1.9) split 0.2 : 0.4 s; "there" [2.2, 2.5)
    # in TR 1; "lived" [2.6, 3.1) split 0.4 : 0.1 s; "a" [3.7, 3.9) in TR 2. Transcript at
    # 6 s: "the" [6, 6.4), "end" an impulse at 6.5 s, "now" [7.75, 8.25).
    expected = [3 + 1 / 3, 2 / 3 + 1 + 0.8, 0.2 + 1, 0, 2, 1]
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    assert open_dataset(aligned).attrs["n_events"] == 8


def test_word_events_must_match_the_store(tmp_path):
    events, folder = _word_events(tmp_path), _stimuli(tmp_path)
    out = extract_features(
        stimuli_dir=folder,
        stimulus_ids=[events],
        output=tmp_path / "rate",
        config={"extractor": "word_rate", "text_source": "transcript"},
        provenance={},
    )
    assert open_dataset(out["output"])["word_event"].values.tolist() == [True] * 7 + [False] * 3
    with pytest.raises(ValueError, match="has no `event_word` variable"):
        align_features(
            features=out["output"],
            brain=_brain(tmp_path, events, word="token"),
            output=tmp_path / "a.zarr",
            config={},
            provenance={},
        )
    text = events.read_text().replace("\tlived\t", "\tloved\t")
    other = tmp_path / "other"
    other.mkdir()
    changed = other / events.name
    changed.write_text(text)
    with pytest.raises(ValueError, match="event 6 has word 'loved', but word 5 of stim_file"):
        align_features(
            features=out["output"],
            brain=_brain(other, changed),
            output=tmp_path / "a.zarr",
            config={},
            provenance={},
        )


def test_transcript_errors(tmp_path):
    folder = _stimuli(tmp_path)
    orphan = _events(tmp_path / "orphan.tsv", [{"onset": 1, "duration": 1, "word": "hi"}])
    with pytest.raises(ValueError, match=r"orphan\.tsv, row 1: the event has a `word` but no"):
        read_transcript([orphan], stimuli_dir=folder)
    (folder / "bad.tsv").write_text("word\tstart\nhi\t0\n")
    with pytest.raises(
        ValueError, match=r"bad\.tsv: the transcript .* lacks column\(s\) \['onset'\]"
    ):
        read_transcript(["bad.tsv"], stimuli_dir=folder)
    (folder / "late.tsv").write_text("word\tonset\nhi\tsoon\n")
    with pytest.raises(ValueError, match=r"late\.tsv, row 1: `onset` must be a number"):
        read_transcript(["late.tsv"], stimuli_dir=folder)
    with pytest.raises(ValueError, match=r"must name transcript \.tsv files"):
        read_transcript(["clip.wav"], stimuli_dir=folder)
    none = _events(tmp_path / "none.tsv", [{"onset": 1, "duration": 1, "stim_file": "a.png"}])
    with pytest.raises(ValueError, match="No words"):
        read_transcript([none], stimuli_dir=folder)
    with pytest.raises(ValueError, match="accepts image, video stimuli"):
        fill_entry({"extractor": "image_statistics", "text_source": "transcript"})
    with pytest.raises(ValueError, match="`text_source` must be one of"):
        fill_entry({"text_source": "subtitles"})
    with pytest.raises(ValueError, match="`transcript_column` must be a non-empty str"):
        fill_entry({"transcript_column": ""})
