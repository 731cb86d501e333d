"""The ``predict`` and ``geometry`` stages through ``snakemake`` on a generated fMRI movie.

The movie's posterior blob is driven by the luminance mean and contrast of the shot on
screen. A pool of never-shown pictures (in two sub-folders) and a table of sentences
are given as stimulus sets; the image-statistics model is applied to the pictures, the
sentence model to the sentences, and each pairing that cannot work (an image model on
sentences, a text model on pictures without captions, a folder that does not exist) is
left out with a note. The blob's predicted response ranks the pictures as their planted
drive does; the other voxels' does not. A layer sweep of a CNN gives the geometry stage
layer scores to stand beside, and a labels table (bright and dark shots) its classes.
"""

from __future__ import annotations

import nibabel as nib
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from dataset_shapes import make_fmri_movie
from dataset_shapes._common import image_features, plan_pictures, render_pictures, rng_for
from figure_helpers import assert_png
from scipy.stats import spearmanr
from shape_helpers import run_shape
from workflow_helpers import snakemake

from neuroflow.artifacts import read_provenance
from neuroflow.demo._io import write_png, write_tsv
from neuroflow.manifests import verify_store

pytestmark = [pytest.mark.workflow, pytest.mark.slow]

N_POOL = 36
SENTENCES = [
    "a bright sunny beach",
    "a dark cave at night",
    "a cat sleeping on a sofa",
    "rockets launching into the sky",
    "a cup of black coffee",
    "an astronaut in a white suit",
    "a galaxy of distant stars",
]


def _write_pool(root, seed: int) -> tuple[list[str], np.ndarray]:
    """Never-shown pictures in two sub-folders; their ids and raw luminance statistics."""
    ids = [f"{'ab'[i % 2]}/pic-{i:03d}.png" for i in range(N_POOL)]
    pictures = plan_pictures(rng_for(seed, "pool"), [f"pool-{i}" for i in range(N_POOL)])
    images = render_pictures(pictures, 48)
    for stim, img in zip(ids, images, strict=True):
        (root / stim).parent.mkdir(parents=True, exist_ok=True)
        write_png(root / stim, img)
    return ids, image_features(images)


@pytest.fixture(scope="module")
def predicted(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("predict")
    facts = make_fmri_movie(root / "bids", seed=5, n_subjects=1)
    pool_ids, pool_raw = _write_pool(root / "pictures", seed=5)
    write_tsv(
        root / "sentences.tsv",
        {"stim_id": [f"s{i}" for i in range(len(SENTENCES))], "sentence": SENTENCES},
    )
    # the planted drive of each picture on the blob: z-scored as the shots were
    shots = np.array([facts["feature_values"][s] for s in facts["stimuli"]])
    z = (pool_raw - shots.mean(axis=0)) / shots.std(axis=0)
    (subject,) = facts["subjects"]
    drive = z @ facts["planted"]["weights"][subject].mean(axis=0)
    # class labels: shots brighter or darker than the median; every third shot forms the
    # held-out set of the out-of-distribution readout
    luminance = shots[:, 0]
    n_shots = len(facts["stimuli"])
    write_tsv(
        root / "labels.tsv",
        {
            "stim_file": [*facts["stimuli"], "shots/never_extracted.png"],
            "label": [*np.where(luminance > np.median(luminance), "bright", "dark"), "dark"],
            "set": [*np.where(np.arange(n_shots) % 3 == 2, "held", "seen"), "seen"],
        },
    )
    # an atlas: the blob, and the rest of the brain
    atlas_dir = root / "bids" / "derivatives" / "atlas"
    atlas_dir.mkdir(parents=True)
    blob = np.asarray(facts["planted"]["blob"][subject])
    brain = np.asarray(facts["planted"]["brain"][subject])
    labels = np.where(blob, 1, np.where(brain, 2, 0)).astype(np.int16)
    nib.save(nib.Nifti1Image(labels, facts["affine"]), atlas_dir / f"sub-{subject}_dseg.nii.gz")
    (atlas_dir / "labels.tsv").write_text("index\tname\n1\tblob\n2\trest\n")
    config = {
        "dataset": {"source": "bids", "bids_root": str(root / "bids")},
        "preprocess_fmri": {
            "rois": {
                "atlas": "derivatives/atlas/sub-{subject}_dseg.nii.gz",
                "labels": "derivatives/atlas/labels.tsv",
            }
        },
        "features": {
            "extractors": [
                {"name": "image_statistics", "extractor": "image_statistics"},
                {"name": "minilm", "extractor": "sentence_transformer"},
                {
                    "name": "cnn",
                    "extractor": "torch_module",
                    "model": "efficientnet-lite0",
                    "input": {"resize": 72, "center_crop": 64},  # small images: small input
                },
            ]
        },
        "encoding": {
            "models": {
                "visual": {"feature_spaces": ["image_statistics"]},
                "semantic": {"feature_spaces": ["minilm"]},
                "deep": {"feature_spaces": ["cnn"], "layer_sweep": True},
            },
            "alphas": {"start": 0.0, "stop": 4.0, "num": 5},
        },
        "evaluation": {"permutation": {"n_permutations": 20}},
        "decoding": {"enabled": False},
        "qc": {"enabled": False},
        "predict": {
            "stimulus_sets": {
                "pictures": {"folder": str(root / "pictures"), "glob": "**/*.png"},
                "sentences": {"sentences": str(root / "sentences.tsv")},
                "missing": {"folder": "no_such_folder"},
            },
            "models": ["visual", "semantic"],
            "k": 5,
        },
        "geometry": {
            "labels": str(root / "labels.tsv"),
            "distribution_column": "set",
            "train_distribution": "seen",
            "ood_permutations": 200,
        },
    }
    run = run_shape(root / "run", config)
    return {"run": run, "ids": pool_ids, "drive": drive, "subject": subject}


def _store(run, model: str, name: str) -> xr.Dataset:
    (path,) = sorted((run / "results" / "predict").glob(f"{model}-*/sub-*_{name}.zarr"))
    assert verify_store(path, checksums=True) == []
    return xr.open_zarr(path)


def test_each_model_meets_the_pools_it_can_read(predicted):
    results = predicted["run"] / "results"
    stores = sorted(p.relative_to(results / "predict") for p in results.glob("predict/*/*.zarr"))
    assert [(p.parent.name.split("-")[0], p.name) for p in stores] == [
        ("semantic", "sub-01_sentences.zarr"),
        ("visual", "sub-01_pictures.zarr"),
    ]
    pool_stores = sorted(
        f"{p.parents[1].name.split('-')[0]}/{p.parent.name}"
        for p in results.glob("pool_features/*/*/*.zarr")
    )
    assert pool_stores == ["image_statistics/pictures", "minilm/sentences"]
    dry = snakemake(predicted["run"], "-n", "--cores", "1")
    out = dry.stdout + dry.stderr
    assert "predict/missing: skipped, there is no" in out and "no_such_folder" in out
    assert "predict/visual: not applied to sentences" in out
    assert "predict/semantic: not applied to pictures" in out and "no captions table" in out
    assert "Nothing to be done" in out


def test_blob_ranks_the_pictures_as_their_planted_drive(predicted):
    ds = _store(predicted["run"], "visual", "pictures")
    assert list(ds["stimulus"].values) == sorted(predicted["ids"])
    order = [predicted["ids"].index(s) for s in ds["stimulus"].values]
    drive = predicted["drive"][order]
    roi = {str(r): j for j, r in enumerate(ds["roi"].values)}
    blob_rho = spearmanr(ds["roi_response"].values[:, roi["blob"]], drive)[0]
    rest_rho = spearmanr(ds["roi_response"].values[:, roi["rest"]], drive)[0]
    print(f"Spearman rho with the planted drive: blob {blob_rho:.3f}, rest {rest_rho:.3f}")
    assert blob_rho > 0.8, blob_rho
    assert abs(rest_rho) < blob_rho - 0.3, (blob_rho, rest_rho)
    (path,) = sorted((predicted["run"] / "results" / "predict").glob("visual-*/*.zarr"))
    prov = read_provenance(path)
    assert prov["stage"] == "predict/visual"
    assert any(i.get("stage") == "encoding/visual" for i in prov["inputs"]), prov["inputs"]
    assert ds.attrs["response_kind"] == "steady_state"


def test_rankings_and_contact_sheets(predicted):
    run = predicted["run"]
    (folder,) = sorted((run / "results" / "predict").glob("visual-*"))
    table = pd.read_csv(folder / "sub-01_pictures_ranking.tsv", sep="\t")
    blob = table[table["roi"] == "blob"]
    assert len(blob) == 2 * 5
    top = blob[blob["direction"] == "top"].sort_values("rank")["stimulus"].tolist()
    ds = _store(run, "visual", "pictures")
    values = ds["roi_response"].sel(roi="blob").to_series()
    assert top == values.sort_values(ascending=False).index[:5].tolist()
    sheets = sorted((folder / "sub-01_pictures_contact_sheets").glob("*.png"))
    assert [p.stem for p in sheets] == ["blob", "rest"]
    for sheet in sheets:
        assert_png(sheet)
    text = _store(run, "semantic", "sentences")
    assert sorted(text["stimulus"].values) == [f"s{i}" for i in range(len(SENTENCES))]
    (folder,) = sorted((run / "results" / "predict").glob("semantic-*"))
    assert_png(folder / "sub-01_sentences_contact_sheets" / "blob.png")


def test_geometry_of_every_layer_beside_its_scores(predicted):
    run = predicted["run"]
    (folder,) = sorted((run / "results" / "geometry").iterdir())
    assert verify_store(folder / "geometry.zarr", checksums=True) == []
    ds = xr.open_zarr(folder / "geometry.zarr")
    assert list(ds["feature_space"].values) == ["image_statistics", "minilm", "cnn"]
    assert ds.attrs["labels_not_in_features"] == 1
    assert list(ds["class"].values) == ["bright", "dark"]
    table = pd.read_csv(folder / "geometry.tsv", sep="\t")
    cnn = table[(table["feature_space"] == "cnn") & (table["metric"] == "participation_ratio")]
    assert len(cnn) == 6 and (cnn["value"] >= 1).all()
    # luminance separates the classes by construction: image statistics do it well
    sep = table[(table["feature_space"] == "image_statistics")]
    sep = sep[sep["metric"] == "linear_separability"]["value"].item()
    assert sep > 0.8, sep
    # the readout trained on the seen shots reads the held-out ones by their luminance
    ood = table[(table["feature_space"] == "image_statistics")].set_index("metric")["value"]
    assert ood["ood_accuracy"] > 0.8 and ood["ood_p_value"] < 0.05, ood
    assert ood["ood_chance"] == 0.5
    assert table[table["metric"] == "ood_accuracy"]["layer"].nunique() == 8
    assert ds["n_degenerate_classes"].dims == ("feature_space", "layer")
    alignment = pd.read_csv(folder / "geometry_alignment.tsv", sep="\t")
    assert set(alignment["feature_space"]) == {"cnn"}
    assert alignment["n_layers"].eq(6).all()
    assert any(a.startswith("encoding r: blob") for a in alignment["analysis"])
    assert alignment["spearman_rho"].between(-1, 1).any()
    assert_png(folder / "geometry.png")
