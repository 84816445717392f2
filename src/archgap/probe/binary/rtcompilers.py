"""Run-time compilers a host ELF image carries, told by its read-only data (not by its name).

A package that compiles device code while it runs keeps its compiler's tables as strings:

- NVRTC (statically linked, as warp-lang's ``warp.so``, or a bundled ``libnvrtc.so.N``) writes
  its diagnostics as ``nvrtc: error: ...`` and keeps the ``-arch=compute_XX`` option of each
  target it compiles for (its builtin list: ``compute_75`` ... ``compute_121f`` in NVRTC 13.x);
  the toolkit's banner ``Cuda compilation tools, release X.Y`` says which release it is.
- LLVM's NVPTX backend (taichi's ``taichi_python.so``) keeps its target triple
  ``nvptx64-nvidia-cuda`` and its subtarget tables, one description per processor and per PTX
  ISA feature: ``Target SM 8.6`` (``Target SM 86`` in newer LLVM), ``Use PTX version 7.5``
  (``Use PTX version 75``): the newest target it can emit and the newest PTX ISA.
  (NVIDIA's NVVM inside NVRTC is LLVM-based and carries the same tables: where NVRTC is
  found, the image's compiler is NVRTC.)

kb/runtime_compilers.json holds these markers with their sources (a unit test holds the two
equal: this module travels without the kb). Only allocated read-only sections are searched, at
most ``MAX_DATA_BYTES`` per image, with ``memmem`` (bytesearch), and their pages are handed
back after (binreader.release). Of a streamed wheel member only the marks' places are kept
(archives.streamread): the compiler is named, its tables are not read. Cost: the two marks are
looked for in every linked image's read-only data (on the 187 libraries, 2.35 GiB, of
tests/.data, warm: 0.37-0.52 s against 0.23-0.37 s without the search, three rounds at load 7;
most of it in the libraries that carry one).
"""

from __future__ import annotations

import contextlib
import mmap
import re
import struct
from typing import Any, List, Optional, Set, Tuple

from ..facts import RuntimeCompiler
from .binreader import NotRecorded, Reader
from .bytesearch import searcher
from .elf import SHF_EXECINSTR, SHT_PROGBITS, Sections

SHF_WRITE, SHF_ALLOC = 0x1, 0x2
MAX_DATA_BYTES = 1 << 30  # read-only data searched at most per image
MAX_HITS = 4096  # table strings read at most per pattern and image
MATCH_MAX = 64  # bytes one table string is matched in
NVRTC_MARK = b"nvrtc: error: "
NVPTX_MARK = b"nvptx64-nvidia-cuda\x00"
NVRTC_ARCH = re.compile(rb"\x00-arch=compute_(\d{2,3})([af]?)\x00")
NVPTX_SM = re.compile(rb"\x00Target SM (\d{1,2})\.?(\d)\x00")
NVPTX_PTX = re.compile(rb"\x00Use PTX version (\d{1,2})\.?(\d)\x00")
RELEASE = re.compile(rb"Cuda compilation tools, release (\d{1,3})\.(\d{1,3})")
# where each pattern starts: searched for with memmem, the pattern matched there
LITERALS = {
    NVRTC_ARCH: b"\0-arch=compute_",
    NVPTX_SM: b"\0Target SM ",
    NVPTX_PTX: b"\0Use PTX version ",
    RELEASE: b"Cuda compilation tools, release ",
}
# read-only sections that hold no compiler tables
NOT_DATA = (b".nv_fatbin", b"__nv_relfatbin", b".eh_frame", b".gcc_except_table", b".note",
            b".interp", b".gnu", b".dynstr", b".dynsym", b".rela", b".rel.", b".hash")  # fmt: skip


def runtime_compilers(reader: Reader, sections: Sections) -> Optional[Tuple[RuntimeCompiler, ...]]:
    """The run-time compilers in the read-only data of the image at the start of ``reader``:
    () when none; None when its bytes were not kept."""
    buf = reader.buf
    try:
        regions = _regions(sections)
        marks: Set[bytes] = set()
        for start, end in regions:
            if hasattr(buf, "madvise"):  # read front to back: read-ahead, as search_section
                aligned = start - start % mmap.PAGESIZE
                with contextlib.suppress(OSError, ValueError, AttributeError):
                    buf.madvise(mmap.MADV_NORMAL, aligned, end - aligned)
            with searcher(buf, start, end) as (find, _):
                marks.update(m for m in (NVRTC_MARK, NVPTX_MARK) if find(m, start, end) >= 0)
            reader.release(start - start % mmap.PAGESIZE, end)  # the page cache keeps them
        if NVRTC_MARK in marks:
            return (_nvrtc(reader, regions),)
        if NVPTX_MARK in marks:
            return (_nvptx(reader, regions),)
    except (NotRecorded, TypeError, ValueError, struct.error):
        return None
    return ()


def _regions(sections: Sections) -> List[Tuple[int, int]]:
    regions: List[Tuple[int, int]] = []
    budget = MAX_DATA_BYTES
    for i, (kind, flags) in enumerate(zip(sections.types, sections.flags)):
        if kind != SHT_PROGBITS or flags & (SHF_WRITE | SHF_EXECINSTR) or not flags & SHF_ALLOC:
            continue
        if sections.name(i).encode("utf-8", "replace").startswith(NOT_DATA) or budget <= 0:
            continue
        size = min(sections.sizes[i], budget)
        budget -= size
        regions.append((sections.offsets[i], sections.offsets[i] + size))
    return regions


def _all(reader: Reader, pattern: Any, regions: List[Tuple[int, int]]) -> List[Any]:
    """The groups of each match of ``pattern``, found by its literal start with ``memmem`` and
    matched there (a regular expression over all of a 30 MB .rodata costs ~0.1 s)."""
    literal, buf = LITERALS[pattern], reader.buf
    found: List[Any] = []
    for start, end in regions:
        start = max(0, start - 1)
        with searcher(buf, start, end) as (find, _):
            try:
                at = find(literal, start, end)
            except NotRecorded:  # a streamed member keeps the marks, not the tables
                return found
            while at >= 0 and len(found) < MAX_HITS:
                match = pattern.match(buf, at, min(end, at + MATCH_MAX))
                if match:
                    found.append(match.groups())
                at = find(literal, at + 1, end)
        reader.release(start - start % mmap.PAGESIZE, end)
    return found


def _nvrtc(reader: Reader, regions: List[Tuple[int, int]]) -> RuntimeCompiler:
    targets = sorted({int(arch) for arch, _ in _all(reader, NVRTC_ARCH, regions)})
    releases = sorted({(int(a), int(b)) for a, b in _all(reader, RELEASE, regions)})
    release = "%d.%d" % releases[-1] if releases else None
    return RuntimeCompiler("nvrtc", tuple(targets), None, release)


def _nvptx(reader: Reader, regions: List[Tuple[int, int]]) -> RuntimeCompiler:
    targets = sorted({int(a) * 10 + int(b) for a, b in _all(reader, NVPTX_SM, regions)})
    isas = sorted({(int(a), int(b)) for a, b in _all(reader, NVPTX_PTX, regions)})
    return RuntimeCompiler("nvptx", tuple(targets), "%d.%d" % isas[-1] if isas else None, None)


__all__ = ["runtime_compilers"]
