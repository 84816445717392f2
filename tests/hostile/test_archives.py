"""Hostile corpus: archives and the files read from them (wheels, conda packages, installed
RECORDs, fatbins). Each class is built here by a generator (sparse files, repeated compressed
blocks: nothing large is committed or written), read in a fresh interpreter, and held to its
expected outcome: the reported problem and its reason, the rows that must not be affected, and
a bound on the reader's time and on how far its peak memory grows.

The rules that decide the outcomes:
- a zip's central directory only points at local headers: entries that share one are one
  member, and an entry that starts inside another's bytes is not a member of its own;
- a member inflates at most its declared size, and an archive at most ``limits.MAX_INFLATED``
  bytes, or ``limits.MAX_RATIO`` times its compressed bytes (real packages inflate < 5:1);
- what is over a limit is a reported value with the reason; the other members are read;
- holes of a sparse file hold zeros: they are neither read nor mapped;
- a metadata file (RECORD, paths.json, files) is read to a cap of bytes and rows;
- an image layer inflates at most ``limits.layer_allowance`` of its compressed bytes: what is
  past it is not read, the layer's problem says why, and the image's other layers are read.
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import os
import struct
import subprocess
import sys
import tarfile
import textwrap
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import zstandard

from archgap.archives import limits
from archgap.probe.binary.fatcontainer import ENTRY_HEADER
from archgap.probe.environment.pyenv import MAX_RECORD_BYTES, MAX_RECORD_ROWS
from tests.oci_images import Image, Layer, distribution, write_layout
from tests.unit.test_hardening_binaries import elf64

BIN = Path(__file__).resolve().parents[1] / "fixtures" / "cuda" / "bin"
REAL = "pkg/libmix.so"  # a real library built from tests/fixtures/cuda, beside each bomb
MIB = 1 << 20
GIB = 1 << 30

# Reads one archive in a fresh interpreter: its outcome as JSON, the CPU seconds the read took
# (user and system, a forked helper's too: the work, which other processes on the machine do not
# add to) and how far the peak RSS grew during it (VmHWM reset after the imports: clear_refs "5").
RUNNER = textwrap.dedent(
    """
    import json, os, sys
    reader, path, overrides = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    from archgap.archives import limits, wheel
    from archgap.image.layout import OciLayout
    from archgap.image.read import read_image
    from archgap.index import conda
    from archgap.probe.binary import fatbin
    from archgap.probe.environment import pyenv
    for dotted, value in overrides.items():
        module, name = dotted.rsplit(".", 1)
        setattr(sys.modules[module], name, value)
    def status(key):
        with open("/proc/self/status") as lines:
            return int(next(l.split()[1] for l in lines if l.startswith(key)))
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")
    def cpu():
        return sum(os.times()[:4])  # user, system, and of reaped children
    base, start = status("VmRSS:"), cpu()
    if reader == "binary":
        rows, problems, dists = [fatbin.read_binary(path, deep=True)], [], []
    elif reader == "image":
        found = read_image(OciLayout(path + ":bomb"))
        rows, problems, dists = found.binaries, found.problems, found.distributions
    elif reader == "installed":
        dists, problems = pyenv.installed_distributions((path,))
        rows = []
    else:
        found = (wheel.read_wheel if reader == "wheel" else conda.read_conda)(path)
        rows, problems, dists = found.binaries, found.problems, found.distributions
    seconds = cpu() - start
    print(json.dumps({
        "rows": {os.path.relpath(b.path, path): [b.format, b.error, len(b.entries)] for b in rows},
        "problems": [p.reason for p in problems],
        "dists": [[d.name, d.version, len(d.native_files)] for d in dists],
        "seconds": seconds,
        "peak_mib": (status("VmHWM:") - base) / 1024,
    }))
    """
)


@dataclass(frozen=True)
class Case:
    build: Callable[[Path], Path]  # writes the hostile input under the directory given
    reader: str  # "wheel", "conda", "installed" (a site-packages), "binary" or "image"
    expect: Callable[[dict[str, Any]], None]  # asserts the outcome
    seconds: float = 5.0  # of CPU time
    peak_mib: float = 96.0
    overrides: dict[str, int] = field(default_factory=dict)  # module.NAME -> value


def outcome(case: Case, tmp_path: Path) -> dict[str, Any]:
    path = case.build(tmp_path)
    run = subprocess.run(
        [sys.executable, "-c", RUNNER, case.reader, str(path), json.dumps(case.overrides)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result: dict[str, Any] = json.loads(run.stdout)
    return result


# --- zips, written by hand: the central directory says whatever the class needs -----------------


def deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    return packer.compress(data) + packer.flush()


def deflated_zeros(head: bytes, size: int) -> tuple[bytes, int]:
    """The raw deflate stream and CRC-32 of ``head`` then zeros, ``size`` bytes (a multiple of
    1 MiB): one full-flushed block of 1 MiB of zeros, repeated (a flush resets the history, so
    the same bytes inflate the same wherever they are)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = head.ljust(MIB, b"\0")
    parts = [packer.compress(first), packer.flush(zlib.Z_FULL_FLUSH)]
    block = packer.compress(bytes(MIB)) + packer.flush(zlib.Z_FULL_FLUSH)
    count = size // MIB - 1
    parts += [block] * count + [packer.flush()]
    crc = zlib.crc32(first)
    zeros = bytes(MIB)
    for _ in range(count):
        crc = zlib.crc32(zeros, crc)
    return b"".join(parts), crc


class Zip:
    """Local headers and central-directory entries written one by one (a lying central
    directory included)."""

    def __init__(self) -> None:
        self.body = bytearray()
        self.central: list[bytes] = []

    def local(
        self,
        name: str,
        raw: bytes,
        crc: int,
        size: int,
        method: int = 8,
        flags: int = 0,
    ) -> int:
        """A local header and its bytes; returns its offset (no central entry)."""
        offset = len(self.body)
        encoded = name.encode()
        self.body += struct.pack(
            "<4sHHHHHIIIHH", b"PK\x03\x04", 20, flags, method, 0, 0, crc, len(raw), size,
            len(encoded), 0,
        )  # fmt: skip
        self.body += encoded + raw
        return offset

    def entry(
        self,
        name: str,
        offset: int,
        compressed: int,
        size: int,
        crc: int,
        method: int = 8,
        flags: int = 0,
        extra: bytes = b"",
    ) -> None:
        encoded = name.encode()
        fields = (20, 20, flags, method, 0, 0, crc, compressed, size, len(encoded), len(extra))
        header = struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", *fields, 0, 0, 0, 0, offset)
        self.central.append(header + encoded + extra)

    def add(self, name: str, data: bytes, method: int = 8, flags: int = 0) -> int:
        raw = deflate(data) if method == 8 else data
        crc = zlib.crc32(data)
        offset = self.local(name, raw, crc, len(data), method, flags)
        self.entry(name, offset, len(raw), len(data), crc, method, flags)
        return offset

    def write(self, path: Path, central_cut: int = 0, count: int | None = None) -> Path:
        """The zip; ``count``: what the end record says the directory lists (a zip64 end
        record over 65,535)."""
        directory = b"".join(self.central)[: len(b"".join(self.central)) - central_cut]
        count = len(self.central) if count is None else count
        at, length = len(self.body), len(directory)
        zip64 = b""
        if count > 0xFFFF:
            zip64 = struct.pack(
                "<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, length, at
            ) + struct.pack("<4sLQL", b"PK\x06\x07", 0, at + length, 1)
        short = min(count, 0xFFFF)
        end = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, short, short, length, at, 0)
        path.write_bytes(bytes(self.body) + directory + zip64 + end)
        return path


def wheel(record: bytes | None = None, metadata: bytes | None = None) -> Zip:
    """A wheel's .dist-info and the real library; the class adds its members."""
    archive = Zip()
    archive.add("bomb-1.dist-info/METADATA", metadata or b"Name: bomb\nVersion: 1\n\n")
    archive.add(REAL, (BIN / "libmix.so").read_bytes())
    listed = b"pkg/libmix.so,,\npkg/libbomb.so,,\n"
    archive.add("bomb-1.dist-info/RECORD", record if record is not None else listed)
    return archive


def real_row_unaffected(result: dict[str, Any]) -> None:
    """The real library beside the bomb reads as it does alone: an ELF with its kernels."""
    fmt, error, entries = result["rows"][REAL]
    assert (fmt, error) == ("elf", None) and entries >= 4, result["rows"][REAL]


def problem(result: dict[str, Any], *words: str) -> str:
    """The one problem that names all ``words``."""
    found: list[str] = [p for p in result["problems"] if all(w in p for w in words)]
    assert len(found) == 1, (words, result["problems"])
    return found[0]


def row(result: dict[str, Any], name: str) -> list[Any]:
    assert name in result["rows"], (name, sorted(result["rows"]))
    value: list[Any] = result["rows"][name]
    return value


def elf_head(size: int) -> bytes:
    """An ELF whose .nv_fatbin runs from 4096 to ``size`` and starts with a container header
    claiming all of it."""
    head = elf64([(b".nv_fatbin", 1, 4096, size - 4096)], b"").ljust(4096, b"\0")
    return head + b"\x50\xed\x55\xba" + struct.pack("<HHQ", 1, 16, size - 4096 - 16)


# shared local header: 20,000 entries, one name, one 16 MiB member (read 20,000 times before)
def shared_header(tmp: Path, renamed: bool = False) -> Path:
    archive = wheel()
    raw, crc = deflated_zeros(elf_head(16 * MIB), 16 * MIB)
    offset = archive.local("pkg/libbomb.so", raw, crc, 16 * MIB)
    for k in range(20_000):
        name = f"pkg/libbomb{k}.so" if renamed and k else "pkg/libbomb.so"
        archive.entry(name, offset, len(raw), 16 * MIB, crc)
    return archive.write(tmp / "shared.whl")


def expect_shared(result: dict[str, Any]) -> None:
    assert "19999 central-directory entries share a local header" in problem(result, "share")
    assert row(result, "pkg/libbomb.so")[0] == "elf"  # the member itself is read, once
    assert len(result["rows"]) == 2
    real_row_unaffected(result)


# overlapping: each entry's local header lies inside the previous entry's compressed bytes
def overlapping(tmp: Path) -> Path:
    archive = wheel()
    inner = deflate(bytes(4096))
    crc = zlib.crc32(bytes(4096))
    names = [f"pkg/libover{k}.so" for k in range(50)]
    start = len(archive.body)
    header = 30 + len(names[0])
    # entry k starts at start + k * header: its 'compressed bytes' cover all the headers after
    for k, name in enumerate(names):
        archive.body += (
            struct.pack(
                "<4sHHHHHIIIHH", b"PK\x03\x04", 20, 0, 8, 0, 0, crc, len(inner), 4096, len(name), 0
            )
            + name.encode()
        )
        archive.entry(name, start + k * header, (50 - k - 1) * header + len(inner), 4096, crc)
    archive.body += inner
    return archive.write(tmp / "overlap.whl")


def expect_overlapping(result: dict[str, Any]) -> None:
    assert "49 central-directory entries start inside another entry's bytes" in problem(
        result, "overlapping"
    )
    assert [n for n in result["rows"] if "over" in n] == ["pkg/libover0.so"]
    real_row_unaffected(result)


def ratio_bomb(tmp: Path, size: int = GIB) -> Path:
    archive = wheel()
    raw, crc = deflated_zeros(elf_head(size), size)
    offset = archive.local("pkg/libbomb.so", raw, crc, size)
    archive.entry("pkg/libbomb.so", offset, len(raw), size, crc)
    return archive.write(tmp / "ratio.whl")


def expect_not_inflated(result: dict[str, Any]) -> None:
    fmt, error, _ = row(result, "pkg/libbomb.so")
    assert fmt == "unknown" and "over the 200:1 limit" in error
    assert "pkg/libbomb.so" in problem(result, "not inflated")
    real_row_unaffected(result)


def total_cap(tmp: Path) -> Path:
    """Ten members of 1 MiB of random bytes: each inflates ~1:1, together past a 4 MiB cap."""
    archive = wheel()
    for k in range(10):
        archive.add(f"pkg/lib{k}.so", b"\x7fELF" + os.urandom(MIB - 4))
    return archive.write(tmp / "total.whl")


def expect_total_cap(result: dict[str, Any]) -> None:
    refused = [n for n, (fmt, err, _) in result["rows"].items() if "inflate past" in (err or "")]
    # libmix.so (84 KiB) and lib0..lib2 fit in 4 MiB; lib3 would pass it, and so the rest
    assert refused == [f"pkg/lib{k}.so" for k in range(3, 10)]
    assert "(and 6 more)" in problem(result, "not inflated")
    real_row_unaffected(result)


def nested_zip(tmp: Path) -> Path:
    inner = tmp / "inner.whl"
    ratio_bomb(tmp, 64 * MIB).rename(inner)
    archive = wheel()
    archive.add("pkg/inner.whl", inner.read_bytes(), method=0)
    return archive.write(tmp / "nested.whl")


def expect_nested(result: dict[str, Any]) -> None:
    assert set(result["rows"]) == {REAL}  # an archive inside is not a native file: not opened
    assert result["problems"] == []


def zip64_lie(tmp: Path) -> Path:
    """A zip64 extra field that claims a member of 2^62 bytes."""
    archive = wheel()
    data = b"\x7fELF" + bytes(60)
    raw = deflate(data)
    offset = archive.local("pkg/libbomb.so", raw, zlib.crc32(data), 0xFFFFFFFF)
    extra = struct.pack("<HHQ", 1, 8, 1 << 62)
    archive.entry("pkg/libbomb.so", offset, len(raw), 0xFFFFFFFF, zlib.crc32(data), extra=extra)
    return archive.write(tmp / "zip64.whl")


def expect_zip64(result: dict[str, Any]) -> None:
    fmt, error, _ = row(result, "pkg/libbomb.so")
    assert fmt == "unknown" and str(1 << 62) in error
    real_row_unaffected(result)


def truncated_directory(tmp: Path) -> Path:
    archive = wheel()
    archive.add("pkg/libmore.so", b"\x7fELF" + bytes(60))
    return archive.write(tmp / "cut.whl", central_cut=20)


def expect_unreadable_wheel(result: dict[str, Any]) -> None:
    assert result["rows"] == {} and result["dists"] == []
    assert "not a readable wheel" in problem(result, "not a readable wheel")


def offset_past_end(tmp: Path) -> Path:
    archive = wheel()
    archive.entry("pkg/libbomb.so", 0xF0000000, 100, 100, 0)
    return archive.write(tmp / "past.whl")


def negative_sizes(tmp: Path) -> Path:
    """Sizes of 0xFFFFFFFF (-1 as signed) over a 64-byte member, without a zip64 field."""
    archive = wheel()
    data = b"\x7fELF" + bytes(60)
    offset = archive.local("pkg/libbomb.so", data, zlib.crc32(data), len(data), method=0)
    archive.entry("pkg/libbomb.so", offset, 0xFFFFFFFF, 0xFFFFFFFF, zlib.crc32(data), method=0)
    return archive.write(tmp / "negative.whl")


def crc_mismatch(tmp: Path) -> Path:
    archive = wheel()
    data = (BIN / "libstub.so").read_bytes()
    raw = deflate(data)
    offset = archive.local("pkg/libbomb.so", raw, 0xDEADBEEF, len(data))
    archive.entry("pkg/libbomb.so", offset, len(raw), len(data), 0xDEADBEEF)
    return archive.write(tmp / "crc.whl")


def expect_unreadable_member(*words: str) -> Callable[[dict[str, Any]], None]:
    def check(result: dict[str, Any]) -> None:
        fmt, error, entries = row(result, "pkg/libbomb.so")
        assert fmt == "unreadable" and entries == 0, (fmt, error)
        assert all(w in error for w in words), error
        real_row_unaffected(result)

    return check


def encrypted(tmp: Path) -> Path:
    archive = wheel()
    archive.add("pkg/libbomb.so", b"\x7fELF" + bytes(60), flags=0x1)
    return archive.write(tmp / "encrypted.whl")


def unknown_method(tmp: Path) -> Path:
    archive = wheel()
    archive.add("pkg/libbomb.so", b"\x7fELF" + bytes(60), method=98)  # PPMd: zipfile has none
    return archive.write(tmp / "ppmd.whl")


def size_lie(tmp: Path) -> Path:
    """The central directory says 64 bytes; the deflate stream holds 4 KiB."""
    archive = wheel()
    data = b"\x7fELF" + bytes(4092)
    raw = deflate(data)
    offset = archive.local("pkg/libbomb.so", raw, zlib.crc32(data[:64]), 64)
    archive.entry("pkg/libbomb.so", offset, len(raw), 64, zlib.crc32(data[:64]))
    return archive.write(tmp / "size.whl")


def name_mismatch(tmp: Path) -> Path:
    archive = wheel()
    data = b"\x7fELF" + bytes(60)
    raw = deflate(data)
    offset = archive.local("pkg/libother.so", raw, zlib.crc32(data), len(data))
    archive.entry("pkg/libbomb.so", offset, len(raw), len(data), zlib.crc32(data))
    return archive.write(tmp / "name.whl")


def many_entries(tmp: Path) -> Path:
    """60,000 tiny members (the central directory alone is 4 MB)."""
    archive = wheel()
    data = b"\x7fELF" + bytes(12)
    raw, crc = deflate(data), zlib.crc32(data)
    for k in range(60_000):
        name = f"pkg/l{k}.so"
        archive.entry(name, archive.local(name, raw, crc, len(data)), len(raw), len(data), crc)
    return archive.write(tmp / "many.whl")


def expect_many(result: dict[str, Any]) -> None:
    assert len(result["rows"]) == 60_001
    real_row_unaffected(result)


def huge_directory(count: int | None, name: str = "directory.whl") -> Callable[[Path], Path]:
    """200,000 directory entries (one small member's local header); the end record says so,
    or, with ``count``, lies that it lists that many: zipfile reads the directory's bytes, so
    these have long names (~40 MB in all, over 2^17 entries of 256 bytes)."""

    def build(tmp: Path) -> Path:
        archive = wheel()
        data = b"\x7fELF" + bytes(12)
        raw, crc = deflate(data), zlib.crc32(data)
        offset = archive.local("pkg/l.so", raw, crc, len(data))
        stem = "x" * (150 if count is not None else 0)
        for k in range(200_000):
            archive.entry(f"pkg/l{stem}{k}.so", offset, len(raw), len(data), crc)
        return archive.write(tmp / name, count=count)

    return build


def expect_directory(*words: str) -> Callable[[dict[str, Any]], None]:
    def check(result: dict[str, Any]) -> None:
        assert result["rows"] == {} and result["dists"] == []
        assert all(w in problem(result, "central directory lists") for w in words)

    return check


def wheel_record_bomb(tmp: Path) -> Path:
    """A RECORD that inflates to 1 GiB of short rows (its deflate stream: ~1 MB)."""
    archive = wheel(record=b"")
    archive.central.pop()  # the empty RECORD: replaced by the bomb below
    rows = b"pkg/libmix.so,,\n" + b"ab,,\n" * (MIB // 5)
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = packer.compress(rows[:MIB]) + packer.flush(zlib.Z_FULL_FLUSH)
    block = packer.compress(b"ab,,\n" * (MIB // 5)) + packer.flush(zlib.Z_FULL_FLUSH)
    raw = first + block * 1000 + packer.flush()
    size = MIB + 1000 * (MIB // 5) * 5
    name = "bomb-1.dist-info/RECORD"
    archive.entry(name, archive.local(name, raw, 0, size), len(raw), size, 0)
    return archive.write(tmp / "record.whl")


def expect_wheel_record(result: dict[str, Any]) -> None:
    assert result["dists"] == [["bomb", "1", 1]]  # libmix.so, listed in the first row
    text = problem(result, "RECORD")
    assert f"over {MAX_RECORD_BYTES >> 20} MiB" in text or f"over {MAX_RECORD_ROWS} rows" in text
    real_row_unaffected(result)


def metadata_bomb(tmp: Path) -> Path:
    """METADATA of 64 MiB (the headers, then a description that never ends)."""
    return wheel(metadata=b"Name: bomb\nVersion: 1\n\n" + b"x" * (64 * MIB)).write(
        tmp / "metadata.whl"
    )


def expect_metadata(result: dict[str, Any]) -> None:
    assert result["dists"][0][:2] == ["bomb", "1"]
    real_row_unaffected(result)


# --- installed distributions: RECORD files -------------------------------------------------------


def installed(rows: bytes | None, repeat: int = 1) -> Callable[[Path], Path]:
    def build(tmp: Path) -> Path:
        site = tmp / "site-packages"
        dist_info = site / "bomb-1.dist-info"
        dist_info.mkdir(parents=True)
        (dist_info / "METADATA").write_text("Name: bomb\nVersion: 1\n\n")
        (site / "bomb").mkdir()
        (site / "bomb" / "libmix.so").write_bytes((BIN / "libmix.so").read_bytes())
        record = dist_info / "RECORD"
        if rows is None:
            os.mkfifo(record)  # nothing ever writes it: a read would wait forever
            return site
        with record.open("wb") as out:
            out.write(b"bomb/libmix.so,,\n")
            chunk = rows * max(1, MIB // len(rows))
            for _ in range(repeat):
                out.write(chunk)
        return site

    return build


def expect_fifo(result: dict[str, Any]) -> None:
    # opened without blocking and checked before any read: a FIFO is no RECORD, and no wait
    assert result["dists"] == [["bomb", "1", 0]]
    assert "unreadable RECORD: not a regular file" in problem(result, "RECORD")


RECORD_SIZE = 24  # MiB of each RECORD bomb: over the cap, and millions of rows


def expect_record(*words: str) -> Callable[[dict[str, Any]], None]:
    def check(result: dict[str, Any]) -> None:
        [(name, version, natives)] = result["dists"]
        assert (name, version, natives) == ("bomb", "1", 1)  # the row before the bomb counts
        assert all(w in " ".join(result["problems"]) for w in words), result["problems"]

    return check


# --- conda packages: a zip (stored) of zstd tars, or one bzip2 tar ------------------------------

INDEX = json.dumps({"name": "bomb", "version": "1", "build": "0", "subdir": "linux-64"}).encode()


def tar_member(name: str, data: bytes = b"", kind: bytes = tarfile.REGTYPE, **fields: Any) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.type = len(data), kind
    for key, value in fields.items():
        setattr(info, key, value)
    padding = bytes(-len(data) % 512)
    return info.tobuf(format=tarfile.GNU_FORMAT) + data + padding


def tar_end() -> bytes:
    return bytes(1024)


def info_tar(paths: bytes | None = None) -> bytes:
    listing = (
        paths
        if paths is not None
        else json.dumps({"paths": [{"_path": "lib/libmix.so"}], "paths_version": 1}).encode()
    )
    return tar_member("info/index.json", INDEX) + tar_member("info/paths.json", listing) + tar_end()


def pkg_tar(*extra: bytes) -> bytes:
    real = tar_member("lib/libmix.so", (BIN / "libmix.so").read_bytes())
    return real + b"".join(extra) + tar_end()


def zstd(data: bytes) -> bytes:
    return zstandard.ZstdCompressor(level=3).compress(data)


def dot_conda(path: Path, parts: dict[str, bytes]) -> Path:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("metadata.json", json.dumps({"conda_pkg_format_version": 2}))
        for name, data in parts.items():
            archive.writestr(name, data)
    path.write_bytes(buffer.getvalue())
    return path


def conda_parts(info: bytes | None, pkg: bytes) -> dict[str, bytes]:
    parts = {"pkg-bomb-1-0.tar.zst": pkg}
    if info is not None:
        parts = {"info-bomb-1-0.tar.zst": info, **parts}
    return parts


def conda_zstd_bomb(tmp: Path) -> Path:
    """pkg-*.tar.zst: libmix.so, then a member of 8 GiB of zeros: 128 frames of 64 MiB each
    (zstd reads across frames), ~300 KB in all."""
    size = 8 * GIB
    info = tarfile.TarInfo("lib/libhuge.so")
    info.size = size
    head = pkg_tar()[: -len(tar_end())] + info.tobuf(format=tarfile.GNU_FORMAT) + b"\x7fELF"
    zeros = zstd(bytes(64 * MIB))
    stream = zstd(head) + zeros * (size // (64 * MIB))
    return dot_conda(tmp / "bomb-1-0.conda", conda_parts(zstd(info_tar()), stream))


def expect_conda_bomb(stream: str) -> Callable[[dict[str, Any]], None]:
    def check(result: dict[str, Any]) -> None:
        # the member's header says what it would inflate to: refused before any of it is
        assert f"{stream}: lib/libhuge.so claims" in problem(result, "not read further")
        assert result["dists"] == [["bomb", "1", 1]]
        assert row(result, "lib/libmix.so")[0] == "elf"

    return check


def conda_no_info(tmp: Path) -> Path:
    return dot_conda(tmp / "bomb-1-0.conda", conda_parts(None, zstd(pkg_tar())))


def expect_no_info(result: dict[str, Any]) -> None:
    assert problem(result, "no info-*.tar.zst")
    assert row(result, "lib/libmix.so")[0] == "elf"  # the files are still read


def paths_json(unique: bool) -> Callable[[Path], Path]:
    """info/paths.json of 60 MiB: ~500,000 entries with their hashes; ``unique``: each its own
    name and random hash (~2:1 compressed), else the same entry repeated (a ratio bomb)."""

    def build(tmp: Path) -> Path:
        one = b'{"_path": "lib/x%07d.so", "path_type": "hardlink", "sha256": "%s", "size": 1}'
        count = 60 * MIB // (len(one % (0, b"0" * 64)) + 2)
        hashes = os.urandom(32 * count).hex().encode() if unique else b"0" * 64 * count
        entries = (one % (k if unique else 0, hashes[64 * k : 64 * k + 64]) for k in range(count))
        real = b'{"_path": "lib/libmix.so"}'
        listing = b'{"paths": [' + real + b", " + b", ".join(entries) + b'], "paths_version": 1}'
        parts = conda_parts(zstd(info_tar(listing)), zstd(pkg_tar()))
        return dot_conda(tmp / "bomb-1-0.conda", parts)

    return build


def expect_paths_json(result: dict[str, Any]) -> None:
    assert result["dists"] == [["bomb", "1", 1]]  # lib/libmix.so: the first entry, owned
    assert "info/paths.json is over 16 MiB: the rest is not read" in problem(result, "over")


def expect_paths_json_refused(result: dict[str, Any]) -> None:
    assert "info/paths.json claims" in problem(result, "not read further")
    assert result["dists"] == [["bomb", "1", 0]]  # no file list: nothing is known to be owned
    assert row(result, "lib/libmix.so")[0] == "elf"


def index_json(data: bytes) -> Callable[[Path], Path]:
    def build(tmp: Path) -> Path:
        info = tar_member("info/index.json", data) + tar_end()
        return dot_conda(tmp / "bomb-1-0.conda", conda_parts(zstd(info), zstd(pkg_tar())))

    return build


def random_json(size: int) -> bytes:
    """A JSON array of ``size`` bytes of objects with random values (~2:1 compressed: no ratio
    bomb, the read limit alone decides)."""
    values = os.urandom(size // 4).hex().encode()
    return (
        b"["
        + b", ".join(b'{"a": "%s"}' % values[k : k + 32] for k in range(0, len(values), 32))
        + b"]"
    )


def expect_no_index(result: dict[str, Any]) -> None:
    assert result["dists"] == []
    assert problem(result, "no readable info/index.json")
    assert row(result, "lib/libmix.so")[0] == "elf"


def corrupt_zstd(tmp: Path) -> Path:
    """pkg-*.tar.zst with its compressed blocks overwritten after the frame header."""
    stream = bytearray(zstd(pkg_tar()))
    stream[16:] = bytes(range(256)) * (len(stream[16:]) // 256) + bytes(len(stream[16:]) % 256)
    return dot_conda(tmp / "bomb-1-0.conda", conda_parts(zstd(info_tar()), bytes(stream)))


def expect_zstd_error(result: dict[str, Any]) -> None:
    assert "pkg-bomb-1-0.tar.zst: zstd:" in problem(result, "zstd")
    assert result["dists"] == [["bomb", "1", 0]]  # info/ was read; libmix.so was never seen


def bz2_bomb(tmp: Path) -> Path:
    """A .tar.bz2 whose member inflates to 2 GiB of zeros: bzip2 streams one after another
    (read as one), 256 of them of 8 MiB of zeros each, ~10 KB in all."""
    info = tarfile.TarInfo("lib/libhuge.so")
    info.size = 2 * GIB
    tars = info_tar()[: -len(tar_end())] + pkg_tar()[: -len(tar_end())]
    head = bz2.compress(tars + info.tobuf(format=tarfile.GNU_FORMAT))
    path = tmp / "bomb-1-0.tar.bz2"
    path.write_bytes(head + bz2.compress(bytes(8 * MIB)) * (2 * GIB // (8 * MIB)))
    return path


def special_members(tmp: Path) -> Path:
    """Members named like libraries that are a FIFO, a character device, a symlink loop and a
    hardlink: none is a regular file's bytes."""
    extra = [
        tar_member("lib/libfifo.so", kind=tarfile.FIFOTYPE),
        tar_member("lib/libdev.so", kind=tarfile.CHRTYPE, devmajor=1, devminor=3),
        tar_member("lib/liba.so", kind=tarfile.SYMTYPE, linkname="libb.so"),
        tar_member("lib/libb.so", kind=tarfile.SYMTYPE, linkname="liba.so"),
        tar_member("lib/libhard.so", kind=tarfile.LNKTYPE, linkname="lib/libmix.so"),
    ]
    return dot_conda(tmp / "bomb-1-0.conda", conda_parts(zstd(info_tar()), zstd(pkg_tar(*extra))))


def expect_special(result: dict[str, Any]) -> None:
    assert set(result["rows"]) == {"lib/libmix.so"}
    assert result["problems"] == [] and result["dists"] == [["bomb", "1", 1]]


def tar_huge_size(tmp: Path) -> Path:
    """A member header claiming 2^60 bytes (base-256 size field) with nothing after it."""
    info = tarfile.TarInfo("lib/libhuge.so")
    info.size = 1 << 60
    stream = zstd(pkg_tar()[: -len(tar_end())] + info.tobuf(format=tarfile.GNU_FORMAT))
    return dot_conda(tmp / "bomb-1-0.conda", conda_parts(zstd(info_tar()), stream))


# --- fatbins over sparse files -------------------------------------------------------------------


def sparse_elf(section: bytes, start: bytes, size: int = 5 * GIB // 2) -> Callable[[Path], Path]:
    """An ELF whose ``section`` claims ``size`` bytes at 4096, of which only ``start`` is data:
    the rest is a hole (a few KiB on disk)."""

    def build(tmp: Path) -> Path:
        path = tmp / "libsparse.so"
        with path.open("wb") as out:
            out.write(elf64([(section, 1, 4096, size)], b""))
            out.seek(4096)
            out.write(start)
            out.truncate(4096 + size)
        return path

    return build


def sparse_raw_fatbin(tmp: Path) -> Path:
    path = tmp / "sparse.fatbin"
    with path.open("wb") as out:
        out.write(b"\x01" * 64)
        out.truncate(5 * GIB // 2)
    return path


def expect_binary(fmt: str, *words: str) -> Callable[[dict[str, Any]], None]:
    def check(result: dict[str, Any]) -> None:
        [(found, error, _)] = result["rows"].values()
        assert found == fmt and all(w in (error or "") for w in words), (found, error)

    return check


def past_end(tmp: Path) -> Path:
    """A container header whose size runs 2 GiB past the end of the file."""
    path = tmp / "libpast.so"
    container = b"\x50\xed\x55\xba" + struct.pack("<HHQ", 1, 16, 2 * GIB)
    path.write_bytes(elf64([(b".nv_fatbin", 1, 64, 4096)], container.ljust(4096, b"\0")))
    return path


def entry_past_end(tmp: Path) -> Path:
    """An entry (SASS sm_90) whose payload size runs far past its container and the file."""
    entry = ENTRY_HEADER.pack(2, 0x0101, 64, 1 << 40, 0, 0, 0, 9, 90, 0, 0, 0, 0, 0)
    container = b"\x50\xed\x55\xba" + struct.pack("<HHQ", 1, 16, len(entry))
    path = tmp / "libentry.so"
    path.write_bytes(elf64([(b".nv_fatbin", 1, 64, 16 + len(entry))], container + entry))
    return path


# --- image layers: a real distribution below the bomb layer, another above it ---------------------


def layer_bomb(
    how: str, claimed: int | None = None, trailing: bool = False
) -> Callable[[Path], Path]:
    """An OCI image of three layers: libmix.so's distribution (gzip), the bomb, and a second
    distribution (gzip). The bomb is a tar of members of 1 MiB of zeros, 256 of them, each one
    gzip member or zstd frame, the same compressed bytes repeated (~300 KB in all); with
    ``claimed``, one member whose header claims that many bytes, followed by 64 MiB of zeros;
    ``trailing``: an empty tar, then 256 MiB of zeros past its end (read to check the digest)."""

    def build(tmp: Path) -> Path:
        if trailing:
            head, chunk, count = tar_end(), bytes(MIB), 256
        elif claimed is not None:
            info = tarfile.TarInfo("opt/huge.bin")
            info.size = claimed
            head, chunk, count = info.tobuf(format=tarfile.GNU_FORMAT), bytes(MIB), 64
        else:
            head, chunk, count = b"", tar_member("opt/zeros.bin", bytes(MIB)), 256
        pack = (lambda d: gzip.compress(d, 1, mtime=0)) if how == "gzip" else zstd
        bomb = pack(head) + pack(chunk) * count  # gzip members and zstd frames read as one
        mix = (BIN / "libmix.so").read_bytes()
        below = Layer(distribution("below", "1", {"below/libmix.so": mix}))
        above = Layer(distribution("above", "1", {"above/libmix.so": mix}))
        return write_layout(tmp / "layout", {"bomb": Image([below, Layer(raw=bomb), above])})

    return build


def expect_layer_refused(*words: str) -> Callable[[dict[str, Any]], None]:
    def check(result: dict[str, Any]) -> None:
        reason = problem(result, "layer 2/3", *words)
        assert "limits: max(" in reason, reason
        # the layers below and above it are read: both distributions and their libraries
        assert sorted(d[0] for d in result["dists"]) == ["above", "below"]
        assert sorted(r[0] for r in result["rows"].values()) == ["elf", "elf"]

    return check


# a layer's floors scaled down so that the streaming bombs stay small: 64 MiB where the real
# ones are 64 GiB and 4 GiB (the claim classes hold at the real limits)
SMALL_LAYERS = {
    "archgap.archives.limits.LAYER_MAX_INFLATED": 64 * MIB,
    "archgap.archives.limits.LAYER_RATIO_MIN": 64 * MIB,
}

CASES = [
    pytest.param(Case(shared_header, "wheel", expect_shared, 5, 96), id="shared-local-header"),
    pytest.param(
        Case(lambda t: shared_header(t, renamed=True), "wheel", expect_shared, 5, 96),
        id="shared-local-header-20000-names",
    ),
    pytest.param(Case(overlapping, "wheel", expect_overlapping), id="overlapping-entries"),
    pytest.param(Case(ratio_bomb, "wheel", expect_not_inflated, 3, 64), id="ratio-bomb"),
    pytest.param(
        Case(lambda t: ratio_bomb(t, 5 * GIB // 2 // MIB * MIB), "wheel", expect_not_inflated),
        id="sparse-fatbin-in-wheel",
    ),
    pytest.param(
        Case(
            total_cap,
            "wheel",
            expect_total_cap,
            overrides={"archgap.archives.limits.MAX_INFLATED": 4 * MIB},
        ),
        id="inflated-bytes-cap",
    ),
    pytest.param(Case(nested_zip, "wheel", expect_nested), id="nested-zip"),
    pytest.param(Case(zip64_lie, "wheel", expect_zip64), id="zip64-size-lie"),
    pytest.param(
        Case(truncated_directory, "wheel", expect_unreadable_wheel), id="truncated-central-dir"
    ),
    pytest.param(
        Case(offset_past_end, "wheel", expect_unreadable_member()), id="local-header-past-eof"
    ),
    pytest.param(
        Case(negative_sizes, "wheel", expect_unreadable_member("truncated")), id="negative-sizes"
    ),
    pytest.param(Case(crc_mismatch, "wheel", expect_unreadable_member("CRC")), id="crc-mismatch"),
    pytest.param(
        Case(encrypted, "wheel", expect_unreadable_member("encrypted")), id="encrypted-entry"
    ),
    pytest.param(
        Case(unknown_method, "wheel", expect_unreadable_member("compression")),
        id="unsupported-method",
    ),
    pytest.param(Case(size_lie, "wheel", expect_unreadable_member("64 bytes")), id="size-lie"),
    pytest.param(
        Case(name_mismatch, "wheel", expect_unreadable_member("differ")), id="local-name-mismatch"
    ),
    pytest.param(Case(many_entries, "wheel", expect_many, 20, 256), id="60000-entries"),
    pytest.param(
        Case(huge_directory(None), "wheel", expect_directory("200003 entries"), 2, 32),
        id="200000-entries",
    ),
    pytest.param(
        Case(huge_directory(4), "wheel", expect_directory("lists 4 entries in"), 2, 32),
        id="directory-count-lie",
    ),
    pytest.param(
        Case(huge_directory(None, "bomb-1-0.conda"), "conda", expect_directory("200003"), 2, 32),
        id="conda-200000-entries",
    ),
    pytest.param(Case(wheel_record_bomb, "wheel", expect_wheel_record), id="record-bomb-in-wheel"),
    pytest.param(Case(metadata_bomb, "wheel", expect_metadata), id="metadata-bomb-in-wheel"),
    pytest.param(
        Case(installed(b"ab,,\n", RECORD_SIZE), "installed", expect_record("over 16 MiB")),
        id="record-bomb-installed",
    ),
    pytest.param(
        Case(installed(b'"a",,\n', RECORD_SIZE), "installed", expect_record("rows")),
        id="record-quoted-rows",
    ),
    pytest.param(
        Case(installed(b"ab\r,,\r\n", RECORD_SIZE), "installed", expect_record("new-line")),
        id="record-lone-cr",
    ),
    pytest.param(
        Case(installed(b"a\0b,,\n", RECORD_SIZE), "installed", expect_record("not a file name")),
        id="record-nul",
    ),
    pytest.param(
        Case(installed(b"x" * MIB, RECORD_SIZE), "installed", expect_record("field larger")),
        id="record-huge-line",
    ),
    pytest.param(Case(installed(None), "installed", expect_fifo), id="record-fifo"),
    pytest.param(
        Case(conda_zstd_bomb, "conda", expect_conda_bomb("pkg-bomb-1-0.tar.zst")),
        id="conda-zstd-bomb",
    ),
    pytest.param(Case(conda_no_info, "conda", expect_no_info), id="conda-missing-info-tar"),
    pytest.param(
        Case(paths_json(unique=True), "conda", expect_paths_json, 10, 256),
        id="paths-json-60-mib",
    ),
    pytest.param(
        Case(paths_json(unique=False), "conda", expect_paths_json_refused),
        id="paths-json-ratio-bomb",
    ),
    pytest.param(Case(corrupt_zstd, "conda", expect_zstd_error), id="conda-corrupt-zstd"),
    pytest.param(
        Case(index_json(b"[" * 200_000), "conda", expect_no_index), id="index-json-deep-nesting"
    ),
    pytest.param(
        Case(index_json(random_json(8 * MIB)), "conda", expect_no_index, 3, 64),
        id="index-json-8-mib",
    ),
    pytest.param(Case(bz2_bomb, "conda", expect_conda_bomb("bzip2")), id="tar-bz2-bomb"),
    pytest.param(Case(special_members, "conda", expect_special), id="tar-devices-fifos-links"),
    pytest.param(
        Case(tar_huge_size, "conda", expect_conda_bomb("pkg-bomb-1-0.tar.zst")),
        id="tar-member-2-60-bytes",
    ),
    pytest.param(
        Case(
            sparse_elf(b".nv_fatbin", b"\x01" * 64),
            "binary",
            expect_binary("elf", "unrecognised bytes at 0x1000"),
            3,
            64,
        ),
        id="sparse-fatbin",
    ),
    pytest.param(
        Case(sparse_elf(b"__nv_relfatbin", b"\x01" * 64), "binary", expect_binary("elf"), 3, 64),
        id="sparse-relfatbin",
    ),
    pytest.param(
        Case(
            sparse_elf(
                b".nv_fatbin", b"\x50\xed\x55\xba" + struct.pack("<HHQ", 1, 16, 5 * GIB // 2 - 16)
            ),
            "binary",
            expect_binary("elf"),
            3,
            64,
        ),
        id="sparse-fatbin-one-container",
    ),
    pytest.param(
        Case(sparse_raw_fatbin, "binary", expect_binary("other"), 3, 64), id="sparse-raw-file"
    ),
    pytest.param(
        Case(past_end, "binary", expect_binary("elf", "past the end"), 3, 64),
        id="fatbin-header-size-past-eof",
    ),
    pytest.param(
        Case(entry_past_end, "binary", expect_binary("elf", "invalid entry header"), 3, 64),
        id="fatbin-entry-size-past-eof",
    ),
    pytest.param(
        Case(layer_bomb("gzip", 100 * GIB), "image", expect_layer_refused("claims"), 3, 64),
        id="gzip-layer-claims-100-gib",
    ),
    pytest.param(
        Case(layer_bomb("zstd", 100 * GIB), "image", expect_layer_refused("claims"), 3, 64),
        id="zstd-layer-claims-100-gib",
    ),
    pytest.param(
        Case(layer_bomb("gzip"), "image", expect_layer_refused("claims"), 5, 64, SMALL_LAYERS),
        id="gzip-layer-bomb",
    ),
    pytest.param(
        Case(layer_bomb("zstd"), "image", expect_layer_refused("claims"), 5, 64, SMALL_LAYERS),
        id="zstd-layer-bomb",
    ),
    pytest.param(
        Case(
            layer_bomb("gzip", trailing=True),
            "image",
            expect_layer_refused("inflates past"),
            5,
            64,
            SMALL_LAYERS,
        ),
        id="gzip-layer-zeros-past-the-tar",
    ),
]


@pytest.mark.parametrize("case", CASES)
def test_hostile_archive(case: Case, tmp_path: Path) -> None:
    result = outcome(case, tmp_path)
    case.expect(result)
    assert result["seconds"] < case.seconds, result["seconds"]
    assert result["peak_mib"] < case.peak_mib, f"peak RSS grew by {result['peak_mib']:.0f} MiB"


def test_the_limits_are_far_above_real_packages() -> None:
    # flashinfer-cubin, the largest package read: 427 MiB of deflate inflating to 1.8 GB
    assert limits.MAX_INFLATED > 4 * 1_800_000_000 and limits.MAX_RATIO > 20 * 4.3


def test_the_layer_limits_cannot_refuse_a_real_layer() -> None:
    # tar of binaries compresses < 10:1 (a layer of zeros far more): every layer from 1 MiB to
    # 1 TiB compressed may inflate 20 times that, and none less than 4 GiB
    for compressed in (MIB << shift for shift in range(21)):
        allowed, _ = limits.layer_allowance(compressed)
        assert allowed >= max(20 * compressed, 4 * GIB), compressed
