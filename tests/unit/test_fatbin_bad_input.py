"""Bad input never raises: truncated, corrupt, unreadable files and odd links become rows."""

from __future__ import annotations

import os
import shutil
import struct
import tempfile
from pathlib import Path

import pytest

from archgap.probe.binary.binfiles import collect_binaries, walk_binaries
from archgap.probe.binary.fatbin import read_binary
from archgap.probe.environment.system import System

BIN = Path(__file__).resolve().parents[1] / "fixtures" / "cuda" / "bin"


def nv_fatbin_range(path: Path) -> tuple[int, int]:
    """(offset, size) of .nv_fatbin, read with a separate minimal ELF64 parser."""
    data = path.read_bytes()
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shnum, shstrndx = struct.unpack_from("<HH", data, 0x3C)
    names_off = struct.unpack_from("<Q", data, shoff + shstrndx * 64 + 24)[0]
    for i in range(shnum):
        name, _, _, _, offset, size = struct.unpack_from("<IIQQQQ", data, shoff + i * 64)
        end = data.index(b"\0", names_off + name)
        if data[names_off + name : end] == b".nv_fatbin":
            return offset, size
    raise AssertionError("no .nv_fatbin")


def copy_with(tmp_path: Path, name: str, data: bytes) -> str:
    target = tmp_path / name
    target.write_bytes(data)
    return str(target)


def test_truncated_inside_the_fatbin_is_reported(tmp_path: Path) -> None:
    source = BIN / "libmix.so"
    offset, size = nv_fatbin_range(source)
    data = source.read_bytes()
    # the section header table sits at the end of the file: keep it, cut the fatbin in half
    path = copy_with(tmp_path, "cut.so", data[: offset + size // 2])
    facts = read_binary(path)
    assert facts.error and "truncated" in facts.error
    # the section headers went with the tail: no section can be located any more
    assert facts.format == "elf"


def test_corrupt_second_container_keeps_the_first(tmp_path: Path) -> None:
    source = BIN / "libmix.so"
    offset, _ = nv_fatbin_range(source)
    data = bytearray(source.read_bytes())
    first_size = struct.unpack_from("<Q", data, offset + 8)[0]
    second = offset + 16 + first_size
    assert data[second : second + 4] == b"\x50\xed\x55\xba"
    data[second + 4] = 9  # container version 9: not a container we know
    facts = read_binary(copy_with(tmp_path, "bad.so", bytes(data)))
    assert facts.error and "invalid container header" in facts.error
    # container #0 (the device-link cubins: one per SASS target in build.sh) survives
    assert len([e for e in facts.entries if e.kind == "sass"]) >= 7


def test_corrupt_entry_header_stops_that_container(tmp_path: Path) -> None:
    source = BIN / "libcomp_default.so"
    offset, _ = nv_fatbin_range(source)
    data = bytearray(source.read_bytes())
    data[offset + 16 : offset + 18] = b"\x07\x00"  # entry kind 7 does not exist
    facts = read_binary(copy_with(tmp_path, "bad.so", bytes(data)))
    assert facts.error and "invalid entry header" in facts.error


@pytest.mark.parametrize("length", [0, 3, 10, 40, 63, 64, 200])
def test_truncated_headers(tmp_path: Path, length: int) -> None:
    data = (BIN / "libmix.so").read_bytes()[:length]
    facts = read_binary(copy_with(tmp_path, "short.so", data))
    assert facts.entries == ()
    if length >= 4:  # the ELF magic is there: what follows is missing
        assert facts.format == "elf" and facts.error
    else:  # too short for any magic: not a binary, and nothing wrong with it
        assert facts.format == "other" and facts.error is None


@pytest.mark.parametrize("name", ["k_sm90a.cubin", "k.fatbin", "librdc.a", "exe_two"])
def test_every_truncation_point_is_handled(tmp_path: Path, name: str) -> None:
    data = (BIN / name).read_bytes()
    path = tmp_path / name
    for length in range(0, len(data), max(1, len(data) // 97)):
        path.write_bytes(data[:length])
        for deep in (False, True):
            facts = read_binary(str(path), deep=deep)
            assert facts.size == length


def test_missing_file() -> None:
    facts = read_binary("/nonexistent/libx.so")
    assert facts.format == "unreadable"
    assert facts.error == "no such file or directory"


def test_directory_given_to_read_binary(tmp_path: Path) -> None:
    facts = read_binary(str(tmp_path))
    assert facts.format == "unreadable"
    assert facts.error == "is a directory"


def _read_as_nobody(path: Path) -> str | None:
    """read_binary(path).error in a child that dropped to uid/gid 65534 (root reads any mode)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns into pytest
        try:
            os.close(read_end)
            os.setgid(65534)
            os.setuid(65534)
            os.write(write_end, (read_binary(str(path)).error or "").encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        error = pipe.read().decode()
    os.waitpid(pid, 0)
    return error or None


def test_permission_denied(tmp_path: Path) -> None:
    # A directory every user may traverse, holding a file no user may read.
    public = Path(tempfile.mkdtemp(prefix="archgap-perm-"))
    try:
        public.chmod(0o755)
        path = public / "locked.so"
        shutil.copy(BIN / "libmix.so", path)
        path.chmod(0)
        error = read_binary(str(path)).error if os.geteuid() else _read_as_nobody(path)
        assert error == "permission denied"
    finally:
        shutil.rmtree(public)


def test_fifo_is_not_opened_for_reading(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.so"
    os.mkfifo(fifo)
    facts = read_binary(str(fifo))  # must return at once, not wait for a writer
    assert facts.format == "other"
    assert [r.path for r in walk_binaries([str(tmp_path)])] == []


def test_links_loops_and_duplicates(tmp_path: Path) -> None:
    shutil.copy(BIN / "libmix.so", tmp_path / "libmix.so.1")
    (tmp_path / "libmix.so").symlink_to("libmix.so.1")  # same file twice: read once
    os.link(tmp_path / "libmix.so.1", tmp_path / "hardlink.so")  # and a third time
    (tmp_path / "libgone.so").symlink_to("does-not-exist.so")
    (tmp_path / "loop_a.so").symlink_to("loop_b.so")
    (tmp_path / "loop_b.so").symlink_to("loop_a.so")
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "up").symlink_to("..")  # a directory loop
    (sub / "notes.py").symlink_to("nowhere.py")  # not a candidate: no row
    rows = {Path(r.path).name: r for r in walk_binaries([str(tmp_path)])}
    readable = [r for r in rows.values() if r.entries]
    assert len(readable) == 1
    assert rows["libgone.so"].error == "dangling symlink to does-not-exist.so"
    assert rows["loop_a.so"].error == "symlink loop"
    assert rows["loop_b.so"].error == "symlink loop"
    assert rows["up"].error is not None and "symlink loop" in rows["up"].error
    assert "notes.py" not in rows
    assert len(rows) == 5


def test_non_candidate_executable_needs_elf_magic(tmp_path: Path) -> None:
    script = tmp_path / "tool"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o755)
    shutil.copy(BIN / "exe_two", tmp_path / "cuda_tool")
    (tmp_path / "data.bin").write_bytes(b"\x7fELF" + bytes(60))  # not executable, not a name
    names = [Path(r.path).name for r in walk_binaries([str(tmp_path)])]
    assert names == ["cuda_tool"]


def test_collect_section_returns_plain_json(tmp_path: Path) -> None:
    rows = collect_binaries(
        System.local(), {"paths": [str(BIN / "k.fatbin"), str(tmp_path / "x.so")], "deep": True}
    )
    assert [r["format"] for r in rows] == ["fatbin", "unreadable"]
    assert rows[0]["deep"] is True
    assert rows[0]["entries"][0]["kind"] == "sass"
