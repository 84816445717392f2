"""The CUDA release a compressed cubin's toolkit note names (fatcontainer, content.packed_toolkit).

The fixtures of tests/fixtures/cuda/bin are real nvcc builds: build.sh refuses any nvcc whose
``--version`` does not say "release 13.0", so every cubin in them was made by CUDA 13.0's ptxas,
which writes its banner ("Cuda compilation tools, release 13.0, V13.0.88") into each cubin's
.note.nv.tkinfo. libtiny_lz4.so and libnokernel_lz4.so were built with ``-Xfatbin=-compress-all
--compress-mode=speed``: every cubin LZ4-compressed; libcomp_all.so with ``-Xfatbin=-compress-all``
(CUDA 13's default mode): every cubin Zstandard-compressed. So their release, 13.0, is in
compressed cubins only. Before: () for all three (only cubins stored as is were read).

The note's own format (the ELF specification's note: namesz, descsz, type, the name, the
descriptor, each 4-byte aligned) is what ``elf.note_toolkit`` reads where the section table
that names the note lies past the bytes unpacked.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
import zstandard

from archgap.probe.binary import content
from archgap.probe.binary.elf import note_toolkit
from archgap.probe.binary.fatbin import read_binary

BIN = Path(__file__).resolve().parents[1] / "fixtures" / "cuda" / "bin"


def sass_compressions(name: str) -> set[str]:
    return {e.compression for e in read_binary(str(BIN / name)).entries if e.kind == "sass"}


@pytest.mark.parametrize("name", ["libtiny_lz4.so", "libnokernel_lz4.so"])
def test_lz4_cubins_name_the_toolkit_that_built_them(name: str) -> None:
    assert sass_compressions(name) == {"lz4"}  # no cubin is stored as is
    assert read_binary(str(BIN / name)).toolkits == ("13.0",)


def test_only_the_first_unpacked_bytes_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """libtiny_lz4.so's larger cubin unpacks to 2,984 bytes: `readelf -SW` of it puts
    .note.nv.tkinfo at 0x428 (0xa4 bytes, ending at 1,228) and the section table at 0x780
    (1,920). With 1,300 bytes unpacked the table is not at hand and the note is read by its own
    format; with 256 (the header and the section names) there is no note to read."""
    monkeypatch.setattr(content, "NOTE_PREFIX", 1300)
    assert read_binary(str(BIN / "libtiny_lz4.so")).toolkits == ("13.0",)
    monkeypatch.setattr(content, "NOTE_PREFIX", 256)
    assert read_binary(str(BIN / "libtiny_lz4.so")).toolkits == ()


def test_zstandard_cubins_where_the_interpreter_unpacks_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Python 3.14's compression.zstd, stood in for by the zstandard package (a real Zstandard
    decoder, the project's zstd extra) where the interpreter is older."""
    assert sass_compressions("libcomp_all.so") == {"zstd"}
    monkeypatch.setattr(content, "_zstd", lambda: zstandard)
    assert read_binary(str(BIN / "libcomp_all.so")).toolkits == ("13.0",)


def note(name: bytes, desc: bytes, kind: int = 2000) -> bytes:
    """An ELF note: namesz, descsz, type, the name and the descriptor padded to 4 bytes."""

    def pad(field: bytes) -> bytes:
        return field + bytes(-len(field) % 4)

    return struct.pack("<III", len(name), len(desc), kind) + pad(name) + pad(desc)


def test_a_note_is_read_by_its_format() -> None:
    banner = b"\0ptxas\0Cuda compilation tools, release 12.9, V12.9.86\0Build cuda_12.9\0"
    tkinfo = note(b"NVIDIA Corp\0", struct.pack("<4I", 2, 0, 1, 7) + banner)
    cuinfo = note(b"NVIDIA Corp\0", struct.pack("<2I", 1, 0x80), 1000)
    assert note_toolkit(bytes(64) + cuinfo + tkinfo) == "12.9"
    assert note_toolkit(bytes(64) + cuinfo) is None  # no banner in it
    assert note_toolkit(bytes(64) + note(b"GNU\0", banner)) is None  # not NVIDIA's
    assert note_toolkit(bytes(63) + tkinfo) is None  # notes are 4-byte aligned
