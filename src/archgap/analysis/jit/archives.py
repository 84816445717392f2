"""JIT packages in wheels judged before they are installed (``scan WHEEL``, ``scan REQ``,
``versions``): a package that compiles its kernels at first use ships none in its wheel, so
the wheel's native files say nothing; what it will do depends on the toolchain it finds. It is
judged with the toolchain of this machine (or of ``--env-from``'s environment), as if installed
here: the same model as an installed one (``analysis.jit.flashinfer``), by its release's rules.

Each JIT package becomes a package row per GPU (``jit`` when its build works, ``none`` when it
fails, ``unknown`` when there is no toolchain to judge against), which gates the exit code as
any package's verdict does, and its findings (the chain of facts and the fixes) beside it. A
wheel of a JIT package is never a clean "no gap" for want of kernels. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from archgap.analysis.jit.findings import JitFinding, JitStatus, gpu_finding, resolve_nvcc
from archgap.analysis.jit.flashinfer import flashinfer_findings
from archgap.analysis.verdicts.compat import GpuTarget
from archgap.analysis.verdicts.verdicts import JIT, NONE, UNKNOWN, PackageVerdict, Verdict
from archgap.analysis.versions import jit_verdict
from archgap.kb import toolchain as kb
from archgap.probe.facts import Distribution, InstalledPackage, ToolchainFacts

WHEN = "at the first FlashInfer JIT call (sampling, attention plan, norm, MoE ...)"
_VERDICT: dict[str, Verdict] = {"ok": JIT, "fails": NONE, "unknown": UNKNOWN}


def canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def jit_package(name: str) -> bool:
    """Whether ``name`` is a package archgap has a JIT model for (kb/jit.json)."""
    return canonical(name) == kb.jit_rules().flashinfer.package


def archive_jit(
    dists: Sequence[Distribution],
    targets: Sequence[GpuTarget],
    toolchain: ToolchainFacts | None,
    problem: str = "",
    driver: str | None = None,
) -> tuple[list[PackageVerdict], list[JitFinding]]:
    """The rows and findings of the JIT packages among ``dists`` (wheels) on ``targets``, with
    ``toolchain`` (None: it could not be read, ``problem`` says why)."""
    rows: list[PackageVerdict] = []
    findings: list[JitFinding] = []
    for dist in dists:
        if not jit_package(dist.name):
            continue
        name = kb.jit_rules().flashinfer.package
        found = _judged(dist, name, targets, toolchain, problem, driver)
        # the package row decides the exit code; the finding carries the chain and the fixes
        findings += [replace(f, gates_exit_code=False) for f in found]
        for f in found:
            target = next(t for t in targets if t.label == f.gpu)
            reason = (
                f.cause if f.status != "ok" else f"compiles its kernels at first use: {f.cause}"
            )
            rows.append(
                PackageVerdict(name, dist.version, target.label, _VERDICT[f.status], reason, ())
            )
    return rows, findings


def _judged(
    dist: Distribution,
    name: str,
    targets: Sequence[GpuTarget],
    toolchain: ToolchainFacts | None,
    problem: str,
    driver: str | None,
) -> list[JitFinding]:
    why = _nothing_to_judge_with(toolchain, problem)
    if why is None and toolchain is not None:
        package = InstalledPackage(name, dist.version, dist.dist_info)
        facts = replace(toolchain, packages=(package,), torch=None, source_checks=())
        found = flashinfer_findings(facts, targets, driver, wheel=True)
        if len(found) == len(targets):
            return found
        why = "the JIT model gave no answer"
    out = []
    for target in targets:
        verdict = jit_verdict(name, dist.version, target)
        status: JitStatus = "fails" if verdict and verdict[0] == NONE else "unknown"
        model = verdict[1] if verdict else "no JIT model for this release"
        cause = model if status == "fails" else f"{why}; by its release's rules: {model}"
        out.append(gpu_finding(name, dist.version, target, status, None, cause, (), (), WHEN))
    return out


def _nothing_to_judge_with(toolchain: ToolchainFacts | None, problem: str) -> str | None:
    """Why the wheel cannot be judged with this toolchain (no nvcc where FlashInfer looks, and
    no CUDA_HOME naming one that is missing), or None when it can."""
    if toolchain is None:
        return f"the toolchain here could not be read ({problem or 'no facts'})"
    resolved = resolve_nvcc(toolchain, kb.jit_rules().flashinfer.nvcc_lookup)
    tk = resolved.toolkit
    named = tk is not None and tk.found_by in ("CUDA_HOME", "CUDA_PATH")
    if tk is None or (tk.status == "missing" and not named):
        whose = toolchain.env_source
        return (
            f"no nvcc to judge against (CUDA_HOME, CUDA_PATH, PATH and /usr/local/cuda of the "
            f"{whose} environment name none)"
        )
    return None
