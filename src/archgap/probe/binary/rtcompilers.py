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
  (NVIDIA's NVVM inside NVRTC is LLVM-based and carries the same triple and tables — the
  NVVM IR specification's target triple is ``nvptx64-nvidia-cuda``; every NVRTC at hand has it:
  12.6, 13.0, cuDNN 9's 13.3, warp's 13.4 — so the NVRTC mark is looked for only in an image
  that has the triple, and where both are found the image's compiler is NVRTC.)

kb/runtime_compilers.json holds these markers with their sources (a unit test holds the two
equal: this module travels without the kb). The read-only data of probe.binary.rodata is
searched with ``memmem`` (bytesearch) for the triple in the pass the dlopen names and the banner
share (``triple_search``, ``compilers_found``: rodata.search_all), and its pages are handed back
after (binreader.release).
Of a streamed wheel member only the marks' places are kept (archives.streamread): the compiler
is named, its tables are not read. Cost: one mark (the triple) is looked for in every linked
image's read-only data, ~5 GB/s; the NVRTC mark and the tables only in the few with the triple
(torch 2.14.1+cu130's site-packages: 619 MB of read-only data in 120 images, 7 with the triple;
0.22 s of CPU for this module, 0.37 s when both marks were looked for everywhere).
"""

from __future__ import annotations

import mmap
import re
import struct
from typing import Any, List, Optional, Tuple

from .binreader import NotRecorded, Reader
from .bytesearch import searcher
from .elf import Sections
from .facts import RuntimeCompiler
from .rodata import Search, pieces, read_only_regions, readahead, search_one

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
# a streamed member keeps MATCH_MAX bytes at each of these (archives.streamread), MAX_HITS each
TABLE_LITERALS = tuple(LITERALS.values())


def runtime_compilers(reader: Reader, sections: Sections) -> Optional[Tuple[RuntimeCompiler, ...]]:
    """The run-time compilers in the read-only data of the image at the start of ``reader``:
    () when none; None when its bytes were not kept."""
    return compilers_found(reader, search_one(reader, triple_search(sections)))


def triple_search(sections: Sections) -> Search:
    """What to search the image's read-only data for first: NVPTX's target triple."""
    return Search(NVPTX_MARK, read_only_regions(sections), 1)


def compilers_found(
    reader: Reader, triple: Optional[Search]
) -> Optional[Tuple[RuntimeCompiler, ...]]:
    """The compilers of an image whose data was searched for the triple (``triple_search``):
    () without it; else NVRTC where its mark is found too, else NVPTX, with their tables;
    None when the bytes were not kept."""
    if triple is None or triple.failed:
        return None
    if not triple.hits:
        return ()
    # NVRTC carries NVVM, whose target triple is NVPTX's: its mark is looked for only in an
    # image that has the triple (one pass over the data of every other image, not two)
    regions = triple.regions
    try:
        nvrtc = search_one(reader, Search(NVRTC_MARK, regions, 1))
        if nvrtc is None:
            return None
        if nvrtc.hits:
            return (_nvrtc(reader, regions),)
        return (_nvptx(reader, regions),)
    except (NotRecorded, TypeError, ValueError, struct.error):
        return None


def _all(reader: Reader, pattern: Any, regions: List[Tuple[int, int]]) -> List[Any]:
    """The groups of each match of ``pattern``, found by its literal start with ``memmem`` and
    matched there (a regular expression over all of a 30 MB .rodata costs ~0.1 s)."""
    literal, buf = LITERALS[pattern], reader.buf
    found: List[Any] = []
    for first, start, stop, end in pieces(regions):
        if start == first:  # a table string's NUL may be the byte before the section
            start = max(0, start - 1)
        readahead(buf, start, end)
        with searcher(buf, start, end) as (find, _):
            try:  # a streamed member keeps the first MAX_HITS of each table string
                at = find(literal, start, end)
                while 0 <= at < stop and len(found) < MAX_HITS:
                    match = pattern.match(buf[at : min(end, at + MATCH_MAX)])
                    if match:
                        found.append(match.groups())
                    at = find(literal, at + 1, end)
            except NotRecorded:  # past what a streamed member kept: what was read counts
                return found
        reader.release(start - start % mmap.PAGESIZE, stop)
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


__all__ = ["compilers_found", "runtime_compilers", "triple_search"]
