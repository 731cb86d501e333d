"""The plan of the ``predict`` stage: which pools exist and which models read them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from neuroflow.demo._io import write_png
from neuroflow.features.registry import available_extractors
from neuroflow.workflow.predict import (
    DEFAULT_STIMULUS_SETS,
    PoolPlan,
    PredictPlan,
    plan_predict,
)

#: The built-in extractors (imported here, once, rather than inside the first test).
BUILTIN = available_extractors()

#: Extractor entries of the fake encoding models.
ENTRIES = {
    "stats": {"name": "stats", "extractor": "image_statistics"},
    "minilm": {"name": "minilm", "extractor": "sentence_transformer"},
    "wr": {"name": "wr", "extractor": "word_rate"},
    "ev": {"name": "ev", "extractor": "events", "events": {"categorical": ["trial_type"]}},
}
#: Encoding model -> extractor names of its feature spaces.
MODELS = {
    "enc_stats": ["stats"],
    "enc_text": ["minilm"],
    "enc_both": ["stats", "wr", "stats"],
    "enc_events": ["ev"],
}


def _extractor_of(name: str) -> dict:
    assert ENTRIES[name]["extractor"] in BUILTIN
    return ENTRIES[name]


def _images(folder: Path, names: list[str], seed: int = 3) -> list[Path]:
    rng = np.random.default_rng(seed)
    paths = []
    for i, name in enumerate(names):
        write_png(folder / name, (rng.random((7 + i, 11, 3)) * 255).astype(np.uint8))
        paths.append(folder / name)
    return paths


def _tsv(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def stimuli(tmp_path: Path) -> Path:
    """A dataset's stimuli folder with an image pool (captioned) and a sentences table."""
    stimuli = tmp_path / "bids" / "stimuli"
    _images(stimuli / "novel", ["b.png", "a.png", "sub/c.png"])
    _tsv(stimuli / "novel_captions.tsv", "stim_file\tcaption\na.png\tan a\nb.png\ta b\n")
    _tsv(stimuli / "sentences.tsv", "stim_id\tsentence\ns2\tsecond\ns1\tfirst\n")
    return stimuli


def _plan(config: dict, stimuli: Path, **kwargs) -> PredictPlan:
    kwargs.setdefault("models", MODELS)
    kwargs.setdefault("extractor_of", _extractor_of)
    return plan_predict(config, stimuli_dir=stimuli, **kwargs)


def test_no_stimulus_sets_gives_an_empty_plan(stimuli):
    for config in ({}, {"stimulus_sets": None}, {"stimulus_sets": {}}):
        plan = _plan(config, stimuli)
        assert plan == PredictPlan(pools={}, models={}, extractors={}, notes=())


def test_missing_pools_are_skipped_with_a_note(stimuli, tmp_path):
    sets = {
        "gone": {"folder": "absent"},
        "gone_text": {"sentences": str(tmp_path / "none.tsv")},
        "novel": {"folder": "novel"},
    }
    plan = _plan({"stimulus_sets": sets}, stimuli)
    assert list(plan.pools) == ["novel"]
    assert plan.notes[:2] == (
        f"predict/gone: skipped, there is no {stimuli / 'absent'}",
        f"predict/gone_text: skipped, there is no {tmp_path / 'none.tsv'}",
    )


@pytest.mark.parametrize(
    "raw",
    [
        DEFAULT_STIMULUS_SETS["pool"],
        {"folder": "pool", "glob": "*.png", "captions": "pool/captions.tsv", "sentences": None},
    ],
)
def test_the_default_pool_is_skipped_silently(stimuli, raw):
    plan = _plan({"stimulus_sets": {"pool": raw}}, stimuli)
    assert (plan.pools, plan.notes) == ({}, ())
    # the same entry under another name, or another entry under the name, is noted
    plan = _plan({"stimulus_sets": {"mine": raw, "pool": {"folder": "pool"}}}, stimuli)
    assert plan.notes == (
        f"predict/mine: skipped, there is no {stimuli / 'pool'}",
        f"predict/pool: skipped, there is no {stimuli / 'pool'}",
    )


def test_a_missing_captions_table_leaves_text_models_out(stimuli):
    raw = {"folder": "novel", "captions": "lost.tsv"}
    plan = _plan({"stimulus_sets": {"novel": raw}}, stimuli)
    pool = plan.pools["novel"]
    assert "captions" not in pool.spec
    assert pool.identity["spec"] == raw
    assert pool.identity["tables"] == {}
    assert pool.files == (stimuli / "novel" / "a.png", stimuli / "novel" / "b.png")
    assert plan.models == {"enc_stats": ("novel",)}
    assert plan.notes[:3] == (
        f"predict/novel: no captions table {stimuli / 'lost.tsv'}, so text models leave it out",
        "predict/enc_text: not applied to novel, extractor 'minilm' reads text and the pool "
        "has no captions table",
        "predict/enc_both: not applied to novel, extractor 'wr' reads text and the pool "
        "has no captions table",
    )


def test_a_real_image_pool(stimuli):
    raw = {"folder": "novel", "glob": None, "captions": "novel_captions.tsv"}
    pool = _plan({"stimulus_sets": {"novel": raw}}, stimuli).pools["novel"]
    assert isinstance(pool, PoolPlan)
    assert (pool.name, pool.kind) == ("novel", "image")
    assert dict(pool.spec) == {
        "folder": str(stimuli / "novel"),
        "glob": "*.png",
        "captions": str(stimuli / "novel_captions.tsv"),
    }
    assert pool.files == (
        stimuli / "novel" / "a.png",
        stimuli / "novel" / "b.png",
        stimuli / "novel_captions.tsv",
    )
    assert pool.identity["spec"] == raw
    assert pool.identity["ids"] == ["a.png", "b.png"]
    assert set(pool.identity["tables"]) == {"novel_captions.tsv"}


def test_a_real_sentence_pool(stimuli):
    pool = _plan({"stimulus_sets": {"s": {"sentences": "sentences.tsv"}}}, stimuli).pools["s"]
    assert pool.kind == "text"
    assert dict(pool.spec) == {"sentences": str(stimuli / "sentences.tsv")}
    assert pool.files == (stimuli / "sentences.tsv",)
    assert pool.identity["ids"] == ["s1", "s2"]
    assert set(pool.identity["tables"]) == {"sentences.tsv"}


def test_identity_follows_the_files_and_tables(stimuli):
    sets = {
        "novel": {"folder": "novel", "glob": "**/*.png", "captions": "novel_captions.tsv"},
        "s": {"sentences": "sentences.tsv"},
    }
    _tsv(
        stimuli / "novel_captions.tsv",
        "stim_file\tcaption\na.png\tan a\nb.png\ta b\nsub/c.png\ta c\nsub/d.png\ta d\n",
    )

    def identities() -> dict:
        plan = _plan({"stimulus_sets": sets}, stimuli)
        return {name: pool.identity for name, pool in plan.pools.items()}

    first = identities()
    assert first["novel"]["ids"] == ["a.png", "b.png", "sub/c.png"]
    assert identities() == first  # deterministic

    _images(stimuli / "novel", ["sub/d.png"], seed=4)
    added = identities()
    assert added["novel"]["ids"] == ["a.png", "b.png", "sub/c.png", "sub/d.png"]
    assert added["novel"] != first["novel"]
    assert added["s"] == first["s"]

    captions = stimuli / "novel_captions.tsv"
    _tsv(captions, captions.read_text(encoding="utf-8").replace("an a", "the letter a"))
    recaptioned = identities()
    assert recaptioned["novel"]["ids"] == added["novel"]["ids"]
    assert recaptioned["novel"]["tables"] != added["novel"]["tables"]

    _tsv(stimuli / "sentences.tsv", "stim_id\tsentence\ns2\tsecond\ns1\tthe first\n")
    assert identities()["s"]["tables"] != recaptioned["s"]["tables"]


def test_a_real_pool_that_cannot_be_read_is_an_error(stimuli):
    (stimuli / "empty").mkdir()
    with pytest.raises(ValueError, match=r"predict\.stimulus_sets\.empty\.glob must match files"):
        _plan({"stimulus_sets": {"empty": {"folder": "empty"}}}, stimuli)
    with pytest.raises(ValueError, match=r"stimulus_sets\.both must give exactly one of folder"):
        _plan({"stimulus_sets": {"both": {"folder": "novel", "sentences": "s.tsv"}}}, stimuli)


def test_demo_pools_exist_when_the_generator_writes_them(tmp_path):
    stimuli = tmp_path / "demo_bids" / "stimuli"  # not written yet
    sets = {
        "pool": dict(DEFAULT_STIMULUS_SETS["pool"]),
        "uncaptioned": {"folder": "pool", "captions": "lost.tsv"},
        "other": {"folder": "other"},
        "deep": {"folder": str(tmp_path / "demo_bids" / "derived" / "pool")},
        "text": {"sentences": "pool_sentences.tsv"},
        "missing_text": {"sentences": "nope.tsv"},
    }
    demo_files = [
        tmp_path / "demo_bids" / "participants.tsv",
        stimuli / "pool" / "a.png",
        stimuli / "pool" / "b.png",
        stimuli / "pool" / "captions.tsv",
        stimuli / "other_pool" / "c.png",  # a sibling folder, not under "other"
        tmp_path / "demo_bids" / "derived" / "pool" / "sub" / "d.png",
        stimuli / "pool_sentences.tsv",
    ]
    plan = _plan({"stimulus_sets": sets}, stimuli, demo_files=demo_files)
    assert list(plan.pools) == ["pool", "uncaptioned", "deep", "text"]
    assert plan.notes[:3] == (
        f"predict/uncaptioned: no captions table {stimuli / 'lost.tsv'}, so text models "
        "leave it out",
        f"predict/other: skipped, the demo dataset writes no {stimuli / 'other'}",
        f"predict/missing_text: skipped, the demo dataset writes no {stimuli / 'nope.tsv'}",
    )
    pool = plan.pools["pool"]
    assert pool.files == ()  # the demo job writes them
    assert pool.identity == {"spec": DEFAULT_STIMULUS_SETS["pool"]}
    assert pool.spec == {
        "folder": str(stimuli / "pool"),
        "glob": "*.png",
        "captions": str(stimuli / "pool" / "captions.tsv"),
    }
    assert plan.pools["uncaptioned"].spec == {"folder": str(stimuli / "pool"), "glob": "*.png"}
    assert plan.models["enc_text"] == ("pool", "text")


def test_the_demo_default_pool_is_skipped_silently(tmp_path):
    stimuli = tmp_path / "demo_bids" / "stimuli"
    sets = {"pool": dict(DEFAULT_STIMULUS_SETS["pool"])}
    plan = _plan({"stimulus_sets": sets}, stimuli, demo_files=[stimuli / "img" / "a.png"])
    assert (plan.pools, plan.models, plan.notes) == ({}, {}, ())


def test_demo_run_treats_pools_outside_the_dataset_as_real(tmp_path):
    stimuli = tmp_path / "demo_bids" / "stimuli"
    elsewhere = tmp_path / "elsewhere"
    _images(elsewhere, ["x.png"])
    sets = {"outside": {"folder": str(elsewhere)}, "gone": {"folder": str(tmp_path / "gone")}}
    plan = _plan({"stimulus_sets": sets}, stimuli, demo_files=[stimuli / "a.png"])
    assert list(plan.pools) == ["outside"]
    assert plan.pools["outside"].files == (elsewhere / "x.png",)
    assert plan.pools["outside"].identity["ids"] == ["x.png"]
    assert plan.notes[0] == f"predict/gone: skipped, there is no {tmp_path / 'gone'}"


def test_models_are_applied_where_every_extractor_reads_the_pool(stimuli):
    sets = {
        "novel": {"folder": "novel", "captions": "novel_captions.tsv"},
        "s": {"sentences": "sentences.tsv"},
    }
    plan = _plan({"stimulus_sets": sets}, stimuli)
    assert plan.models == {
        "enc_stats": ("novel",),
        "enc_text": ("novel", "s"),
        "enc_both": ("novel",),
    }
    assert plan.extractors == {"stats": ("novel",), "minilm": ("novel", "s"), "wr": ("novel",)}
    assert plan.notes == (
        "predict/enc_stats: not applied to s, extractor 'stats' does not read text stimuli",
        "predict/enc_both: not applied to s, extractor 'stats' does not read text stimuli",
        *(
            f"predict/enc_events: not applied to {pool}, extractor 'ev' reads events tables, "
            "not stimuli"
            for pool in ("novel", "s")
        ),
    )


def test_text_models_skip_an_uncaptioned_image_pool(stimuli):
    plan = _plan(
        {"stimulus_sets": {"novel": {"folder": "novel"}}},
        stimuli,
        models={"enc_text": ["minilm"], "enc_stats": ["stats"]},
    )
    assert plan.models == {"enc_stats": ("novel",)}
    assert plan.extractors == {"stats": ("novel",)}
    assert plan.notes == (
        "predict/enc_text: not applied to novel, extractor 'minilm' reads text and the pool "
        "has no captions table",
    )


def test_models_filter_keeps_named_models_and_notes_unknown_ones(stimuli):
    config = {
        "stimulus_sets": {"s": {"sentences": "sentences.tsv"}},
        "models": ["enc_text", "no_such_model"],
    }
    plan = _plan(config, stimuli)
    assert plan.models == {"enc_text": ("s",)}
    assert plan.extractors == {"minilm": ("s",)}
    assert plan.notes == ("predict/no_such_model: skipped, no encoding model 'no_such_model' runs",)


def test_no_model_reads_the_pools(stimuli):
    plan = _plan(
        {"stimulus_sets": {"s": {"sentences": "sentences.tsv"}}},
        stimuli,
        models={"enc_stats": ["stats"]},
    )
    assert list(plan.pools) == ["s"]
    assert (plan.models, plan.extractors) == ({}, {})
    assert len(plan.notes) == 1 and plan.notes[0].startswith("predict/enc_stats: not applied")


def test_eeg_models_are_planned_beside_the_fmri_ones(stimuli):
    sets = {
        "novel": {"folder": "novel", "captions": "novel_captions.tsv"},
        "s": {"sentences": "sentences.tsv"},
    }
    plan = _plan(
        {"stimulus_sets": sets, "models": ["enc_text", "eeg_stats", "eeg_events"]},
        stimuli,
        eeg_models={"eeg_stats": ["stats"], "eeg_events": ["ev"], "eeg_unwanted": ["minilm"]},
    )
    assert plan.models == {"enc_text": ("novel", "s")}
    assert plan.eeg_models == {"eeg_stats": ("novel",)}
    # the extractions serve both: stats only for the EEG model
    assert plan.extractors == {"minilm": ("novel", "s"), "stats": ("novel",)}
    assert plan.notes == (
        "predict_eeg/eeg_stats: not applied to s, extractor 'stats' does not read text stimuli",
        *(
            f"predict_eeg/eeg_events: not applied to {pool}, extractor 'ev' reads events "
            "tables, not stimuli"
            for pool in ("novel", "s")
        ),
    )
    # without fMRI models the EEG ones still run
    plan = _plan({"stimulus_sets": sets}, stimuli, models={}, eeg_models={"eeg_text": ["minilm"]})
    assert plan.models == {} and plan.eeg_models == {"eeg_text": ("novel", "s")}
