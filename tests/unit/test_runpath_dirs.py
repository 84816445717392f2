"""What a library's absolute RUNPATH directories hold on the target (probe.binary.runpath).

ld.so(8): DT_RUNPATH directories are searched for each DT_NEEDED name, in order; one that does
not exist is passed over. So the probe reports the names a library needs (or dlopens) that lie
in those directories, an empty list where none do (no directory there at all included), and
nothing (None) where a directory could not be read, or the library names none.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from archgap.probe.binary.facts import BinaryFacts
from archgap.probe.binary.runpath import RunpathDirectories
from archgap.probe.environment.system import System


def lib(runpath: tuple[str, ...], needed: tuple[str, ...] = ("libtorch_cpu.so", "libc.so.6"),
        dlopens: tuple[str, ...] | None = None) -> BinaryFacts:  # fmt: skip
    return BinaryFacts(
        "/sp/o/ops.so", 1, "elf", (), False, needed=needed, runpath=runpath, dlopens=dlopens
    )


def directories(root: Path) -> RunpathDirectories:
    return RunpathDirectories(System(root=str(root)).path)


def test_a_directory_the_target_lacks_holds_nothing(tmp_path: Path) -> None:
    found = directories(tmp_path).found(lib(("/root/.pyenv/torch/lib", "$ORIGIN")))
    assert found == []


def test_the_names_in_a_directory_are_found_through_the_root(tmp_path: Path) -> None:
    (tmp_path / "opt/torch/lib").mkdir(parents=True)
    (tmp_path / "opt/torch/lib/libtorch_cpu.so").write_bytes(b"")
    (tmp_path / "opt/torch/lib/libcublas.so.12").write_bytes(b"")
    runpath = ("/opt/torch/lib/", "/nowhere")
    assert directories(tmp_path).found(lib(runpath)) == ["libtorch_cpu.so"]
    found = directories(tmp_path).found(lib(runpath, dlopens=("libcublas.so.12",)))
    assert found == ["libcublas.so.12", "libtorch_cpu.so"]


def test_only_origin_directories_or_none_tell_nothing(tmp_path: Path) -> None:
    assert directories(tmp_path).found(lib(("$ORIGIN/../lib",))) is None
    assert directories(tmp_path).found(lib(())) is None
    assert directories(tmp_path).found(lib(("/opt",), needed=None)) is None  # type: ignore[arg-type]


def test_a_directory_that_cannot_be_read_leaves_it_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As root (CI) no directory is unreadable, so the refusal comes from os.scandir itself."""
    real = os.scandir

    def refuse(path: str) -> object:
        if path.endswith("/secret"):
            raise PermissionError(errno.EACCES, "Permission denied", path)
        return real(path)

    monkeypatch.setattr(os, "scandir", refuse)
    assert directories(tmp_path).found(lib(("/nowhere", "/secret"))) is None


def test_each_directory_is_listed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    listed: list[str] = []
    real = os.scandir

    def count(path: str) -> object:
        listed.append(path)
        return real(path)

    monkeypatch.setattr(os, "scandir", count)
    seen = directories(tmp_path)
    for _ in range(3):
        seen.found(lib(("/opt/a", "/opt/b")))
    assert len(listed) == 2


def test_toolkit_directories_are_the_loader_sections(tmp_path: Path) -> None:
    """/usr/local/cuda* directories are listed by the loader section (LoaderFacts.toolkit_dirs),
    which the analysis reads for them: not looked up twice."""
    toolkit = ("/usr/local/cuda-12.1/targets/x86_64-linux/lib",)
    assert directories(tmp_path).found(lib(toolkit)) is None
    assert directories(tmp_path).found(lib((*toolkit, "/nowhere"))) == []
