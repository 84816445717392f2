"""The Python API: what the CLI commands do, as functions returning frozen dataclasses.

>>> from archgap.api import scan
>>> report = scan(gpus=["RTX PRO 6000"])
>>> [(p.package, p.verdict) for p in report.packages]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from archgap.analysis.compat import ComputeCapability, GpuTarget, matrix_targets, resolve_gpu
from archgap.analysis.jit import JitFinding
from archgap.analysis.verdicts import NONE, PackageVerdict, group_by_package, verdicts_for
from archgap.kb.gpus import identify
from archgap.model import BinaryFacts, GpuFacts, Problem, PythonEnvironment
from archgap.probe.system import System
from archgap.probe.toolkit import ToolchainFacts


@dataclass(frozen=True)
class ScanReport:
    environment: PythonEnvironment
    gpu_facts: GpuFacts
    gpus: tuple[GpuTarget, ...]
    binaries: tuple[BinaryFacts, ...]
    packages: tuple[PackageVerdict, ...]
    toolchains: ToolchainFacts | None = None  # toolkits and the environment JIT compilers see
    jit: tuple[JitFinding, ...] = ()  # what the JIT compilers will do (fails/unknown only)

    @property
    def jit_gaps(self) -> tuple[JitFinding, ...]:
        """JIT findings that fail for a GPU that is present or was named."""
        return tuple(f for f in self.jit if f.status == "fails" and f.gates_exit_code)

    @property
    def gaps(self) -> tuple[PackageVerdict, ...]:
        """Packages that cannot run at all on a GPU that is present or was named."""
        gating = {g.label for g in self.gpus if g.gates_exit_code}
        return tuple(p for p in self.packages if p.verdict == NONE and p.gpu in gating)

    @property
    def problems(self) -> tuple[Problem, ...]:
        facts = self.gpu_facts
        return self.environment.problems + facts.problems + unidentified_gpus(facts)


def unidentified_gpus(facts: GpuFacts) -> tuple[Problem, ...]:
    """GPUs whose compute capability neither the driver nor the knowledge base gives."""
    return tuple(
        Problem(
            f"GPU {gpu.index} ({gpu.name})",
            "compute capability unknown: the driver does not report it and kb/gpus.json does not "
            "know this name; name it with --gpu X.Y",
        )
        for gpu in facts.gpus
        if ComputeCapability.parse(gpu.compute_capability) is None and identify(gpu.name) is None
    )


def present_targets(facts: GpuFacts) -> tuple[GpuTarget, ...]:
    """One target per distinct compute capability among the GPUs nvidia-smi reported."""
    by_cc: dict[ComputeCapability, list[str]] = {}
    names: dict[ComputeCapability, str] = {}
    for gpu in facts.gpus:
        cc = ComputeCapability.parse(gpu.compute_capability)
        if cc is None:  # an old driver that does not report compute_cap: go by the name
            product = identify(gpu.name)
            cc = ComputeCapability.parse(product.compute_capability) if product else None
        if cc is None:
            continue  # reported by unidentified_gpus()
        by_cc.setdefault(cc, []).append(str(gpu.index))
        names.setdefault(cc, gpu.name)
    return tuple(
        GpuTarget(f"{names[cc]} (GPU {','.join(indices)})", cc, "present", facts.source)
        for cc, indices in sorted(by_cc.items())
    )


def choose_targets(facts: GpuFacts, named: Sequence[str]) -> tuple[GpuTarget, ...]:
    """Named GPUs and the present ones; the default matrix when there are neither.

    Raises ``archgap.analysis.compat.UnknownGpu`` for a name no table knows.
    """
    targets = [resolve_gpu(text) for text in named]
    targets += present_targets(facts)
    # One column per compute capability and role: "RTX PRO 6000" and "sm_120" are the same GPU.
    unique: dict[tuple[ComputeCapability, str], GpuTarget] = {}
    for target in targets:
        key = (target.compute_capability, target.role)
        if key in unique:
            first = unique[key]
            target = replace(first, label=f"{first.label} / {target.label}")
        unique[key] = target
    return tuple(unique.values()) or matrix_targets()


def scan(
    python: str | None = None,
    gpus: Sequence[str] = (),
    system: System | None = None,
    on_file: Callable[[str, int], None] | None = None,
) -> ScanReport:
    """Scan an environment's native libraries and judge each package against each GPU.

    ``on_file(path, total)`` is called before each file is read (for progress bars).
    """
    from archgap.analysis.jit import jit_findings
    from archgap.kb.toolchain import all_source_checks, max_ptx_isa_for_driver
    from archgap.probe.fatbin import read_binary
    from archgap.probe.gpu import probe_gpus
    from archgap.probe.pyenv import discover_environment
    from archgap.probe.toolkit import discover_toolchains

    system = system or System.local()
    gpu_facts = probe_gpus(system)
    targets = choose_targets(gpu_facts, gpus)
    env = discover_environment(system, python)
    owned = {p for d in env.distributions for p in d.native_files}
    paths = sorted(owned | set(env.unowned_native_files))
    binaries = []
    for path in paths:
        if on_file:
            on_file(path, len(paths))
        binaries.append(read_binary(path, deep=True))
    groups = group_by_package(env, binaries)
    isa = max_ptx_isa_for_driver(gpu_facts.driver_version) if gpu_facts.driver_version else None
    packages = verdicts_for(groups, targets, _isa_tuple(isa))
    toolchains = discover_toolchains(system, env.site_packages, all_source_checks())
    jit = jit_findings(toolchains, targets, gpu_facts.driver_version, gpu_facts.source)
    return ScanReport(env, gpu_facts, targets, tuple(binaries), packages, toolchains, jit)


def _isa_tuple(isa: str | None) -> tuple[int, int] | None:
    if not isa:
        return None
    major, _, minor = isa.partition(".")
    return (int(major), int(minor)) if major.isdigit() and minor.isdigit() else None
