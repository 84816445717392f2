"""What `scan TARGET...` and `kernels TARGET...` are given, read: wheel files, conda packages
(.conda, .tar.bz2), directories of them, their URLs, requirements resolved from the user's indexes,
and container images (``image/targets.py``). Each target becomes a ``WheelContents``; one that
cannot be read is one with only a problem, so the others are still judged."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from archgap.archives.wheel import WheelContents, wheel_files
from archgap.image.targets import is_image, read_image_target
from archgap.index import net
from archgap.index.fetch import Fetched
from archgap.index.options import ARCHIVE_SUFFIXES, URL_SCHEMES, IndexOptions
from archgap.index.read import failed, read_local, read_url
from archgap.index.resolve import ResolveError, indexes, parse_requirement, resolve
from archgap.probe.facts import Problem

if TYPE_CHECKING:
    from archgap.index.deps import Chosen


def read_targets(
    targets: Sequence[str],
    options: IndexOptions | None = None,
    *,
    deep: bool = True,
    resolved: list[Chosen] | None = None,
) -> tuple[list[WheelContents], list[Fetched]]:
    """Every target read (in order); how remote wheels were fetched. ``deep``: also search the
    native members' data sections (scan does; ``kernels`` only with --deep). ``resolved`` is told
    the wheel each requirement (with ``options.deps``, each project of the set) resolved to."""
    options = options or IndexOptions()
    reading = _Reading(options, deep, [], [] if resolved is None else resolved)
    requirements: list[str] = []
    found: list[WheelContents] = []
    network = net.limits(options.timeout, options.max_download, options.trust_token_realm)
    with network:
        for target in targets:
            if is_image(target):
                found.append(read_image_target(target, options.platform, deep, options.tls_verify))
            elif target.startswith(URL_SCHEMES):
                found.append(reading.url(net.admit(target), None))
            elif os.path.exists(target) or target.endswith(ARCHIVE_SUFFIXES):
                skipped: list[tuple[str, str]] = []  # links out of the directory
                archives = wheel_files([target], ARCHIVE_SUFFIXES, skipped)
                found.extend(failed(path, why) for path, why in skipped)
                if not archives and not skipped:
                    found.append(
                        failed(target, "no .whl, .conda or .tar.bz2 file in this directory")
                    )
                found.extend(read_local(path, deep) for path in archives)
            elif options.deps:  # resolved together, as one pip install
                requirements.append(target)
            else:
                found.append(reading.requirement(target))
        if requirements:
            found.extend(reading.requirement_set(requirements))
    return found, reading.fetched


@dataclass
class _Reading:
    """Remote wheels read for one ``read_targets``: how each was fetched, what each requirement
    resolved to."""

    options: IndexOptions
    deep: bool
    fetched: list[Fetched]
    resolved: list[Chosen]

    def url(self, url: str, sha256: str | None) -> WheelContents:
        return read_url(url, sha256, self.fetched, self.deep)

    def requirement(self, text: str) -> WheelContents:
        from archgap.index.deps import ROOT, Chosen

        options = self.options
        urls = indexes(options.index_url, list(options.extra_index_urls))
        try:
            chosen = resolve(text, urls, options.python_version, options.platform)
        except ResolveError as exc:
            return failed(text, str(exc))
        extras = tuple(sorted(parse_requirement(text).extras))
        self.resolved.append(
            Chosen(chosen.name, chosen.version, chosen.file, chosen.index, extras, (ROOT,))
        )
        return self.url(chosen.file.url, chosen.file.sha256)

    def requirement_set(self, requirements: list[str]) -> list[WheelContents]:
        """Every wheel of the requirements' dependency set; what could not be resolved, a
        target with only its problem (the requirement, who asked for it, why)."""
        from archgap.index.deps import ROOT, resolve_set

        options = self.options
        urls = indexes(options.index_url, list(options.extra_index_urls))
        resolution = resolve_set(requirements, urls, options.python_version, options.platform)
        self.resolved.extend(resolution.chosen)
        found = [self.url(c.file.url, c.file.sha256) for c in resolution.chosen]
        for problem in resolution.problems:
            by = "" if problem.required_by == ROOT else f" (required by {problem.required_by})"
            found.append(failed(problem.requirement, problem.reason + by))
        return found


UNVERIFIED = "unverified: read through range requests, so the index's sha256 was not checked"


def unverified(contents: Sequence[WheelContents], fetched: Sequence[Fetched]) -> list[str]:
    """The archives (labels) whose index gave a sha256 that their reading did not check."""
    unchecked = {f.url for f in fetched if f.sha256 and not f.verified}
    return [archive.label for archive in contents if archive.label in unchecked]


def mark_unverified(contents: Sequence[WheelContents], fetched: Sequence[Fetched]) -> None:
    """A problem (UNVERIFIED) on each archive ``unverified`` names."""
    labels = set(unverified(contents, fetched))
    for archive in contents:
        if archive.label in labels:
            archive.problems.append(Problem(archive.label, UNVERIFIED))
