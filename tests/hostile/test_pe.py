"""Hostile corpus: Windows images (PE/COFF DLLs, ``.pyd``) built here from the PE format
specification (``tests.pe_build``), each damaged one way, read by the kernel reader.

The rules that decide the outcomes:
- every offset and size of the headers, the section table and the import tables is checked
  against the file: what lies past the end, or at an RVA no section's bytes hold, is not read,
  and the file's row says why in one line (``error``); what was read before the damage stays;
- the work is bounded by the structure, not by what a header claims: the section table by the
  file's size, each import table by ``pe.MAX_IMPORTS`` descriptors, each name by ``pe.MAX_NAME``
  bytes, each region read once however many section headers point at it, and the holes of a
  sparse file neither read nor mapped (the reader's work units, ``Reader.work``, are asserted);
- nothing raises: the row is a value with its reason.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from archgap.probe.binary import pe
from archgap.probe.binary.binreader import Reader
from archgap.probe.binary.fatbin import read_binary, read_with
from archgap.probe.facts import BinaryFacts
from tests.fuzzing import binary_violations, mutate_binary
from tests.pe_build import COFF_AT, DATA, OPTIONAL_AT, TABLE_AT, pe_image
from tests.unit.test_hardening_binaries import nv_fatbin_payload

GIB = 1 << 30
IMPORT_DIR = OPTIONAL_AT + 112 + 8  # data directory 1 (the specification's offsets)
DELAY_DIR = OPTIONAL_AT + 112 + 8 * 13


def fatbin_dll() -> bytes:
    """A DLL whose .nv_fatb holds the real .nv_fatbin of the fixture libmix.so, importing
    cudart64_13.dll and delay-loading cublas64_13.dll."""
    return pe_image([(b".nv_fatb", nv_fatbin_payload(), DATA)], ("cudart64_13.dll",),
                    ("cublas64_13.dll",))  # fmt: skip


def patched(data: bytes, *writes: tuple[int, str, int]) -> bytes:
    out = bytearray(data)
    for at, fmt, value in writes:
        struct.pack_into(fmt, out, at, value)
    return bytes(out)


def section_row(index: int) -> int:
    return TABLE_AT + 40 * index


def idata_va(data: bytes) -> int:
    return int(struct.unpack_from("<I", data, IMPORT_DIR)[0])


def endless_imports(tmp: Path) -> bytes:
    """An import table of 1,000,000 descriptors and no null one (20 MB), all naming one DLL."""
    base = pe_image([(b".nv_fatb", nv_fatbin_payload(), DATA)], ("a.dll",))
    row = section_row(1)  # .idata
    raw = struct.unpack_from("<I", base, row + 20)[0]
    va = struct.unpack_from("<I", base, row + 12)[0]
    count = 1_000_000
    name_rva = va + 20 * count
    table = struct.pack("<IIIII", 1, 0, 0, name_rva, 0) * count + b"a.dll\0"
    out = bytearray(base[:raw]) + table
    struct.pack_into("<IIII", out, row + 8, len(table), va, len(table), raw)
    return bytes(out)


def sparse_section(tmp: Path) -> Path:
    """A DLL whose .nv_fatb is 4 GiB - 4 KiB of holes, then one real container at its end."""
    payload = nv_fatbin_payload()
    base = bytearray(pe_image([(b".nv_fatb", b"\0" * 512, DATA)]))
    raw = struct.unpack_from("<I", base, section_row(0) + 20)[0]
    size = 0xFFFFF000
    struct.pack_into("<II", base, section_row(0) + 8, size, 0x1000)
    struct.pack_into("<II", base, section_row(0) + 16, size, raw)
    path = tmp / "sparse.dll"
    with open(path, "wb") as out:
        out.write(base[:raw])
        out.seek(raw + size - len(payload))
        out.write(payload)
    return path


@dataclass(frozen=True)
class Case:
    build: Callable[[Path], bytes | Path]
    reason: str  # words the one-line error holds ("" when the file is whole)
    max_work: int  # the reader's work units (headers, entries, KiB searched) at most
    # the container of the fixture is still found as the listed fatbin (True), nothing is found
    # (False), or what a deep read finds is not this class's point (None)
    listed: bool | None = True
    needed: tuple[str, ...] | str | None = "any"


CASES = [
    pytest.param(Case(lambda _: b"MZ" + bytes(20), "truncated MS-DOS header", 10, False, None),
                 id="truncated-dos-header"),
    pytest.param(Case(lambda _: patched(fatbin_dll(), (0x3C, "<I", 0xFFFFFFF0)),
                      "the PE header (at 0xfffffff0) is past the end", 10, False, None),
                 id="e-lfanew-past-eof"),
    pytest.param(Case(lambda _: patched(fatbin_dll(), (0x3C, "<I", 0x40)), "no PE signature", 10,
                      False, None), id="no-pe-signature"),
    pytest.param(Case(lambda _: patched(fatbin_dll(), (COFF_AT + 16, "<H", 0xFFFF))[:0x400],
                      "truncated optional header", 10, False, None),
                 id="optional-header-past-eof"),
    pytest.param(Case(lambda _: patched(fatbin_dll(), (COFF_AT + 2, "<H", 0xFFFF)),
                      "section headers present", 100_000), id="section-table-past-eof"),
    pytest.param(Case(lambda _: patched(fatbin_dll(), (section_row(0) + 16, "<I", 0xFFFFFE00),
                                        (section_row(0) + 8, "<I", 0)),
                      "section .nv_fatb ends", 5_000_000), id="section-past-eof"),
    pytest.param(Case(endless_imports, "no end within 4096 descriptors", 10_000,
                      needed=("a.dll",)), id="import-table-without-end"),
    pytest.param(Case(lambda _: patched(fatbin_dll(), (IMPORT_DIR, "<I", 0x7FFF0000)),
                      "the import table (RVA 0x7fff0000) is outside", 100, needed=(
                          "cublas64_13.dll",)), id="import-rva-outside"),
    pytest.param(Case(lambda _: patched(fatbin_dll(), (IMPORT_DIR, "<I", 0xFFFFFFFC)),
                      "is outside the file's sections", 100, needed=("cublas64_13.dll",)),
                 id="import-rva-wraps-2-32"),
    pytest.param(Case(lambda d: _name_outside(fatbin_dll()), "a import name (RVA 0x7ffffff0)",
                      100, needed=("cublas64_13.dll",)), id="import-name-rva-outside"),
    pytest.param(Case(lambda _: _delay_self(fatbin_dll()), "", 100), id="delay-name-is-its-table"),
    pytest.param(Case(lambda _: _same_region(fatbin_dll()), "", 70_000),
                 id="65535-sections-over-one-region"),
    pytest.param(Case(lambda _: _long_name(fatbin_dll()), "", 100, None),
                 id="long-name-outside-strings"),
    pytest.param(Case(lambda _: patched(fatbin_dll(), (OPTIONAL_AT, "<H", 0x1234)),
                      "unknown optional header magic 0x1234", 100, needed=None),
                 id="unknown-optional-magic"),
    pytest.param(Case(sparse_section, "", 10_000), id="sparse-4gib-section"),
]  # fmt: skip


def _name_outside(data: bytes) -> bytes:
    """The import descriptor's Name RVA points far past every section."""
    va = idata_va(data)
    raw = struct.unpack_from("<I", data, section_row(1) + 20)[0]
    return patched(data, (raw + (va - va) + 12, "<I", 0x7FFFFFF0))


def _delay_self(data: bytes) -> bytes:
    """The delay-load descriptor's name points at the descriptor itself: read as a name, up to
    its first zero byte, never followed further."""
    delay_va = struct.unpack_from("<I", data, DELAY_DIR)[0]
    va = idata_va(data)
    raw = struct.unpack_from("<I", data, section_row(1) + 20)[0]
    return patched(data, (raw + delay_va - va + 4, "<I", delay_va))


def _same_region(data: bytes) -> bytes:
    """65,535 section headers, every one the .nv_fatb of the first: read once."""
    row = bytes(data[section_row(0) : section_row(0) + 40])
    raw = struct.unpack_from("<I", data, section_row(0) + 20)[0]
    body = data[raw:]
    count = 0xFFFF
    table_end = section_row(0) + 40 * count
    start = (table_end + 0x1FF) // 0x200 * 0x200
    out = bytearray(data[: section_row(0)]) + row * count
    out += bytes(start - len(out)) + body
    for i in range(count):
        struct.pack_into("<I", out, section_row(i) + 20, start)
    struct.pack_into("<H", out, COFF_AT + 2, count)
    struct.pack_into("<I", out, IMPORT_DIR, 0)  # the .idata row is gone
    struct.pack_into("<I", out, DELAY_DIR, 0)
    return bytes(out)


def _long_name(data: bytes) -> bytes:
    """The .nv_fatb's name is "/99999999" and there is no string table: the name stays."""
    out = bytearray(data)
    out[section_row(0) : section_row(0) + 8] = b"/9999999"
    struct.pack_into("<II", out, COFF_AT + 8, 0xFFFFFFF0, 0xFFFFFFF)
    return bytes(out)


def read(path: Path, deep: bool) -> tuple[BinaryFacts, int]:
    """The row and the reader's work units."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as buf:
            reader = Reader(buf, size, deep, fd)
            return read_with(str(path), reader, "pe"), reader.work
    finally:
        os.close(fd)


@pytest.mark.parametrize("case", CASES)
def test_pe_class(case: Case, tmp_path: Path) -> None:
    built = case.build(tmp_path)
    path = built if isinstance(built, Path) else tmp_path / "hostile.dll"
    if not isinstance(built, Path):
        path.write_bytes(built)
    for deep in (False, True):
        facts, work = read(path, deep)
        assert facts == read_binary(str(path), deep)  # the same row through the file reader
        assert work <= case.max_work, work
        if case.reason:
            assert facts.error is not None and case.reason in facts.error, facts.error
            assert "\n" not in facts.error
        else:
            assert facts.error is None, facts.error
        assert facts.format == "pe"
        if case.listed:
            assert any(e.listed and e.section == ".nv_fatbin" for e in facts.entries)
        elif case.listed is False:
            assert facts.entries == ()
        else:  # the section is not called .nv_fatb(in): nothing listed, whatever deep finds
            assert not any(e.listed for e in facts.entries)
        if case.needed != "any":
            assert facts.needed == case.needed


def test_a_whole_dll_reads_as_built() -> None:
    """The control: the builder's DLL gives the fixture's containers and its two imports."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "whole.dll"
        path.write_bytes(fatbin_dll())
        facts, _ = read(path, False)
    assert facts.error is None and facts.machine == "x86-64"
    assert facts.needed == ("cudart64_13.dll", "cublas64_13.dll")
    assert facts.entries and all(e.section == ".nv_fatbin" for e in facts.entries)


def test_mutated_dlls_never_raise(tmp_path: Path) -> None:
    """The fuzz campaign's mutations (tests/fuzzing.py) over a built DLL and a real ARM64 one
    where present: no exception, no impossible row, bounded work."""
    import random

    originals = [fatbin_dll()]
    path = tmp_path / "case.dll"
    failures = []
    for index in range(300):
        rng = random.Random(31 * 1000 + index)
        data = mutate_binary(rng, originals[index % len(originals)])
        path.write_bytes(data)
        deep = bool(index % 2)
        facts, work = read(path, deep)
        problems = binary_violations(facts, len(data)) if facts.format == "pe" else []
        if problems or work > 2_000_000:
            failures.append(f"case {index}: {problems} work {work}")
    assert not failures, failures[:5]
    assert pe.MAX_IMPORTS == 4096
