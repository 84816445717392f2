"""A member read as its bytes stream by (archives/streamread.py) against the installed-file reader.

The fixtures are the nvcc-built binaries of tests/fixtures/cuda (build.sh): shared libraries
whose section table is at the end of the file, static archives of -rdc objects, loose cubins and a
fatbin. Read in one pass, a chunk at a time, each must give exactly what ``read_binary`` gives
for the file (format, size, machine, every entry with its section and offset, and the errors).
Where the stream pass did not keep bytes the reader asks for, the member is "unknown" with the
offset: never a different answer.
"""

from __future__ import annotations

import io
import random
import subprocess
from pathlib import Path

import pytest

from archgap.archives import streamread
from archgap.archives.streamread import read_streamed
from archgap.probe.binary.fatbin import read_binary, read_bytes
from archgap.probe.facts import BinaryFacts

BIN = Path(__file__).resolve().parents[1] / "fixtures" / "cuda" / "bin"
ELF_OR_AR = (b"\x7fELF", b"!<ar")
FIXTURES = [*sorted(p.name for p in BIN.iterdir() if p.read_bytes()[:4] in ELF_OR_AR), "k.fatbin"]


def streamed(data: bytes, deep: bool, chunk: int = 1 << 20) -> BinaryFacts:
    """``data`` read as a stream handing out ``chunk`` bytes at a time (the first 8 bytes were
    read apart, as ``archive.read_stream`` reads them)."""
    old = streamread.CHUNK
    streamread.CHUNK = chunk
    try:
        return read_streamed("member", io.BytesIO(data[8:]), data[:8], len(data), deep)
    finally:
        streamread.CHUNK = old


def facts(b: BinaryFacts) -> tuple[object, ...]:
    """What must be alike: the device code, the toolkits its cubins' notes name (compressed
    ones too: libtiny_lz4.so), and what the loader needs and dlopen may open."""
    return (b.format, b.size, b.machine, b.entries, b.error, b.toolkits, b.needed, b.runpath,
            b.dlopens)  # fmt: skip


@pytest.mark.parametrize("deep", [False, True])
def test_every_fixture_streamed_reads_like_the_file(deep: bool) -> None:
    """Chunks of 4099 bytes: containers, entry headers and section tables straddle chunks."""
    assert len(FIXTURES) >= 20  # the build's libraries, archives, object, cubins and fatbin
    entries = 0
    for name in FIXTURES:
        installed = read_binary(str(BIN / name), deep)
        got = streamed((BIN / name).read_bytes(), deep, chunk=4099)
        assert facts(got) == facts(installed), name
        entries += len(got.entries)
    # libmix.so alone has 17 entries (cuobjdump --list-elf/--list-ptx, test_fatbin_fixtures)
    assert entries > 17


def test_a_fatbin_section_that_does_not_start_with_a_container_is_unknown_not_guessed() -> None:
    """libmix.so with its first container magic overwritten: the file reader reports the bytes
    before the next container; the stream never kept them (it could not know a section starts
    there until the table at the end arrived), so it says so instead of answering differently."""
    data = bytearray((BIN / "libmix.so").read_bytes())
    first = data.find(b"\x50\xed\x55\xba")
    data[first : first + 4] = b"\x01\x02\x03\x04"
    installed = read_bytes("member", data, False)
    assert installed.error is not None and f"unrecognised bytes at {first:#x}" in installed.error
    got = streamed(bytes(data), False)
    assert got.format == "unknown"
    assert got.error is not None and got.error.startswith(f"streamed: bytes {first:#x}-")


def test_mutated_fixtures_stream_alike_or_say_what_was_not_kept() -> None:
    """Seeded random damage to real fixtures (bytes changed, zeroed, files cut short), read in
    chunks of 61 B to 64 KiB: the result is the file reader's, or "unknown" naming bytes the
    stream did not keep; never a third answer."""
    rng = random.Random(14)
    sources = [(BIN / n).read_bytes() for n in ("libmix.so", "k.fatbin", "librdc.a", "exe_two")]
    alike = 0
    for _ in range(150):
        data = bytearray(rng.choice(sources))
        for _ in range(rng.randint(1, 6)):
            at = rng.randrange(8, len(data))
            value = rng.randrange(2) * rng.randrange(256)  # zeros half the time
            data[at : at + rng.randint(1, 16)] = bytes([value] * rng.randint(1, 16))
        if rng.random() < 0.1:
            del data[rng.randrange(64, len(data)) :]
        for deep in (False, True):
            want = read_bytes("member", data, deep)
            got = streamed(bytes(data), deep, rng.choice([61, 4099, 65536]))
            if facts(got) == facts(want):
                alike += 1
            else:
                assert got.format == "unknown", (facts(got), facts(want))
                assert got.error is not None and got.error.startswith("streamed: "), got.error
    assert alike >= 280  # nearly all: only damage at a section's first bytes is not kept


def test_a_cubin_whose_names_are_out_of_the_lookbehind_is_unknown() -> None:
    """The names of a cubin precede its section table: with a lookbehind of 16 bytes they are
    gone when the table arrives, and the reader's request for them is named."""
    data = (BIN / "k_sm86.cubin").read_bytes()
    old = streamread.LOOKBEHIND
    streamread.LOOKBEHIND = 16
    try:
        got = streamed(data, False, chunk=64)
    finally:
        streamread.LOOKBEHIND = old
    assert got.format == "unknown" and got.entries == ()
    assert got.error is not None and "were not kept as the member went by" in got.error
    assert facts(streamed(data, False, chunk=64)) == facts(read_binary(str(BIN / "k_sm86.cubin")))


def test_padded_containers_in_a_data_section_stream_like_the_file(tmp_path: Path) -> None:
    """libmix.so with a data section (objcopy --add-section) holding k.fatbin's containers three
    times, with 16 and 40 zero bytes between them: the deep search looks past padding to the next
    container without a search (deepsearch.PADDING_PEEK); the stream kept the zero run before
    each magic, so it finds the same containers at the same offsets."""
    fatbin = (BIN / "k.fatbin").read_bytes()
    blob = tmp_path / "blob.bin"
    blob.write_bytes(b"\x11" * 8 + fatbin + bytes(16) + fatbin + bytes(40) + fatbin)
    lib = tmp_path / "libpadded.so"
    subprocess.run(
        ["objcopy", "--add-section", f".blob={blob}", "--set-section-flags",
         ".blob=contents,readonly", str(BIN / "libmix.so"), str(lib)],
        check=True,
    )  # fmt: skip
    installed = read_binary(str(lib), True)
    in_blob = [e for e in installed.entries if e.section == ".blob"]
    # k.fatbin holds 3 entries (test_fatbin_fixtures: sm_86 and sm_90a SASS, compute_75 PTX)
    assert len(in_blob) == 3 * 3
    assert facts(streamed(lib.read_bytes(), True, chunk=4099)) == facts(installed)


@pytest.mark.parametrize("deep", [False, True])
def test_kernel_answers_stand_in_for_payloads_not_kept(
    deep: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No payload kept for the reader (``MAX_PAYLOADS`` 0): whether each small PTX or compressed
    cubin holds a kernel was answered from its bytes as they went by (the LZ4 fixtures' stubs
    and kernels), and every fixture still reads exactly like the file."""
    monkeypatch.setattr(streamread, "MAX_PAYLOADS", 0)
    looked = 0
    for name in FIXTURES:
        installed = read_binary(str(BIN / name), deep)
        got = streamed((BIN / name).read_bytes(), deep, chunk=4099)
        assert facts(got) == facts(installed), name
        looked += sum(e.kernels is not None for e in got.entries if e.compression != "none")
    assert looked  # libnokernel_lz4.so and libtiny_lz4.so: LZ4 cubins, looked at
