"""Thumbnails of the report's raster figures: size bound, aspect ratio, formats."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from neuroflow.figures import (
    THUMBNAIL_PRESETS,
    encode_thumbnail,
    thumbnail_size,
    write_thumbnail,
    write_thumbnails,
)


def _noise(rng: np.random.Generator, height: int, width: int, channels: int = 3) -> Image.Image:
    """A photo-like image: smooth gradients plus noise, which no palette holds."""
    yy, xx = np.mgrid[:height, :width]
    base = np.stack([xx / width, yy / height, (xx + yy) / (width + height)], axis=-1)
    pixels = 200 * base + rng.normal(0, 25, (height, width, 3))
    if channels == 4:  # opaque alpha, as matplotlib writes it
        pixels = np.concatenate([pixels, np.full((height, width, 1), 255.0)], axis=-1)
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def _plot(rng: np.random.Generator, height: int, width: int) -> Image.Image:
    """A plot-like image: a white canvas with a few flat-coloured boxes."""
    pixels = np.full((height, width, 3), 255, np.uint8)
    for colour in ((31, 119, 180), (255, 127, 14), (0, 0, 0)):
        y, x = rng.integers(0, height - 20), rng.integers(0, width - 40)
        pixels[y : y + 20, x : x + 40] = colour
    return Image.fromarray(pixels)


def _decoded(data: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(data))
    image.load()
    return image


@pytest.mark.parametrize(
    ("size", "max_side", "expected"),
    [
        ((1632, 322), 800, (800, 158)),  # a contact sheet: wide
        ((1020, 2800), 1200, (437, 1200)),  # a tall figure
        ((500, 420), 1200, (500, 420)),  # fits: left as it is
        ((3001, 1), 300, (300, 1)),  # never below one pixel
    ],
)
def test_thumbnail_size_keeps_the_aspect_ratio(size, max_side, expected):
    width, height = thumbnail_size(*size, max_side)
    assert (width, height) == expected
    assert max(width, height) <= max_side
    if min(size) > 1:
        assert width / height == pytest.approx(size[0] / size[1], rel=0.01)


@pytest.mark.parametrize("bad", [0, -3, 2.5])
def test_thumbnail_size_refuses_a_non_positive_side(bad):
    with pytest.raises(ValueError, match="`max_side` must be a positive integer, got"):
        thumbnail_size(640, 480, bad)
    with pytest.raises(ValueError, match="`width` must be a positive integer"):
        thumbnail_size(bad, 480, 100)


def test_photo_thumbnail_fits_its_byte_bound_as_jpeg():
    rng = np.random.default_rng(7)
    image = _noise(rng, 613, 1931)
    preset = THUMBNAIL_PRESETS["photo"]
    data, fmt = encode_thumbnail(image, **preset)
    assert fmt == "jpeg" and data[:2] == b"\xff\xd8"
    assert len(data) <= preset["max_bytes"]
    thumb = _decoded(data)
    assert max(thumb.size) <= preset["max_side"]
    assert thumb.width / thumb.height == pytest.approx(1931 / 613, rel=0.02)


def test_plot_thumbnail_is_a_lossless_palette_png_when_it_fits():
    rng = np.random.default_rng(3)
    image = _plot(rng, 437, 1951)
    data, fmt = encode_thumbnail(image, **THUMBNAIL_PRESETS["plot"])
    assert fmt == "png"
    thumb = _decoded(data).convert("RGB")
    assert thumb.size == (1600, 358)  # wider than a 1,600 px window: scaled to it
    # a plot that fits the window keeps its pixels (text stays as sharp as drawn)
    fits = _plot(np.random.default_rng(4), 437, 1301)
    data, _ = encode_thumbnail(fits, **THUMBNAIL_PRESETS["plot"])
    assert _decoded(data).size == (1301, 437)
    # flat colours survive the palette exactly where nothing was resampled
    small = _plot(np.random.default_rng(3), 201, 333)
    data, _ = encode_thumbnail(small, max_side=400, max_bytes=40_000)
    np.testing.assert_array_equal(np.asarray(_decoded(data).convert("RGB")), np.asarray(small))


def test_anti_aliased_plot_keeps_every_pixel_close_in_its_palette():
    """Curves drawn with anti-aliasing have more than 256 colours: the palette of the PNG
    thumbnail stays within a few levels of every pixel (no colour swapped for another)."""
    from PIL import ImageDraw

    rng = np.random.default_rng(5)
    height, width = 400, 900
    canvas = Image.new("RGB", (2 * width, 2 * height), "white")
    draw = ImageDraw.Draw(canvas)
    for k, colour in enumerate([(31, 119, 180), (255, 127, 14), (44, 160, 44)]):
        x = np.arange(0, 2 * width, 6)
        y = height + 240 * np.sin(x / 120 + k) + rng.normal(0, 6, x.size)
        draw.line(list(zip(x.tolist(), y.tolist(), strict=True)), fill=colour, width=4)
    image = canvas.resize((width, height), Image.Resampling.LANCZOS)
    assert image.getcolors(256) is None  # more colours than a palette holds
    data, fmt = encode_thumbnail(image, **THUMBNAIL_PRESETS["plot"])
    assert fmt == "png"
    error = np.abs(
        np.asarray(_decoded(data).convert("RGB"), dtype=int) - np.asarray(image, dtype=int)
    )
    assert error.max() <= 24 and error.mean() < 2.0, (error.max(), error.mean())


def test_dense_plot_falls_back_to_jpeg_then_shrinks():
    rng = np.random.default_rng(11)
    image = _noise(rng, 500, 800, channels=4)
    data, fmt = encode_thumbnail(image, max_side=1200, max_bytes=200_000, formats=("png", "jpeg"))
    assert fmt == "jpeg" and len(data) <= 200_000
    assert _decoded(data).size == (800, 500)  # JPEG at full size fits
    data, fmt = encode_thumbnail(image, max_side=1200, max_bytes=8_000, formats=("png", "jpeg"))
    thumb = _decoded(data)
    assert len(data) <= 8_000 and max(thumb.size) < 800  # made smaller to fit
    assert thumb.width / thumb.height == pytest.approx(800 / 500, rel=0.03)


def test_transparency_is_drawn_on_white():
    pixels = np.zeros((30, 50, 4), np.uint8)  # fully transparent black
    data, fmt = encode_thumbnail(Image.fromarray(pixels), max_side=100, max_bytes=10_000)
    assert fmt == "png"
    assert np.all(np.asarray(_decoded(data).convert("RGB")) == 255)


def test_impossible_bounds_and_unknown_formats_are_refused():
    image = _noise(np.random.default_rng(0), 64, 96)
    with pytest.raises(ValueError, match=r"`max_bytes` must allow a \d+ x \d+ pixel thumbnail"):
        encode_thumbnail(image, max_side=96, max_bytes=50, formats=("jpeg",))
    with pytest.raises(
        ValueError, match=r"`formats` must be a non-empty sequence of \['jpeg', 'png'\]"
    ):
        encode_thumbnail(image, max_side=96, max_bytes=10_000, formats=("webp",))
    with pytest.raises(ValueError, match="`max_bytes` must be a positive integer, got 0"):
        encode_thumbnail(image, max_side=96, max_bytes=0)


def test_write_thumbnails_mirrors_a_folder_and_leaves_it_as_it_was(tmp_path):
    rng = np.random.default_rng(5)
    figures = tmp_path / "sub-01_pool_contact_sheets"
    figures.mkdir()
    _noise(rng, 322, 1632).save(figures / "early_visual.png")
    _plot(rng, 300, 800).save(figures / "tsnr.png")
    (figures / "vector.svg").write_text("<svg/>")  # a vector figure: copied as it is
    (figures / "tsnr.svg").write_text("<svg/>")  # the PNG of the same figure is shown
    before = {p.name: p.read_bytes() for p in figures.iterdir()}
    written = write_thumbnails(figures, tmp_path / "thumbs", **THUMBNAIL_PRESETS["plot"])
    assert [p.name for p in written] == ["early_visual.jpg", "tsnr.png", "vector.svg"]
    assert written[2].read_text() == "<svg/>"
    assert sorted(p.name for p in (tmp_path / "thumbs").iterdir()) == [p.name for p in written]
    for path in written[:2]:
        assert path.stat().st_size <= THUMBNAIL_PRESETS["plot"]["max_bytes"]
    assert {p.name: p.read_bytes() for p in figures.iterdir()} == before  # full size kept
    # one file: its suffix names the format
    single = write_thumbnail(
        figures / "tsnr.png", tmp_path / "tsnr_thumbnail.png", max_side=400, max_bytes=20_000
    )
    assert single == tmp_path / "tsnr_thumbnail.png" and _decoded(single.read_bytes()).width == 400


def test_write_thumbnails_refuses_two_formats_of_one_figure_and_unreadable_files(tmp_path):
    figures = tmp_path / "plots"
    figures.mkdir()
    image = _plot(np.random.default_rng(1), 40, 90)
    image.save(figures / "roi_mean_r.png")
    image.save(figures / "roi_mean_r.jpg")
    with pytest.raises(ValueError, match=r"one raster figure per name, got .* \['roi_mean_r'\]"):
        write_thumbnails(figures, tmp_path / "out", max_side=50, max_bytes=10_000)
    assert not (tmp_path / "out").exists()
    (figures / "broken.png").write_bytes(b"not an image")
    with pytest.raises(ValueError, match=r"`source` must be a readable image, got .*broken\.png"):
        write_thumbnail(figures / "broken.png", tmp_path / "b.png", max_side=50, max_bytes=9_000)
    with pytest.raises(ValueError, match="`source_dir` must be a folder of figures"):
        write_thumbnails(tmp_path / "missing", tmp_path / "out", max_side=50, max_bytes=9_000)
