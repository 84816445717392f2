"""Several needles found in one pass over a file's bytes: Hyperscan's matcher, where the
``hyperscan`` package is installed (bytesearch.searcher asks for it with the needles a caller
will look for).

A linked library's strings are searched for four marks (rodata.search_all) and a deep read's data
sections for two needles (deepsearch): with ``memmem``, one pass over the bytes per needle (the
3-byte ``.so`` at ~1.3 GB/s). The matcher finds every needle in one pass. On torch 2.14.1+cu130's
site-packages (the bytes in memory, one CPU): the four marks over the 0.7 GB their regions cover,
0.23 s, where ``memmem`` took 0.60-0.68 s; a deep read's two needles, 0.36 s of scanning (its
page faults included) where ``memmem`` took 0.55 s.

The bytes are indexed a ``BLOCK`` at a time, as the caller's searches reach them: where each
needle starts in the block (and lies wholly in the searched range). A ``find`` is then a look-up,
and it answers as ``memmem`` does: the first place at or after ``first`` where the needle lies
wholly before ``stop``. Blocks a caller never searches (the containers a deep read steps over)
are never scanned. A block with more than ``MAX_BLOCK_PLACES`` places is not indexed; the caller's
own search (``plain``) looks through it, as it would without Hyperscan. Without the package, with
a binding that cannot compile the needles, or for a buffer that is not a file's mapping, there is no
index and the caller searches as before.
"""

from __future__ import annotations

import mmap
import threading
from bisect import bisect_left
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

Find = Callable[[bytes, int, int], int]  # (needle, start, end) -> offset, or -1

BLOCK = 256 << 10  # bytes indexed at once (a deep read's jumps over containers skip the rest)
MAX_BLOCK_PLACES = 4096  # places of all needles in a block kept at most; more: searched plainly

_hyperscan: Any = None  # the hyperscan module; False once known to be missing or unusable
# Each thread's compiled databases by needles (a database's scratch space serves one scan at a
# time: threads reading wheel members may search at once).
_databases = threading.local()


class BlockIndex:
    """Where ``needles`` start in ``buf``'s [``start``, ``end``), indexed a block at a time;
    ``find`` answers for them, ``plain`` for any other needle and any block not indexed."""

    def __init__(
        self, buf: Any, start: int, end: int, needles: Sequence[bytes], database: Any, plain: Find
    ) -> None:
        self.view = memoryview(buf)
        self.start, self.end = start, end
        self.order = {needle: i for i, needle in enumerate(needles)}
        self.lengths = [len(needle) for needle in needles]
        self.longest = max(self.lengths)
        self.database = database
        self.plain = plain
        self.blocks: Dict[int, Optional[List[List[int]]]] = {}

    def close(self) -> None:
        self.view.release()

    def find(self, needle: bytes, first: int, stop: int) -> int:
        """The first place at or after ``first`` where ``needle`` lies wholly before ``stop``
        (both within the indexed range), or -1."""
        index = self.order.get(needle)
        if index is None:
            return self.plain(needle, first, stop)
        first, stop = max(first, self.start), min(stop, self.end)
        size = self.lengths[index]
        block = first // BLOCK
        while block * BLOCK <= stop - size:  # a place in this block could still fit
            places = self._places(block)
            if places is None:  # too many places to index: this block searched plainly
                at = self.plain(needle, first, min(stop, (block + 1) * BLOCK + size - 1))
                if at >= 0:
                    return at
            else:
                found = places[index]
                i = bisect_left(found, first)
                if i < len(found):
                    return found[i] if found[i] + size <= stop else -1
            block += 1
            first = block * BLOCK
        return -1

    def _places(self, block: int) -> Optional[List[List[int]]]:
        """Where each needle starts in ``block`` (lying wholly in the indexed range), or None
        when the block holds more than ``MAX_BLOCK_PLACES`` (or cannot be scanned)."""
        if block in self.blocks:
            return self.blocks[block]
        low = max(self.start, block * BLOCK)
        high = min(self.end, (block + 1) * BLOCK + self.longest - 1)
        span = (block + 1) * BLOCK - low  # a place that starts past it is the next block's
        found: List[List[int]] = [[] for _ in self.lengths]
        count = 0
        lengths = self.lengths

        def on_match(index: int, _first: int, last: int, _flags: int, _context: Any) -> bool:
            nonlocal count
            at = last - lengths[index]
            if at < span:
                found[index].append(low + at)
                count += 1
            return count > MAX_BLOCK_PLACES  # True ends the scan

        places: Optional[List[List[int]]] = found
        try:
            with self.view[low:high] as piece:
                self.database.scan(piece, match_event_handler=on_match)
        except Exception:  # ScanTerminated (too many places), or any failure: searched plainly
            places = None
        for each in places or ():  # (matches come by end offset: sorting costs ~nothing)
            each.sort()
        self.blocks[block] = places
        return places


def block_index(
    buf: Any, start: int, end: int, needles: Sequence[bytes], plain: Find
) -> Optional[BlockIndex]:
    """An index of ``needles`` over ``buf``'s [``start``, ``end``) (a file's mapping), or None
    where there can be none (no usable ``hyperscan``, another kind of buffer, no needles)."""
    if not needles or not isinstance(buf, mmap.mmap):
        return None
    unique = tuple(dict.fromkeys(needles))
    database = _database(unique)
    if database is None:
        return None
    try:
        return BlockIndex(buf, start, end, unique, database, plain)
    except (TypeError, ValueError, BufferError):  # a closed mapping, no buffer to export
        return None


def _database(needles: Tuple[bytes, ...]) -> Any:
    """This thread's Hyperscan database of ``needles`` (their bytes, exactly), compiled once;
    None when there is no usable ``hyperscan``."""
    global _hyperscan
    if _hyperscan is None:
        try:
            import hyperscan

            _hyperscan = hyperscan
        except ImportError:
            _hyperscan = False
    if not _hyperscan:
        return None
    cache: Dict[Tuple[bytes, ...], Any] = getattr(_databases, "cache", None) or {}
    _databases.cache = cache
    if needles not in cache:
        try:
            database = _hyperscan.Database(mode=_hyperscan.HS_MODE_BLOCK)
            # Each byte as an escape: the binding hands a literal on as a C string, so one
            # with a zero byte (the container header's) would end there.
            expressions = [b"".join(b"\\x%02x" % byte for byte in n) for n in needles]
            database.compile(
                expressions=expressions, ids=list(range(len(needles))),
                elements=len(needles), flags=0,
            )  # fmt: skip
        except Exception:  # a binding or a platform it cannot compile for
            _hyperscan = False
            return None
        cache[needles] = database
    return cache[needles]


__all__ = ["BLOCK", "MAX_BLOCK_PLACES", "BlockIndex", "block_index"]
