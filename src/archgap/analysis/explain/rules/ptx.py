"""PTX ISA: PTX newer than what assembles it, the driver's JIT linker (a driver older than the
toolchain that wrote the PTX) or a ptxas older than it."""

from __future__ import annotations

from archgap.analysis.explain.rules.facts import (
    CONDITIONAL,
    DETERMINED,
    DRIVER,
    PTXAS,
    TRITON,
    XLA,
    LogFacts,
    Ruling,
)
from archgap.analysis.explain.rules.words import version_of
from archgap.analysis.fixes.engine import TOOLKIT, UPGRADE, Fix, worded
from archgap.kb import toolchain as kb


def _cuda_of_isa(isa: str) -> kb.ToolkitRelease | None:
    """The first toolkit release whose PTX ISA is at least ``isa``."""
    wanted = version_of(isa)
    return next((r for r in kb.toolkit_releases() if version_of(r.ptx_isa) >= wanted), None)


def ptx_isa(facts: LogFacts) -> Ruling | None:
    """PTX newer than what assembles it: the driver's JIT linker (a driver older than the
    toolchain that wrote the PTX), or a ptxas older than it (the tool's own fix)."""
    needed, known = facts.first("ptx_isa_needed"), facts.first("ptx_isa_known")
    found = needed and known
    writer = _cuda_of_isa(needed) if needed else None
    reader = _cuda_of_isa(known) if known else None
    if facts.tool not in (DRIVER, "") and found is not None:
        return _older_ptxas(facts, needed, known, writer, reader)
    newest: kb.ToolkitRelease | None = writer
    if writer is not None:
        cause = (
            f"the driver's JIT knows PTX ISA {known} (a CUDA {reader.cuda if reader else '?'} "
            f"driver) but the PTX is ISA {needed}, written by a CUDA {writer.cuda} toolchain: the "
            f"driver is older than that toolchain"
        )
        status = DETERMINED
    else:
        cause, status, newest = _older_driver(facts)
    return Ruling(
        "ptx-isa",
        cause,
        status,
        _driver_fixes(newest, reader, facts),
        ()
        if status == DETERMINED
        else ("the driver's CUDA version and the toolkit's: `nvidia-smi`, `nvcc --version`",),
    )


def _older_ptxas(
    facts: LogFacts,
    needed: str | None,
    known: str | None,
    writer: kb.ToolkitRelease | None,
    reader: kb.ToolkitRelease | None,
) -> Ruling | None:
    """A ptxas (the tool the log names) older than the toolchain that wrote the PTX: the tool's
    own fix. None for Triton's ptxas (the signature's fixes: TRITON_PTXAS_PATH) or an ISA no
    release is known to write."""
    if facts.tool == TRITON or writer is None:
        return None
    cause = (
        f"{facts.tool} knows PTX ISA {known} (CUDA {reader.cuda if reader else '?'}) but the "
        f"PTX is ISA {needed} (CUDA {writer.cuda}): the ptxas in use is older than the "
        f"toolchain that wrote the PTX"
    )
    fix = (
        worded(
            "ptx-ptxas-first-on-path", kind=TOOLKIT, cuda=writer.cuda, tool=facts.tool, isa=needed
        )
        if facts.tool in (XLA, PTXAS)
        else worded(
            "ptx-ptxas-in-cuda-home", kind=TOOLKIT, cuda=writer.cuda, tool=facts.tool, isa=needed
        )
    )
    return Ruling("ptx-isa", cause, DETERMINED, (fix,))


def _older_driver(facts: LogFacts) -> tuple[str, str, kb.ToolkitRelease | None]:
    """(cause, status, the newest toolkit release involved) where the log does not name the
    PTX's ISA: the toolkit and the driver the log states; conditional with neither."""
    have = facts.toolkit
    newest = kb.toolkit_release(have) if have else None
    runs = kb.driver_cuda_version(facts.driver) if facts.driver else None
    said = f" (CUDA {have})" if have else ""
    drv = f"; driver {facts.driver} runs up to CUDA {runs}" if runs else ""
    cause = (
        f"the driver is older than the toolchain that built the PTX{said}{drv}: the driver "
        f"cannot JIT-compile a PTX ISA newer than its own CUDA"
    )
    return cause, DETERMINED if have or runs else CONDITIONAL, newest


def _driver_fixes(
    newest: kb.ToolkitRelease | None, reader: kb.ToolkitRelease | None, facts: LogFacts
) -> tuple[Fix, ...]:
    if facts.tegra:
        return (worded("ptx-jetpack-cuda", kind=TOOLKIT),)
    return (_upgrade_driver(newest), _match_driver(reader))


def _upgrade_driver(newest: kb.ToolkitRelease | None) -> Fix:
    """A driver that JIT-compiles the PTX: the minimum of the toolkit that wrote it, where known."""
    if newest and newest.min_driver_linux:
        return worded(
            "ptx-driver-for-toolkit",
            kind=UPGRADE,
            min_driver=newest.min_driver_linux,
            cuda=newest.cuda,
        )
    return worded("ptx-driver-for-toolkit-unknown", kind=UPGRADE)


def _match_driver(reader: kb.ToolkitRelease | None) -> Fix:
    """PTX written by the toolkit whose ISA the driver knows, where the log says which."""
    if reader:
        return worded("ptx-toolkit-of-driver", kind=TOOLKIT, cuda=reader.cuda)
    return worded("ptx-toolkit-of-driver-unknown", kind=TOOLKIT)
