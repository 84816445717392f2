"""A wheel's small native members read from their compressed bytes by a few threads
(``archives.zipmembers``): the same facts as the file reader finds in the same files, in member
order, with zlib and with python-isal; and each way a member can be broken is an unreadable
row with the reason while the rest of the wheel is read.

The wheels are real bytes: the nvcc-built fixtures (tests/fixtures/cuda/bin) zipped here, and
the nvidia-cuda-runtime wheel from the package index (scripts/testdata), altered in place.
"""

from __future__ import annotations

import threading
import zipfile
import zlib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from isal import isal_zlib  # type: ignore[import-not-found,unused-ignore]

from archgap.archives import wheel as archive
from archgap.archives import zipmembers
from archgap.archives.wheel import read_wheel
from archgap.probe.binary.fatbin import read_binary
from archgap.probe.binary.names import is_native_file
from archgap.probe.facts import BinaryFacts
from tests.helpers import DATA, FIXTURES

BIN = FIXTURES / "cuda" / "bin"
RUNTIME = next(iter((DATA / "wheels").glob("nvidia_cuda_runtime-13.0.96-*.whl")), None)
INFLATERS = {"zlib": zlib, "isal": isal_zlib}


def fixture_wheel(path: Path, rounds: int = 3) -> list[tuple[str, Path]]:
    """A wheel of every fixture file, ``rounds`` times under other names, deflated but for
    every fifth member (stored); returns (member, the file it holds) in zip order."""
    files = sorted(p for p in BIN.iterdir() if p.is_file() and is_native_file(p.name))
    members = [(f"demo/r{r}/{f.name}", f) for r in range(rounds) for f in files]
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(
            "demo-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n"
        )
        for k, (name, f) in enumerate(members):
            method = zipfile.ZIP_STORED if k % 5 == 4 else zipfile.ZIP_DEFLATED
            zf.write(f, name, compress_type=method)
        zf.writestr("demo-1.0.dist-info/RECORD", "".join(f"{n},,\n" for n, _ in members))
    return members


def facts_of(b: BinaryFacts) -> tuple[Any, ...]:
    return (b.format, b.size, b.machine, b.entries, b.error, b.deep)


@pytest.mark.parametrize("inflater", sorted(INFLATERS))
@pytest.mark.parametrize("deep", [False, True])
def test_members_equal_the_files_read_in_member_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inflater: str, deep: bool
) -> None:
    """Four threads over 69 members (cubins of sm_86, sm_90a, sm_120f, a fatbin, shared
    libraries with every compression nvcc offers, static archives, an empty file, a linker
    script): each row is the file reader's row for the same file, and the rows come in zip
    order, whichever thread finished first."""
    monkeypatch.setattr(zipmembers, "INFLATER", INFLATERS[inflater])
    monkeypatch.setattr(zipmembers, "WORKERS", 4)
    wheel = tmp_path / "demo-1.0-py3-none-any.whl"
    members = fixture_wheel(wheel)
    before = threading.active_count()
    contents = read_wheel(str(wheel), deep=deep)
    assert threading.active_count() == before  # every thread joined
    assert contents.problems == []
    assert [b.path for b in contents.binaries] == [f"{wheel}/{name}" for name, _ in members]
    for row, (name, f) in zip(contents.binaries, members, strict=True):
        assert facts_of(row) == facts_of(read_binary(str(f), deep)), name
    formats = {b.format for b in contents.binaries}
    assert {"elf", "archive", "other"} <= formats  # libscript.so is text; libempty.so empty
    # the sm_120f cubin keeps 'f' only in .note.nv.tkinfo; sm_90a's 'a' is in e_flags
    variants = {(e.arch, e.variant) for b in contents.binaries for e in b.entries}
    assert {(120, "f"), (90, "a"), (86, "")} <= variants


def test_a_small_budget_and_a_low_direct_bound_give_the_same_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Members over 16 KiB read by zipfile's stream into memory instead; then members over
    40 KiB read as they stream by, and those below held about one at a time (a 40 KiB budget,
    each member counting its compressed bytes and twice its size): the same rows, in order."""
    wheel = tmp_path / "demo-1.0-py3-none-any.whl"
    fixture_wheel(wheel, rounds=2)
    expected = [(b.path, facts_of(b)) for b in read_wheel(str(wheel)).binaries]
    monkeypatch.setattr(zipmembers, "DIRECT_MAX", 16 << 10)
    assert [(b.path, facts_of(b)) for b in read_wheel(str(wheel)).binaries] == expected
    monkeypatch.setattr(archive, "IN_MEMORY_MAX", 40 << 10)
    assert [(b.path, facts_of(b)) for b in read_wheel(str(wheel)).binaries] == expected


# -- broken members: each an unreadable row with its reason, the rest of the wheel read --------

needs_runtime = pytest.mark.skipif(RUNTIME is None, reason="scripts/testdata downloads the wheel")


@pytest.fixture(params=["threads", "stream"])
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each broken member read both ways: by the threads, and streamed (``MemberStream``, as a
    member over ``DIRECT_MAX`` is)."""
    if request.param == "stream":
        monkeypatch.setattr(zipmembers, "DIRECT_MAX", 0)
    return str(request.param)


CUDART = "nvidia/cu13/lib/libcudart.so.13"
NATIVES = ["nvidia/cu13/lib/libcudadevrt.a", CUDART, "nvidia/cu13/lib/libcudart_static.a"]


def runtime_wheel(tmp_path: Path) -> tuple[Path, zipfile.ZipInfo]:
    """The runtime wheel's .dist-info and native members (the same bytes, deflated), the
    .dist-info first: a cut in a native member leaves the distribution readable. Returns the
    wheel and libcudart's entry in it."""
    assert RUNTIME is not None
    path = tmp_path / RUNTIME.name
    with zipfile.ZipFile(RUNTIME) as source, zipfile.ZipFile(path, "w") as zf:
        names = [n for n in source.namelist() if ".dist-info/" in n] + NATIVES
        for name in names:
            zf.writestr(name, source.read(name), compress_type=zipfile.ZIP_DEFLATED)
    with zipfile.ZipFile(path) as zf:
        return path, zf.getinfo(CUDART)


def patch(path: Path, at: int, new: bytes) -> None:
    with path.open("r+b") as handle:
        handle.seek(at)
        handle.write(new)


def data_start(info: zipfile.ZipInfo) -> int:
    return info.header_offset + 30 + len(info.filename) + len(info.extra)


def rows_by_member(wheel: Path) -> dict[str, BinaryFacts]:
    contents = read_wheel(str(wheel), deep=True)
    assert contents.problems == []
    assert [d.name for d in contents.distributions] == ["nvidia-cuda-runtime"]
    return {b.path[len(str(wheel)) + 1 :]: b for b in contents.binaries}


def assert_broken(row: BinaryFacts, reason: str) -> None:
    assert row.format == "unreadable" and row.entries == ()
    assert row.error is not None and row.error.startswith("corrupt member: "), row.error
    assert reason in row.error, row.error


def assert_only_cudart_broken(rows: dict[str, BinaryFacts], reason: str) -> None:
    assert list(rows) == NATIVES
    assert_broken(rows[CUDART], reason)
    # libcudadevrt.a: 11 entries (its members' __nv_relfatbin; test_wheels checks cuobjdump)
    assert len(rows[NATIVES[0]].entries) == 11
    assert rows[NATIVES[2]].format == "archive" and rows[NATIVES[2]].error is None


@needs_runtime
@pytest.mark.parametrize("inflater", sorted(INFLATERS))
def test_a_flipped_compressed_byte_is_a_corrupt_member(
    tmp_path: Path, way: str, monkeypatch: pytest.MonkeyPatch, inflater: str
) -> None:
    """One byte of libcudart's deflate data flipped (at three places): the inflater refuses
    the stream, or it inflates to other bytes whose CRC-32 is not the central directory's."""
    monkeypatch.setattr(zipmembers, "INFLATER", INFLATERS[inflater])
    for where in (3, 2, 4):
        wheel, info = runtime_wheel(tmp_path)
        at = data_start(info) + info.compress_size // where
        patch(wheel, at, bytes([wheel.read_bytes()[at] ^ 0xFF]))
        rows = rows_by_member(wheel)
        assert_only_cudart_broken(rows, "")
        error = rows[CUDART].error or ""
        assert any(
            s in error for s in ("Bad CRC-32", "decompress", "invalid", "bytes its header says")
        ), error


@needs_runtime
def test_a_wrong_crc_in_the_directory_is_named(tmp_path: Path, way: str) -> None:
    """The bytes intact, the central directory's CRC-32 of libcudart changed."""
    wheel, info = runtime_wheel(tmp_path)
    raw = wheel.read_bytes()
    entry = raw.rfind(b"PK\x01\x02", 0, raw.rfind(CUDART.encode()))
    patch(wheel, entry + 16, (info.CRC ^ 1).to_bytes(4, "little"))
    assert_only_cudart_broken(rows_by_member(wheel), f"Bad CRC-32 for file '{CUDART}'")


@needs_runtime
def test_a_local_header_that_disagrees_with_the_directory(tmp_path: Path, way: str) -> None:
    """The local header's name differs from the central directory's; then its signature is
    not a local header's: zipfile's own reasons, for libcudart only."""
    wheel, info = runtime_wheel(tmp_path)
    patch(wheel, info.header_offset + 30 + len("nvidia/cu13/lib/libcuda"), b"X")
    reason = "and header b'nvidia/cu13/lib/libcudaXt.so.13' differ"
    assert_only_cudart_broken(rows_by_member(wheel), reason)
    wheel, info = runtime_wheel(tmp_path)
    patch(wheel, info.header_offset, b"PK\x05\x06")
    assert_only_cudart_broken(rows_by_member(wheel), "Bad magic number for file header")


@needs_runtime
def test_members_past_the_end_of_a_cut_wheel(tmp_path: Path, way: str) -> None:
    """The wheel cut in the middle of libcudart's compressed bytes, its central directory put
    back after the cut (a download cut short, its directory kept): libcudart's bytes run out,
    libcudart_static.a is not there at all; libcudadevrt.a, before the cut, is read."""
    wheel, info = runtime_wheel(tmp_path)
    raw = wheel.read_bytes()
    end = raw.rfind(b"PK\x05\x06")
    directory = int.from_bytes(raw[end + 16 : end + 20], "little")
    cut = data_start(info) + info.compress_size // 2
    record = raw[end : end + 16] + cut.to_bytes(4, "little") + raw[end + 20 :]
    wheel.write_bytes(raw[:cut] + raw[directory:end] + record)
    rows = rows_by_member(wheel)
    assert list(rows) == NATIVES and len(rows[NATIVES[0]].entries) == 11
    assert_broken(rows[CUDART], "truncated: ")
    assert_broken(rows[NATIVES[2]], "Bad magic number for file header")


def test_the_inflater_is_python_isal_when_installed_else_zlib(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """python-isal is a test dependency (archgap's on x86-64 and ARM64): it is the one chosen."""
    assert zipmembers._inflater() is isal_zlib
    import builtins

    real_import = builtins.__import__

    def no_isal(name: str, *args: Any, **kwargs: Any) -> ModuleType:
        if name == "isal":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_isal)
    assert zipmembers._inflater() is zlib
