"""The device code of binaries read here: files and directories (walked), wheels, conda
packages and container images (read without installing or extracting them). What ``archgap
kernels`` reads on this machine and ``api.kernels`` returns; kept light (no analysis imported),
for the command's start-up."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

ARCHIVES = (".whl", ".conda", ".tar.bz2")  # index.targets.ARCHIVE_SUFFIXES, not imported here

if TYPE_CHECKING:
    from archgap.analysis.compat import GpuTarget
    from archgap.probe.archive import WheelContents
    from archgap.probe.facts import BinaryFacts
    from archgap.probe.fatbin import Progress


def required_gpus(names: Sequence[str]) -> list[GpuTarget]:
    """The GPUs of --require values (comma-separated), each once; ``UnknownGpu`` for a bad one."""
    from archgap.analysis.compat import resolve_gpu

    gpus: dict[str, GpuTarget] = {}
    for name in (v.strip() for value in names for v in value.split(",") if v.strip()):
        gpu = resolve_gpu(name)
        gpus.setdefault(gpu.label, gpu)
    return list(gpus.values())


def local_binaries(
    paths: Sequence[str],
    deep: bool = False,
    image: tuple[str | None, bool] = (None, True),
    progress: Progress | None = None,
) -> list[BinaryFacts]:
    """Files and directories, wheels and conda packages, and container images (``image``: the
    platform to pick from a multi-platform index, and whether a docker:// registry's certificate
    must verify); an archive or image that cannot be read is an unreadable row per problem.
    ``progress(done, total, path)`` is told as files are read (not with ``deep``)."""
    from archgap.image.targets import is_image, read_image_target

    platform, tls_verify = image
    images = [p for p in paths if is_image(p, rootfs=False)]
    found = [
        b
        for name in images
        for b in _archive_binaries(read_image_target(name, platform, deep, tls_verify))
    ]
    paths = [p for p in paths if p not in images]
    holding = [p for p in paths if _holds_archives(p)]
    if holding:  # the wheel and conda readers (and urllib) are imported only for archives
        from archgap.index.targets import ARCHIVE_SUFFIXES, read_archive
        from archgap.probe.archive import wheel_files

        for path in wheel_files(holding, ARCHIVE_SUFFIXES):
            found.extend(_archive_binaries(read_archive(path, deep=deep)))
    rest = [p for p in paths if not p.endswith(ARCHIVES) or not os.path.isfile(p)]
    return found + (_read_files(rest, deep, progress) if rest else [])


def _holds_archives(path: str) -> bool:
    if os.path.isdir(path):
        return any(name.endswith(ARCHIVES) for name in os.listdir(path))
    return path.endswith(ARCHIVES) and os.path.isfile(path)


def _archive_binaries(contents: WheelContents) -> list[BinaryFacts]:
    """An archive's (a wheel's, an image's) native members; what could not be read of it is
    one unreadable row per problem."""
    from archgap.probe.facts import BinaryFacts

    unread = [
        BinaryFacts(p.subject, 0, "unreadable", (), False, p.reason) for p in contents.problems
    ]
    return unread + contents.binaries


def _read_files(paths: Sequence[str], deep: bool, progress: Progress | None) -> list[BinaryFacts]:
    from archgap.probe.binfiles import discover, walk_binaries
    from archgap.probe.fatbin import read_binary

    if deep:
        # Deep reads search whole data sections: walk_binaries may share them with a forked
        # helper, which it only does from a process without threads.
        return list(walk_binaries(paths, deep))
    found = list(discover(paths))
    files: list[BinaryFacts] = []
    for done, (path, ready) in enumerate(found, start=1):
        files.append(ready if ready is not None else read_binary(path, deep))
        if progress is not None:
            progress(done, len(found), path)
    return files
