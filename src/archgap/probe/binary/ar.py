"""Static archives (``ar``): each member that is an ELF image is read as one.

GNU long names (the ``//`` member), BSD names (``#1/N``) and the symbol tables are understood;
a thin archive (``!<thin>``) only names separate files and holds no code (``fatbin`` says so).
"""

from __future__ import annotations

from typing import Any, Tuple

from .binreader import Reader
from .elf import ELF_MAGIC
from .hostelf import read_elf

AR_MAGIC = b"!<arch>\n"
THIN_AR_MAGIC = b"!<thin>\n"
MAX_LONG_NAMES = 16 << 20  # bytes kept of an archive's long-name table


def _member_name(buf: Any, raw_name: bytes, data: int, long_names: bytes) -> Tuple[str, int]:
    """(member name, where its data starts): GNU's "name/" and "/N" (an offset into the long
    names of "//"), BSD's "#1/N" (the name's N bytes lead the data)."""
    name = raw_name.decode("utf-8", "replace")
    if raw_name == b"//":
        return name, data
    if raw_name.startswith(b"#1/"):  # BSD: the name follows the header
        try:
            name_len = int(raw_name[3:])
        except ValueError:
            name_len = 0
        name = buf[data : data + name_len].rstrip(b"\0").decode("utf-8", "replace")
        return name, data + name_len
    if raw_name.startswith(b"/") and raw_name[1:].isdigit():
        at = int(raw_name[1:])
        stop = long_names.find(b"/\n", at)
        return long_names[at : stop if stop >= 0 else None].decode("utf-8", "replace"), data
    if raw_name.endswith(b"/") and raw_name not in (b"/", b"/SYM64/"):
        return name[:-1], data
    return name, data


def read_archive(reader: Reader) -> None:
    buf = reader.buf
    pos = len(AR_MAGIC)
    long_names = b""
    while pos + 60 <= reader.size:
        header = buf[pos : pos + 60]
        if header[58:60] != b"`\n":
            reader.fail("archive: corrupt member header at 0x%x" % pos)
            return
        raw_name = header[0:16].rstrip(b" ")
        size_field = header[48:58].strip() or b"0"
        if not size_field.isdigit():  # int() takes "-60": the walk would loop back forever
            reader.fail("archive: corrupt member size at 0x%x" % pos)
            return
        size = int(size_field)
        data = pos + 60
        end = data + size
        if end > reader.size:
            reader.fail("truncated: archive member at 0x%x runs past the end" % pos)
            end = reader.size
        if raw_name == b"//":
            long_names = bytes(buf[data : min(end, data + MAX_LONG_NAMES)])
        name, data = _member_name(buf, raw_name, data, long_names)
        if raw_name not in (b"/", b"//", b"/SYM64/") and buf[data : data + 4] == ELF_MAGIC:
            read_elf(reader, data, end, name)
        pos = end + (end & 1)  # members are 2-byte aligned
