"""How much one archive may inflate: the one rule against decompression bombs.

An archive (a wheel, a conda package) inflates ``MAX_INFLATED`` bytes at most, and a stream or
member larger than ``RATIO_MIN`` at most ``MAX_RATIO`` times its compressed bytes. Real packages
stay far inside both: flashinfer-cubin, the largest seen, inflates 427 MiB to 1.8 GB (4.3:1);
deflate's best is ~1032:1 (all zeros), zstd's and bzip2's far more. What is over a limit is not
inflated; the reason is reported and the rest of the archive is read.

A container image layer (a gzip or zstd tar) is one stream too, but far larger: CUDA images'
layers are GiBs compressed and inflate a few times that (tar compresses < 10:1). It inflates at
most the larger of ``LAYER_MAX_INFLATED`` and ``LAYER_SIZE_FACTOR`` times its compressed bytes,
and past ``LAYER_RATIO_MIN`` at most ``MAX_RATIO`` times them; what is past that is not read,
and the image's other layers are.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import IO

MAX_INFLATED = 8 << 30
MAX_RATIO = 200
RATIO_MIN = 16 << 20
LAYER_MAX_INFLATED = 64 << 30
LAYER_SIZE_FACTOR = 50
LAYER_RATIO_MIN = 4 << 30


class InflationLimit(Exception):
    """A stream inflated past what its archive may (``Inflated.allowed``): the reason."""


def ratio_refusal(size: int, compressed: int) -> str | None:
    """Why ``size`` bytes stored as ``compressed`` are not inflated (a bomb's ratio), or None."""
    if size > RATIO_MIN and size > MAX_RATIO * compressed:
        ratio = size // max(compressed, 1)
        return f"inflates {size} bytes from {compressed} ({ratio}:1, over the {MAX_RATIO}:1 limit)"
    return None


class Inflated:
    """The bytes one archive has inflated so far, against ``MAX_INFLATED``."""

    def __init__(self) -> None:
        self.total = 0

    def refusal(self, size: int, compressed: int) -> str | None:
        """Why a member of ``size`` bytes (``compressed`` stored) is not inflated, or None: then
        its bytes are counted."""
        why = ratio_refusal(size, compressed)
        if why is None and self.total + size > MAX_INFLATED:
            why = f"the archive would inflate past its {MAX_INFLATED >> 30} GiB limit"
        if why is None:
            self.total += size
        return why


def archive_allowance(compressed: int | None) -> tuple[int, str]:
    """(the bytes one compressed stream of an archive may inflate, the limits in words)."""
    allowed = MAX_INFLATED
    if compressed is not None:
        allowed = min(MAX_INFLATED, max(RATIO_MIN, MAX_RATIO * compressed))
    return allowed, f"{MAX_RATIO}:1, {MAX_INFLATED >> 30} GiB"


def layer_allowance(compressed: int | None) -> tuple[int, str]:
    """(the bytes an image layer of ``compressed`` bytes may inflate, the limits in words)."""
    words = (
        f"max({_size(LAYER_MAX_INFLATED)}, {LAYER_SIZE_FACTOR}x the layer), "
        f"{MAX_RATIO}:1 past {_size(LAYER_RATIO_MIN)}"
    )
    if compressed is None or compressed < 0:
        return LAYER_MAX_INFLATED, words
    allowed = min(
        max(LAYER_MAX_INFLATED, LAYER_SIZE_FACTOR * compressed),
        max(LAYER_RATIO_MIN, MAX_RATIO * compressed),
    )
    return allowed, words


def _size(size: int) -> str:
    return f"{size >> 30} GiB" if size >= 1 << 30 else f"{size >> 20} MiB"


class CappedStream(io.RawIOBase):
    """A decompressed stream (a conda package's zstd or bzip2 tar) that raises
    ``InflationLimit`` once it has given more than its archive may: ``MAX_INFLATED`` bytes, or,
    past ``RATIO_MIN``, ``MAX_RATIO`` times ``compressed`` (when that is known)."""

    def __init__(
        self,
        stream: IO[bytes],
        compressed: int | None,
        name: str,
        allowance: Callable[[int | None], tuple[int, str]] = archive_allowance,
    ) -> None:
        super().__init__()
        self.stream, self.name = stream, name
        self.allowed, self.limits = allowance(compressed)
        self.compressed = compressed
        self.given = 0

    def claim(self, size: int, what: str) -> None:
        """Before ``what`` (a tar member of ``size`` bytes) is read or skipped: both inflate it."""
        if self.given + size > self.allowed:
            raise self._over(f"{what} claims {size} bytes, past the {self.allowed} it may inflate")

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        want = self.allowed + 1 - self.given
        data = self.stream.read(want if size < 0 else min(size, want))
        self.given += len(data)
        if self.given > self.allowed:
            stored = "" if self.compressed is None else f" from {self.compressed}"
            raise self._over(f"inflates past {self.allowed} bytes{stored}")
        return data

    def _over(self, why: str) -> InflationLimit:
        return InflationLimit(f"{self.name}: {why} (limits: {self.limits})")


__all__ = [
    "LAYER_MAX_INFLATED",
    "LAYER_RATIO_MIN",
    "LAYER_SIZE_FACTOR",
    "MAX_INFLATED",
    "MAX_RATIO",
    "RATIO_MIN",
    "CappedStream",
    "Inflated",
    "InflationLimit",
    "archive_allowance",
    "layer_allowance",
    "ratio_refusal",
]
