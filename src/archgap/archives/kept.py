"""What a stream pass kept of a member (``streamread``), read like the member's bytes: ``Kept``
answers slices of the kept ranges and searches for the needles whose positions were noted,
``KeptReader`` whether a range is zero; anything else raises ``NotRecorded``."""

from __future__ import annotations

import bisect
import re
import zlib
from collections.abc import Mapping
from typing import Any, Protocol

from archgap.probe.binary.binreader import ZERO_CHUNK, NotRecorded, Reader

NONZERO = re.compile(rb"[^\0]")


class Collector(Protocol):
    """What a stream pass (``streamread.Collector``) kept, as ``Kept`` and ``KeptReader`` read
    it (a protocol, so that this module does not import the one that imports it)."""

    @property
    def size(self) -> int: ...
    @property
    def needles(self) -> Mapping[bytes, Any]: ...  # needle -> array("q") of its positions
    @property
    def lost_at(self) -> int: ...
    @property
    def told(self) -> Mapping[int, bool | None]: ...
    @property
    def pins(self) -> Mapping[int, bytes]: ...
    @property
    def packed(self) -> Mapping[int, tuple[int, bytes]]: ...
    @property
    def nonzero(self) -> Mapping[int, int]: ...
    @property
    def zeros_before(self) -> Mapping[int, int]: ...


class Kept:
    """The bytes a stream pass kept, read like the member's bytes (offsets are the member's).

    Slices of kept ranges are bytes; searches for the container magic and the cubin ident are
    answered from the positions found; anything else raises ``NotRecorded``."""

    def __init__(self, collector: Collector) -> None:
        self.size = collector.size
        self.needles = collector.needles
        self.lost_at = collector.lost_at  # from here on, not every position or header was kept
        self.told_kernels = collector.told  # content.has_kernel's answers, found as they went by
        pins = collector.pins
        self.packed = sorted(collector.packed.items())  # (start, (length, zlib data))
        self.packed_starts = [start for start, _ in self.packed]
        self.unpacked: tuple[int, bytes] = (-1, b"")  # the last packed block read
        self.starts: list[int] = []
        self.blocks: list[bytes] = []
        for start in sorted(pins):
            block = pins[start]
            if self.starts and start <= self.starts[-1] + len(self.blocks[-1]):
                last = self.blocks[-1]
                keep = start + len(block) - self.starts[-1] - len(last)
                if keep > 0:
                    self.blocks[-1] = last + block[len(block) - keep :]
            else:
                self.starts.append(start)
                self.blocks.append(block)

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            start = min(index.start or 0, self.size)
            stop = self.size if index.stop is None else min(index.stop, self.size)
            return self.read(start, max(start, stop))
        return self.read(index, index + 1)[0]

    def read(self, start: int, stop: int) -> bytes:
        if start == stop:
            return b""
        i = bisect.bisect_right(self.starts, start) - 1
        if i >= 0 and stop <= self.starts[i] + len(self.blocks[i]):
            at = start - self.starts[i]
            return self.blocks[i][at : at + stop - start]
        i = bisect.bisect_right(self.packed_starts, start) - 1
        if i >= 0 and stop <= self.packed_starts[i] + self.packed[i][1][0]:
            if self.unpacked[0] != i:
                self.unpacked = (i, zlib.decompress(self.packed[i][1][1]))
            at = start - self.packed_starts[i]
            return self.unpacked[1][at : at + stop - start]
        raise NotRecorded(
            f"streamed: bytes 0x{start:x}-0x{stop:x} were not kept as the member went by"
        )

    def find(self, needle: bytes, start: int, end: int | None = None) -> int:
        end = self.size if end is None else min(end, self.size)
        positions = self.needles.get(needle)
        if positions is None:
            block = self.read(start, end)  # a search inside kept bytes
            found = block.find(needle)
            return start + found if found >= 0 else -1
        i = bisect.bisect_left(positions, start)
        if i < len(positions) and positions[i] + len(needle) <= end:
            return int(positions[i])
        if end > self.lost_at:
            raise NotRecorded(f"streamed: positions past 0x{self.lost_at:x} were not kept")
        return -1


class KeptReader(Reader):
    """A ``Reader`` over ``Kept`` bytes: whether a range is zero comes from the first non-zero
    byte the stream saw after each position that can be asked about."""

    def __init__(self, kept: Kept, deep: bool, collector: Collector) -> None:
        super().__init__(kept, kept.size, deep)
        self.nonzero = collector.nonzero
        self.zeros_before = collector.zeros_before

    def padded_magic(self, pos: int, stop: int, magic: bytes) -> int:
        """The first magic in [pos, stop), if the zero bytes the stream saw before it reach
        back to ``pos``."""
        found = self.buf.find(magic, pos, stop)
        return found if found >= 0 and self.zeros_before.get(found, 0) >= found - pos else -1

    def is_zero(self, start: int, end: int) -> bool:
        first = self.nonzero.get(start)
        if first is None:
            block = self.buf[start:end]
            match = NONZERO.search(block)
            first = start + match.start() if match else end
        pos = start
        while pos < end:  # the work the file reader spends: its chunks, up to the non-zero one
            chunk = min(end, pos + ZERO_CHUNK)
            self.spend((chunk - pos) >> 10)
            if first < chunk:
                return False
            pos = chunk
        return True


__all__ = ["Kept", "KeptReader"]
