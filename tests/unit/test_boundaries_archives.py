"""Boundaries of the archive caps (archives/limits.py's documented policy: a member or stream
inflates at most MAX_INFLATED bytes in all, and past RATIO_MIN at most MAX_RATIO times its
compressed size; an image layer the larger of LAYER_MAX_INFLATED and LAYER_SIZE_FACTOR times its
compressed bytes, and past LAYER_RATIO_MIN at most MAX_RATIO times them). At the limit is
allowed; one byte past it is not."""

from __future__ import annotations

import io

import pytest

from archgap.archives.limits import (
    LAYER_MAX_INFLATED,
    LAYER_RATIO_MIN,
    LAYER_SIZE_FACTOR,
    MAX_INFLATED,
    MAX_RATIO,
    RATIO_MIN,
    CappedStream,
    Inflated,
    InflationLimit,
    archive_allowance,
    layer_allowance,
    ratio_refusal,
)


def test_the_ratio_applies_only_past_ratio_min() -> None:
    assert ratio_refusal(RATIO_MIN, 1) is None  # at RATIO_MIN: any ratio
    assert ratio_refusal(RATIO_MIN + 1, 1) is not None
    compressed = RATIO_MIN  # far past RATIO_MIN: exactly MAX_RATIO:1 is allowed
    assert ratio_refusal(MAX_RATIO * compressed, compressed) is None
    assert ratio_refusal(MAX_RATIO * compressed + 1, compressed) is not None


def test_an_archive_inflates_max_inflated_in_all() -> None:
    inflated = Inflated()
    member = 1 << 30  # 1 GiB stored as 100 MiB: a ratio of ~10:1
    for _ in range(MAX_INFLATED // member):
        assert inflated.refusal(member, 100 << 20) is None
    assert inflated.total == MAX_INFLATED
    assert inflated.refusal(1, 1) is not None  # one byte past the total


def test_a_streams_allowance() -> None:
    assert archive_allowance(None)[0] == MAX_INFLATED
    assert archive_allowance(1)[0] == RATIO_MIN  # a small stream may inflate RATIO_MIN
    assert archive_allowance(1 << 20)[0] == MAX_RATIO << 20
    assert archive_allowance(1 << 30)[0] == MAX_INFLATED


@pytest.mark.parametrize(
    ("compressed", "allowed"),
    [
        (None, LAYER_MAX_INFLATED),
        (10 << 20, LAYER_RATIO_MIN),  # a small layer: the ratio bound past LAYER_RATIO_MIN
        (1 << 30, LAYER_MAX_INFLATED),  # 50 GiB by its factor < 64 GiB
        (2 << 30, LAYER_SIZE_FACTOR * (2 << 30)),  # 100 GiB by its factor
    ],
)
def test_a_layers_allowance(compressed: int | None, allowed: int) -> None:
    assert layer_allowance(compressed)[0] == allowed


def test_a_capped_stream_gives_exactly_its_allowance() -> None:
    allowed = RATIO_MIN  # a 1-byte stream's allowance
    stream = CappedStream(io.BytesIO(b"\0" * (allowed + 1)), 1, "x.tar.zst")
    stream.claim(allowed, "member")  # a member exactly the allowance
    with pytest.raises(InflationLimit):
        stream.claim(allowed + 1, "member")
    assert len(stream.read(allowed)) == allowed
    with pytest.raises(InflationLimit):
        stream.read(1)
