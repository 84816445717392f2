"""What `scan TARGET...` is given, read: wheel files, conda packages (.conda, .tar.bz2),
directories of them, their URLs, requirements resolved from the user's indexes, and container
images (``image/targets.py``). Each target becomes a ``WheelContents``; one that cannot be read is
one with only a problem, so the others are still judged."""

from __future__ import annotations

import contextlib
import os
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass

from archgap.image.targets import is_image, read_image_target
from archgap.index.conda import CONDA_SUFFIXES, conda_format, read_conda
from archgap.index.fetch import Fetched, FetchError, open_wheel
from archgap.index.resolve import IndexFile, ResolveError, indexes, resolve
from archgap.probe.archive import WheelContents, read_wheel, wheel_files
from archgap.probe.facts import Problem

URL_SCHEMES = ("http://", "https://", "file:")
ARCHIVE_SUFFIXES = (".whl", *CONDA_SUFFIXES)


@dataclass(frozen=True)
class IndexOptions:
    """Where requirements are resolved, and for which interpreter and platform."""

    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    python_version: str | None = None
    platform: str | None = None
    deps: bool = False  # resolve the requirements' dependency sets (pip without --no-deps)
    tls_verify: bool = True  # docker:// registries: False allows plain HTTP (skopeo's flag)


def read_targets(
    targets: Sequence[str], options: IndexOptions = IndexOptions()
) -> tuple[list[WheelContents], list[Fetched]]:
    """Every target read (in order); how remote wheels were fetched."""
    found: list[WheelContents] = []
    fetched: list[Fetched] = []
    requirements: list[str] = []
    for target in targets:
        if is_image(target):
            found.append(read_image_target(target, options.platform, True, options.tls_verify))
        elif target.startswith(URL_SCHEMES):
            found.append(_read_url(target, None, fetched))
        elif os.path.exists(target) or target.endswith(ARCHIVE_SUFFIXES):
            archives = wheel_files([target], ARCHIVE_SUFFIXES)
            if not archives:
                found.append(_failed(target, "no .whl, .conda or .tar.bz2 file in this directory"))
            found.extend(read_archive(path) for path in archives)
        elif options.deps:  # resolved together, as one pip install
            requirements.append(target)
        else:
            found.append(_read_requirement(target, options, fetched))
    if requirements:
        found.extend(_read_set(requirements, options, fetched))
    return found, fetched


def read_archive(path: str, deep: bool = True) -> WheelContents:
    """A local wheel or conda package, by its name."""
    if conda_format(path):
        return read_conda(path, deep=deep)
    return read_wheel(path, deep=deep)


def _failed(target: str, reason: str) -> WheelContents:
    contents = WheelContents(target)
    contents.problems.append(Problem(target, reason))
    return contents


def _read_url(url: str, sha256: str | None, fetched: list[Fetched]) -> WheelContents:
    try:
        handle, how = open_wheel(url, sha256)
    except FetchError as exc:
        return _failed(url, str(exc))
    fetched.append(how)
    with contextlib.closing(handle):
        if conda_format(urllib.parse.urlsplit(url).path):
            return read_conda(url, handle)
        return read_wheel(url, handle)


def _read_requirement(text: str, options: IndexOptions, fetched: list[Fetched]) -> WheelContents:
    urls = indexes(options.index_url, list(options.extra_index_urls))
    try:
        chosen = resolve(text, urls, options.python_version, options.platform)
    except ResolveError as exc:
        return _failed(text, str(exc))
    return read_index_file(chosen.file, fetched)


def _read_set(
    requirements: list[str], options: IndexOptions, fetched: list[Fetched]
) -> list[WheelContents]:
    """Every wheel of the requirements' dependency set; what could not be resolved, a target
    with only its problem (the requirement, who asked for it, why)."""
    from archgap.index.deps import ROOT, resolve_set

    urls = indexes(options.index_url, list(options.extra_index_urls))
    resolution = resolve_set(requirements, urls, options.python_version, options.platform)
    found = [read_index_file(c.file, fetched) for c in resolution.chosen]
    for problem in resolution.problems:
        by = "" if problem.required_by == ROOT else f" (required by {problem.required_by})"
        found.append(_failed(problem.requirement, problem.reason + by))
    return found


def read_index_file(file: IndexFile, fetched: list[Fetched]) -> WheelContents:
    """The wheel an index lists, read (checked against the index's sha256 when downloaded)."""
    return _read_url(file.url, file.sha256, fetched)
