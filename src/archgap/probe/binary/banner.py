"""The CUDA release a host ELF image was built with, told by the toolkit's banner in its data.

NVIDIA's tools write ``Cuda compilation tools, release X.Y, VX.Y.Z`` into what they make: ptxas
and nvlink into each cubin's ``.note.nv.tkinfo``, and the toolkit's static libraries keep it as
a string (the statically linked NVRTC of warp-lang 1.19.0's ``warp.so``: ``..., release 13.4,
V13.4.92, Build cuda_13.4.r1``). So a library that carries no device code a reader can walk
still says its CUDA: CUPTI 13 (``libcupti.so.13``, ``libcheckpoint.so``) keeps its cubins in
``.rodata`` and ``.data`` with notes ``release 13.3`` and ``13.5``; DALI's
``libdali_kernels.so`` (nvidia-dali-cuda130 2.4.0) compresses its listed cubins, while the
relocatable cubins of its ``__nv_relfatbin`` say ``release 13.4``. The newest release named
decides (the CUDA major a driver must run: analysis/verdicts/drivers.py).

Only allocated read-only data is searched (as probe.binary.rtcompilers: not code, not writable
data, not ``.nv_fatbin``, whose cubins' notes ``elf.py`` reads and whose size is the bulk of a
kernel library), at most ``rodata.MAX_DATA_BYTES`` per image and ``MAX_HITS`` banners, with
``memmem`` (bytesearch); pages are handed back after (binreader.release). It is read only for a
linked image whose cubins' notes named no release (hostelf). Cost: 37 ms summed over the 186
libraries (2.35 GiB) of tests/.data, within the noise of their plain read (docs/load-model.md,
check 2).
"""

from __future__ import annotations

import re
import struct
from typing import List, Optional, Tuple

from .binreader import NotRecorded, Reader
from .elf import Sections
from .rodata import Search, read_only_regions, search_one

MAX_HITS = 256  # banners read at most per image (CUPTI 13.5 holds 38 in .rodata)
MAX_PLACES = 16 * MAX_HITS  # places of its words looked at (a banner is not at every one)
LITERAL = b"Cuda compilation tools, release "
RELEASE = re.compile(rb"Cuda compilation tools, release (\d{1,3})\.(\d{1,3}),")
# read-only sections that hold no banner, or whose cubins are read by elf.py
NOT_DATA = (b".nv_fatbin", b".eh_frame", b".gcc_except_table", b".note", b".interp", b".gnu",
            b".dynstr", b".dynsym", b".rela", b".rel.", b".hash")  # fmt: skip


def cuda_release(reader: Reader, sections: Sections) -> Optional[str]:
    """The newest CUDA release ("13.4") a toolkit banner in the image's read-only data names;
    "" when none does; None when its bytes were not kept (a streamed wheel member)."""
    return release_found(reader, search_one(reader, banner_search(sections)))


def banner_search(sections: Sections) -> Search:
    """What to search the image's read-only data for: the banner's words."""
    return Search(LITERAL, read_only_regions(sections, _banner_section), MAX_PLACES)


def release_found(reader: Reader, search: Optional[Search]) -> Optional[str]:
    """The newest release the banners at ``search``'s places (``banner_search``) name; "" when
    none does; None when the bytes were not kept."""
    if search is None or search.failed:
        return None
    found: List[Tuple[int, int]] = []
    try:
        for at, _, last in search.hits:
            match = RELEASE.match(reader.buf[at : min(last, at + len(LITERAL) + 8)])
            if match:
                found.append((int(match.group(1)), int(match.group(2))))
                if len(found) >= MAX_HITS:
                    break
    except (NotRecorded, TypeError, ValueError, struct.error):
        return None
    return "%d.%d" % max(found) if found else ""


def _banner_section(name: str) -> bool:
    return not name.encode("utf-8", "replace").startswith(NOT_DATA)
