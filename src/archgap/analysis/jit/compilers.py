"""What every JIT compiler in the stack will do on first use, for the GPUs judged: FlashInfer,
Triton, torch C++ extensions and torch itself, and the CUDA runtimes against the driver (each
model in its own module, on the facts ``analysis.jit`` defines)."""

from __future__ import annotations

from collections.abc import Sequence

from archgap.analysis.jit.findings import JitFinding, runtime_findings, torch_findings
from archgap.analysis.jit.flashinfer import flashinfer_findings
from archgap.analysis.jit.patched import recognise
from archgap.analysis.jit.triton import triton_findings
from archgap.analysis.verdicts.compat import GpuTarget
from archgap.probe.facts import ToolchainFacts


def jit_findings(
    facts: ToolchainFacts,
    targets: Sequence[GpuTarget],
    driver_version: str | None = None,
    driver_source: str = "nvidia-smi",
    python: str | None = None,
) -> tuple[JitFinding, ...]:
    """Every JIT finding (ok, fails, unknown) for these GPUs; one that archgap's own applied
    patch answers says so (``python``: the environment's interpreter, for the undo command)."""
    return (
        *recognise(flashinfer_findings(facts, targets, driver_version), facts, python),
        *triton_findings(facts, targets, driver_version, driver_source),
        *torch_findings(facts, targets, driver_version, driver_source),
        *runtime_findings(
            facts.toolkits, driver_version, driver_source, any(t.gates_exit_code for t in targets)
        ),
    )
