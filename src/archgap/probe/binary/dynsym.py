"""The dynamic symbol table of a host ELF image: which names it imports (undefined symbols).

Read from ``.dynsym`` and ``.dynstr`` only: a caller finds the names it wants in ``.dynstr``
(``dynstr``), and the symbol table is read only when one is there (``undefined_at``).
"""

from __future__ import annotations

import struct
import sys
from typing import Any, Collection, List, Optional, Set, Tuple

from .elf import Sections

SHT_DYNSYM = 11
SHN_UNDEF = 0
ELF64_SYM = struct.Struct("<IBBHQQ")  # st_name, st_info, st_other, st_shndx, st_value, st_size
MAX_DYNSYM_BYTES = 64 << 20  # a symbol table read at most (libtorch_cuda.so: ~5 MiB)


def dynstr(sections: Sections) -> Optional[Tuple[int, int]]:
    """(offset, size) of the image's ``.dynstr``; None without it or without a ``.dynsym``."""
    strings = sections.named(b".dynstr")
    if not strings or SHT_DYNSYM not in sections.types:
        return None
    return sections.offsets[strings[0]], sections.sizes[strings[0]]


def undefined_at(buf: Any, sections: Sections, spots: Collection[int]) -> Set[int]:
    """The offsets among ``spots`` (relative to ``.dynstr``) where the name of an undefined
    symbol of ``.dynsym`` starts (names may share a tail, so a start need not follow a NUL)."""
    table = sections.types.index(SHT_DYNSYM)
    offset = sections.offsets[table]
    size = min(sections.sizes[table], MAX_DYNSYM_BYTES)
    raw = bytes(buf[offset : offset + size - size % ELF64_SYM.size])
    if sys.byteorder == "little":
        names: List[int] = memoryview(raw).cast("I")[0::6].tolist()
        shndx: List[int] = memoryview(raw).cast("H")[3::12].tolist()
    else:
        rows = list(ELF64_SYM.iter_unpack(raw))
        names, shndx = [r[0] for r in rows], [r[3] for r in rows]
    return {n for n, s in zip(names, shndx) if s == SHN_UNDEF and n in spots}
