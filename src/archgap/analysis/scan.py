"""A scan's verdicts from probe facts: which GPUs to judge, and every package against each.

Pure: the facts may come from this machine or any other (``archgap probe``, a fleet engine).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from archgap.analysis.jit.caches import CacheReport, audit_caches
from archgap.analysis.jit.compilers import jit_findings
from archgap.analysis.jit.findings import JitFinding, blocked_on
from archgap.analysis.jit.runtime_compilers import runtime_compiler_findings
from archgap.analysis.verdicts.compat import (
    ComputeCapability,
    GpuTarget,
    matrix_targets,
    resolve_gpu,
)
from archgap.analysis.verdicts.load import LoadFinding, load_model
from archgap.analysis.verdicts.platform import (
    PlatformFinding,
    image_mismatches,
    jit_blocked,
    platform_blocked,
    platform_findings,
)
from archgap.analysis.verdicts.verdicts import (
    BLOCKED,
    JIT,
    KERNEL_LIBRARY,
    NATIVE,
    NONE,
    PARTIAL,
    UNKNOWN,
    PackageVerdict,
    group_by_package,
    verdicts_for,
)
from archgap.codec import decode, prepare
from archgap.errors import EXIT_GAP, EXIT_OK
from archgap.image.facts import ImageFacts
from archgap.kb.gpus import identify
from archgap.kb.toolchain import max_ptx_isa_for_driver
from archgap.probe.facts import (
    BinaryFacts,
    Gpu,
    GpuFacts,
    LoaderFacts,
    ProbeResponse,
    Problem,
    PythonEnvironment,
    ToolchainFacts,
)

T = TypeVar("T")


@dataclass(frozen=True)
class ScanReport:
    environment: PythonEnvironment
    gpu_facts: GpuFacts
    gpus: tuple[GpuTarget, ...]
    binaries: tuple[BinaryFacts, ...]
    packages: tuple[PackageVerdict, ...]
    toolchains: ToolchainFacts | None = None  # toolkits and the environment JIT compilers see
    jit: tuple[JitFinding, ...] = ()  # what the JIT compilers will do (ok, fails, unknown)
    collection_errors: tuple[Problem, ...] = ()  # probe sections that failed
    caches: CacheReport | None = None  # the JIT caches of the environment's user
    # Where the time went: each probe section on the target (reading), then "analysis" (here).
    seconds: tuple[tuple[str, float], ...] = ()
    platform: tuple[PlatformFinding, ...] = ()  # the environment's CPU is not the GPU host's
    driver: str | None = None  # the driver judged against (detected, or --driver)
    driver_source: str = ""
    strict: bool = False  # --strict: 'partial' on a gating GPU is a gap too
    images: tuple[ImageFacts, ...] = ()  # container images judged (their platform, Python sites)
    target: str = ""  # where the facts were collected when not here: "root@gpu1", a container
    load: tuple[LoadFinding, ...] = ()  # broken links of the load model (analysis/verdicts/load.py)

    @property
    def jit_gaps(self) -> tuple[JitFinding, ...]:
        """JIT findings that fail for a GPU that is present or was named, or cannot run there
        at all (blocked: the environment is of another CPU than its systems)."""
        return tuple(f for f in self.jit if f.status in ("fails", "blocked") and f.gates_exit_code)

    @property
    def unread(self) -> str | None:
        """Why no environment was read (its interpreter did not run, or is no Python); None when
        its site-packages were."""
        env = self.environment
        if env.site_packages:
            return None
        reasons = "; ".join(p.reason for p in env.problems)
        return reasons or f"no site-packages in {env.executable or 'the interpreter'}"

    @property
    def has_gap(self) -> bool:
        """Whether the run fails: a package or a JIT build cannot work on a gating GPU."""
        return bool(self.gaps or self.jit_gaps or self.platform_gaps or self.load_gaps)

    @property
    def exit_code(self) -> int:
        """``archgap scan``'s: 1 when the run fails on a gating GPU (``has_gap``), else 0."""
        return EXIT_GAP if self.has_gap else EXIT_OK

    @property
    def load_gaps(self) -> tuple[LoadFinding, ...]:
        """Broken links of the load model that fail a GPU that is present or was named."""
        return tuple(f for f in self.load if f.status == "fails" and f.gates_exit_code)

    @property
    def platform_gaps(self) -> tuple[PlatformFinding, ...]:
        return tuple(f for f in self.platform if f.gates_exit_code)

    @property
    def gaps(self) -> tuple[PackageVerdict, ...]:
        """Packages not shown to run on a GPU that is present or was named (``fails``)."""
        gating = {g.label for g in self.gpus if g.gates_exit_code}
        return tuple(p for p in self.packages if p.gpu in gating and fails(p, self.strict))

    @property
    def problems(self) -> tuple[Problem, ...]:
        facts = self.gpu_facts
        return (
            self.collection_errors
            + self.environment.problems
            + image_mismatches(self.images, self.binaries)
            + facts.problems
            + unidentified_gpus(facts)
        )


def fails(package: PackageVerdict, strict: bool) -> bool:
    """A package fails a gating GPU when nothing in it runs there (none, blocked), or nothing
    could be read (unknown proves nothing, as in the build gate); with ``strict`` (the meaning
    --strict has everywhere) every kernel library must hold SASS for it: PTX only, a library with
    nothing for it or too little ('partial') or one that could not be read fail too."""
    if package.verdict in (NONE, BLOCKED, UNKNOWN):
        return True
    kernels = (lib for lib in package.libraries if lib.role == KERNEL_LIBRARY)
    return strict and (
        package.verdict in (PARTIAL, JIT) or any(lib.verdict != NATIVE for lib in kernels)
    )


def gpu_capability(gpu: Gpu) -> ComputeCapability | None:
    """What the driver reports; for an old driver that does not, what the product name says."""
    cc = ComputeCapability.parse(gpu.compute_capability)
    if cc is None:
        product = identify(gpu.name)
        cc = ComputeCapability.parse(product.compute_capability) if product else None
    return cc


def unidentified_gpus(facts: GpuFacts) -> tuple[Problem, ...]:
    """GPUs whose compute capability neither the driver nor the knowledge base gives."""
    return tuple(
        Problem(
            f"GPU {gpu.index} ({gpu.name})",
            "compute capability unknown: the driver does not report it and kb/gpus.json does not "
            "know this name; name it with --gpu X.Y",
        )
        for gpu in facts.gpus
        if gpu_capability(gpu) is None
    )


def present_targets(facts: GpuFacts) -> tuple[GpuTarget, ...]:
    """One target per distinct compute capability among the GPUs nvidia-smi reported."""
    by_cc: dict[ComputeCapability, list[str]] = {}
    names: dict[ComputeCapability, str] = {}
    for gpu in facts.gpus:
        cc = gpu_capability(gpu)
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

    Raises ``archgap.analysis.verdicts.compat.UnknownGpu`` for a name no table knows.
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


def prepare_judging() -> None:
    """Build now what the first ``report_from_facts`` would build: the decoders of the sections
    it reads and the JIT rules it imports on first use (a local scan's parent does this while
    its probe runs: 5 ms off the time after the facts arrive)."""
    prepare(GpuFacts, PythonEnvironment, BinaryFacts, ToolchainFacts, ImageFacts, LoaderFacts)


def _section(facts: ProbeResponse, name: str, cls: type[T]) -> T | None:
    data = facts.section(name)
    return None if data is None else decode(cls, data)


def _jit(
    env: PythonEnvironment,
    binaries: tuple[BinaryFacts, ...],
    targets: tuple[GpuTarget, ...],
    toolchains: ToolchainFacts | None,
    version: str | None,
    source: str,
) -> tuple[JitFinding, ...]:
    """What the JIT compilers will do for each GPU: the toolchain's, then those a package
    carries (which need no toolchain: wheels too)."""
    if not targets:
        return ()
    jit: tuple[JitFinding, ...] = ()
    if toolchains is not None:
        jit = tuple(jit_findings(toolchains, targets, version, source, env.executable or None))
    return jit + tuple(runtime_compiler_findings(env, binaries, targets, version, source))


def report_from_facts(
    facts: ProbeResponse,
    gpus: Sequence[str] = (),
    matrix: bool = True,
    driver: str | None = None,
    strict: bool = False,
) -> ScanReport:
    """Judge probe facts (from any host) against the named, present or default GPUs. Pure.

    ``driver`` (``--driver``) replaces the detected driver version: the PTX ISA it can JIT and
    the CUDA runtimes it can run are judged against it. Raises ``UnknownGpu`` for a GPU name no
    table knows and ``DecodeError`` for facts that do not have the probe's shape.
    """
    started = time.perf_counter()
    errors = tuple(Problem(f"probe: {k}", v) for k, v in facts.errors.items())
    gpu_facts = _section(facts, "gpu", GpuFacts) or GpuFacts((), None, None, "none")
    env = _section(facts, "python", PythonEnvironment) or PythonEnvironment("", "", (), (), ())
    found = facts.section("binaries") or ()
    binaries = tuple(decode(BinaryFacts, b) for b in found)
    toolchains = _section(facts, "toolchains", ToolchainFacts)
    targets = choose_targets(gpu_facts, gpus) if matrix or gpus or gpu_facts.gpus else ()
    version, source = (
        (driver, "--driver") if driver else (gpu_facts.driver_version, gpu_facts.source)
    )
    isa = max_ptx_isa_for_driver(version) if version else None
    loader = _section(facts, "loader", LoaderFacts)
    load = load_model(env, binaries, targets, version, source, loader, toolchains, facts.platform)
    images = tuple(decode(ImageFacts, i) for i in facts.section("images") or ())
    off_platform = platform_blocked(binaries, targets, facts.platform, images)
    load = replace(load, blocked={**load.blocked, **off_platform})
    packages = verdicts_for(group_by_package(env, binaries), targets, _isa_tuple(isa), load)
    jit = _jit(env, binaries, targets, toolchains, version, source)
    jit = blocked_on(jit, jit_blocked(binaries, targets, facts.platform, images))
    cache_data = facts.section("caches")
    caches = (
        audit_caches(cache_data, targets, toolchains, env.python_version)
        if isinstance(cache_data, dict)
        else None
    )
    seconds = (*facts.seconds.items(), ("analysis", time.perf_counter() - started))
    findings = platform_findings(binaries, targets, facts.platform, images)
    return ScanReport(
        env, gpu_facts, targets, binaries, packages, toolchains, jit, errors, caches, seconds,
        platform=findings, driver=version, driver_source=source if version else "",
        strict=strict, images=images, load=load.findings,
    )  # fmt: skip


def _isa_tuple(isa: str | None) -> tuple[int, int] | None:
    if not isa:
        return None
    major, _, minor = isa.partition(".")
    return (int(major), int(minor)) if major.isdigit() and minor.isdigit() else None
