"""When a node's GPUs are faulty rather than absent: one rule for scan --health and fleet.

nvidia-smi blocks or fails when a GPU has fallen off the bus or the driver is not loaded; a node
without nvidia-smi has no NVIDIA driver installed, so no GPU to judge. Pure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archgap.probe.environment.gpu import NVIDIA_SMI_MISSING

if TYPE_CHECKING:
    from archgap.probe.facts import GpuFacts


def gpu_fault(gpu_facts: GpuFacts) -> str | None:
    """Why the node's GPUs are faulty, or None: nvidia-smi is installed but hung or failed and
    no GPU answered NVML either."""
    if gpu_facts.gpus:
        return None
    return next(
        (p.reason for p in gpu_facts.problems
         if p.subject == "nvidia-smi" and p.reason != NVIDIA_SMI_MISSING),
        None,
    )  # fmt: skip
