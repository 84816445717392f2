"""Which released version of a package covers a GPU: every version and variant the user's indexes
list for the target interpreter and platform, newest first, each judged like ``scan WHEEL --gpu``.

A *variant* is one version on one index: ``3.0`` and ``3.0+cu130`` (a local label) are two, and so
is the same ``2.0`` on PyPI and on a vendor's index when the files differ (same sha256: one
variant, from the first index). Each variant's wheel is the one pip would install on the target
(its best tag). The walk goes newest first and, with ``first``, stops at the first variant that
covers every named GPU, so older wheels are never fetched.

What *covers* means: ``analysis.versions``.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence

from archgap.analysis.compat import GpuTarget, resolve_gpu
from archgap.analysis.scan import report_from_facts
from archgap.analysis.verdicts import NO_KERNELS
from archgap.analysis.versions import GpuVerdict, VersionsReport, VersionVerdict, covers
from archgap.archives.wheel import archive_facts
from archgap.index import net
from archgap.index.fetch import Fetched
from archgap.index.options import IndexOptions
from archgap.index.resolve import PYPI, Candidate, candidates, parse_requirement
from archgap.index.targets import read_index_file

Progress = Callable[[int, int, str], None]


def variants(found: Sequence[Candidate], index_urls: Sequence[str]) -> list[Candidate]:
    """One wheel per (version, index), pip's best tag; newest first, then in index order; the
    same bytes on a later index (same sha256) left out."""
    best: dict[tuple[str, str], Candidate] = {}
    for c in found:
        key = (str(c.version), c.index)
        if key not in best or c.rank < best[key].rank:
            best[key] = c
    order = {url: i for i, url in enumerate(index_urls)}
    listed = sorted(best.values(), key=lambda c: order.get(c.index, len(order)))
    listed.sort(key=lambda c: c.version, reverse=True)  # stable: index order on a tie
    kept: list[Candidate] = []
    digests: set[tuple[str, str]] = set()
    for c in listed:
        if c.file.sha256 and (str(c.version), c.file.sha256) in digests:
            continue
        if c.file.sha256:
            digests.add((str(c.version), c.file.sha256))
        kept.append(c)
    return kept


def install_line(
    name: str, winner: Candidate, listed: Sequence[Candidate], index_urls: Sequence[str]
) -> str:
    """The pip command that installs exactly ``winner``'s wheel.

    ``NAME==V`` (``==3.0+cu130`` with its local label); ``NAME===V`` when a local variant of the
    same version exists (``==3.0`` would also match ``3.0+cu130``, and pip takes the highest);
    the wheel's URL when the same version has other files on another index (pip would choose
    between them by index order it does not promise). ``--index-url`` when the winner's index is
    the main one and not PyPI, ``--extra-index-url`` when it is another."""
    if any(c is not winner and c.version == winner.version for c in listed):
        return f"pip install {shlex.quote(f'{name} @ {winner.file.url}')}"
    shadowed = winner.version.local is None and any(
        c.version.public == winner.version.public and c.version.local is not None for c in listed
    )
    pin = f"{name}{'===' if shadowed else '=='}{winner.version}"
    options = ""
    if index_urls and winner.index == index_urls[0]:
        if winner.index.rstrip("/") != PYPI:
            options = f" --index-url {shlex.quote(winner.index)}"
    else:
        options = f" --extra-index-url {shlex.quote(winner.index)}"
    return f"pip install{options} {shlex.quote(pin)}"


def judge(
    candidate: Candidate,
    gpus: Sequence[GpuTarget],
    driver: str | None,
    strict: bool,
    fetched: list[Fetched],
) -> VersionVerdict:
    """One variant's wheel read (ranges where the server allows) and judged on every GPU."""
    contents = read_index_file(candidate.file, fetched)
    base = (str(candidate.version), candidate.index, candidate.file.filename, candidate.file.url)
    if not contents.distributions:
        why = "; ".join(p.reason for p in contents.problems) or "not a wheel"
        return VersionVerdict(*base, (), False, why)
    labels = [g.label for g in gpus]
    facts = archive_facts([contents], "")
    report = report_from_facts(facts, labels, matrix=False, driver=driver, strict=strict)
    found: list[GpuVerdict] = []
    for gpu in report.gpus:
        rows = [p for p in report.packages if p.gpu == gpu.label]
        # the wheel's distribution decides; a member no RECORD lists only when it is alone
        row = next((p for p in rows if p.version), rows[0] if rows else None)
        verdict, reason = (
            (row.verdict, row.reason) if row else (NO_KERNELS, "no native file with device code")
        )
        found.append(GpuVerdict(gpu.label, str(gpu.compute_capability), verdict, reason))
    return VersionVerdict(*base, tuple(found), all(covers(v.verdict, strict) for v in found))


def walk(
    package: str,
    gpus: Sequence[str],
    options: IndexOptions,
    index_urls: Sequence[str],
    *,
    first: bool = False,
    driver: str | None = None,
    strict: bool = False,
    progress: Progress | None = None,
) -> VersionsReport:
    """Every variant of ``package`` (a name, or a requirement that narrows the versions) judged
    on ``gpus``, newest first; with ``first``, only down to the newest that covers them.
    Raises ``UnknownGpu`` for a GPU name no table knows; an index problem is the report's."""
    targets = tuple(resolve_gpu(name) for name in gpus)
    requirement = parse_requirement(package)
    urls = list(index_urls)
    base = (requirement.name, targets, tuple(urls), options.python_version, options.platform)
    from archgap.index.resolve import ResolveError

    skipped: list[str] = []
    with net.limits(options.timeout, options.max_download):  # the wheels' deadline, cap
        try:
            found = candidates(requirement, urls, options.python_version, options.platform, skipped)
        except ResolveError as exc:
            return VersionsReport(*base, strict, (), 0, None, None, str(exc))
        listed = variants(found, urls)
        judged: list[VersionVerdict] = []
        fetched: list[Fetched] = []
        winner = None
        for done, candidate in enumerate(listed):
            if progress:
                progress(done, len(listed), f"{requirement.name} {candidate.version}")
            result = judge(candidate, targets, driver, strict, fetched)
            judged.append(result)
            if result.covers and winner is None:
                winner = (result, candidate)
                if first:
                    break
        install = install_line(requirement.name, winner[1], listed, urls) if winner else None
        return VersionsReport(
            *base, strict, tuple(judged), len(listed), winner[0] if winner else None, install,
            bytes_fetched=sum(f.bytes_fetched for f in fetched), index_problems=tuple(skipped),
        )  # fmt: skip
