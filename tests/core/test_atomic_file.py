"""``atomic_file``: a file appears complete or not at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuroflow.artifacts import PARTIAL_MARKER, atomic_file


def _listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_the_file_appears_only_after_the_block(tmp_path):
    final = tmp_path / "table.tsv"
    with atomic_file(final) as tmp:
        assert isinstance(tmp, Path)
        assert tmp.parent == tmp_path and tmp != final
        assert tmp.name.startswith(f".{final.name}{PARTIAL_MARKER}")
        tmp.write_text("a\tb\n1\t2\n", encoding="utf-8")
        assert not final.exists()
        assert _listing(tmp_path) == [tmp.name]
    assert final.read_text(encoding="utf-8") == "a\tb\n1\t2\n"
    assert not tmp.exists()
    assert _listing(tmp_path) == ["table.tsv"]


def test_an_existing_file_is_replaced_when_the_block_completes(tmp_path):
    final = tmp_path / "figure.png"
    final.write_bytes(b"old")
    with atomic_file(str(final)) as tmp:
        tmp.write_bytes(b"new contents")
        assert final.read_bytes() == b"old"
    assert final.read_bytes() == b"new contents"
    assert _listing(tmp_path) == ["figure.png"]


def test_an_error_keeps_the_old_file_and_leaves_no_partial_file(tmp_path):
    final = tmp_path / "table.tsv"
    final.write_text("kept\n", encoding="utf-8")
    with (
        pytest.raises(RuntimeError, match=r"^writer failed half way$"),
        atomic_file(final) as tmp,
    ):
        tmp.write_text("half of a new ta", encoding="utf-8")
        raise RuntimeError("writer failed half way")
    assert final.read_text(encoding="utf-8") == "kept\n"
    assert not tmp.exists()
    assert _listing(tmp_path) == ["table.tsv"]


def test_an_error_before_anything_is_written_leaves_nothing(tmp_path):
    final = tmp_path / "out" / "table.tsv"
    with pytest.raises(ValueError, match=r"^no rows$"), atomic_file(final):
        raise ValueError("no rows")
    assert not final.exists()
    assert _listing(final.parent) == []


def test_parent_folders_are_created(tmp_path):
    final = tmp_path / "a" / "b" / "c" / "notes.txt"
    with atomic_file(final) as tmp:
        assert tmp.parent.is_dir()
        tmp.write_text("x", encoding="utf-8")
    assert final.read_text(encoding="utf-8") == "x"
    assert _listing(tmp_path / "a" / "b" / "c") == ["notes.txt"]


def test_each_write_has_its_own_partial_file(tmp_path):
    final = tmp_path / "shared.txt"
    with atomic_file(final) as first, atomic_file(final) as second:
        assert first != second
        first.write_text("first", encoding="utf-8")
        second.write_text("second", encoding="utf-8")
    # the outer block completes last, so its contents win
    assert final.read_text(encoding="utf-8") == "first"
    assert _listing(tmp_path) == ["shared.txt"]
