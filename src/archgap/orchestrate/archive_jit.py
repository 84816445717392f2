"""Wheels of JIT packages judged before install with the toolchain here (``scan WHEEL``,
``scan REQ``, ``versions``): the toolkits this machine's probe finds (CUDA_HOME, CUDA_PATH,
PATH, /usr/local/cuda*), with the shell's environment or a service's (``env_from``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from archgap.errors import ProbeError
from archgap.orchestrate.shared import probe_facts
from archgap.transport.target import DEFAULT_TIMEOUT, LOCAL

if TYPE_CHECKING:
    from archgap.analysis.scan import ScanReport
    from archgap.probe.facts import Distribution, ToolchainFacts


def any_jit_package(names: Sequence[str]) -> bool:
    from archgap.analysis.jit.archives import jit_package

    return any(jit_package(n) for n in names)


def local_toolchain(
    env_from: str | None = None, root: str = "/", timeout: float = DEFAULT_TIMEOUT
) -> tuple[ToolchainFacts | None, str]:
    """The toolchain of this machine (``env_from``: a service's environment instead of the
    shell's), without any Python environment's packages: (facts, "") or (None, why not). An
    ``env_from`` that cannot be read raises ``ProbeError``, as scan's does."""
    from archgap.codec import DecodeError, decode
    from archgap.probe.facts import ToolchainFacts

    request: dict[str, Any] = {"toolchains": {"site_packages": [], "source_checks": []}}
    facts = probe_facts(LOCAL, request, timeout, root, env_from)
    env_problem = facts.errors.get("env_from")
    if env_problem:
        raise ProbeError(f"--env-from {env_from}: {env_problem}")
    data = facts.section("toolchains")
    if data is None:
        return None, facts.errors.get("toolchains") or "the probe gave no toolchain"
    try:
        return decode(ToolchainFacts, data), ""
    except DecodeError as exc:
        return None, f"the probe's toolchain facts do not decode: {exc}"


def with_jit(
    report: ScanReport,
    toolchain: ToolchainFacts | None,
    problem: str = "",
    driver: str | None = None,
) -> ScanReport:
    """``report`` (of wheels) with its JIT packages judged with ``toolchain``: their rows
    replace the kernel-less ones, their findings join the report's, the toolchain is shown."""
    from archgap.analysis.jit.archives import archive_jit, jit_package

    dists: Sequence[Distribution] = report.environment.distributions
    if not report.gpus or not any(jit_package(d.name) for d in dists):
        return report
    rows, findings = archive_jit(dists, report.gpus, toolchain, problem, driver or report.driver)
    judged = {(r.package, r.gpu) for r in rows}
    kept = tuple(p for p in report.packages if (p.package, p.gpu) not in judged)
    return replace(
        report,
        packages=(*kept, *rows),
        jit=(*report.jit, *findings),
        toolchains=toolchain if toolchain is not None else report.toolchains,
    )
