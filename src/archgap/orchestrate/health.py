"""A scan as a node's health: what ``scan --health``, ``--drain`` and ``--nfd`` report, decided
once here (``report.health`` and ``report.nfd`` only render it).

The codes (``results.GAP_CODES``, ``results.ERROR_CODES``) are a contract: drain policies match
them; never rename one, only add.

exit 1 (the node cannot run this stack; a drain policy may act on it):
  ``gpu-missing``   a ``--require``'d GPU is not present
  ``no-kernel``     a package has no kernel that can run on a present or named GPU
  ``blocked``       a package has kernels for such a GPU but cannot load there: the driver, a
                    library, the platform or a companion is missing (verdict ``blocked``; these
                    were ``no-kernel`` before the word existed); after ``no-kernel``, as
                    ``blocked`` ranks after ``none`` (analysis/verdicts/verdicts.py RANK)
  ``jit-fails``     a JIT compiler (FlashInfer, Triton, torch extensions) will fail on such a GPU
  ``gpu-fault``     nvidia-smi is installed but hung or failed and no GPU answered (a GPU that
                    fell off the bus, a driver that is not loaded): the node cannot run GPU jobs
exit 2 (archgap could not judge; not a reason to drain):
  ``probe-failed``  the facts could not be collected (unreachable target, bad --env-from ...)
  ``no-python``     the interpreter has no site-packages (it did not run, or is not Python)
  ``gpu-unknown``   a present GPU's compute capability is unknown (name it with --require)
  ``no-gpu``        no GPU is present and none was named: nothing to judge
  ``usage``         a bad argument (an unknown GPU name, --drain outside Slurm)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from archgap.analysis.gpu_fault import gpu_fault
from archgap.errors import ProbeError
from archgap.results import NodeHealth, NodeVerdict
from archgap.transport.target import DEFAULT_TIMEOUT, LOCAL, Target

if TYPE_CHECKING:
    from archgap.analysis.scan import ScanReport
    from archgap.analysis.verdicts.compat import GpuTarget

# The JIT statuses that are not ok, worst first (a package's label on a GPU is its worst).
_JIT_ORDER = {"fails": 0, "blocked": 0, "unknown": 1}


def health(
    python: str | None = None,
    *,
    gpus: Sequence[str] = (),
    require: Sequence[str] = (),
    target: Target = LOCAL,
    env_from: str | None = None,
    root: str = "/",
    timeout: float = DEFAULT_TIMEOUT,
    driver: str | None = None,
    strict: bool = False,
) -> NodeHealth:
    """``scan --health`` in one call (the MCP tool): the environment scanned on the GPUs
    ``gpus`` and ``require`` name (and those present), then judged by ``node_health``; facts that
    could not be collected are ``probe-failed`` (a value, not an exception). ``UnknownGpu`` for
    a GPU name no table knows."""
    from archgap.orchestrate.scan import scan

    try:
        report = scan(
            python, gpus=[*gpus, *require], target=target, env_from=env_from, root=root,
            timeout=timeout, driver=driver, strict=strict,
        )  # fmt: skip
    except ProbeError as exc:
        return failed("probe-failed", str(exc))
    return node_health(report, require=require)


def node_health(report: ScanReport, *, require: Sequence[str] = ()) -> NodeHealth:
    """The first reason the node cannot run this stack, in the order of ``GAP_CODES`` (a GPU
    fault before a missing GPU: it is "missing" because it does not answer), else why it cannot
    be judged, else OK. ``require``: the GPUs (names or compute capabilities) the node must
    have; those not present are ``gpu-missing``. ``UnknownGpu`` for a name no table knows."""
    fault = gpu_fault(report.gpu_facts)
    if fault:
        return _judged(report, NodeHealth("gpu-fault", "nvidia-smi", fault))
    missing = missing_gpus(report, require)
    if missing:
        present = ", ".join(sorted({str(g.compute_capability) for g in report.gpus
                                    if g.role == "present"})) or "none"  # fmt: skip
        why = f"not present (GPUs present: {present})"
        return _judged(report, NodeHealth("gpu-missing", missing[0], why, len(missing) - 1))
    by_label = {g.label: g for g in report.gpus}
    # no kernel (and unknown) first, then what cannot load: the order of the verdicts' RANK
    gaps = sorted(report.gaps, key=lambda p: (p.verdict == "blocked", p.package.lower(), p.gpu))
    if gaps:
        first = gaps[0]
        code = "blocked" if first.verdict == "blocked" else "no-kernel"
        subject = f"{first.package} {first.version} on {_gpu_name(by_label[first.gpu])}"
        extra = len(gaps) - 1 + len(report.jit_gaps)
        return _judged(report, NodeHealth(code, subject, first.reason, extra))
    jit = sorted(report.jit_gaps, key=lambda f: (f.package.lower(), f.gpu or ""))
    if jit:
        f = jit[0]
        target = by_label.get(f.gpu or "")
        gpu = _gpu_name(target) if target else (f.compute_capability or "any GPU")
        subject = f"{f.package} {f.version} on {gpu}"
        return _judged(report, NodeHealth("jit-fails", subject, f.cause, len(jit) - 1))
    return _unjudged(report) or _judged(report, NodeHealth("ok"))


def failed(code: str, why: str) -> NodeHealth:
    """A node that could not be judged: ``code`` one of ``ERROR_CODES`` ("probe-failed": the
    facts could not be collected; "usage": a bad argument)."""
    return NodeHealth(code, why=why)


def missing_gpus(report: ScanReport, required: Sequence[str]) -> list[str]:
    """The ``required`` GPUs (names or compute capabilities) that are not present, by compute
    capability."""
    from archgap.analysis.verdicts.compat import resolve_gpu

    present = {g.compute_capability for g in report.gpus if g.role == "present"}
    return [text for text in required if resolve_gpu(text).compute_capability not in present]


def _gpu_name(target: GpuTarget) -> str:
    """'12.0 (NVIDIA RTX PRO 6000 Blackwell)': the label without its '(GPU 0,1)' list."""
    label = re.sub(r"\s*\(GPU [^)]*\)$", "", target.label)
    cc = str(target.compute_capability)
    return cc if label in (cc, "") else f"{cc} ({label})"


def _unjudged(report: ScanReport) -> NodeHealth | None:
    """Why a report without a gap still cannot say OK, if it cannot."""
    if report.unread:
        executable = report.environment.executable or "the interpreter"
        return failed("no-python", f"{executable}: {report.unread}")
    from archgap.analysis.scan import unidentified_gpus

    unknown = unidentified_gpus(report.gpu_facts)
    if unknown:
        return failed("gpu-unknown", f"{unknown[0].subject}: {unknown[0].reason}")
    if not any(g.gates_exit_code for g in report.gpus):
        seen = next((f"{p.subject}: {p.reason}" for p in report.gpu_facts.problems), "")
        return failed("no-gpu", "no GPU found and none named" + (f" ({seen})" if seen else ""))
    return None


def _judged(report: ScanReport, health: NodeHealth) -> NodeHealth:
    """``health`` with what a judged node is labelled with: the gaps, each package's verdict
    on each gating GPU (packages by name, then GPU), each package's worst JIT status that is not
    ok (on the finding's GPU when that one gates, else on every gating GPU)."""
    from dataclasses import replace

    gating = {g.label: str(g.compute_capability) for g in report.gpus if g.gates_exit_code}
    verdicts = tuple(
        NodeVerdict(p.package, gating[p.gpu], p.verdict)
        for p in sorted(report.packages, key=lambda p: (p.package.lower(), p.gpu))
        if p.gpu in gating
    )
    worst: dict[tuple[str, str], str] = {}
    for f in report.jit:
        if f.status == "ok":
            continue
        for cc in [gating[f.gpu]] if f.gpu in gating else sorted(set(gating.values())):
            known = worst.get((f.package, cc), "")
            if _JIT_ORDER.get(f.status, 2) < _JIT_ORDER.get(known, 2):
                worst[(f.package, cc)] = f.status
    jit = tuple(NodeVerdict(package, cc, status) for (package, cc), status in worst.items())
    gaps = len(report.gaps) + len(report.jit_gaps)
    return replace(health, gaps=gaps, verdicts=verdicts, jit=jit)
