"""The device code of binaries read here: files and directories (walked), wheels, conda
packages and container images (read without installing or extracting them). What ``archgap
kernels`` reads on this machine and ``api.kernels`` returns; kept light (no analysis imported),
for the command's start-up."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from archgap.index.options import ARCHIVE_SUFFIXES as ARCHIVES
from archgap.index.options import URL_SCHEMES

if TYPE_CHECKING:
    from archgap.archives.wheel import WheelContents
    from archgap.index.deps import Chosen
    from archgap.index.options import IndexOptions
    from archgap.probe.binary.facts import BinaryFacts
    from archgap.probe.binary.fatbin import Progress
    from archgap.probe.binary.summary import Summary


def local_binaries(
    paths: Sequence[str],
    deep: bool = False,
    options: IndexOptions | None = None,
    progress: Progress | None = None,
    resolved: list[Chosen] | None = None,
    detail: bool = True,
    unverified: list[str] | None = None,
) -> list[BinaryFacts]:
    """Files and directories, wheels and conda packages (files, their URLs, requirements resolved
    like pip from ``options``' indexes, with their dependency sets when ``options.deps``), and
    container images (``options.platform`` picks from a multi-platform index; ``tls_verify``: a
    docker:// registry's certificate must verify); an archive, image or requirement that cannot
    be read is an unreadable row per problem. ``resolved`` is told the wheel each requirement
    resolved to, ``unverified`` the archives read through range requests, so that the index's
    sha256 was not checked. ``progress(done, total, path)`` is told as files are read. Without
    ``detail``, a file's entries are kept as one row per kind of entry (``summary_rows``)."""
    from archgap.image.targets import is_image

    remote = [p for p in paths if is_image(p, rootfs=False) or is_index_target(p)]
    found: list[BinaryFacts] = []
    if remote:  # the index, wheel and image readers (and urllib) are imported only for these
        found = _remote_binaries(remote, deep, options, resolved, unverified)
    paths = [p for p in paths if p not in remote]
    holding = [p for p in paths if _holds_archives(p)]
    if holding:
        found.extend(_held_archive_binaries(holding, deep))
    rest = [p for p in paths if not p.endswith(ARCHIVES) or not os.path.isfile(p)]
    return found + (_read_files(rest, deep, progress, detail) if rest else [])


def _remote_binaries(
    remote: list[str],
    deep: bool,
    options: IndexOptions | None,
    resolved: list[Chosen] | None,
    unverified: list[str] | None,
) -> list[BinaryFacts]:
    """The binaries of images, wheel URLs and requirements (see ``local_binaries``)."""
    from archgap.targets import read_targets
    from archgap.targets import unverified as unchecked

    contents, fetched = read_targets(remote, options, deep=deep, resolved=resolved)
    found = [b for c in contents for b in _archive_binaries(c)]
    if unverified is not None:
        unverified.extend(unchecked(contents, fetched))
    return found


def _held_archive_binaries(holding: list[str], deep: bool) -> list[BinaryFacts]:
    """The binaries of the wheels and conda packages named or in the directories named."""
    from archgap.archives.wheel import wheel_files
    from archgap.index.conda import read_archive
    from archgap.probe.binary.facts import BinaryFacts

    found: list[BinaryFacts] = []
    skipped: list[tuple[str, str]] = []  # links out of a directory named: not followed
    for path in wheel_files(holding, ARCHIVES, skipped):
        found.extend(_archive_binaries(read_archive(path, deep=deep)))
    found.extend(BinaryFacts(p, 0, "unreadable", (), False, why) for p, why in skipped)
    return found


def is_index_target(path: str) -> bool:
    """A wheel's URL, or a requirement: as pip tells them from paths, a name that is no file
    here, has no path separator, does not start with a dot and is not an archive's name (nor,
    for kernels, a native file's: ``libfoo.so`` stays a missing file)."""
    if path.startswith(URL_SCHEMES):
        return True
    if os.path.lexists(path) or path.startswith(".") or path.endswith(ARCHIVES):
        return False
    from archgap.probe.binary.names import is_native_file

    name = path.split(";")[0].split("@")[0]  # a marker or a direct reference's URL may have /
    return "/" not in name and os.sep not in name and not is_native_file(name.strip())


def _holds_archives(path: str) -> bool:
    if os.path.isdir(path):
        return any(name.endswith(ARCHIVES) for name in os.listdir(path))
    return path.endswith(ARCHIVES) and os.path.isfile(path)


def _archive_binaries(contents: WheelContents) -> list[BinaryFacts]:
    """An archive's (a wheel's, an image's) native members; what could not be read of it is
    one unreadable row per problem."""
    from archgap.probe.binary.facts import BinaryFacts

    unread = [
        BinaryFacts(p.subject, 0, "unreadable", (), False, p.reason) for p in contents.problems
    ]
    return unread + contents.binaries


def summary_rows() -> Summary:
    """One row per kind of entry (``probe.binary.summary``)."""
    from archgap.probe.binary.summary import Summary

    return Summary()


def _read_files(
    paths: Sequence[str], deep: bool, progress: Progress | None, detail: bool
) -> list[BinaryFacts]:
    from archgap.probe.binary.binfiles import walk_binaries

    # walk_binaries may share the reading with a forked helper, which it only does from a
    # process without threads. Summarized where they are read (without ``detail``): no object
    # per entry, and a helper sends back ~700 rows, not 21,000-48,000 entries to unpickle.
    summarize = None if detail else summary_rows
    return list(walk_binaries(paths, deep, progress, summarize))
