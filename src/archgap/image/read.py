"""An image's Python environments and native files, read from its layers without extracting.

Python environments are found where images keep them: any ``lib/python3[.N]/site-packages`` or
``dist-packages`` directory (``/usr/local/lib/python3.12/site-packages``,
``/usr/lib/python3/dist-packages``, ``/opt/conda/lib/python3.11/site-packages``, a venv's, found
by the ``pyvenv.cfg`` next to its ``lib``; through links too: ``image.sites``). Their
distributions come from ``.dist-info`` METADATA and RECORD like an installed environment's
(``probe.environment.pyenv``); the native files read are the same as there: those a RECORD
owns and those under a site-packages no RECORD lists. Paths in the result are
``LABEL/image/path`` (the image's label, then the path inside the image).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import IO, Any

from archgap.archives.wheel import WheelContents, read_stream
from archgap.codec import encode
from archgap.image.facts import ImageFacts, PythonSite
from archgap.image.layers import (
    FILE,
    HARDLINK,
    Entry,
    FileTree,
    LinkError,
    apply_layers,
    read_files,
)
from archgap.image.sites import SITE, find_sites
from archgap.image.source import ImageError, ImageManifest, ImageSource, Platform
from archgap.probe.binary.names import is_native_file
from archgap.probe.environment import pyenv
from archgap.probe.facts import BinaryFacts, Distribution, Problem

IN_SITE = re.compile(SITE + "/(?P<inner>.+)$")  # a path inside a site
DIST_INFO_FILES = (".dist-info/METADATA", ".dist-info/RECORD")
NO_PYTHON = (
    "no Python environment in the image (no lib/python3*/site-packages or dist-packages "
    "directory with a .dist-info)"
)
# Reads the wanted files (image path -> entry) with a reader; (results, reasons for the rest).
Fetched = tuple[dict[str, Any], dict[str, str]]
Fetch = Callable[[dict[str, Entry], Callable[[str, IO[bytes], int], Any]], Fetched]


class ImageContents(WheelContents):
    """An image's distributions and native files, as a wheel's: the analysis reads both."""

    def __init__(self, label: str) -> None:
        super().__init__(label)
        self.image: ImageFacts | None = None


def image_facts(contents: Sequence[WheelContents]) -> list[dict[str, Any]]:
    """The facts of the images among ``contents``, as JSON (the facts' "images" section)."""
    return [encode(c.image) for c in contents if isinstance(c, ImageContents) and c.image]


def read_image(
    source: ImageSource, platform: Platform | None = None, deep: bool = True
) -> ImageContents:
    """The Python distributions and native files of the image ``source`` gives for
    ``platform`` (None: this machine's, when the image is an index). Never raises: what could
    not be read is in ``problems``; an image without Python is a problem saying so."""
    found = ImageContents(source.label)
    try:
        manifest = source.manifest(platform)
        _read(source, manifest, found, deep)
    except ImageError as exc:  # the message names the image; the subject says it already
        found.problems.append(Problem(source.label, str(exc).removeprefix(source.label + ": ")))
    finally:
        source.close()
    return found


def _read(source: ImageSource, manifest: ImageManifest, found: ImageContents, deep: bool) -> None:
    applied = apply_layers(source, manifest, _reader(deep, found), read_early)
    sites = find_sites(applied.tree, applied.problems)
    found.problems.extend(Problem(found.label, p) for p in applied.problems)
    declared = manifest.platform
    found.image = ImageFacts(
        found.label, str(declared), declared.architecture, declared.os, declared.elf_machine,
        manifest.digest, len(manifest.layers), sites,
    )  # fmt: skip

    def fetch(wanted: dict[str, Entry], read: Callable[[str, IO[bytes], int], Any]) -> Fetched:
        """The values read in the one pass; a second pass only for what it did not read."""
        results: dict[str, Any] = {}
        rest: dict[str, Entry] = {}
        for path, entry in wanted.items():
            known, value = applied.value(path, entry)
            if known:
                results[path] = value
            else:
                rest[path] = entry
        if not rest:
            return results, {}
        more, failed = read_files(source, manifest, rest, read)
        return {**results, **more}, failed

    read_tree(found, applied.tree, fetch, found.image.sites, deep)


def read_early(path: str) -> bool:
    """Whether the one pass over the layers reads the file at ``path`` as it streams by: a
    native file or a distribution's METADATA or RECORD inside a site-packages (what
    ``read_tree`` asks for in nearly every image; the rest takes a second pass over the layers
    that provide it)."""
    match = IN_SITE.search(path)
    if match is None:
        return False
    inner = match.group("inner")
    if inner.count("/") == 1 and inner.endswith(DIST_INFO_FILES):
        return True
    return is_native_file(path)


def read_tree(
    found: ImageContents,
    tree: FileTree,
    fetch: Fetch,
    sites: tuple[PythonSite, ...],
    deep: bool,
) -> None:
    """The distributions and native files of the Python sites of ``tree``; ``fetch`` reads the
    wanted files (from layers, or from an unpacked root file system)."""
    dist_infos = [(s.path, d) for s in sites for d in _dist_infos(tree, s.path)]
    if not dist_infos:
        found.problems.append(Problem(found.label, NO_PYTHON))
        return
    found.site_packages = [_labelled(found.label, s.path) for s in sites]
    native = {p: e for s in sites for p, e in _native_files(tree, s.path)}
    wanted = {p: e for d in dist_infos for p, e in _metadata_files(tree, d[1])}
    results, failed = fetch({**wanted, **native}, _reader(deep, found))
    owned: set[str] = set()
    for site, dist_info in dist_infos:
        owned.update(_distribution(found, site, dist_info, results, failed))
    extra = _owned_elsewhere(tree, owned, native)
    if extra:
        more, more_failed = fetch(extra, _reader(deep, found))
        results.update(more)
        failed.update(more_failed)
    _binaries(found, tree, owned, native, results, failed, deep)


def _labelled(label: str, path: str) -> str:
    return label.rstrip("/") + path


def _dist_infos(tree: FileTree, site: str) -> list[str]:
    return [
        f"{site}/{name}"
        for name in tree.children(site)
        if name.endswith(".dist-info") and tree.get(f"{site}/{name}/METADATA") is not None
    ]


def _file_entry(tree: FileTree, path: str) -> tuple[str, Entry]:
    """The regular file at ``path`` (symlinks followed inside the image); ``LinkError``."""
    real, entry = tree.resolve(path)
    if entry.kind not in (FILE, HARDLINK):
        raise LinkError(f"{path}: not a regular file ({entry.kind})")
    return real, entry


def _metadata_files(tree: FileTree, dist_info: str) -> list[tuple[str, Entry]]:
    found = []
    for name in ("METADATA", "RECORD"):
        try:
            found.append((f"{dist_info}/{name}", _file_entry(tree, f"{dist_info}/{name}")[1]))
        except LinkError:
            continue  # a missing RECORD is reported with the distribution
    return found


def _native_files(tree: FileTree, site: str) -> list[tuple[str, Entry]]:
    """Regular files with a native name under ``site`` (symlinks are not files of their own,
    as for an installed environment)."""
    return [
        (path, entry)
        for path, entry in tree.walk(site)
        if entry.kind in (FILE, HARDLINK) and is_native_file(path)
    ]


def _reader(deep: bool, found: ImageContents) -> Any:
    def read(path: str, stream: IO[bytes], size: int) -> bytes | BinaryFacts:
        name = path.rsplit("/", 1)[-1]
        if name == "METADATA" or name == "RECORD":
            limit = pyenv.MAX_METADATA_BYTES if name == "METADATA" else pyenv.MAX_RECORD_BYTES + 1
            return stream.read(limit)
        return read_stream(_labelled(found.label, path), stream, size, deep)

    return read


def _distribution(
    found: ImageContents,
    site: str,
    dist_info: str,
    results: dict[str, Any],
    failed: dict[str, str],
) -> set[str]:
    """One distribution from its METADATA and RECORD; the native files its RECORD lists."""
    metadata = results.get(f"{dist_info}/METADATA")
    name, version = pyenv.metadata_fields(metadata) if isinstance(metadata, bytes) else ("", "")
    record = results.get(f"{dist_info}/RECORD")
    subject = _labelled(found.label, dist_info)
    bad: list[str] = []
    names: list[str] = []
    if isinstance(record, bytes):
        more = len(record) > pyenv.MAX_RECORD_BYTES
        names = pyenv.record_names(record[: pyenv.MAX_RECORD_BYTES], more, bad)
    else:
        why = failed.get(f"{dist_info}/RECORD", "not in the image")
        found.problems.append(Problem(subject, f"no RECORD: {why}"))
    if bad:
        found.problems.append(Problem(subject, pyenv.first_problems(bad)))
    owned = {posixpath.normpath(posixpath.join(site, n)) for n in names if is_native_file(n)}
    fallback = dist_info.rsplit("/", 1)[-1][: -len(".dist-info")]
    found.distributions.append(
        Distribution(
            name or fallback,
            version,
            subject,
            tuple(sorted(_labelled(found.label, p) for p in owned)),
        )
    )
    return owned


def _owned_elsewhere(tree: FileTree, owned: set[str], native: dict[str, Entry]) -> dict[str, Entry]:
    """Owned native files not read with the site-packages (outside them, or symlinks): the
    regular file each resolves to inside the image."""
    extra: dict[str, Entry] = {}
    for path in sorted(owned - set(native)):
        try:
            real, entry = _file_entry(tree, path)
        except LinkError:
            continue  # reported as unreadable with the binaries
        extra[real] = entry
    return extra


def _binaries(
    found: ImageContents,
    tree: FileTree,
    owned: set[str],
    native: dict[str, Entry],
    results: dict[str, Any],
    failed: dict[str, str],
    deep: bool,
) -> None:
    label = found.label
    for path in sorted(owned | set(native)):
        labelled = _labelled(label, path)
        if path not in owned:
            found.unowned.append(labelled)
        try:
            real = _file_entry(tree, path)[0]
        except LinkError as exc:
            found.binaries.append(BinaryFacts(labelled, 0, "unreadable", (), deep, str(exc)))
            continue
        facts = results.get(real)
        if isinstance(facts, BinaryFacts):
            if facts.path != labelled:  # read as the file a link names
                facts = replace(facts, path=labelled)
            found.binaries.append(facts)
        else:
            reason = failed.get(real, "not read")
            found.binaries.append(BinaryFacts(labelled, 0, "unreadable", (), deep, reason))
