"""Tests of the demo's pool of never-shown images and their planted drives."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from neuroflow.demo import demo_layout, generate_demo_dataset, load_ground_truth, resolve_config
from neuroflow.demo import stimuli as demo_stimuli
from neuroflow.demo.stimuli import (
    PHOTOS,
    Shot,
    crop_key,
    plan_eeg_images,
    plan_movies,
    plan_pool,
    render_shot,
)
from neuroflow.features.image_statistics import FEATURE_NAMES, image_statistics

N_POOL = 7
TINY = {
    "seed": 5,
    "n_subjects": 2,
    "image_size": 32,
    "fmri": {"n_train_runs": 2, "n_test_repeats": 0, "n_volumes": 30, "grid_shape": [12, 13, 11]},
    "eeg": {"n_trials": 20, "n_test_images": 2, "n_repeats": 2, "sfreq": 200.0, "n_components": 2},
}
ROIS = {"early_visual": 1, "semantic": 2, "noise": 3}
CAPTION = r"^a (wide shot|medium shot|close-up) of "


def _config(n_images: int) -> dict:
    return {**TINY, "pool": {"n_images": n_images}}


def _hashes(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _read_png(path: Path) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as img:
        return np.asarray(img.convert("RGB"))


def _shots(table: pd.DataFrame, split: str | None = None) -> list[Shot]:
    """Shots rebuilt from a ``stimuli.tsv`` or ``pool_stimuli.tsv`` table."""
    return [
        Shot(
            stim_file=row.stim_file,
            photo=row.photo,
            region=row.region,
            zoom=float(row.zoom),
            pan=(float(row.pan_row), float(row.pan_col)),
            caption=row.caption,
            split=split or row.split,
        )
        for row in table.itertuples()
    ]


@pytest.fixture(scope="module")
def with_pool(tmp_path_factory) -> Path:
    """A tiny dataset with a pool of N_POOL images."""
    root = tmp_path_factory.mktemp("pool") / "bids"
    generate_demo_dataset(output=root, config=_config(N_POOL), provenance={"stage": "demo"})
    return root


@pytest.fixture(scope="module")
def without_pool(tmp_path_factory) -> Path:
    """The same tiny dataset without a pool."""
    root = tmp_path_factory.mktemp("nopool") / "bids"
    generate_demo_dataset(output=root, config=_config(0), provenance={"stage": "demo"})
    return root


def test_pool_files_match_layout(with_pool, without_pool):
    """The layout lists the pool files (none for an empty pool) and they are written."""
    layout = demo_layout(_config(N_POOL), with_pool)
    assert layout.pool_ids == tuple(f"pool-{i:04d}.png" for i in range(1, N_POOL + 1))
    assert {p for p in with_pool.rglob("*") if p.is_file()} == set(layout.files)
    pngs = sorted(layout.pool_dir.glob("*.png"))
    assert [p.name for p in pngs] == list(layout.pool_ids)
    assert all(_read_png(p).shape == (32, 32, 3) for p in pngs)
    for sub in layout.subjects:
        assert layout.groundtruth / f"sub-{sub}" / f"sub-{sub}_pool.tsv" in layout.files
    empty = demo_layout(_config(0), without_pool)
    assert empty.pool_ids == ()
    assert not any("pool" in p.name for p in empty.files)
    assert {p for p in without_pool.rglob("*") if p.is_file()} == set(empty.files)
    assert not (without_pool / "stimuli" / "pool").exists()


def test_pool_captions_table(with_pool):
    """captions.tsv names each pool image relative to the pool folder, shot-style."""
    captions = pd.read_csv(with_pool / "stimuli" / "pool" / "captions.tsv", sep="\t")
    assert list(captions.columns) == ["stim_file", "caption"]
    assert captions["stim_file"].tolist() == [f"pool-{i:04d}.png" for i in range(1, N_POOL + 1)]
    assert captions["caption"].str.match(CAPTION).all()
    crops = pd.read_csv(with_pool / "derivatives" / "groundtruth" / "pool_stimuli.tsv", sep="\t")
    assert crops["stim_file"].tolist() == captions["stim_file"].tolist()
    assert crops["caption"].tolist() == captions["caption"].tolist()


def test_other_files_unchanged_by_pool(with_pool, without_pool):
    """Every file but the pool's and groundtruth.json is byte-identical without a pool."""
    h_pool, h_none = _hashes(with_pool), _hashes(without_pool)
    meta = {"derivatives/groundtruth/groundtruth.json", ".neuroflow.json"}
    assert set(h_none) <= set(h_pool)
    assert {k: v for k, v in h_pool.items() if k in h_none and k not in meta} == {
        k: v for k, v in h_none.items() if k not in meta
    }
    extra = set(h_pool) - set(h_none)
    assert all("pool" in Path(f).name or f.startswith("stimuli/pool/") for f in extra)
    # PNGs, captions.tsv, pool_features.npz, pool_stimuli.tsv, one table per subject
    assert len(extra) == N_POOL + 3 + TINY["n_subjects"]
    gt_pool, gt_none = (
        json.loads((root / "derivatives" / "groundtruth" / "groundtruth.json").read_text())
        for root in (with_pool, without_pool)
    )
    assert gt_pool["pool"]["n_images"] == N_POOL and gt_none["pool"] is None
    assert gt_pool["config"].pop("pool") == {"n_images": N_POOL}
    assert gt_none["config"].pop("pool") == {"n_images": 0}
    gt_pool.pop("pool"), gt_none.pop("pool")
    assert gt_pool == gt_none


def test_no_crop_reused(with_pool):
    """No pool image frames the pixels of a shot, an EEG image or another pool image."""
    gt = with_pool / "derivatives" / "groundtruth"
    stimuli = pd.read_csv(gt / "stimuli.tsv", sep="\t")
    pool = pd.read_csv(gt / "pool_stimuli.tsv", sep="\t")
    params = ["photo", "region", "zoom", "pan_row", "pan_col"]
    shown = set(stimuli[params].itertuples(index=False))
    drawn = list(pool[params].itertuples(index=False))
    assert len(set(drawn)) == len(drawn) and not shown & set(drawn)
    boxes = {crop_key(s) for s in _shots(stimuli)}
    pool_boxes = [crop_key(s) for s in _shots(pool, "pool")]
    assert len(set(pool_boxes)) == len(pool_boxes) and not boxes & set(pool_boxes)
    shown_png = {
        hashlib.sha256((with_pool / "stimuli" / f).read_bytes()).digest()
        for f in stimuli["stim_file"]
    }
    pool_png = [p.read_bytes() for p in sorted((with_pool / "stimuli" / "pool").glob("*.png"))]
    assert not shown_png & {hashlib.sha256(b).digest() for b in pool_png}


def test_planted_pool_drives(with_pool):
    """Drives are ROI-mean weights times the pool features standardised like the stimuli."""
    from neuroflow.demo.stimuli import embed_captions

    root = with_pool
    gt = root / "derivatives" / "groundtruth"
    feats = np.load(gt / "features.npz")
    pool = np.load(gt / "pool_features.npz")
    captions = pd.read_csv(root / "stimuli" / "pool" / "captions.tsv", sep="\t")
    assert pool["pool_stimulus"].tolist() == captions["stim_file"].tolist()
    assert pool["visual_names"].tolist() == list(FEATURE_NAMES)
    pixels = np.stack([_read_png(root / "stimuli" / "pool" / f) for f in captions["stim_file"]])
    visual = image_statistics(pixels)
    np.testing.assert_allclose(pool["pool_visual"], visual, rtol=1e-10, atol=1e-12)
    semantic = embed_captions(captions["caption"].tolist())
    assert pool["pool_semantic"].shape == (N_POOL, 384)
    np.testing.assert_allclose(pool["pool_semantic"], semantic, atol=1e-5)
    z_vis = (visual - feats["visual_mean"]) / feats["visual_std"]
    z_sem = (pool["pool_semantic"].astype(np.float64) - feats["semantic_mean"]) / feats[
        "semantic_std"
    ]
    truth = load_ground_truth(root)
    assert truth["pool_features"]["pool_visual"].shape == (N_POOL, len(FEATURE_NAMES))
    for sub in truth["subjects"]:
        fmri = np.load(gt / f"sub-{sub}" / f"sub-{sub}_fmri.npz")
        drives = pd.read_csv(gt / f"sub-{sub}" / f"sub-{sub}_pool.tsv", sep="\t")
        assert list(drives.columns) == ["stim_file"] + [
            f"{roi}_{space}" for roi in ROIS for space in ("visual", "semantic")
        ]
        assert drives["stim_file"].tolist() == captions["stim_file"].tolist()
        w_vis = fmri["weights_visual"].astype(np.float64)[fmri["roi"] == ROIS["early_visual"]]
        w_sem = fmri["weights_semantic"].astype(np.float64)[fmri["roi"] == ROIS["semantic"]]
        tol = {"rtol": 1e-9, "atol": 1e-12}
        np.testing.assert_allclose(drives["early_visual_visual"], z_vis @ w_vis.mean(0), **tol)
        np.testing.assert_allclose(drives["semantic_semantic"], z_sem @ w_sem.mean(0), **tol)
        assert drives["early_visual_visual"].std() > 0 and drives["semantic_semantic"].std() > 0
        # only early_visual sees visual and semantic sees semantic features; noise sees none
        for column in ("early_visual_semantic", "semantic_visual", "noise_visual"):
            assert (drives[column] == 0).all(), column
        assert (drives["noise_semantic"] == 0).all()
        loaded = truth["subject"][sub]["pool"]
        assert loaded["stim_file"].tolist() == drives["stim_file"].tolist()
        np.testing.assert_array_equal(loaded["early_visual_visual"], drives["early_visual_visual"])


def test_load_ground_truth_without_pool(without_pool):
    """Without a pool the loader returns no pool features or drives."""
    truth = load_ground_truth(without_pool)
    assert truth["pool"] is None and truth["pool_features"] is None
    assert all(s["pool"] is None for s in truth["subject"].values())


def _planned(config: dict) -> tuple[list[Shot], list[Shot]]:
    cfg = resolve_config(config)
    train, test = plan_movies(cfg)
    images, _ = plan_eeg_images(cfg)
    shots = [s for m in [*train, *([test] if test else [])] for s in m.shots] + images
    return shots, plan_pool(cfg, shots)


def test_pool_spans_photos_and_image_statistics():
    """The default pool covers every photograph and the stimuli's spread of statistics."""
    shots, pool = _planned({"pool": {"n_images": 120}})
    assert len(pool) == 120 and {s.photo for s in pool} == {p.name for p in PHOTOS}
    framings = {s.caption.split(" of ")[0] for s in pool}
    assert framings == {"a wide shot", "a close-up", "a medium shot"}
    assert len({s.zoom for s in pool}) > 60
    shown = image_statistics(np.stack([render_shot(s, 32) for s in shots[::3]]))
    drawn = image_statistics(np.stack([render_shot(s, 32) for s in pool]))
    z = (drawn - shown.mean(axis=0)) / shown.std(axis=0)
    assert np.all(z.std(axis=0) > 0.5)
    assert np.all(z.max(axis=0) - z.min(axis=0) > 2.5)


def test_rendered_shots_are_fresh_copies_of_one_rendering():
    """A shot rendered again is the same image, in an array of its own: writing into one
    rendering changes neither the next nor another size's."""
    shot = _planned({"pool": {"n_images": 3}})[1][1]
    first = render_shot(shot, 24)
    assert first.shape == (24, 24, 3) and first.dtype == np.uint8 and first.flags.writeable
    kept = first.copy()
    first[:] = 0
    again = render_shot(shot, 24)
    np.testing.assert_array_equal(again, kept)
    assert again.flags.writeable and not np.shares_memory(again, first)
    assert render_shot(shot, 25).shape == (25, 25, 3)
    assert kept.any()


def test_pool_is_seeded_and_grows_by_appending():
    """Same seed, same pool; a larger pool keeps the smaller one; another seed differs."""
    _, small = _planned({**TINY, "pool": {"n_images": 5}})
    _, large = _planned({**TINY, "pool": {"n_images": 12}})
    assert large[:5] == small
    assert _planned({**TINY, "pool": {"n_images": 5}})[1] == small
    _, other = _planned({**TINY, "seed": 6, "pool": {"n_images": 5}})
    assert [s.zoom for s in other] != [s.zoom for s in small]
    assert _planned({**TINY, "pool": {"n_images": 0}})[1] == []


@pytest.mark.parametrize(
    ("pool", "error", "match"),
    [
        ({"n_images": -1}, ValueError, r"`demo.pool.n_images` must be an int >= 0, got -1 instead"),
        ({"n_images": 2.0}, ValueError, r"`demo.pool.n_images` must be an int >= 0, got 2.0"),
        ({"n_images": True}, ValueError, r"`demo.pool.n_images` must be an int >= 0, got True"),
        ({"size": 3}, ValueError, r"Unknown key 'demo\.pool\.size'"),
        ("many", TypeError, r"`demo.pool` must be a mapping"),
    ],
)
def test_bad_pool_config(pool, error, match):
    """Bad pool sizes raise errors naming the key and the value."""
    with pytest.raises(error, match=match):
        resolve_config({"pool": pool})


def test_pool_too_large_for_distinct_crops(monkeypatch):
    """A pool larger than the distinct unused crops raises instead of looping."""
    brick = next(p for p in PHOTOS if p.name == "brick")
    monkeypatch.setattr(demo_stimuli, "PHOTOS", (brick,))
    monkeypatch.setattr(demo_stimuli, "POOL_ZOOM_FULL", (1.0, 1.0))
    cfg = resolve_config({"pool": {"n_images": 2}})
    with pytest.raises(RuntimeError, match=r"`demo.pool.n_images` must not exceed .*got 2 instead"):
        plan_pool(cfg, [])
