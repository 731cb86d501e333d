"""EEG decoding, RSA and encoding recover the demo's planted latencies and identities.

The demo is generated with its default EEG design (both subjects; the fMRI part is
shrunk since it is not used here) and run through the package functions in workflow
order: ``preprocess_eeg_recording`` -> ``extract_features`` (image statistics and the
packaged MiniLM) -> ``decode_eeg`` / ``rsa_eeg`` / ``fit_eeg_encoding``. Each test checks
one claim against :func:`neuroflow.demo.load_ground_truth` with explicit tolerances:

- identification of the held-out test images is far above chance for both decoders
  and both feature spaces (top-1 at least ``ID_FACTOR`` times chance, permutation
  p below ``ID_ALPHA``);
- time-resolved decoding of the visual (image statistics) features peaks near the
  planted visual latency, the semantic (MiniLM) ones near the semantic latency;
- cross-temporal RSA peaks in the same order, near the same latencies;
- EEG encoding models peak at the planted latencies on the held-out test r course and
  on the cross-validated course.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from demo_features import extract_demo_features

pytestmark = pytest.mark.slow

DEMO = {"seed": 42, "n_subjects": 2, "fmri": {"grid_shape": [10, 10, 10], "n_volumes": 40}}
SUBJECTS = ("01", "02")
SPACES = {"image_statistics": "visual", "minilm": "semantic"}
LATENCY_TOL = 0.03  # s, decoding and encoding peaks
RSA_TOL = 0.05  # s, RSA peaks (the semantic bump is wide)
ID_FACTOR = 3.0
ID_ALPHA = 0.01
PROV: dict = {}
DECODING = {
    "classification": {"enabled": False},
    "features": {"n_permutations": 0},
    "identification": {"n_permutations": 200},
    "contrastive": {"device": "cpu"},
}


def _features(root: Path, work: Path) -> dict[str, Path]:
    return extract_demo_features(root, sorted(root.glob("sub-*/eeg/*_events.tsv")), work, PROV)


@pytest.fixture(scope="module")
def eeg_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    from neuroflow.decoding import decode_eeg
    from neuroflow.demo import generate_demo_dataset, load_ground_truth
    from neuroflow.encoding.eeg import fit_eeg_encoding
    from neuroflow.preprocessing.eeg import preprocess_eeg_recording
    from neuroflow.rsa import rsa_eeg

    work = tmp_path_factory.mktemp("demo_eeg")
    root = work / "demo"
    generate_demo_dataset(output=root, config=DEMO, provenance=PROV)
    epochs = []
    for sub in SUBJECTS:
        epo, _ = preprocess_eeg_recording(
            recording=root / f"sub-{sub}" / "eeg" / f"sub-{sub}_task-images_eeg.vhdr",
            epochs_output=work / f"sub-{sub}_epo.zarr",
            continuous_output=work / f"sub-{sub}_raw.zarr",
            config={},
            provenance=PROV,
        )
        epochs.append(epo)
    stores = _features(root, work)
    dec = decode_eeg(
        epochs=epochs, features=stores, output=work / "dec.zarr", config=DECODING, provenance=PROV
    )
    rsa = rsa_eeg(
        epochs=epochs,
        features=stores,
        output=work / "rsa.zarr",
        config={"comparisons": ["spearman"], "bootstrap": {"over": "none"}},
        provenance=PROV,
    )
    enc = {
        (sub, name): xr.open_zarr(
            fit_eeg_encoding(
                epochs=epo,
                features={name: store},
                output=work / f"enc_{sub}_{name}.zarr",
                config={"device": "cpu"},
                provenance=PROV,
            )
        ).load()
        for sub, epo in zip(SUBJECTS, epochs, strict=True)
        for name, store in stores.items()
    }
    return {
        "latencies": load_ground_truth(root)["eeg"]["latencies"],
        "decoding": xr.open_zarr(dec).load(),
        "rsa": xr.open_zarr(rsa).load(),
        "encoding": enc,
    }


@pytest.mark.parametrize("subject", SUBJECTS)
@pytest.mark.parametrize("space", list(SPACES))
@pytest.mark.parametrize("decoder", ["ridge", "contrastive"])
def test_identification_far_above_chance(eeg_run, subject, space, decoder):
    ds = eeg_run["decoding"]
    sel = {"subject": subject, "feature_space": space, "metric": "top1"}
    top1 = float(ds["identification"].sel(decoder=decoder, **sel))
    chance = float(ds["identification_chance"].sel(**sel))
    p = float(ds["identification_p"].sel(decoder=decoder, **sel))
    assert top1 >= ID_FACTOR * chance, (top1, chance)
    assert p < ID_ALPHA, p


@pytest.mark.parametrize("subject", SUBJECTS)
def test_feature_decoding_peaks_in_planted_order(eeg_run, subject):
    lat = eeg_run["latencies"]
    peak = eeg_run["decoding"]["feature_peak_latency"].sel(subject=subject)
    vis = float(peak.sel(feature_space="image_statistics"))
    sem = float(peak.sel(feature_space="minilm"))
    assert vis < sem, (vis, sem)
    assert abs(vis - lat["visual"]) <= LATENCY_TOL, vis
    assert abs(sem - lat["semantic"]) <= LATENCY_TOL, sem


@pytest.mark.parametrize("subject", SUBJECTS)
def test_cross_temporal_rsa_peaks_in_planted_order(eeg_run, subject):
    lat = eeg_run["latencies"]
    ds = eeg_run["rsa"]
    course = ds["cross_temporal"].sel(subject=subject, comparison="spearman", channel_group="all")
    times = ds["time"].values
    peaks = {n: float(times[int(np.nanargmax(course.sel(layer=n).values))]) for n in SPACES}
    assert peaks["image_statistics"] < peaks["minilm"], peaks
    for name, kind in SPACES.items():
        assert abs(peaks[name] - lat[kind]) <= RSA_TOL, (name, peaks[name])


@pytest.mark.parametrize("subject", SUBJECTS)
@pytest.mark.parametrize("space", list(SPACES))
@pytest.mark.parametrize("course", ["r_course", "cv_course"])
def test_eeg_encoding_peaks_at_planted_latency(eeg_run, subject, space, course):
    planted = eeg_run["latencies"][SPACES[space]]
    ds = eeg_run["encoding"][(subject, space)]
    lat = ds["latency"].values
    peak = float(lat[int(np.nanargmax(ds[course].values))])
    assert abs(peak - planted) <= LATENCY_TOL, (peak, planted)
