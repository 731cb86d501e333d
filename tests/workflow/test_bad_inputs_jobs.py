"""Bad inputs that only a job can see, fed to ``snakemake``: the plan accepts them, the job
that reads them fails with a message naming the file and the values in its log, and no
store is written under its final name, neither by that job nor by anything downstream."""

from __future__ import annotations

import json
import re
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
from dataset_shapes import make_algonauts_like, make_fmri_movie
from workflow_helpers import snakemake, write_config

from neuroflow.artifacts import PARTIAL_MARKER, open_dataset

pytestmark = [pytest.mark.workflow, pytest.mark.slow]

IMAGE_STATISTICS = {"name": "image_statistics", "extractor": "image_statistics"}
#: The reason Pillow gives for each kind of damaged PNG, as the message quotes it.
PNG_DAMAGE = {
    "random_bytes": "UnidentifiedImageError: cannot identify image file",
    "cut_short": "OSError: Truncated File Read",
}


def _config(bids: Path, source: str = "bids", **dataset) -> dict:
    """One image extractor, one encoding model, no RSA."""
    return {
        "dataset": {"source": source, "bids_root": str(bids), **dataset},
        "features": {"extractors": [IMAGE_STATISTICS]},
        "encoding": {"models": {"visual": {"feature_spaces": ["image_statistics"]}}},
        "rsa": {"enabled": False},
    }


def _stores(folder: Path) -> list[Path]:
    """Stores under ``folder`` under their final name (a ``.partial-`` write does not count)."""
    if not folder.exists():
        return []
    return sorted(p for p in folder.rglob("*.zarr") if PARTIAL_MARKER not in p.name)


def _logs(root: Path, stage: str, pattern: str = "*.log") -> str:
    """Every job log of ``stage`` matching ``pattern``, concatenated."""
    return "".join(p.read_text() for p in sorted((root / "logs" / stage).rglob(pattern)))


def _shorten_run(bold: Path, events: Path, n_volumes: int, tr: float) -> None:
    """Keep the first ``n_volumes`` of a run, and the events that start within them."""
    img = nib.load(bold)
    data = np.asarray(img.dataobj)[..., :n_volumes]
    nib.save(nib.Nifti1Image(data, img.affine, img.header), bold)
    lines = events.read_text().splitlines()
    onset = lines[0].split("\t").index("onset")
    kept = [row for row in lines[1:] if float(row.split("\t")[onset]) < n_volumes * tr]
    assert 0 < len(kept) < len(lines) - 1
    events.write_text("\n".join([lines[0], *kept]) + "\n")


def test_fir_lag_as_long_as_the_shortest_run_fails_fit_encoding(tmp_path):
    facts = make_fmri_movie(tmp_path / "bids", seed=5, n_subjects=1, n_runs=2, n_volumes=37)
    # runs of 37 and 31 volumes: the lag fits the first run, not the second
    _shorten_run(facts["bold"]["01", "2"], facts["events"]["01", "2"], 31, facts["tr"])
    config = _config(tmp_path / "bids")
    config["encoding"]["delays"] = {"method": "fir", "lags": [0, 4, 33]}
    write_config(tmp_path / "config.yaml", config)
    proc = snakemake(tmp_path, "--cores", "2", "--until", "fit_encoding", check=False)
    assert proc.returncode != 0
    # the plan accepted the lags: every run was cleaned, and the short one is 31 volumes
    runs = _stores(tmp_path / "results" / "preprocess_fmri")
    assert [p.name for p in runs] == [
        f"sub-01_task-movie_run-{r}_desc-clean_bold.zarr" for r in (1, 2)
    ]
    assert open_dataset(runs[1])["bold"].shape[0] == 31
    logs = _logs(tmp_path, "encoding", "sub-01.log")
    store = re.escape(str(runs[1].relative_to(tmp_path)))
    message = (
        r"`encoding\.delays\.lags` must be shorter than every run, got lag 33 TRs but "
        rf"(\S*/)?{store} has 31 volumes\."
    )
    assert re.search(message, logs), logs[-3000:]
    assert not _stores(tmp_path / "results" / "encoding")


@pytest.mark.parametrize("damage", sorted(PNG_DAMAGE))
def test_unreadable_stimulus_image_fails_extract_features(tmp_path, damage):
    facts = make_fmri_movie(tmp_path / "bids", seed=6, n_subjects=1, n_runs=2, n_volumes=29)
    image = tmp_path / "bids" / "stimuli" / facts["run_stimuli"]["2"][1]
    if damage == "random_bytes":
        image.write_bytes(np.random.default_rng(7).bytes(1237))
    else:
        image.write_bytes(image.read_bytes()[:-411])
    write_config(tmp_path / "config.yaml", _config(tmp_path / "bids"))
    # --keep-going: every job that does not need the features still runs
    proc = snakemake(tmp_path, "--cores", "2", "--keep-going", check=False)
    assert proc.returncode != 0
    logs = _logs(tmp_path, "features", "image_statistics-*.log")
    assert (
        f"Stimulus image {image} must be an image Pillow can read (PNG, JPEG, BMP, TIFF, "
        f"GIF, WebP, ...), got an unreadable file instead ({PNG_DAMAGE[damage]}"
    ) in logs, logs[-3000:]
    results = tmp_path / "results"
    assert len(_stores(results / "preprocess_fmri")) == 2
    assert not _stores(results / "features")
    for stage in ("align_features", "encoding", "evaluation", "summary"):
        assert not (results / stage).exists(), stage


def test_timeseries_tr_disagreeing_with_its_sidecar_fails_that_run(tmp_path):
    facts = make_algonauts_like(tmp_path / "bids", seed=3, n_volumes=33)
    # run 2 has its own sidecar, which BIDS inheritance puts over the dataset's 1.49 s
    sidecar = tmp_path / "bids" / "sub-01" / "func" / "sub-01_task-movie_run-2_timeseries.json"
    sidecar.write_text(json.dumps({"RepetitionTime": 1.5}))
    config = _config(tmp_path / "bids", "timeseries", subjects=["01"], repetition_time=1.49)
    write_config(tmp_path / "config.yaml", config)
    proc = snakemake(
        tmp_path, "--cores", "2", "--keep-going", "--until", "preprocess_timeseries", check=False
    )
    assert proc.returncode != 0
    logs = _logs(tmp_path, "preprocess_fmri", "sub-01_task-movie_run-2.log")
    assert (
        f"`dataset.repetition_time` is 1.49 s but RepetitionTime in the sidecars of "
        f"{facts['timeseries']['01']} (dataset 'task-movie_run-2') (task-movie_timeseries.json, "
        f"{sidecar.name}) is 1.5 s; they must agree within 0.001 s."
    ) in logs, logs[-3000:]
    # the runs whose sidecars agree are cleaned; run 2 has no store
    stores = [p.name for p in _stores(tmp_path / "results" / "preprocess_fmri")]
    assert stores == [f"sub-01_task-movie_run-{r}_desc-clean_bold.zarr" for r in (1, 3, 4)]
    assert not (tmp_path / "results" / "encoding").exists()
