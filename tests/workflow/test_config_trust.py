"""Checking or planning a config runs none of its code; builders come from trusted places only."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml
from workflow_helpers import REPO, TINY_CONFIG, snakemake, write_config

from neuroflow.features.trust import (
    builder_trust,
    file_digest,
    import_trusted_builder,
    locate_builder,
)

#: Builder module whose import leaves a marker file (its path is filled in).
NETS = """
from pathlib import Path
import subprocess
Path({marker!r}).write_text("imported")
import torch

def build(width=3):
    return torch.nn.Conv2d(3, width, 3)

class Nets:
    @classmethod
    def small(cls):
        return torch.nn.Linear(3, 2)

from subprocess import run  # a callable defined elsewhere
"""


def _code_dir(root: Path, name: str = "trusted_nets") -> tuple[Path, Path]:
    """A code folder with package ``name`` (module ``build``), and the marker its import writes."""
    code = root / "code"
    package = code / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    marker = root / f"{name}-imported"
    (package / "build.py").write_text(NETS.format(marker=str(marker)))
    return code, marker


def _shell_entry(marker: Path, layers: list[str]) -> dict:
    return {
        "name": "shell",
        "extractor": "torch_module",
        "builder": "os:system",
        "builder_kwargs": {"command": f"touch {marker}"},
        "layers": layers,
    }


@pytest.mark.slow
def test_check_config_refuses_a_stdlib_builder_and_runs_nothing(tmp_path, monkeypatch, capsys):
    from neuroflow.cli import main

    monkeypatch.chdir(REPO)  # config/config.yaml is read from the working folder
    marker = tmp_path / "pwned"
    code, imported = _code_dir(tmp_path, "plan_nets")
    base = [{"name": "image_statistics", "extractor": "image_statistics"}]
    for layers in (["all"], ["output"]):
        features = {"extractors": [*base, _shell_entry(marker, layers)], "code_dirs": [str(code)]}
        mine = write_config(tmp_path / "mine.yaml", {"features": features})
        assert main(["check-config", "--configfile", str(mine)]) == 2
        err = capsys.readouterr().err
        assert "`builder` 'os:system' of `features.extractors` entry 'shell' names 'os'" in err
        assert "standard library, which is never allowed" in err
        assert "`features.code_dirs` or in an installed distribution listed in" in err
    # a builder in a listed folder plans without its module being imported
    entry = {
        "name": "nets",
        "extractor": "torch_module",
        "builder": "plan_nets.build:build",
        "layers": ["output"],
    }
    features = {"extractors": [*base, entry], "code_dirs": [str(code)]}
    mine = write_config(tmp_path / "mine.yaml", {"features": features})
    assert main(["check-config", "--configfile", str(mine)]) == 0  # valid, nothing missing
    assert "features: image_statistics, nets" in capsys.readouterr().out
    assert not marker.exists() and not imported.exists()
    assert "plan_nets" not in sys.modules
    # the same builder without its folder listed is refused
    mine = write_config(tmp_path / "mine.yaml", {"features": {"extractors": [*base, entry]}})
    assert main(["check-config", "--configfile", str(mine)]) == 2
    assert "names module 'plan_nets.build', which lies in none of" in capsys.readouterr().err


@pytest.mark.workflow
@pytest.mark.slow
def test_snakemake_dry_run_refuses_a_stdlib_builder_and_runs_nothing(tmp_path):
    marker = tmp_path / "pwned"
    code, imported = _code_dir(tmp_path)
    features = {
        "extractors": [
            {"name": "image_statistics", "extractor": "image_statistics"},
            _shell_entry(marker, ["all"]),
        ],
        "code_dirs": [str(code)],
    }
    visual = {"visual": TINY_CONFIG["encoding"]["models"]["visual"]}
    encoding = {**TINY_CONFIG["encoding"], "models": visual}
    config = {**TINY_CONFIG, "features": features, "encoding": encoding}
    write_config(tmp_path / "config.yaml", config)
    proc = snakemake(tmp_path, "-n", check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "`builder` 'os:system' of `features.extractors` entry 'shell'" in text, text[-3000:]
    assert not marker.exists()
    # a builder from the listed folder plans its extraction job, importing nothing
    entry = {
        "name": "nets",
        "extractor": "torch_module",
        "builder": "trusted_nets.build:build",
        "layers": ["output"],
    }
    features["extractors"][1] = entry
    write_config(tmp_path / "config.yaml", config)
    proc = snakemake(tmp_path, "-n", "--quiet", "rules", check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text[-3000:]
    assert "extract_features_nets" in text
    assert not imported.exists() and not marker.exists()


# --------------------------------------------------------------------------- allow-list
def test_a_module_under_code_dirs_is_allowed(tmp_path):
    code, marker = _code_dir(tmp_path)
    trust = builder_trust({"code_dirs": [str(code)]})
    origin = locate_builder("trusted_nets.build:Nets.small", trust, entry="nets")
    assert origin.file == (code / "trusted_nets" / "build.py").resolve()
    assert origin.source == "code_dirs" and origin.root == code.resolve()
    assert not marker.exists()  # found on disk, not imported
    builder, same = import_trusted_builder("trusted_nets.build:Nets.small", trust)
    assert same == origin and marker.exists()
    assert builder().out_features == 2
    assert file_digest(origin.file) == file_digest(code / "trusted_nets" / "build.py")


def test_a_listed_distribution_is_allowed_and_an_unlisted_one_refused():
    trust = builder_trust({"trusted_packages": ["torch"]})
    origin = locate_builder("torch.nn:Linear", trust)
    assert origin.source == "trusted_packages" and origin.where == "torch"
    assert origin.file.name == "__init__.py" and origin.file.parent.name == "nn"
    builder, _ = import_trusted_builder("torch.nn:Linear", trust)
    assert builder(2, 3).weight.shape == (3, 2)
    with pytest.raises(ValueError, match=r"'torch\.nn', which lies in none of .*\['numpy'\]"):
        locate_builder("torch.nn:Linear", builder_trust({"trusted_packages": ["numpy"]}))
    with pytest.raises(ValueError, match=r"entry 'lin' names module 'torch\.nn', which lies"):
        locate_builder("torch.nn:Linear", builder_trust({}), entry="lin")
    with pytest.raises(ValueError, match="lists 'no-such-dist', which is not an installed"):
        locate_builder("torch.nn:Linear", {"trusted_packages": ["no-such-dist"]})


@pytest.mark.parametrize("spec", ["os:system", "subprocess:run", "builtins:eval", "posix:system"])
def test_standard_library_builders_are_refused(tmp_path, spec):
    code = tmp_path / "code"
    code.mkdir()
    (code / f"{spec.partition(':')[0]}.py").write_text("def system(c): pass\n")  # a decoy
    trust = builder_trust({"code_dirs": [str(code)], "trusted_packages": ["torch"]})
    with pytest.raises(ValueError, match=r"entry 'x' names '\w+', a module of Python's standard"):
        locate_builder(spec, trust, entry="x")


def test_files_outside_code_dirs_are_refused(tmp_path):
    outside, marker = _code_dir(tmp_path / "elsewhere")
    code = tmp_path / "code"
    (code / "linked").mkdir(parents=True)
    (code / "linked" / "__init__.py").write_text("")
    (code / "linked" / "build.py").symlink_to(outside / "trusted_nets" / "build.py")
    trust = builder_trust({"code_dirs": [str(code)]})
    with pytest.raises(ValueError, match=r"'linked\.build', which lies in none of"):
        locate_builder("linked.build:build", trust)
    with pytest.raises(ValueError, match=r"must be 'package\.module:function', got '\.\./x:y'"):
        locate_builder("../x:y", trust)
    with pytest.raises(FileNotFoundError, match=r"`features\.code_dirs\[1\]` must be an existing"):
        builder_trust({"code_dirs": [str(code), str(tmp_path / "absent")]})
    site = Path(yaml.__file__).resolve().parents[1]
    with pytest.raises(
        ValueError, match=r"`features\.code_dirs\[0\]` must be a folder of your own"
    ):
        builder_trust({"code_dirs": [str(site)]})
    assert not marker.exists()


def test_the_job_refuses_callables_from_elsewhere(tmp_path):
    code, _ = _code_dir(tmp_path, "nets_elsewhere")
    trust = builder_trust({"code_dirs": [str(code)]})
    # allowed on disk (the module lies in code_dirs), refused once imported
    locate_builder("nets_elsewhere.build:subprocess.run", trust)
    with pytest.raises(ValueError, match=r"got module 'subprocess' after the colon"):
        import_trusted_builder("nets_elsewhere.build:subprocess.run", trust)
    with pytest.raises(ValueError, match=r"must name a callable defined under .*subprocess\.py"):
        import_trusted_builder("nets_elsewhere.build:run", trust)
    # a module of the folder shadowed by an installed one of the same name
    (code / "yaml.py").write_text("def build():\n    pass\n")
    with pytest.raises(ValueError, match=r"another module of that name comes first"):
        import_trusted_builder("yaml:build", trust)


def test_model_inventory_finds_a_builder_in_code_dirs_without_importing_it(tmp_path):
    from neuroflow.features.inventory import model_inventory

    code, marker = _code_dir(tmp_path, "inventory_nets")
    entry = {"name": "nets", "extractor": "torch_module", "builder": "inventory_nets.build:build"}
    trust = builder_trust({"code_dirs": [str(code)]})
    found = model_inventory([entry], trust=trust)
    assert [(r.needs, r.status) for r in found] == [("nothing", "not checked")]
    (missing, _) = model_inventory([entry], trust=builder_trust({}))
    assert missing.status == "missing" and "which lies in none of" in missing.note
    shell = {**entry, "builder": "os:system", "builder_kwargs": {"command": f"touch {marker}"}}
    (refused, _) = model_inventory([shell], trust=trust)
    assert refused.status == "missing" and "standard library" in refused.note
    assert not marker.exists() and "inventory_nets" not in sys.modules
