"""``versions``: a package's released versions and variants on the user's indexes, each wheel
judged on the GPUs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from archgap.errors import UsageError
from archgap.orchestrate.shared import check_driver, judge, resolve

if TYPE_CHECKING:
    from archgap.analysis.verdicts.compat import GpuTarget
    from archgap.analysis.versions import VersionsReport, VersionVerdict
    from archgap.index.fetch import Fetched
    from archgap.index.options import IndexOptions
    from archgap.index.resolve import Candidate
    from archgap.probe.facts import ToolchainFacts


def versions(
    package: str,
    *,
    gpus: Sequence[str],
    options: IndexOptions | None = None,
    first: bool = False,
    driver: str | None = None,
    strict: bool = False,
    progress: Callable[[int, int, str], None] | None = None,
    each: Callable[[VersionVerdict], None] | None = None,
) -> VersionsReport:
    """The released versions and variants of ``package`` (a name, or a requirement that narrows
    the versions) on the user's indexes (``options``; pip's settings apply), newest first, each
    judged on ``gpus`` from its wheel like ``scan WHEEL --gpu``; with ``first`` only down to the
    newest that covers them (older wheels are never fetched). ``winner`` and ``install`` (the
    pip command) name that one. Raises ``UsageError`` for an unknown GPU name or driver, or a
    PACKAGE that is not a requirement; an index or a wheel that fails is a problem in the
    report. ``progress(done, total, variant)`` is told before each wheel is read, ``each(verdict)``
    each variant's verdict as it is decided. A wheel read before (by its index's sha256) is not
    read again (index.versions.read_variant)."""
    from archgap.analysis.versions import VersionsReport
    from archgap.index import net
    from archgap.index.options import IndexOptions
    from archgap.index.resolve import ResolveError, candidates, indexes, parse_requirement
    from archgap.index.versions import install_line, variants
    from archgap.orchestrate.archive_jit import any_jit_package, local_toolchain

    chosen = options or IndexOptions()
    urls = indexes(chosen.index_url, list(chosen.extra_index_urls))
    targets = resolve(gpus)
    check_driver(driver)
    try:
        requirement = parse_requirement(package)
    except ResolveError as exc:
        raise UsageError(str(exc)) from None
    base = (requirement.name, targets, tuple(urls), chosen.python_version, chosen.platform)
    skipped: list[str] = []
    # a JIT package is judged with the toolchain here, read once (not "some CUDA would do")
    toolchain = local_toolchain() if any_jit_package([requirement.name]) else None
    with net.limits(chosen.timeout, chosen.max_download):  # the wheels' deadline, cap
        try:
            found = candidates(requirement, urls, chosen.python_version, chosen.platform, skipped)
        except ResolveError as exc:
            return VersionsReport(*base, strict, (), 0, None, None, str(exc))
        listed = variants(found, urls)
        judged: list[VersionVerdict] = []
        fetched: list[Fetched] = []
        winner = None
        for done, candidate in enumerate(listed):
            if progress:
                progress(done, len(listed), f"{requirement.name} {candidate.version}")
            result = _judge_variant(candidate, targets, driver, strict, fetched, toolchain)
            judged.append(result)
            if each:
                each(result)
            if result.covers and winner is None:
                winner = (result, candidate)
                if first:
                    break
        install = install_line(requirement.name, winner[1], listed, urls) if winner else None
        return VersionsReport(
            *base, strict, tuple(judged), len(listed), winner[0] if winner else None, install,
            bytes_fetched=sum(f.bytes_fetched for f in fetched), index_problems=tuple(skipped),
        )  # fmt: skip


def _judge_variant(
    candidate: Candidate,
    gpus: Sequence[GpuTarget],
    driver: str | None,
    strict: bool,
    fetched: list[Fetched],
    toolchain: tuple[ToolchainFacts | None, str] | None = None,
) -> VersionVerdict:
    """One variant's wheel read (ranges where the server allows) and judged on every GPU; a
    JIT package's with ``toolchain`` (the facts, or None and why not)."""
    from archgap.analysis.verdicts.verdicts import NO_KERNELS
    from archgap.analysis.versions import GpuVerdict, VersionVerdict, covers, variant_verdict
    from archgap.archives.wheel import archive_facts
    from archgap.index.versions import read_variant
    from archgap.orchestrate.archive_jit import with_jit

    contents = read_variant(candidate.file, fetched)
    base = (str(candidate.version), candidate.index, candidate.file.filename, candidate.file.url)
    if not contents.distributions:
        why = "; ".join(p.reason for p in contents.problems) or "not a wheel"
        return VersionVerdict(*base, (), False, why)
    labels = [g.label for g in gpus]
    report = judge(
        archive_facts([contents], ""), labels, matrix=False, driver=driver, strict=strict
    )
    if toolchain is not None:
        report = with_jit(report, *toolchain, driver)
    found: list[GpuVerdict] = []
    for gpu in report.gpus:
        rows = [p for p in report.packages if p.gpu == gpu.label]
        # the wheel's distribution decides; a member no RECORD lists only when it is alone
        row = next((p for p in rows if p.version), rows[0] if rows else None)
        verdict, reason = (
            (row.verdict, row.reason) if row else (NO_KERNELS, "no native file with device code")
        )
        name, version = contents.distributions[0].name, str(candidate.version)
        verdict, reason = variant_verdict(name, version, gpu, verdict, reason)
        found.append(GpuVerdict(gpu.label, str(gpu.compute_capability), verdict, reason))
    return VersionVerdict(*base, tuple(found), all(covers(v.verdict, strict) for v in found))
