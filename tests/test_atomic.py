"""Atomic writes (pddplan.atomic): the old file or the new one, never a part of either."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

import pddplan.atomic
from pddplan.atomic import atomic_file, atomic_write_text


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_the_new_content_replaces_the_old(tmp_path: Path) -> None:
    target = tmp_path / "plan.json"
    target.write_text("old")
    atomic_write_text(target, "new")
    assert target.read_text() == "new"
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("failure", [OSError(errno.ENOSPC, "No space left"), KeyboardInterrupt()])
def test_a_failed_write_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, failure: BaseException
) -> None:
    target = tmp_path / "plan.json"
    target.write_text("old, whole")
    with pytest.raises(type(failure)), atomic_file(target) as f:
        f.write(b"half of the n")
        raise failure
    assert target.read_text() == "old, whole"
    assert leftovers(tmp_path) == []


def test_a_failed_rename_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "plan.json"
    target.write_text("old")

    def full(src: str, dst: str) -> None:
        raise OSError(errno.EDQUOT, "Disk quota exceeded")

    monkeypatch.setattr(pddplan.atomic.os, "replace", full)
    with pytest.raises(OSError):
        atomic_write_text(target, "new")
    assert target.read_text() == "old"
    assert leftovers(tmp_path) == []


def test_the_targets_mode_is_kept_and_a_new_file_gets_the_umasks(tmp_path: Path) -> None:
    kept = tmp_path / "kept.yaml"
    kept.write_text("old")
    os.chmod(kept, 0o640)
    atomic_write_text(kept, "new")
    assert stat.S_IMODE(kept.stat().st_mode) == 0o640
    umask = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "fresh.yaml", "x")
    finally:
        os.umask(umask)
    assert stat.S_IMODE((tmp_path / "fresh.yaml").stat().st_mode) == 0o644


def test_a_symlinked_target_is_written_through(tmp_path: Path) -> None:
    real = tmp_path / "catalogs" / "models.yaml"
    real.parent.mkdir()
    real.write_text("old")
    link = tmp_path / "models.yaml"
    link.symlink_to(real)
    atomic_write_text(link, "new")
    assert link.is_symlink() and real.read_text() == "new"
    assert leftovers(real.parent) == [] and leftovers(tmp_path) == []


def test_a_device_is_written_directly() -> None:
    """No temporary file renamed over a device: /dev/null stays the device it was."""
    before = os.stat("/dev/null")
    atomic_write_text(Path("/dev/null"), "into the void")
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (
        before.st_ino,
        before.st_rdev,
    )


def test_a_failed_model_import_leaves_the_catalog_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pddplan.errors import ArgumentError
    from pddplan.io.hf import add_model_entry

    catalog = tmp_path / "models.yaml"
    entry = "models:\n  tiny:\n    layers: 2\n"  # need not be complete: the write fails first
    catalog.write_text("models:\n  # the user's comment\n")
    before = catalog.read_text()

    def full(src: str, dst: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pddplan.atomic.os, "replace", full)
    with pytest.raises(ArgumentError, match=r"cannot write .*No space left"):
        add_model_entry(catalog, entry)
    assert catalog.read_text() == before
    assert leftovers(tmp_path) == []
