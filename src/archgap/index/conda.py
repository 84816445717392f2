"""Conda packages read as they are, without installing or extracting them.

Two formats (conda's package specification):
- ``NAME-VERSION-BUILD.tar.bz2``: one bzip2-compressed tar holding ``info/`` and the files;
- ``NAME-VERSION-BUILD.conda``: a zip (members stored) of ``metadata.json``,
  ``info-NAME-VERSION-BUILD.tar.zst`` (the ``info/`` directory) and ``pkg-….tar.zst`` (the files),
  each a zstd-compressed tar.

The package is identified by ``info/index.json`` (name, version, build, subdir) and owns the files
``info/paths.json`` lists (else ``info/files``). Tars are read in stream mode, one member at a
time: native members (shared libraries, archives, cubins, fatbins, by name, anywhere: ``lib/``,
``targets/*/lib``, site-packages) go to the wheels' member reader (``archives.wheel.read_stream``),
so a conda package gives the same contents as a wheel and is judged by the same analysis. Nothing is
written to disk.

zstd: the ``zstandard`` module (``pip install 'archgap[zstd]'``, as for zstd image layers). It is
imported only to read ``.conda`` files; without it, a ``.conda`` is a problem naming the module,
and ``.tar.bz2`` still reads (bz2 is in the standard library).
"""

from __future__ import annotations

import bz2
import json
import os
import re
import tarfile
import zipfile
from collections.abc import Iterator
from types import ModuleType
from typing import IO, Any

from archgap.archives.limits import CappedStream, InflationLimit
from archgap.archives.wheel import WheelContents, open_zip, read_stream, read_wheel
from archgap.probe.binary.names import is_native_file
from archgap.probe.facts import BinaryFacts, Distribution, Problem

CONDA_SUFFIXES = (".conda", ".tar.bz2")
# The info files read, and the bytes read of each: index.json is a few hundred bytes, paths.json
# of the largest CUDA packages a few MB.
INFO_FILES = {"info/index.json": 1 << 20, "info/paths.json": 16 << 20, "info/files": 16 << 20}
MAX_LISTED = 1 << 18  # files a package's list names, at most
# A "_path" of paths.json, found without building the document (60 MiB of it took 900 MB).
_PATH_ENTRY = re.compile(rb'"_path"\s*:\s*("(?:[^"\\]|\\.)*")')


def conda_format(name: str) -> str | None:
    """ ".conda" or ".tar.bz2" for a conda package's file name (or URL path), else None."""
    return next((s for s in CONDA_SUFFIXES if name.endswith(s)), None)


class _Package:
    """What the tars of one package held: its info files and the native members read."""

    def __init__(self, label: str, deep: bool) -> None:
        self.label = label
        self.deep = deep
        self.info: dict[str, bytes] = {}
        self.binaries: list[BinaryFacts] = []

    def take(self, tar: tarfile.TarFile, stream: CappedStream) -> None:
        """Every member of a tar opened in stream mode on ``stream``, in the order they come."""
        for member in _members(tar):
            name = member.name[2:] if member.name.startswith("./") else member.name
            stream.claim(member.size, name)
            if name in INFO_FILES and member.isfile():
                self.info[name] = _read_info(tar, member, INFO_FILES[name])
            elif member.isfile() and not name.startswith("info/") and is_native_file(name):
                self.binaries.append(self._native(tar, member, name))

    def _native(self, tar: tarfile.TarFile, member: tarfile.TarInfo, name: str) -> BinaryFacts:
        path = self.label.rstrip("/") + "/" + name
        stream = tar.extractfile(member)
        if stream is None:  # not a regular file after all
            return BinaryFacts(path, member.size, "other", (), self.deep)
        try:
            with stream:
                return read_stream(path, stream, member.size, self.deep)
        except (tarfile.TarError, OSError, EOFError, ValueError, RuntimeError) as exc:
            return BinaryFacts(path, member.size, "unreadable", (), self.deep, _why(exc))


def _members(tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    member = tar.next()
    while member is not None:
        yield member
        member = tar.next()


def _read_info(tar: tarfile.TarFile, member: tarfile.TarInfo, limit: int) -> bytes:
    stream = tar.extractfile(member)
    if stream is None:
        return b""
    with stream:
        return stream.read(limit + 1)  # the byte past the limit says there is more


def _why(exc: BaseException) -> str:
    return f"corrupt member: {type(exc).__name__}: {exc}"


def read_conda(label: str, fileobj: IO[bytes] | None = None, deep: bool = True) -> WheelContents:
    """The distribution and the device code of the conda package at ``label`` (a path), or read
    from ``fileobj`` (``.conda``: any seekable file; ``.tar.bz2``: any readable one) named
    ``label``. Never raises: what could not be read is a problem."""
    found = WheelContents(label)
    package = _Package(label, deep)
    kind = conda_format(label.split("?")[0].split("#")[0])
    source: Any = fileobj if fileobj is not None else label
    try:
        if kind == ".conda":
            _read_dot_conda(source, package, found)
        else:
            compressed = None if fileobj is not None else os.path.getsize(label)
            with bz2.BZ2File(source) as raw:
                stream = CappedStream(raw, compressed, "bzip2")
                with tarfile.open(fileobj=stream, mode="r|") as tar:
                    package.take(tar, stream)
    except InflationLimit as exc:
        found.problems.append(Problem(label, f"not read further: {exc}"))
    except (tarfile.TarError, zipfile.BadZipFile, zipfile.LargeZipFile) as exc:
        found.problems.append(Problem(label, f"not a readable conda package: {exc}"))
    except (OSError, EOFError, ValueError, RuntimeError, NotImplementedError) as exc:
        found.problems.append(Problem(label, f"cannot read: {type(exc).__name__}: {exc}"))
    found.binaries.extend(package.binaries)
    _identify(package, found)
    return found


def _zstd() -> ModuleType | None:
    try:
        import zstandard
    except ImportError:
        return None
    return zstandard


def _read_dot_conda(source: Any, package: _Package, found: WheelContents) -> None:
    """info-*.tar.zst first (the package's identity), then pkg-*.tar.zst (its files)."""
    zstd = _zstd()
    if zstd is None:
        found.problems.append(
            Problem(
                found.label,
                "reading .conda needs the zstandard module: pip install 'archgap[zstd]'",
            )
        )
        return
    with open_zip(source) as zf:
        infos = [i for prefix in ("info-", "pkg-") for i in zf.infolist() if _is_part(i, prefix)]
        if not any(i.filename.startswith("info-") for i in infos):
            found.problems.append(Problem(found.label, "no info-*.tar.zst: not a .conda package"))
        for info in infos:
            name = info.filename
            try:
                with (
                    zf.open(info) as raw,
                    zstd.ZstdDecompressor().stream_reader(raw, read_across_frames=True) as zst,
                ):
                    stream = CappedStream(zst, info.compress_size, name)
                    with tarfile.open(fileobj=stream, mode="r|") as tar:
                        package.take(tar, stream)
            except zstd.ZstdError as exc:
                found.problems.append(Problem(found.label, f"{name}: zstd: {exc}"))
            except InflationLimit as exc:
                found.problems.append(Problem(found.label, f"not read further: {exc}"))


def _is_part(info: zipfile.ZipInfo, prefix: str) -> bool:
    name = info.filename
    return name.startswith(prefix) and name.endswith(".tar.zst") and "/" not in name


def _identify(package: _Package, found: WheelContents) -> None:
    """The distribution from info/index.json; owned natives from info/paths.json or info/files."""
    index = _json(package.info.get("info/index.json"))
    if not isinstance(index, dict) or not index.get("name"):
        if not found.problems:
            found.problems.append(
                Problem(found.label, "no readable info/index.json: not a conda package")
            )
        return
    listed = _listed(package.info, found)
    if listed is None:
        found.problems.append(Problem(found.label, "no info/paths.json or info/files"))
        listed = set()
    prefix = found.label.rstrip("/") + "/"
    native = [b.path for b in package.binaries]
    owned = sorted(p for p in native if p[len(prefix) :] in listed)
    found.unowned.extend(p for p in native if p[len(prefix) :] not in listed)
    found.distributions.append(
        Distribution(
            str(index["name"]), str(index.get("version", "")), prefix + "info", tuple(owned)
        )
    )


def _json(data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):  # (nesting deeper than the parser's stack)
        return None


def _listed(info: dict[str, bytes], found: WheelContents) -> set[str] | None:
    """The package's own file list (``MAX_LISTED`` names at most): paths.json's ``_path``
    entries, else the lines of files."""
    paths = info.get("info/paths.json", b"")
    for name, data in info.items():
        if len(data) > INFO_FILES[name]:
            reason = f"{name} is over {INFO_FILES[name] >> 20} MiB: the rest is not read"
            found.problems.append(Problem(found.label, reason))
    if b'"paths"' in paths:
        entries = (_json(m.group(1)) for m in _PATH_ENTRY.finditer(paths))
        names = (e for e in entries if isinstance(e, str))
    elif "info/files" in info:
        listing = info["info/files"][: INFO_FILES["info/files"]]
        lines = (line.strip() for line in listing.split(b"\n", MAX_LISTED))
        names = (line.decode("utf-8", "replace") for line in lines if line)
    else:
        return None
    listed: set[str] = set()
    for name in names:
        if len(listed) == MAX_LISTED:
            found.problems.append(
                Problem(found.label, f"the file list names over {MAX_LISTED}: the rest is not read")
            )
            break
        listed.add(name)
    return listed


def read_archive(path: str, deep: bool = True) -> WheelContents:
    """A local wheel or conda package, by its name (what ``kernels`` and ``scan`` read of a file
    here, without the index and image readers)."""
    if conda_format(path):
        return read_conda(path, deep=deep)
    return read_wheel(path, deep=deep)


__all__ = ["CONDA_SUFFIXES", "conda_format", "read_archive", "read_conda"]
