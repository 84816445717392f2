"""Whether a fatbin entry holds a kernel, told by its content: a ``.text`` section in a cubin,
an ``.entry`` directive in PTX (kb/roles.json "kernel_less").

An entry is looked at only while it is small (``fatcontainer.KERNEL_CHECK_MAX`` bytes
unpacked): nvlink's kernel-less stubs are a few KiB (libcudnn_ext.so.9's, CUDA 12: 960-4,840 B),
while a library's real cubins are often megabytes. A compressed payload is unpacked first: LZ4 (what
CUDA 12's ``-Xfatbin=-compress-all`` writes) here, in a few lines of Python; Zstandard (CUDA
12.8+'s ``--compress-mode=size``, CUDA 13's default for compressed cubins) only where the
interpreter has it (``compression.zstd``, Python 3.14). What cannot be looked at is None: not
known to be kernel-less, so it is judged as a kernel.

Whether a cubin is relocatable (``is_relocatable``) needs only its ELF header: the first bytes
of a cubin stored as is or LZ4-compressed (a few sequences unpacked), not of a Zstandard one.
What cannot be read is None: not known to be a link input, so it counts as loadable.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Optional, Tuple

from .binreader import NotRecorded
from .elf import ET_EXEC, ET_REL, cubin_has_text, cubin_toolkit, note_toolkit

PTX_ENTRY = re.compile(rb"(?:^|\s)\.entry\s")  # the directive of a kernel (PTX ISA, 11.1)


def has_kernel(
    buf: Any, payload: int, stored: int, unpacked: int, kind: str, compression: str
) -> Optional[bool]:  # kind: "sass" or "ptx"
    """Whether the entry whose payload is ``buf[payload : payload + stored]`` holds a kernel;
    None when its compression cannot be unpacked here or its bytes were not kept (a streamed
    member). A streamed member's bytes (``archives.kept.Kept``) carry the answers
    found as its payloads went by (``told_kernels``), in place of the payloads."""
    told = getattr(buf, "told_kernels", None)
    if told is not None and payload in told:
        return told[payload]  # type: ignore[no-any-return]
    try:
        raw = bytes(buf[payload : payload + stored])
    except NotRecorded:
        return None
    data: Optional[bytes] = raw
    if compression == "lz4":
        data = lz4_block(raw, unpacked)
    elif compression == "zstd":
        data = zstd_frame(raw, unpacked)
    elif compression != "none":
        return None
    if data is None:
        return None
    if kind == "ptx":
        return PTX_ENTRY.search(data) is not None
    return cubin_has_text(data, 0, len(data))


E_TYPE_AT = 16  # e_type: a 16-bit field after the 16-byte e_ident
PREFIX_STORED = 256  # stored bytes unpacked for a cubin's ELF header (64 bytes) at most


def is_relocatable(
    buf: Any, payload: int, stored: int, unpacked: int, compression: str
) -> Optional[bool]:
    """Whether the cubin whose payload is ``buf[payload : payload + stored]`` is relocatable
    device code (ELF type ET_REL: an input to nvlink, cuLink* or nvJitLink, which must be
    device-linked before it loads) rather than a linked one (ET_EXEC); None when its header
    cannot be read here: Zstandard (a block, up to 128 KiB, unpacks only whole), bytes not
    kept."""
    if compression not in ("none", "lz4"):
        return None
    try:
        head: Optional[bytes] = bytes(buf[payload : payload + min(stored, PREFIX_STORED)])
    except NotRecorded:
        return None
    if compression == "lz4" and head is not None:
        head = lz4_prefix(head, unpacked, E_TYPE_AT + 2)
    if head is None or len(head) < E_TYPE_AT + 2 or head[:4] != b"\x7fELF":
        return None
    e_type = head[E_TYPE_AT] | head[E_TYPE_AT + 1] << 8  # cubins are little-endian
    return e_type == ET_REL if e_type in (ET_REL, ET_EXEC) else None


# Unpacked bytes of a compressed cubin looked at for its toolkit note at most: the note follows
# its name, string and symbol tables. In the 800 noted cubins of 41 CUDA 13 libraries (torch
# 2.14.1+cu130's nvidia/cu13, cuFFT 12.0) it starts 2.4 KiB in (median), within 16 KiB in 89%,
# 64 KiB in 94%; a file's first 16 cubins are looked at, and one note names its release. A
# cubin without a note (CUDA < 12.8) costs its whole prefix: the five all-LZ4 CUDA 12 libraries
# of tests/.data read in 0.117 s of CPU, 0.088 s when compressed cubins were not looked at.
NOTE_PREFIX = 16 << 10


def packed_toolkit(
    buf: Any, payload: int, stored: int, unpacked: int, compression: str
) -> Optional[str]:
    """The CUDA release the toolkit note of the compressed cubin whose payload is
    ``buf[payload : payload + stored]`` names; None when it has none in its first
    ``NOTE_PREFIX`` unpacked bytes, or cannot be unpacked here. LZ4: only the first
    ``NOTE_PREFIX`` bytes are unpacked (a sequence's literals are stored as they are, so that
    many bytes come from as many stored ones and a byte per 255 of their lengths); Zstandard,
    where the interpreter has it, whole, if it unpacks to ``NOTE_PREFIX`` bytes at most."""
    span = note_span(stored, unpacked, compression)
    if not span:
        return None
    src = bytes(buf[payload : payload + span])
    if compression == "lz4":
        data = lz4_prefix(src, unpacked, min(unpacked, NOTE_PREFIX))
    else:
        data = zstd_frame(src, unpacked)
    if data is None:
        return None
    return cubin_toolkit(data, 0, len(data)) or note_toolkit(data)


def note_span(stored: int, unpacked: int, compression: str) -> int:
    """The stored bytes of a compressed cubin that ``packed_toolkit`` reads: 0 when none."""
    want = min(unpacked, NOTE_PREFIX)
    if compression == "lz4":
        return min(stored, want + want // 255 + 64)
    if compression == "zstd" and unpacked <= NOTE_PREFIX and _zstd() is not None:
        return stored
    return 0


def lz4_block(src: bytes, size: int) -> Optional[bytes]:
    """An LZ4 block (https://github.com/lz4/lz4/blob/dev/doc/lz4_Block_format.md) unpacked to
    ``size`` bytes; None when it is not one."""
    out = _lz4(src, size, size)
    return out if out is not None and len(out) == size else None


def lz4_prefix(src: bytes, size: int, want: int) -> Optional[bytes]:
    """The first ``want`` bytes of an LZ4 block that unpacks to ``size`` bytes, from the start
    of its stored bytes ``src`` (a cubin's ELF header: a few sequences); None when they do not
    give that many."""
    out = _lz4(src, size, want)
    return out[:want] if out is not None and len(out) >= want else None


def _lz4(src: bytes, size: int, want: int) -> Optional[bytes]:
    """Sequences of the LZ4 block ``src`` unpacked until ``want`` bytes are out (or it ends);
    None when it breaks the format or ``size``."""
    out = bytearray()
    at, end = 0, len(src)
    try:
        while at < end and len(out) < want:
            token = src[at]
            at += 1
            length, at = _extended(src, at, token >> 4)
            out += src[at : at + length]
            at += length
            if at >= end or len(out) >= want:
                break  # the last sequence has literals only
            offset = src[at] | src[at + 1] << 8
            at += 2
            length, at = _extended(src, at, token & 15)
            length += 4
            start = len(out) - offset
            if offset == 0 or start < 0 or len(out) + length > size:
                return None
            if length <= offset:
                out += out[start : start + length]
            else:  # the match overlaps what it writes: a repeated pattern
                pattern = bytes(out[start:])
                out += (pattern * (length // offset + 1))[:length]
    except IndexError:
        return None
    return bytes(out)


def _extended(src: bytes, at: int, length: int) -> Tuple[int, int]:
    """A 4-bit length of 15 goes on in the bytes that follow, each adding up to 255 (the LZ4
    block format's length extension); the full length and the position after it."""
    if length == 15:
        while True:
            more = src[at]
            at += 1
            length += more
            if more != 255:
                break
    return length, at


@functools.lru_cache(maxsize=None)
def _zstd() -> Any:
    """Python 3.14's compression.zstd, or None: looked for once (a failed import is not cached
    by Python, and searching sys.path for it per entry cost a torch scan 0.9 s)."""
    try:
        from compression import zstd  # type: ignore[import-not-found,unused-ignore]  # novm
    except ImportError:
        return None
    return zstd


def zstd_frame(src: bytes, size: int) -> Optional[bytes]:
    """A Zstandard frame unpacked, where the interpreter can (Python 3.14's compression.zstd)."""
    zstd = _zstd()
    if zstd is None:
        return None
    try:
        data = zstd.decompress(src)
    except Exception:  # zstd.ZstdError, or a damaged frame in any other way
        return None
    return data if len(data) == size else None


__all__ = [
    "has_kernel",
    "is_relocatable",
    "lz4_block",
    "lz4_prefix",
    "note_span",
    "packed_toolkit",
    "zstd_frame",
]
