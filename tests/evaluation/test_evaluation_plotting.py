"""Figures: NIfTI placement, brain maps, ROI bars, time courses, topomaps."""

import mne
import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from neuroflow.evaluation import analysis_plotting
from neuroflow.evaluation.plotting import (
    DIVERGING_CMAP,
    MAX_FIGURE_WIDTH,
    MAX_ROI_PANELS,
    SEQUENTIAL_CMAP,
    GlassBrainCanvas,
    map_cmap,
    map_color_limits,
    plot_brain_map,
    plot_roi_bars,
    plot_score_timecourse,
    plot_topomap,
    save_figure,
)
from neuroflow.io.files import scores_to_nifti
from neuroflow.io.records import natural_key


def test_scores_to_nifti_places_values():
    ijk = np.array([[1, 2, 3], [6, 7, 8], [0, 0, 0]])
    affine = np.diag([2.0, 2.0, 2.0, 1.0])
    img = scores_to_nifti(np.array([0.5, np.nan, -0.2]), ijk, affine=affine, mask_shape=[7, 8, 9])
    data = img.get_fdata()
    assert data.shape == (7, 8, 9)
    assert data[1, 2, 3] == pytest.approx(0.5) and data[6, 7, 8] == 0.0
    assert data[0, 0, 0] == pytest.approx(-0.2) and np.count_nonzero(data) == 2
    np.testing.assert_array_equal(img.affine, affine)
    with pytest.raises(ValueError, match="`ijk` must index the grid"):
        scores_to_nifti(np.ones(3), ijk + 1, affine=affine, mask_shape=[7, 8, 9])
    with pytest.raises(ValueError, match="`mask_shape` must be 3 positive ints"):
        scores_to_nifti(np.ones(3), ijk, affine=affine, mask_shape=[7, 8])


def test_scores_to_nifti_keeps_undefined_scores_undefined_when_asked():
    ijk = np.array([[1, 2, 3], [6, 7, 8], [0, 0, 0]])
    img = scores_to_nifti(
        np.array([0.5, np.nan, 0.0]), ijk, affine=np.eye(4), mask_shape=[7, 8, 9], undefined=np.nan
    )
    data = img.get_fdata()
    assert np.isnan(data[6, 7, 8]) and np.isnan(data).sum() == 1
    assert data[0, 0, 0] == 0.0 and data[1, 2, 3] == pytest.approx(0.5)


@pytest.mark.parametrize("kind", ["glass_brain", "stat_map"])
def test_brain_map_all_nan(tmp_path, kind):
    img = scores_to_nifti(
        np.full(2, np.nan), np.array([[1, 1, 1], [2, 2, 2]]), affine=np.eye(4), mask_shape=[7, 8, 9]
    )
    paths = save_figure(plot_brain_map(img, kind=kind, title="empty"), tmp_path / "m", ["png"])
    assert paths[0].stat().st_size > 0
    with pytest.raises(ValueError, match="`kind` must be one of"):
        plot_brain_map(img, kind="surface")


def _pixels(fig) -> np.ndarray:
    """RGBA pixels of a figure drawn as a PNG would be (shape (height, width, 4))."""
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba()).copy()


@pytest.mark.slow
def test_glass_brain_canvas_draws_each_map_as_a_new_figure_would(rng):
    """One figure reused for many maps: the same pixels as a new glass brain for each."""
    grids = [
        (np.diag([3.0, 3.0, 3.0, 1.0]), [11, 13, 9]),
        (np.diag([2.0, 2.5, 2.0, 1.0]), [9, 7, 8]),
    ]
    grids[0][0][:3, 3] = [-15.0, -20.0, -10.0]
    maps = []
    for sign in (0, -1, None, 1):  # mixed, negative scores; all undefined; positive
        affine, shape = grids[len(maps) % 2]
        ijk = np.argwhere(rng.random(shape) < 0.3)
        values = rng.normal(0.1, 0.2, len(ijk))
        if sign is None:
            values[:] = np.nan
        elif sign:
            values = sign * np.abs(values)
        maps.append(scores_to_nifti(values, ijk, affine=affine, mask_shape=shape))
    canvas = GlassBrainCanvas()
    for i, img in enumerate(maps):
        title = f"map {i}" if i != 2 else None
        label = "r" if i != 1 else None
        expected = _pixels(plot_brain_map(img, kind="glass_brain", title=title, label=label))
        fig = canvas.draw(img, title=title, label=label)
        assert len(fig.axes) == 5  # frame, three projections, one colour bar
        np.testing.assert_array_equal(_pixels(fig), expected, err_msg=f"map {i}")
    assert canvas.draw(maps[0]) is fig  # one figure throughout


def test_map_color_limits_ignore_outliers_and_zeros(rng):
    values = np.concatenate([rng.uniform(0.2, 0.4, 997), [5.0, -6.0, 7.0], np.zeros(500)])
    threshold, vmax = map_color_limits(rng.permutation(values))
    assert 0.3 < vmax < 0.45  # three outlying voxels of 1,000 do not set the scale
    assert 0 < threshold < 0.2  # every scored voxel is drawn, the zeros are not
    assert map_color_limits(np.zeros((3, 4))) == (1e-12, 1.0)
    assert map_color_limits(np.full(5, np.nan))[1] == 1.0
    with pytest.raises(ValueError, match="`percentile` must be in"):
        map_color_limits(values, percentile=0)


def test_brain_map_zero_voxels_are_transparent(rng):
    ijk = np.array([[i, j, k] for i in range(1, 9) for j in range(1, 9) for k in range(1, 7)])
    values = rng.uniform(0.2, 0.4, len(ijk))
    values[:100] = 0.0  # not significant
    values[100] = 9.0  # one outlier
    img = scores_to_nifti(values, ijk, affine=np.eye(4), mask_shape=[10, 10, 8])
    fig = plot_brain_map(img, kind="stat_map")
    images = [im for ax in fig.axes for im in ax.get_images()]
    assert images
    _, vmax = map_color_limits(values)
    for image in images:
        assert image.norm.vmax == pytest.approx(vmax) and vmax < 1.0
        assert np.ma.count_masked(image.get_array()) > 0  # zeros and outside: transparent


def test_roi_bars_and_timecourse(tmp_path, rng):
    df = pd.DataFrame(
        {
            "subject": ["01", "02", "01", "02"],
            "model": "m",
            "roi": ["a", "a", "b", "b"],
            "mean_r": [0.1, 0.2, np.nan, np.nan],
            "noise_ceiling_r": [0.5, 0.6, np.nan, np.nan],
        }
    )
    fig = plot_roi_bars(df)
    assert [ax.get_title() for ax in fig.axes] == ["a", "b"]  # one panel per ROI
    assert save_figure(fig, tmp_path / "bars", ["png", "svg"])[1].suffix == ".svg"
    with pytest.raises(ValueError, match="must have a 'roi' column"):
        plot_roi_bars(df.drop(columns="roi"))
    fig = plot_score_timecourse(
        rng.random((2, 9)),
        np.linspace(0, 0.8, 9),
        names=["a", "b"],
        significant=rng.random((2, 9)) > 0.5,
    )
    assert len(fig.axes[0].lines) >= 2
    with pytest.raises(ValueError, match="`times` must have shape"):
        plot_score_timecourse(rng.random((2, 9)), np.arange(8))


def test_topomap(rng):
    names = ["Fz", "Cz", "Pz", "Oz", "C3", "C4", "F3"]
    info = mne.create_info(names, 100.0, "eeg")
    info.set_montage(mne.channels.make_standard_montage("standard_1020"))
    fig = plot_topomap(rng.random(7), info, significant=rng.random(7) > 0.5, title="r")
    assert fig.axes[0].get_title() == "r"
    with pytest.raises(ValueError, match=r"`scores` must have shape \(7,\)"):
        plot_topomap(rng.random(8), info)


def _colorbar_label(fig) -> str:
    """The label of the figure's colour bar (its last axes)."""
    return fig.axes[-1].get_ylabel()


@pytest.mark.parametrize("kind", ["glass_brain", "stat_map"])
def test_brain_map_colours_follow_the_sign_and_the_bar_is_labelled(rng, kind):
    ijk = np.array([[i, j, k] for i in range(1, 7) for j in range(1, 8) for k in range(1, 6)])
    positive = rng.uniform(0.05, 0.5, len(ijk))
    positive[:40] = 0.0  # not significant
    signed = positive - 0.2
    maps = {}
    for name, values in (("positive", positive), ("signed", signed)):
        img = scores_to_nifti(values, ijk, affine=np.eye(4), mask_shape=[8, 9, 7])
        fig = plot_brain_map(img, kind=kind, title="sub-01 · visual · r", label="r (held-out)")
        cmaps = {im.get_cmap().name for ax in fig.axes[:-1] for im in ax.get_images()}
        maps[name] = cmaps
        assert _colorbar_label(fig) == "r (held-out)"
    assert maps == {"positive": {SEQUENTIAL_CMAP}, "signed": {DIVERGING_CMAP}}
    assert map_cmap(np.array([0.0, np.nan, 0.3])) == SEQUENTIAL_CMAP
    assert map_cmap(np.array([-1e-3, 0.3])) == DIVERGING_CMAP


def test_glass_brain_canvas_labels_each_map_and_picks_its_colours(rng):
    ijk = np.argwhere(rng.random((9, 10, 8)) < 0.4)
    canvas = GlassBrainCanvas()
    for values, label, cmap in (
        (rng.uniform(0.1, 0.6, len(ijk)), "r (held-out)", SEQUENTIAL_CMAP),
        (rng.normal(0.0, 0.3, len(ijk)), "r / noise ceiling", DIVERGING_CMAP),
    ):
        img = scores_to_nifti(values, ijk, affine=np.eye(4), mask_shape=[9, 10, 8])
        fig = canvas.draw(img, title="sub-02 · semantic · r", label=label)
        assert len(fig.axes) == 5 and _colorbar_label(fig) == label  # the last bar only
        assert {im.get_cmap().name for ax in fig.axes for im in ax.get_images()} == {cmap}


def test_roi_bars_stay_within_the_window_whatever_the_number_of_rois_and_models(rng):
    """Nine ROIs x fifteen long model names: panels of four, models named down the left."""
    rois = [f"roi_{i}" for i in range(9)]
    models = [f"efficientnet:blocks.{i}" for i in range(12)] + ["visual", "semantic", "joint"]
    df = pd.DataFrame(
        [
            {
                "subject": s,
                "model": m,
                "roi": r,
                "mean_r": rng.normal(0.3, 0.1),
                "noise_ceiling_r": 0.8,
            }
            for s in ("01", "02", "03")
            for m in models
            for r in rois
        ]
    )
    fig = plot_roi_bars(df, title="mean_r per ROI")
    width, _ = fig.get_size_inches()
    assert width <= MAX_FIGURE_WIDTH
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in shown] == sorted(rois)
    assert len(fig.axes) == 12  # three rows of four; the last three panels hidden
    labels = [t.get_text() for t in shown[0].get_yticklabels()]
    blocks = [f"efficientnet:blocks.{i}" for i in range(12)]  # blocks.2 before blocks.10
    assert labels == [*blocks, "joint", "semantic", "visual"]
    assert all(ax.get_legend() is None for ax in fig.axes)  # nothing covers the bars
    # a bar per model, a dot per subject, a ceiling tick per model in every panel
    for ax in shown:
        assert len(ax.patches) == len(models)
        dots = sum(len(line.get_xdata()) for line in ax.lines if line.get_marker() == "o")
        assert dots == 3 * len(models)
        assert ax.collections and len(ax.collections[0].get_segments()) == len(models)
    # the panels above the empty slots of the last row carry their own x labels
    assert [ax.get_xlabel() for ax in shown[5:8]] == ["mean_r"] * 3
    assert shown[4].get_xlabel() == ""


@pytest.mark.parametrize(
    ("draw", "label"),
    [
        (lambda path: analysis_plotting.plot_rdm(np.arange(6.0), path), "dissimilarity"),
        (
            lambda path: analysis_plotting.plot_generalization(
                np.linspace(0, 0.3, 4), np.full((4, 4), 0.6), path, chance=0.5
            ),
            "decoding score (chance 0.5)",
        ),
        (
            lambda path: analysis_plotting.plot_alignment(np.eye(3), ["a", "b", "c"], path),
            "RDM similarity",
        ),
    ],
)
def test_matrix_figures_label_their_colour_bars(tmp_path, monkeypatch, draw, label):
    drawn = []
    monkeypatch.setattr(analysis_plotting, "_save", lambda fig, path: drawn.append(fig) or path)
    draw(tmp_path / "m.png")
    (fig,) = drawn
    assert fig.axes[-1].get_ylabel() == label


def _overlaps(a, b) -> bool:
    """Whether two display boxes share area."""
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_legends_stay_outside_the_data(rng):
    times = np.linspace(-0.1, 0.5, 31)
    names = [f"efficientnet:blocks.{i}" for i in range(6)]
    fig = plot_score_timecourse(rng.random((6, 31)), times, names=names)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    (ax,) = fig.axes
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == names
    assert not _overlaps(legend.get_window_extent(renderer), ax.get_window_extent(renderer))
    # inside the figure: the layout made room for it
    assert legend.get_window_extent(renderer).x1 <= fig.bbox.x1 + 1


def test_time_course_legend_is_outside_its_axes(tmp_path, monkeypatch, rng):
    drawn = []
    monkeypatch.setattr(analysis_plotting, "_save", lambda fig, path: drawn.append(fig) or path)
    times = np.linspace(0, 0.4, 21)
    scores = {f"model {i}": rng.random(21) for i in range(5)}
    analysis_plotting.plot_time_courses(times, scores, tmp_path / "t.png", chance=0.5)
    (fig,) = drawn
    FigureCanvasAgg(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    (ax,) = fig.axes
    box = ax.get_legend().get_window_extent(renderer)
    assert not _overlaps(box, ax.get_window_extent(renderer))
    assert box.x1 <= fig.bbox.x1 + 1


def test_many_rois_are_drawn_as_one_map_of_the_subject_means(rng):
    """An atlas of 41 parcels x 5 models: one model x ROI map of the across-subject means
    (a cell without a finite score stays NaN, drawn grey), within the width limit."""
    rois = [f"7Networks_LH_Vis_{i}" for i in range(41)]
    models = ["visual", "semantic", "joint", "efficientnet:blocks.2", "efficientnet:blocks.10"]
    rows = [
        {"subject": s, "model": m, "roi": r, "mean_r": rng.normal(0.2, 0.2)}
        for s in ("01", "02", "03")
        for m in models
        for r in rois
    ]
    df = pd.DataFrame(rows)
    df.loc[(df["model"] == "joint") & (df["roi"] == rois[3]), "mean_r"] = np.nan
    df.loc[
        (df["model"] == "visual") & (df["roi"] == rois[5]) & (df["subject"] == "02"), "mean_r"
    ] = np.inf
    fig = plot_roi_bars(df, title="mean_r per ROI")
    assert len(fig.axes) == 2  # the map and its colour bar
    ax = fig.axes[0]
    (image,) = ax.get_images()
    shown = image.get_array()
    order = sorted(rois, key=natural_key)
    names = sorted(models, key=natural_key)
    assert shown.shape == (len(names), len(rois))
    assert [t.get_text() for t in ax.get_yticklabels()] == names
    assert [t.get_text() for t in ax.get_xticklabels()] == order
    expected = df[np.isfinite(df["mean_r"])].groupby(["model", "roi"])["mean_r"].mean()
    for i, m in enumerate(names):
        for j, r in enumerate(order):
            if (m, r) == ("joint", rois[3]):
                assert np.ma.is_masked(shown[i, j])
            else:
                assert shown[i, j] == pytest.approx(expected[m, r])
    assert image.norm.vmin == -image.norm.vmax  # scores of both signs: centred on 0
    assert fig.axes[1].get_ylabel() == "mean_r"
    assert fig.get_size_inches()[0] <= MAX_FIGURE_WIDTH
    assert fig.get_suptitle() == "mean_r per ROI: colour mean over subjects"
    # up to twelve ROIs keep a bar panel each
    few = df[df["roi"].isin(rois[:MAX_ROI_PANELS])]
    assert len([ax for ax in plot_roi_bars(few).axes if ax.get_visible()]) == MAX_ROI_PANELS
