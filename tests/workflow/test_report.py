"""The Snakemake report of a finished run: categories, labels, captions and methods."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from workflow_helpers import report_data, snakemake

from neuroflow.figures import THUMBNAIL_PRESETS
from neuroflow.workflow.report_layout import QC_FIGURES

pytestmark = [pytest.mark.workflow, pytest.mark.slow]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory, tiny_run: Path) -> tuple[dict, dict]:
    out = tmp_path_factory.mktemp("report") / "report.html"
    snakemake(tiny_run, "--report", str(out))
    return report_data(out.read_text())


def _entries(results: dict, categories: dict, category: str) -> dict[str, dict]:
    """Report entries of one category, by file name."""
    paths = [p for sub in categories.get(category, {}).values() for p in sub]
    return {Path(p).name: results[p] for p in paths}


def test_results_are_grouped_by_analysis(report):
    _, categories = report
    assert {"fMRI encoding", "Decoding", "RSA", "Tables", "Methods", "Warnings"} <= set(
        categories
    ), sorted(categories)
    assert "Other figures" not in categories  # every figure the summary writes is placed
    encoding = categories["fMRI encoding"]
    assert {"Scores per ROI", "Score maps"} <= set(encoding)
    assert set(categories["RSA"]) == {"EEG", "fMRI"}
    assert set(categories["EEG encoding"]) == {"Time courses"}


def test_each_figure_has_its_own_caption_and_labels(report):
    results, categories = report
    fmri = _entries(results, categories, "fMRI encoding")
    assert "Encoding accuracy per ROI" in fmri["roi_mean_r.png"]["caption"]
    assert "noise ceiling" in fmri["roi_mean_r_normalized.png"]["caption"]
    maps = {name: e for name, e in fmri.items() if name.startswith("sub-")}
    assert maps
    for entry in maps.values():
        assert "glass brain" in entry["caption"] and "q = 0.05" in entry["caption"]
        assert entry["labels"]["subject"] == "01"
        assert entry["labels"]["model"] in {"visual", "semantic"}
    decoding = _entries(results, categories, "Decoding")
    assert "balanced accuracy" in decoding["decoding_classification_timecourse.png"]["caption"]
    assert "Pearson r between decoded" in decoding["decoding_features_timecourse.png"]["caption"]
    rsa = _entries(results, categories, "RSA")
    assert "Time-resolved RSA" in rsa["rsa_eeg_cross_temporal.png"]["caption"]
    eeg = _entries(results, categories, "EEG encoding")
    assert {e["labels"]["model"] for e in eeg.values()} == {"visual", "semantic"}
    for entry in eeg.values():
        assert "EEG encoding accuracy over latency" in entry["caption"]
    figures = [*fmri.values(), *decoding.values(), *rsa.values(), *eeg.values()]
    assert len({e["caption"] for e in figures}) >= 7  # no caption shared by unlike figures


def test_methods_and_config_of_the_run(report, tiny_run):
    results, categories = report
    (entry,) = _entries(results, categories, "Methods").values()
    assert entry["labels"] == {"file": "config of the run"}
    caption = entry["caption"]
    for text in ("BOLD runs were cleaned with nilearn", "MNE-Python", "References", "Gramfort A"):
        assert text in caption, text
    (methods,) = (tiny_run / "results" / "summary").glob("*/methods.rst")
    assert "Representational similarity analysis" in methods.read_text()
    tables = _entries(results, categories, "Tables")
    assert {"scores.tsv", "layer_sweep.tsv"} <= set(tables)


#: A phrase of each QC figure's own caption.
QC_CAPTIONS = {
    "psd": "Power spectral density",
    "band-power": "Band power of every kept channel",
    "channels": "flagged bad",
    "drop-log": "epochs kept",
    "erp": "mean of all kept epochs",
    "erp-conditions": "Global field power",
    "mean": "Temporal mean",
    "tsnr": "signal-to-noise",
    "carpet": "Carpet plot",
    "motion": "framewise displacement",
    "variance_removed": "nuisance set",
}


def test_quality_control_of_each_recording(report, tiny_run):
    results, categories = report
    assert set(categories["Quality control"]) == {"EEG", "fMRI"}
    entries = _entries(results, categories, "Quality control")
    n_runs = len(list((tiny_run / "results" / "preprocess_fmri").rglob("*_bold.zarr")))
    n_eeg = len(list((tiny_run / "results" / "preprocess_eeg").rglob("*_epo.zarr")))
    kinds = {name: Path(name).stem.rsplit("_qc-", 1)[1] for name in entries}
    assert set(kinds.values()) == set(QC_CAPTIONS)
    eeg_kinds = [k for k in QC_CAPTIONS if QC_FIGURES[k][0] == "EEG"]
    assert len(entries) == n_eeg * len(eeg_kinds) + n_runs * (len(QC_CAPTIONS) - len(eeg_kinds))
    for name, entry in entries.items():
        kind = kinds[name]
        assert QC_CAPTIONS[kind] in entry["caption"], name
        assert entry["labels"]["measure"] == QC_FIGURES[kind][1]
        assert entry["labels"]["recording"] == name.rsplit("_qc-", 1)[0].replace("_", " ")
    captions = {kinds[n]: e["caption"] for n, e in entries.items()}
    assert len(set(captions.values())) == len(QC_CAPTIONS)  # one caption per measure


def test_in_silico_contact_sheets(report, tiny_run):
    results, categories = report
    fmri, eeg = "stimulus set pool", "EEG, stimulus set pool"
    assert set(categories["In-silico"]) == {fmri, eeg}
    for sub, stage, region in ((fmri, "predict", "ROI"), (eeg, "predict_eeg", "channel group")):
        paths = categories["In-silico"][sub]
        sheets = sorted((tiny_run / "results" / stage).glob("*/*_contact_sheets/*.png"))
        assert len(paths) == len(sheets) > 0, sub
        seen = set()
        for path in paths:
            entry = results[path]
            model_dir, sheet_dir = Path(path).parts[-3:-1]
            assert Path(path).parts[-4] == stage
            labels = entry["labels"]
            assert model_dir.rsplit("-", 1)[0] == labels["model"]
            assert sheet_dir.startswith(f"sub-{labels['subject']}_pool")
            assert Path(path).stem == labels[region]
            what = "In-silico EEG experiment" if stage == "predict_eeg" else "In-silico experiment"
            assert what in entry["caption"]
            assert f">{labels['model']}<" in entry["caption"]  # the model named in the text
            seen.add((labels["model"], labels[region]))
        assert {m for m, _ in seen} == {"visual", "semantic"}, sub
    # the EEG sheets rank the global field power (the tiny run names no channel group)
    assert {r for p in categories["In-silico"][eeg] for r in [Path(p).stem]} == {"gfp"}


def _full_size(thumbnail: Path) -> Path:
    """The full-size figure of a report thumbnail (``<dir>_thumbnails/<name>.<ext>`` or
    ``<name>_thumbnail.png``)."""
    if thumbnail.parent.name.endswith("_thumbnails"):
        folder = thumbnail.parent.with_name(thumbnail.parent.name.removesuffix("_thumbnails"))
        return folder / f"{thumbnail.stem}.png"
    return thumbnail.with_name(f"{thumbnail.stem.removesuffix('_thumbnail')}.png")


def test_figures_are_thumbnails_of_the_full_size_files(report, tiny_run):
    results, _ = report
    images = {p: e for p, e in results.items() if e["mime_type"].startswith("image/")}
    assert len(images) > 20
    for path, entry in images.items():
        data = base64.b64decode(entry["data_uri"].split("base64,", 1)[1])
        rule = entry["job_properties"]["rule"]
        assert rule.endswith(("_thumbnails", "_thumbnail")), (path, rule)
        if path.endswith(".svg"):  # a vector figure, copied as it is
            continue
        preset = THUMBNAIL_PRESETS["photo" if rule.startswith("predict") else "plot"]
        assert len(data) <= preset["max_bytes"], path
        magic = b"\x89PNG" if path.endswith(".png") else b"\xff\xd8"  # JPEG
        assert data.startswith(magic), path
        full = _full_size(Path(path))
        assert (tiny_run / full).is_file(), path  # the full-size figure stays in results/
        assert str(full) not in results  # and is not in the report a second time
        # the info panel: the figure's own caption, and the thumbnail's few settings
        assert "Shown as a thumbnail" in entry["caption"], path
        assert "the full-size" in entry["caption"], path
        assert full.parent.name in entry["caption"], path
        params = entry["job_properties"]["params"]
        assert len(params) < 400 and "max_bytes" in params, (path, params)
