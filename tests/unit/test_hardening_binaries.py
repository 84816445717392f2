"""Hostile binaries: each costs bounded time and memory, and impossible values are reported.

Every case here is a file a real scan can meet (a corrupt ``.a`` in site-packages, a crafted
``.so``); each once hung the reader, multiplied its rows or copied gigabytes into memory.
"""

from __future__ import annotations

import signal
import struct
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from archgap.probe.binary import binreader
from archgap.probe.binary.fatbin import read_binary
from tests.hangs import GUARD

BIN = Path(__file__).resolve().parents[1] / "fixtures" / "cuda" / "bin"
T = TypeVar("T")


class TookTooLong(Exception):
    pass


def within(seconds: float, work: Callable[[], T]) -> T:
    """``work()``, or TookTooLong once it has used ``seconds`` of this process's CPU time (the
    work: a loop that never ends, or one that costs far more than it should; other processes on
    a busy machine do not add to it), or once ``hangs.GUARD`` seconds have passed (a hang guard
    for work that blocks instead: a hang fails the test instead of the run)."""
    guard = max(GUARD, seconds)

    def expire(signum: int, _frame: object) -> None:
        if signum == signal.SIGPROF:
            raise TookTooLong(f"used more than {seconds} s of CPU time")
        raise TookTooLong(f"still running after {guard} s")

    previous = {s: signal.signal(s, expire) for s in (signal.SIGPROF, signal.SIGALRM)}
    signal.setitimer(signal.ITIMER_PROF, seconds)
    signal.setitimer(signal.ITIMER_REAL, guard)
    try:
        return work()
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def ar_member(name: bytes, size: bytes, data: bytes = b"") -> bytes:
    header = name.ljust(16) + b"0".ljust(12) + b"0".ljust(6) + b"0".ljust(6) + b"644".ljust(8)
    return header + size.ljust(10) + b"`\n" + data


def test_archive_member_with_a_negative_size_is_corrupt_not_a_loop(tmp_path: Path) -> None:
    # int(b"-60") is -60: the member would "end" at its own header and the walk start over.
    path = tmp_path / "libneg.a"
    path.write_bytes(b"!<arch>\n" + ar_member(b"a.o/", b"-60") + ar_member(b"b.o/", b"2", b"ab"))
    facts = within(5, lambda: read_binary(str(path)))
    assert facts.format == "archive"
    assert facts.error is not None and "corrupt member size at 0x8" in facts.error


def elf64(sections: list[tuple[bytes, int, int, int]], body: bytes, machine: int = 62) -> bytes:
    """A little-endian ELF64 shared object: ``body`` at offset 64, then the names, then the
    section headers. ``sections`` are (name, type, offset, size); offsets are absolute."""
    names = b"\0" + b"".join(name + b"\0" for name, *_ in sections) + b".shstrtab\0"
    names_at = 64 + len(body)
    table_at = (names_at + len(names) + 7) // 8 * 8
    headers = [bytes(64)]
    spot = 1
    for name, kind, offset, size in sections:
        headers.append(struct.pack("<IIQQQQIIQQ", spot, kind, 2, 0, offset, size, 0, 0, 8, 0))
        spot += len(name) + 1
    headers.append(struct.pack("<IIQQQQIIQQ", spot, 3, 0, 0, names_at, len(names), 0, 0, 1, 0))
    ident = b"\x7fELF\x02\x01\x01" + bytes(9)
    count = len(headers)
    head = struct.pack(
        "<16sHHIQQQIHHHHHH", ident, 3, machine, 1, 0, 0, table_at, 0, 64, 0, 0, 64, count,
        count - 1,
    )  # fmt: skip
    data = head + body + names
    return data + bytes(table_at - len(data)) + b"".join(headers)


def nv_fatbin_payload() -> bytes:
    """The .nv_fatbin bytes of the real fixture libmix.so (located by a separate parser)."""
    data = (BIN / "libmix.so").read_bytes()
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shnum, shstrndx = struct.unpack_from("<HH", data, 0x3C)
    names = struct.unpack_from("<Q", data, shoff + shstrndx * 64 + 24)[0]
    for i in range(shnum):
        name, _, _, _, offset, size = struct.unpack_from("<IIQQQQ", data, shoff + i * 64)
        if data[names + name : data.index(b"\0", names + name)] == b".nv_fatbin":
            return data[offset : offset + size]
    raise AssertionError("libmix.so has no .nv_fatbin")


def test_many_section_headers_over_one_region_read_it_once(tmp_path: Path) -> None:
    payload = nv_fatbin_payload()
    once = tmp_path / "once.so"
    once.write_bytes(elf64([(b".nv_fatbin", 1, 64, len(payload))], payload))
    many = tmp_path / "many.so"
    many.write_bytes(elf64([(b".nv_fatbin", 1, 64, len(payload))] * 3000, payload))
    expected = read_binary(str(once)).entries
    # libmix.so's .nv_fatbin: the device-link cubins and the sm_75/86/90/120 SASS + PTX of the
    # fixture build, each listed once by cuobjdump however many headers name the section.
    assert len(expected) >= 4
    facts = within(20, lambda: read_binary(str(many)))
    assert facts.entries == expected


def fake_cubins(count: int, table_entries: int) -> bytes:
    """``count`` cubin ELF headers side by side, all pointing at one section table of
    ``table_entries`` headers that follows them (no real cubin shares a table). Its string table
    (section 1) claims 1 TiB: each header is refused only once its whole table is parsed."""
    table = count * 64
    names = struct.pack("<IIQQQQIIQQ", 0, 3, 0, 0, 0, 1 << 40, 0, 0, 1, 0)
    headers = b"".join(
        struct.pack(
            "<16sHHIQQQIHHHHHH", b"\x7fELF\x02\x01\x01" + bytes(9), 2, 190, 1, 0, 0,
            table - i * 64, 0x5A00, 64, 0, 0, 64, table_entries, 1,
        )
        for i in range(count)
    )  # fmt: skip
    return headers + bytes(64) + names + bytes((table_entries - 2) * 64)


def test_deep_read_of_fake_cubins_sharing_one_table_is_linear(tmp_path: Path) -> None:
    rodata = fake_cubins(400, 65535)
    path = tmp_path / "fake.so"
    path.write_bytes(elf64([(b".rodata", 1, 64, len(rodata))], rodata))
    # Every header's sections run past the end of the file: none of them is a cubin.
    facts = within(10, lambda: read_binary(str(path), deep=True))
    assert facts.format == "elf"
    assert facts.entries == ()


def test_a_file_past_the_work_bound_is_unknown_with_the_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(binreader, "WORK_BUDGET", 50)
    facts = read_binary(str(BIN / "libhidden.so"), deep=True)
    assert facts.format == "unknown"
    assert facts.error is not None and facts.error.startswith("work bound reached")
    monkeypatch.undo()
    assert read_binary(str(BIN / "libhidden.so"), deep=True).format == "elf"


def compressed_entries(data: bytes) -> Iterator[int]:
    """Offsets of the compressed entries in the first container (format: fatbin_format.md)."""
    assert data[:4] == b"\x50\xed\x55\xba"
    pos, end = 16, 16 + struct.unpack_from("<Q", data, 8)[0]
    while pos + 64 <= end:
        header_size, payload_size, compressed = struct.unpack_from("<IQI", data, pos + 4)
        if compressed:
            yield pos
        pos += header_size + payload_size


def test_impossible_unpacked_size_makes_the_entry_invalid(tmp_path: Path) -> None:
    data = bytearray((BIN / "k.fatbin").read_bytes())
    fixed = read_binary(str(BIN / "k.fatbin"))
    spots = list(compressed_entries(bytes(data)))
    assert spots, "k.fatbin has compressed entries (nvcc 13 compresses by default)"
    struct.pack_into("<Q", data, spots[0] + 0x38, 2**64 - 1)  # "unpacks" to 16 EiB
    path = tmp_path / "k.fatbin"
    path.write_bytes(bytes(data))
    facts = read_binary(str(path))
    assert len(facts.entries) == len(fixed.entries) - 1
    assert all(e.offset != spots[0] for e in facts.entries)
    assert all(e.uncompressed_size <= e.stored_size * 65536 for e in facts.entries)
    assert facts.error is not None
    assert f"invalid entry at 0x{spots[0]:x}" in facts.error and "would unpack to" in facts.error


MEASURE = textwrap.dedent(
    """
    import sys
    from archgap.probe.binary.fatbin import read_binary
    def peak_kib():  # VmHWM; compared before and after the work (the child's start-up varies)
        return int(next(l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM:")))
    before = peak_kib()
    facts = read_binary(sys.argv[1], deep=sys.argv[2] == "deep")
    print(facts.format, len(facts.entries), peak_kib() - before)
    """
)


@pytest.mark.parametrize("deep", ["plain", "deep"])
def test_sparse_file_over_2_gib_is_never_materialised(tmp_path: Path, deep: str) -> None:
    # A 3 GiB .nv_fatbin that takes a few KiB on disk: one container header, then holes.
    size = 3 << 30
    path = tmp_path / "sparse.so"
    head = elf64([(b".nv_fatbin", 1, 4096, size)], b"")
    container = b"\x50\xed\x55\xba" + struct.pack("<HHQ", 1, 16, size - 16)
    with path.open("wb") as handle:
        handle.write(head)
        handle.seek(4096)
        handle.write(container)
        handle.truncate(4096 + size)
    run = subprocess.run(
        [sys.executable, "-c", MEASURE, str(path), deep],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    kind, entries, growth_kib = run.stdout.split()
    assert (kind, entries) == ("elf", "0")
    assert int(growth_kib) < 64 * 1024, f"peak RSS grew by {int(growth_kib) >> 10} MiB"
