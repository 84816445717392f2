"""Fuzzing the reader with mutated real binaries: it never raises and never hangs."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archgap.probe.binary.fatbin import read_binary
from archgap.probe.facts import BinaryFacts
from tests.hangs import GUARD
from tests.unit.test_hardening_binaries import within

BIN = Path(__file__).resolve().parents[1] / "fixtures" / "cuda" / "bin"
SOURCES = {
    name: (BIN / name).read_bytes()
    for name in ("libmix.so", "librdc.a", "k.fatbin", "k_sm120f.cubin", "libhidden.so", "rdc_a.o")
}


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, bytes]:
    name = draw(st.sampled_from(sorted(SOURCES)))
    data = bytearray(SOURCES[name])
    size = len(data)
    # Flips aimed where the parsers look: the ELF/archive header, the section header table at
    # the end, and anywhere else (container and entry headers).
    spots = st.one_of(
        st.integers(0, 127),
        st.integers(max(0, size - 2048), size - 1),
        st.integers(0, size - 1),
    )
    for offset, value in draw(st.lists(st.tuples(spots, st.integers(0, 255)), max_size=12)):
        data[offset] = value
    if draw(st.booleans()):
        del data[draw(st.integers(0, size)) :]
    return name, bytes(data)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(), st.booleans())
def test_mutated_binaries_never_raise(case: tuple[str, bytes], deep: bool) -> None:
    name, data = case
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(data)
        # CPU time of this process, not wall time: a bound on the reader's work (a loop that
        # never ends spends it), which other processes sharing the machine cannot use up; a
        # read that blocks instead fails at the (wall-clock) hang guard.
        started = time.process_time()
        facts = within(GUARD, lambda: read_binary(str(path), deep=deep))
        assert time.process_time() - started < 5.0
    assert isinstance(facts, BinaryFacts)
    assert facts.size == len(data)
    # Every mutated file is a regular file that opens and maps: "unreadable" here can only be
    # the catch-all of read_binary turning a reader exception into a row.
    assert facts.format != "unreadable", facts.error
    for entry in facts.entries:
        assert entry.kind in ("sass", "ptx", "ltoir")
        assert entry.offset < len(data)
