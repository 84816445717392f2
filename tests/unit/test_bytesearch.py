"""The deep search's byte search: libc memmem through ctypes finds exactly what ``find`` finds.

memmem only serves ranges of at least MEMMEM_MIN bytes, which no fixture's data section reaches:
the deep-search test below builds such a range from the real nvcc-built k.fatbin and k_sm86.cubin.
"""

from __future__ import annotations

import mmap
import random
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archgap.probe.binary import bytesearch, deepsearch
from archgap.probe.binary.binreader import Reader
from archgap.probe.binary.bytesearch import searcher
from archgap.probe.binary.deepsearch import CONTAINER_START, search_section
from archgap.probe.binary.elf import CUBIN_IDENT
from archgap.probe.binary.fatcontainer import CONTAINER_MAGIC

BIN = Path(__file__).resolve().parents[1] / "fixtures" / "cuda" / "bin"
NEEDLES = [CONTAINER_START, CONTAINER_MAGIC, CUBIN_IDENT]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc/musl: memmem")
def test_memmem_serves_large_ranges_on_linux() -> None:
    data = bytes(bytesearch.MEMMEM_MIN)
    with searcher(data, 0, len(data)) as (_, fast):
        assert fast
    with searcher(data, 0, bytesearch.MEMMEM_MIN - 1) as (find, fast):
        assert not fast and find == data.find  # too small to pay for the ctypes set-up


# Haystacks made of the pieces that matter: needles, their prefixes (partial matches), zeros
# and other bytes, so that hits land at the start, the end and across the range's edges.
PIECES = st.sampled_from(
    [*NEEDLES, CUBIN_IDENT[:5], CONTAINER_START[:6], b"\0" * 9, b"\x01\x50", b"\xba\x7f", b"x"]
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    pieces=st.lists(PIECES, max_size=40),
    needle=st.sampled_from(NEEDLES),
    bounds=st.tuples(st.integers(0, 400), st.integers(0, 400)),  # offsets: never negative
)
def test_memmem_finds_the_first_hit_find_finds(
    monkeypatch: pytest.MonkeyPatch, pieces: list[bytes], needle: bytes, bounds: tuple[int, int]
) -> None:
    monkeypatch.setattr(bytesearch, "MEMMEM_MIN", 0)
    data = b"".join(pieces)
    start, end = bounds
    with searcher(data, 0, 1) as (find, fast):
        assert fast or not sys.platform.startswith("linux")
        assert find(needle, start, end) == data.find(needle, start, end)


def test_a_read_only_mapping_is_searched_and_can_be_closed_after(tmp_path: Path) -> None:
    path = tmp_path / "data"
    data = bytearray(random.Random(7).randbytes(3 * bytesearch.MEMMEM_MIN))
    data[-7:] = CUBIN_IDENT  # the very last bytes
    data[1000:1008] = CONTAINER_START
    path.write_bytes(data)
    with path.open("rb") as file:
        buf = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        with pytest.raises(KeyError), searcher(buf, 0, len(buf)) as (find, _):
            assert find(CUBIN_IDENT, 0, len(buf)) == len(buf) - 7
            assert find(CUBIN_IDENT, 0, len(buf) - 1) == -1  # must lie wholly in the range
            assert find(CONTAINER_START, 1001, len(buf) + 99) == -1
            assert find(CONTAINER_START, 0, len(buf)) == 1000
            raise KeyError("left early")
        buf.close()  # the buffer export was released: an mmap with exports cannot close


def test_an_object_without_the_buffer_protocol_is_searched_with_its_find() -> None:
    class Text:
        def find(self, needle: bytes, start: int, end: int) -> int:
            return 42

    with searcher(Text(), 0, 1 << 30) as (find, fast):
        assert not fast and find(CUBIN_IDENT, 0, 9) == 42


def _found(data: bytes) -> Counter[tuple[str, int]]:
    reader = Reader(data, len(data), True)
    search_section(reader, 0, len(data), ".rodata", None)
    assert reader.error_text() is None
    return Counter((e.target, e.offset) for e in reader.entries)


def test_the_deep_search_finds_the_same_with_memmem_and_with_find(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # k.fatbin: one container of SASS sm_80, sm_100f and PTX compute_89 (build.sh); k_sm86.cubin
    # a bare sm_86 cubin. In 3 MiB of other bytes, searched in 1 MiB windows: one container at
    # an odd offset, one across a window edge, the cubin after decoys (the container magic with
    # version 7, the ELF ident of a host object), containers right after another and after
    # zero padding.
    monkeypatch.setattr(deepsearch, "SEARCH_WINDOW", 1 << 20)
    fatbin = (BIN / "k.fatbin").read_bytes()
    cubin = (BIN / "k_sm86.cubin").read_bytes()
    data = bytearray(random.Random(11).randbytes(3 << 20))
    decoy = CONTAINER_MAGIC + b"\x07\x00\x10\x00" + bytes(80)
    host = CUBIN_IDENT + bytes(9) + b"\x03\x00\x3e\x00" + bytes(44)  # ET_DYN, x86-64
    places = {12345: fatbin, (1 << 20) - 40: fatbin, 1_500_001: decoy + host + cubin}
    places[2_000_000] = fatbin + fatbin
    places[2_500_000] = fatbin + bytes(24) + fatbin  # zero padding, as cuFFT's .ldata has
    for at, piece in places.items():
        data[at : at + len(piece)] = piece
    cubin_at = 1_500_001 + len(decoy) + len(host)
    with_memmem = _found(bytes(data))
    monkeypatch.setattr(bytesearch, "_memmem", False)  # as where ctypes cannot call memmem
    assert _found(bytes(data)) == with_memmem
    targets = Counter(target for target, _ in with_memmem.elements())
    assert targets == {"sm_80": 6, "sm_100f": 6, "compute_89": 6, "sm_86": 1}
    containers = {at for _, at in with_memmem if at != cubin_at}
    assert min(containers) == 12345 + 16  # the first entry follows the 16-byte header
    assert (("sm_86", cubin_at), 1) in with_memmem.items()
