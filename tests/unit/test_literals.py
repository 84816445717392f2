"""The one-pass search (probe/binary/literals.py) answers exactly as a byte string's own ``find``.

The oracle is Python's ``bytes.find(needle, start, end)``: the first place at or after ``start``
where the needle lies wholly before ``end``, or -1. Every query below is asked of a block index
over the same bytes (a file's mapping, as the readers have it) and of ``bytes.find``; block sizes
as small as a needle and a cap of a few places per block put block edges and the plain fallback
under every needle. Hyperscan is a dependency on Linux x86-64 CPython (pyproject.toml): there the
index must exist, so a missing or broken package fails here instead of passing as ``memmem``.
"""

from __future__ import annotations

import contextlib
import mmap
import platform
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archgap.probe.binary import literals
from archgap.probe.binary.bytesearch import searcher

REQUIRED = (
    sys.platform == "linux"
    and platform.machine() == "x86_64"
    and platform.python_implementation() == "CPython"
)  # where pyproject.toml installs hyperscan
# needles like the readers': a zero byte inside (the container header), a short one (".so"), a
# prefix of another, and one that overlaps itself
NEEDLES = (b"P\xedU\xba\x01\x00\x10\x00", b".so", b".so.1", b"aa", b"\x00\x00")
ALPHABET = b"P\xedU\xba\x01\x00\x10.so1a"


@contextlib.contextmanager
def mapped(tmp_path: Path, data: bytes) -> Iterator[mmap.mmap]:
    path = tmp_path / "data.bin"
    path.write_bytes(data or b"\x00")
    with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, prot=mmap.PROT_READ) as buf:
        yield buf


def need_hyperscan() -> None:
    """Go on where Hyperscan can be used; fail where pyproject.toml installs it and it cannot
    be (a missing or broken package would otherwise pass as ``memmem``); skip elsewhere."""
    if literals._database((b"\x00a",)) is not None:
        return
    if REQUIRED:
        pytest.fail("hyperscan is a dependency on this platform (pyproject.toml) and unusable")
    pytest.skip("hyperscan is installed only on Linux x86-64 CPython")


@settings(max_examples=150, deadline=None)
@given(
    data=st.lists(
        st.one_of(st.sampled_from(NEEDLES), st.binary(min_size=1, max_size=4)), max_size=60
    ).map(b"".join),
    block=st.integers(min_value=8, max_value=64),
    cap=st.integers(min_value=1, max_value=8),
    queries=st.lists(
        st.tuples(st.sampled_from(NEEDLES), st.integers(0, 400), st.integers(0, 400)), max_size=30
    ),
    bounds=st.tuples(st.integers(0, 40), st.integers(0, 40)),
)
def test_every_find_is_bytes_find(
    tmp_path_factory: pytest.TempPathFactory,
    data: bytes,
    block: int,
    cap: int,
    queries: list[tuple[bytes, int, int]],
    bounds: tuple[int, int],
) -> None:
    need_hyperscan()
    start, end = bounds[0], max(bounds[0], len(data) - bounds[1])
    tmp = tmp_path_factory.mktemp("literals")
    saved = literals.BLOCK, literals.MAX_BLOCK_PLACES
    literals.BLOCK, literals.MAX_BLOCK_PLACES = block, cap
    try:
        with mapped(tmp, data) as buf:
            raw = bytes(buf)

            def plain(needle: bytes, first: int, stop: int) -> int:
                return raw.find(needle, max(first, start), min(stop, end))

            index = literals.block_index(buf, start, end, NEEDLES, plain)
            assert index is not None
            try:
                # and at every place a needle starts: ranges that end inside it, just past it,
                # and that start on it or just after
                edges = [
                    (needle, first, stop)
                    for needle in NEEDLES
                    for at in _places(raw, needle)
                    for first in (at - 1, at, at + 1)
                    for stop in (at + len(needle) - 1, at + len(needle), at + len(needle) + block)
                ]
                for needle, first, stop in queries + edges:
                    expected = raw.find(needle, max(first, start), min(stop, end))
                    assert index.find(needle, first, stop) == expected, (needle, first, stop)
                assert index.find(b"1", start, end) == raw.find(b"1", start, end)  # not indexed
            finally:
                index.close()
    finally:
        literals.BLOCK, literals.MAX_BLOCK_PLACES = saved


def _places(data: bytes, needle: bytes) -> Iterator[int]:
    at = data.find(needle)
    while at >= 0:
        yield at
        at = data.find(needle, at + 1)


def test_a_needle_with_zero_bytes_is_found_where_it_starts(tmp_path: Path) -> None:
    # The binding hands a literal on as a C string: "P\xedU\xba\x01" alone would match 3 bytes
    # early (the container header's first zero ends it). Each byte goes as an escape instead.
    need_hyperscan()
    header = NEEDLES[0]
    data = b"P\xedU\xba\x01\x00\x11\x00" + b"x" * 100 + header + b"y" * 70_000
    with mapped(tmp_path, data) as buf, searcher(buf, 0, len(data), [header]) as (find, fast):
        assert fast and find(header, 0, len(data)) == 108 == data.find(header)


def test_without_hyperscan_the_search_is_memmem_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(literals, "_hyperscan", False)
    data = b"z" * 70_000 + b"libcuda.so.1\x00"
    with mapped(tmp_path, data) as buf:
        assert literals.block_index(buf, 0, len(data), [b".so"], buf.find) is None
        with searcher(buf, 0, len(data), [b".so"]) as (find, _):
            assert find(b".so", 0, len(data)) == data.find(b".so")


def test_only_a_files_mapping_is_indexed() -> None:
    # a streamed member's buffer raises on bytes it did not keep: its own search handles that
    assert literals.block_index(b"abc" * 30_000, 0, 90_000, [b"bca"], bytes.find) is None
