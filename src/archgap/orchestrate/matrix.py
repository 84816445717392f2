"""``matrix``: a compatibility matrix of packages' last releases x variants x GPUs, each cell
judged from the wheel as ``versions`` judges it, computed once per wheel (its index's sha256) and
kept in a cache file that a rerun reads first."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from archgap.errors import UsageError
from archgap.orchestrate.shared import judge, resolve

if TYPE_CHECKING:
    from archgap.analysis.matrix import Cell, MatrixReport, PackageMatrix, Variant
    from archgap.analysis.verdicts.compat import GpuTarget
    from archgap.index.fetch import Fetched
    from archgap.index.options import IndexOptions
    from archgap.index.resolve import Candidate

CACHE_FORMAT = 1  # bumped when a cell's fields change; with archgap's version, older entries go


def matrix(
    packages: Sequence[str],
    *,
    gpus: Sequence[str],
    versions: int = 5,
    options: IndexOptions | None = None,
    cache: str | None = None,
    platforms: Sequence[str] = (),
    progress: Callable[[int, int, str], None] | None = None,
) -> MatrixReport:
    """For each of ``packages`` (names, or requirements that narrow the versions) its newest
    ``versions`` releases on the user's indexes (``options``), every variant of each (a local
    label such as +cu130, the same version on another index: ``index.versions.variants``), each
    judged on every GPU of ``gpus`` from its wheel (ranges where the server allows). A cell is
    computed once per wheel sha256: ``cache`` (a JSON file) keeps them, and a rerun reads only
    wheels it does not hold. A JIT package's wheel is judged by its JIT model, not by this
    machine's toolkits (a matrix says the same wherever it is built). ``platforms`` (wheel
    platform tags; default ``options.platform``) each choose their wheels: a wheel per platform is
    a variant (the same file for two platforms is judged once). Raises ``UsageError`` for
    an unknown GPU name, a PACKAGE that is not a requirement or ``versions`` below 1; an index or
    a wheel that fails is a problem in the report."""
    from packaging.utils import canonicalize_name

    from archgap import __version__
    from archgap.analysis.matrix import MatrixReport
    from archgap.index import net
    from archgap.index.options import IndexOptions
    from archgap.index.resolve import ResolveError, indexes, parse_requirement

    if versions < 1:
        raise UsageError(f"--versions {versions}: give 1 or more releases")
    chosen = options or IndexOptions()
    urls = indexes(chosen.index_url, list(chosen.extra_index_urls))
    targets = resolve(gpus)
    try:
        parsed = [parse_requirement(p) for p in packages]
    except ResolveError as exc:
        raise UsageError(str(exc)) from None
    # one page per project: Foo_Bar and foo-bar are one (PEP 503), the first given kept
    firsts = {canonicalize_name(r.name): r for r in reversed(parsed)}.values()
    requirements = [r for r in parsed if any(r is f for f in firsts)]
    stamp = [CACHE_FORMAT, __version__]
    kept = _load_cache(cache, stamp)
    chosen_platforms = tuple(platforms) or (chosen.platform,)
    done: list[PackageMatrix] = []
    with net.limits(chosen.timeout, chosen.max_download):
        for requirement in requirements:
            before = len(kept), sum(len(e.get("cells", ())) for e in kept.values())
            done.append(_package(requirement, targets, urls, chosen, chosen_platforms, versions,
                                 kept, progress))  # fmt: skip
            if (len(kept), sum(len(e.get("cells", ())) for e in kept.values())) != before:
                _store_cache(cache, stamp, kept)  # after each package: an interrupted run keeps it
    return MatrixReport(
        targets, tuple(urls), chosen.python_version, chosen_platforms, versions, tuple(done)
    )


def _package(
    requirement: Any,
    targets: tuple[GpuTarget, ...],
    urls: list[str],
    options: IndexOptions,
    platforms: tuple[str | None, ...],
    count: int,
    kept: dict[str, Any],
    progress: Callable[[int, int, str], None] | None,
) -> PackageMatrix:
    from archgap.analysis.matrix import PackageMatrix, releases
    from archgap.index.resolve import ResolveError, candidates
    from archgap.index.versions import variants

    skipped: list[str] = []
    name = requirement.name
    listed: list[tuple[str | None, Candidate]] = []
    problems = []
    for platform in platforms:
        try:
            found = candidates(requirement, urls, options.python_version, platform, skipped)
        except ResolveError as exc:
            problems.append(str(exc))
            continue
        listed += [(platform, c) for c in variants(found, urls)]
    if not listed:
        return PackageMatrix(name, (), (), "; ".join(problems), tuple(dict.fromkeys(skipped)))
    shown = releases([str(c.version) for _, c in listed], count)
    # newest first, then platform and index order (the listing's order on a tie)
    order = {v: i for i, v in enumerate(shown)}
    chosen = [(p, c) for p, c in listed if str(c.version).split("+", 1)[0] in order]
    chosen.sort(key=lambda pc: order[str(pc[1].version).split("+", 1)[0]])
    fetched: list[Fetched] = []
    judged = []
    for done, (platform, candidate) in enumerate(chosen):
        if progress:
            progress(done, len(chosen), f"{name} {candidate.version}")
        judged.append(_variant(name, candidate, targets, kept, fetched, platform))
    return PackageMatrix(
        name, tuple(shown), tuple(judged), None, tuple(dict.fromkeys([*skipped, *problems])),
        sum(f.bytes_fetched for f in fetched), sum(f.size for f in fetched),
    )  # fmt: skip


def _key(gpu: GpuTarget) -> str:
    return f"{gpu.label}@{gpu.compute_capability}"


def _variant(
    package: str,
    candidate: Candidate,
    targets: tuple[GpuTarget, ...],
    kept: dict[str, Any],
    fetched: list[Fetched],
    platform: str | None = None,
) -> Variant:
    """One wheel's cells: from the cache when it holds them all for this sha256, else the wheel
    read (``index.versions.read_variant``) and judged on the GPUs the cache lacks."""
    from archgap.analysis.matrix import Variant

    file = candidate.file
    digest = _digest(file.sha256)
    cells = _kept_cells(kept.get(digest) if digest else None)
    base = (str(candidate.version), candidate.index, file.filename, file.url, digest or None)
    missing = [g for g in targets if _key(g) not in cells]
    if not missing:
        return Variant(*base, tuple(cells[_key(g)] for g in targets), None, True, platform)
    new, problem, clean = _judge(package, candidate, missing, fetched)
    if problem is not None:
        return Variant(*base, (), problem, platform=platform)
    cells.update(zip((_key(g) for g in missing), new, strict=True))
    if digest and clean:  # what a read that met a problem saw may differ next time: not kept
        from archgap.codec import encode

        kept[digest] = {"wheel": file.filename, "cells": {k: encode(c) for k, c in cells.items()}}
    return Variant(*base, tuple(cells[_key(g)] for g in targets), platform=platform)


def _digest(sha256: str | None) -> str:
    """The index's sha256 of the wheel, or "" when it gives none that names the bytes (the
    wheel is then read on every run, and never kept)."""
    digest = (sha256 or "").lower()
    ok = len(digest) == 64 and all(c in "0123456789abcdef" for c in digest)
    return digest if ok else ""


def _kept_cells(entry: Any) -> dict[str, Cell]:
    """The cells the cache holds for a wheel, by GPU; one that does not decode is judged again."""
    from archgap.analysis.matrix import Cell
    from archgap.codec import DecodeError, decode

    cells: dict[str, Cell] = {}
    found = entry.get("cells") if isinstance(entry, dict) else None
    for key, doc in (found if isinstance(found, dict) else {}).items():
        with contextlib.suppress(DecodeError, TypeError, ValueError):
            cells[key] = decode(Cell, doc)
    return cells


def _judge(
    package: str, candidate: Candidate, gpus: list[GpuTarget], fetched: list[Fetched]
) -> tuple[list[Cell], str | None, bool]:
    """The wheel read and judged on ``gpus`` as ``versions`` judges it (``variant_verdict``),
    each cell with its deciding library; or why it could not be read; and whether the read met
    no problem (a member cut short, a request that failed)."""
    from archgap.analysis.matrix import cell, on_platform
    from archgap.analysis.verdicts.verdicts import NO_KERNELS
    from archgap.analysis.versions import variant_verdict
    from archgap.archives.wheel import archive_facts
    from archgap.index.versions import read_variant

    contents = read_variant(candidate.file, fetched)
    if not contents.distributions:
        return [], "; ".join(p.reason for p in contents.problems) or "not a wheel", False
    report = judge(archive_facts([contents], ""), [g.label for g in gpus], matrix=False)
    name = contents.distributions[0].name
    version = str(candidate.version)
    cells = []
    for gpu in report.gpus:
        rows = [p for p in report.packages if p.gpu == gpu.label]
        row = next((p for p in rows if p.version), rows[0] if rows else None)
        verdict, reason = (
            (row.verdict, row.reason) if row else (NO_KERNELS, "no native file with device code")
        )
        verdict, reason = variant_verdict(name, version, gpu, verdict, reason)
        libraries = row.libraries if row else ()
        found = cell(name, version, gpu, verdict, reason, libraries, contents.label)
        cells.append(on_platform(found, report.platform))
    clean = not contents.problems and not any(b.error for b in contents.binaries)
    return cells, None, clean


def _load_cache(path: str | None, stamp: list[Any]) -> dict[str, Any]:
    """The cells kept by an earlier run of this archgap (another version's are judged again);
    an absent or damaged cache is empty (every wheel is read)."""
    if path is None:
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict) or doc.get("format") != stamp:
        return {}
    wheels = doc.get("wheels")
    if not isinstance(wheels, dict):
        return {}
    return {k: v for k, v in wheels.items() if isinstance(v, dict)}


def _store_cache(path: str | None, stamp: list[Any], kept: dict[str, Any]) -> None:
    """Written atomically (a rename); a cache that cannot be written is no error (the next run
    reads the wheels again)."""
    if path is None:
        return
    folder = os.path.dirname(os.path.abspath(path))
    with contextlib.suppress(OSError):
        fd, part = tempfile.mkstemp(dir=folder, suffix=".part")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({"format": stamp, "wheels": kept}, f, sort_keys=True)
            os.replace(part, path)
        except OSError:
            os.unlink(part)
