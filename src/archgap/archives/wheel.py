"""Wheels read as they are, without installing or extracting them.

A wheel is a zip: its ``.dist-info`` METADATA and RECORD say which distribution it is and which
files it owns, and its native members (shared libraries, archives, cubins, fatbins) are
decompressed and handed to the same reader as installed files. The result has the shape of the
probe's "python" and "binaries" sections, so the analysis judges a wheel exactly as an installed
package.

Memory is bounded and nothing is written to disk. Members up to ``zipmembers.DIRECT_MAX`` are
inflated from their compressed bytes by a few threads at once, in order, ``IN_MEMORY_MAX``
bytes of them at most in hand (``zipmembers``). Others up to ``IN_MEMORY_MAX`` are decompressed
into memory once, one at a time (``fatbin.read_bytes``). A larger one is read in one pass as it is
decompressed (``streamread``): the headers the file reader can ask for (containers, entries,
cubins, the ELF section table that comes at the end) are kept as the bytes go by, with a 16 MiB
lookbehind, and the same reader then runs over what was kept: an 820 MiB member peaks at
44 MiB (the whole process; ``bench/wheel_member_memory.py``). Why not two passes over the
compressed member (one to reach the section table, one for the sections): inflating is most of
a wheel's reading time, and over HTTP ranges the member would cross the network twice.

A member's path is ``WHEEL/MEMBER`` (the wheel's path, then the member's name in the zip).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import struct
import zipfile
from collections.abc import Iterator
from dataclasses import asdict
from typing import IO, Any

from archgap.probe.binary.fatbin import read_bytes
from archgap.probe.binary.names import is_native_file
from archgap.probe.binary.summary import binary_json
from archgap.probe.environment.pyenv import (
    MAX_METADATA_BYTES,
    MAX_RECORD_BYTES,
    first_problems,
    metadata_fields,
    record_names,
)
from archgap.probe.facts import BinaryFacts, Distribution, ProbeResponse, Problem, PythonEnvironment

from .limits import Inflated, InflationLimit
from .platform import foreign_wheel_note
from .streamread import read_streamed
from .windows import with_dll_search
from .zipmembers import MemberStream, direct, native_head, read_members

# Members up to this size are read in memory; larger ones as they stream by (``streamread``).
IN_MEMORY_MAX = 64 << 20
MAX_MEMBER_BYTES = 1 << 40  # a size field above this is not believed
# Entries a zip's central directory may list (flashinfer-cubin, the most seen: ~16,000); zipfile
# makes an object of each before anything else is read (10^6 entries: 790 MB).
MAX_MEMBERS = 1 << 17
MAX_ENTRY_BYTES = 256  # a directory entry's bytes, on average at most (~100 in real wheels)
END_RECORD = struct.Struct("<4s4H2LH")  # the end of central directory record
ZIP64_LOCATOR = struct.Struct("<4sLQL")
ZIP64_END_RECORD = struct.Struct("<4sQ2H2L4Q")


class WheelContents:
    """What one archive (a wheel, a conda package) holds: its distribution, the native members
    read, and problems."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.distributions: list[Distribution] = []
        self.binaries: list[BinaryFacts] = []
        self.unowned: list[str] = []
        self.problems: list[Problem] = []
        self.site_packages: list[str] = []  # where its files are (default: the label itself)


def read_wheel(label: str, fileobj: IO[bytes] | None = None, deep: bool = True) -> WheelContents:
    """The distribution and the device code of the wheel at ``label`` (a path), or read from
    ``fileobj`` (any seekable file: a ranged HTTP reader) named ``label``. Never raises."""
    found = WheelContents(label)
    try:
        with open_zip(fileobj if fileobj is not None else label) as zf:
            _read_zip(zf, found, deep)
    except (zipfile.BadZipFile, zipfile.LargeZipFile) as exc:
        found.problems.append(Problem(label, f"not a readable wheel: {exc}"))
    except (OSError, EOFError, ValueError, RuntimeError, NotImplementedError) as exc:
        found.problems.append(Problem(label, f"cannot read: {type(exc).__name__}: {exc}"))
    return found


@contextlib.contextmanager
def open_zip(source: str | IO[bytes]) -> Iterator[zipfile.ZipFile]:
    """The zip at ``source`` (a path, or a seekable file), opened once its end record shows a
    central directory of at most ``MAX_MEMBERS`` entries and their bytes: zipfile makes an
    object of each entry before anything else (whatever the count says, it reads the
    directory's bytes). Else ``zipfile.BadZipFile`` with the reason."""
    with contextlib.ExitStack() as stack:
        fp = stack.enter_context(open(source, "rb")) if isinstance(source, str) else source
        entries, length = _directory(fp)
        if entries > MAX_MEMBERS or length > MAX_MEMBERS * MAX_ENTRY_BYTES:
            raise zipfile.BadZipFile(
                f"its central directory lists {entries} entries in {length} bytes"
                f" (at most {MAX_MEMBERS} entries of {MAX_ENTRY_BYTES} bytes are read)"
            )
        yield stack.enter_context(zipfile.ZipFile(fp))


def _directory(fp: IO[bytes]) -> tuple[int, int]:
    """(entries, bytes) of the zip's central directory, as its end record (zip64's, where it
    defers to it) gives them; (0, 0) where there is none (zipfile then says why)."""
    size = fp.seek(0, os.SEEK_END)
    fp.seek(max(0, size - END_RECORD.size - 0xFFFF))  # the record, and a comment at most
    tail = fp.read()
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or at + END_RECORD.size > len(tail):
        return 0, 0
    fields = END_RECORD.unpack_from(tail, at)
    entries, length = fields[4], fields[5]
    locator = at - ZIP64_LOCATOR.size
    deferred = entries == 0xFFFF or length == 0xFFFFFFFF
    if deferred and locator >= 0 and tail[locator : locator + 4] == b"PK\x06\x07":
        fp.seek(ZIP64_LOCATOR.unpack_from(tail, locator)[2])
        record = fp.read(ZIP64_END_RECORD.size)
        if len(record) == ZIP64_END_RECORD.size and record[:4] == b"PK\x06\x06":
            entries, length = ZIP64_END_RECORD.unpack(record)[7:9]
    return entries, length


def _read_zip(zf: zipfile.ZipFile, found: WheelContents, deep: bool) -> None:
    infos = _distinct([i for i in zf.infolist()[:MAX_MEMBERS] if not i.is_dir()], found)
    owned = _distribution(zf, infos, found)
    members = [(i, _member_path(found.label, i.filename)) for i in infos
               if is_native_file(i.filename)]  # fmt: skip
    found.unowned.extend(path for info, path in members if info.filename not in owned)
    rows = _refused(members, found, deep)
    read = iter(
        read_members(
            zf,
            [m for m, row in zip(members, rows, strict=True) if row is None],
            IN_MEMORY_MAX,
            deep,
            lambda i, p: _read_member(zf, i, p, deep),
        )
    )
    found.binaries.extend(row if row is not None else next(read) for row in rows)
    native = [b.format for b in found.binaries if b.format not in ("other", "unreadable")]
    with_dll_search(zf, infos, found.label, found.distributions, native)
    note = foreign_wheel_note(found.label, native)
    if note is not None:
        found.problems.append(Problem(found.label, note))


def _distribution(
    zf: zipfile.ZipFile, infos: list[zipfile.ZipInfo], found: WheelContents
) -> set[str]:
    """The wheel's distribution (its METADATA and RECORD) into ``found``; the native members
    its RECORD lists."""
    dist_info = _dist_info_dir(infos)
    if dist_info is None:
        found.problems.append(Problem(found.label, "no .dist-info directory: not a wheel"))
        return set()
    name, version = _metadata(zf, dist_info + "/METADATA")
    owned = {m for m in _record(zf, dist_info + "/RECORD", found) if is_native_file(m)}
    found.distributions.append(
        Distribution(
            name or dist_info[: -len(".dist-info")],
            version,
            _member_path(found.label, dist_info),
            tuple(sorted(_member_path(found.label, m) for m in owned)),
        )
    )
    return owned


def _distinct(infos: list[zipfile.ZipInfo], found: WheelContents) -> list[zipfile.ZipInfo]:
    """The entries, each local header read once: entries that share one with an earlier entry
    (20,000 names for one 16 MiB member) or start inside another's bytes (overlapping entries,
    a bomb's shape) are reported and not read."""
    keep = [False] * len(infos)
    shared: list[zipfile.ZipInfo] = []
    overlapping: list[zipfile.ZipInfo] = []
    start, end = -1, -1  # the last entry kept: where its local header starts, its bytes end
    # (a stable sort: of the entries at one offset, the central directory's first is kept)
    for k in sorted(range(len(infos)), key=lambda k: infos[k].header_offset):
        info = infos[k]
        if info.header_offset == start:
            shared.append(info)
        elif info.header_offset < end:
            overlapping.append(info)
        else:
            keep[k] = True
            # at least the fixed part of the local header, then the compressed bytes
            start, end = info.header_offset, info.header_offset + 30 + info.compress_size
    for entries, what in (
        (shared, "share a local header with an earlier entry: read once"),
        (overlapping, "start inside another entry's bytes (overlapping entries): not read"),
    ):
        if entries:
            first = entries[0]
            found.problems.append(
                Problem(
                    found.label,
                    f"{len(entries)} central-directory entries {what}"
                    f" (first: {first.filename!r} at 0x{first.header_offset:x})",
                )
            )
    return [info for info, kept in zip(infos, keep, strict=True) if kept]


def _refused(
    members: list[tuple[zipfile.ZipInfo, str]], found: WheelContents, deep: bool
) -> list[BinaryFacts | None]:
    """For each member, its row when it is not inflated (``limits``: the archive's total, a
    bomb's ratio), else None; the members refused are one problem of the archive."""
    inflated = Inflated()
    rows: list[BinaryFacts | None] = []
    reasons: list[str] = []
    for info, path in members:
        why = inflated.refusal(info.file_size, info.compress_size)
        rows.append(
            None
            if why is None
            else BinaryFacts(path, info.file_size, "unknown", (), deep, f"not inflated: {why}")
        )
        if why is not None:
            reasons.append(f"{info.filename}: {why}")
    if reasons:
        more = f" (and {len(reasons) - 1} more)" if len(reasons) > 1 else ""
        found.problems.append(Problem(found.label, f"not inflated: {reasons[0]}{more}"))
    return rows


def _member_path(label: str, member: str) -> str:
    return label.rstrip("/") + "/" + member


def _dist_info_dir(infos: list[zipfile.ZipInfo]) -> str | None:
    """The top-level ``NAME-VERSION.dist-info`` directory that holds a METADATA file."""
    for info in infos:
        top, _, rest = info.filename.partition("/")
        if top.endswith(".dist-info") and rest == "METADATA":
            return top
    return None


def _metadata(zf: zipfile.ZipFile, member: str) -> tuple[str, str]:
    with zf.open(member) as stream:
        return metadata_fields(stream.read(MAX_METADATA_BYTES))


def _record(zf: zipfile.ZipFile, member: str, found: WheelContents) -> list[str]:
    """The member names a wheel's RECORD lists; unreadable rows become one problem."""
    try:
        with zf.open(member) as stream:
            data = stream.read(MAX_RECORD_BYTES + 1)
    except KeyError:
        found.problems.append(Problem(found.label, "no RECORD in {}".format(member.split("/")[0])))
        return []
    bad: list[str] = []
    names = record_names(data[:MAX_RECORD_BYTES], len(data) > MAX_RECORD_BYTES, bad)
    if bad:
        found.problems.append(Problem(found.label, first_problems(bad)))
    return names


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, path: str, deep: bool) -> BinaryFacts:
    """One native member, decompressed as it streams out of the zip (its CRC is checked)."""
    if info.file_size > MAX_MEMBER_BYTES:
        return read_stream(path, io.BytesIO(), info.file_size, deep)  # the size says it all
    try:
        if direct(info, MAX_MEMBER_BYTES) and zf.fp is not None:  # with the faster inflater
            stream: Any = MemberStream(zf.fp, info)
            return read_stream(path, stream, info.file_size, deep)
        with zf.open(info) as stream:
            return read_stream(path, stream, info.file_size, deep)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, RuntimeError) as exc:
        return BinaryFacts(path, info.file_size, "unreadable", (), deep, f"corrupt member: {exc}")
    except NotImplementedError as exc:
        return BinaryFacts(path, info.file_size, "unreadable", (), deep, str(exc))


def read_stream(path: str, stream: IO[bytes], size: int, deep: bool = True) -> BinaryFacts:
    """A native member of ``size`` bytes (an archive's member, a container layer's file) read
    from ``stream`` as it is decompressed (into memory, or as it streams by when large) by the
    same reader as installed files. A read that fails is an unreadable row with the reason;
    nothing is raised."""
    if size > MAX_MEMBER_BYTES:
        reason = f"member of {size} bytes is over the {MAX_MEMBER_BYTES >> 30} GiB read limit"
        return BinaryFacts(path, size, "unknown", (), deep, reason)
    try:
        head = stream.read(8)
        if not native_head(head):
            return BinaryFacts(path, size, "other", (), deep)
        if size > IN_MEMORY_MAX:
            return read_streamed(path, stream, head, size, deep)
        data = _read_rest(stream, head, size)
    except NotImplementedError as exc:
        return BinaryFacts(path, size, "unreadable", (), deep, str(exc))
    except InflationLimit:
        raise  # the archive's stream stops here: its reader reports it
    except Exception as exc:  # zip's CRC, a truncated layer, corrupt gzip: this member only
        return BinaryFacts(path, size, "unreadable", (), deep, f"corrupt member: {exc}")
    return read_bytes(path, data, deep)


def _read_rest(stream: IO[bytes], head: bytes, size: int) -> bytearray:
    """``head`` and the rest of ``stream`` in one buffer of the member's size (allocated once:
    the member is in memory once, and handed back whole when the reader is done)."""
    data = bytearray(size)
    view = memoryview(data)
    view[: len(head)] = head
    pos = len(head)
    while pos < size:
        got = stream.readinto(view[pos : min(size, pos + (1 << 20))])  # type: ignore[attr-defined]
        if not got:
            break
        pos += got
    view.release()
    _check_end(stream, pos, size)
    return data


def _check_end(stream: IO[bytes], pos: int, size: int) -> None:
    if pos != size or stream.read(1):
        raise ValueError(f"member is not the {size} bytes its header says")


def wheel_files(
    paths: list[str],
    suffixes: tuple[str, ...] = (".whl",),
    skipped: list[tuple[str, str]] | None = None,
) -> list[str]:
    """The archives named: files, and the files directly in directories whose names end with
    one of ``suffixes`` (wheels; with ``.conda``/``.tar.bz2``, conda packages too). A directory's
    symlink whose target (all links resolved) is outside the directory is not followed: it goes
    to ``skipped`` as (path, reason)."""
    found: list[str] = []
    for path in paths:
        if not os.path.isdir(path):
            found.append(path)
            continue
        top = os.path.realpath(path)
        for name in sorted(os.listdir(path)):
            full = os.path.join(path, name)
            why = _link_out(top, full) if name.endswith(suffixes) else None
            if why is not None and skipped is not None:
                skipped.append((full, why))
            elif why is None and name.endswith(suffixes) and os.path.isfile(full):
                found.append(full)
    return found


def _link_out(top: str, path: str) -> str | None:
    """Why ``path`` is not followed: a symlink whose target is outside ``top`` (resolved)."""
    if not os.path.islink(path):
        return None
    if os.path.commonpath([top, os.path.realpath(path)]) == top:
        return None
    return f"a link out of the directory (-> {os.readlink(path)[:256]}): not followed"


def archive_facts(
    contents: list[WheelContents],
    label: str,
    detail: bool = False,
) -> ProbeResponse:
    """A probe answer with the "python" and "binaries" sections of these archives (one row
    per kind of entry unless ``detail``: ``summary.summarized``)."""
    dists = [d for c in contents for d in c.distributions]
    env = PythonEnvironment(
        label,
        "",
        tuple(s for c in contents if c.distributions for s in c.site_packages or [c.label]),
        tuple(dists),
        tuple(p for c in contents for p in c.unowned),
        tuple(p for c in contents for p in c.problems),
    )
    binaries = [binary_json(b, detail) for c in contents for b in c.binaries]
    sections = {"python": asdict(env), "binaries": binaries}
    # as the JSON the probe sends (tuples become arrays), so it decodes like any probe's facts
    return ProbeResponse(sections=json.loads(json.dumps(sections)))


__all__ = [
    "WheelContents",
    "archive_facts",
    "open_zip",
    "read_stream",
    "read_wheel",
    "wheel_files",
]
