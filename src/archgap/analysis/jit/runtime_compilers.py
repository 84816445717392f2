"""Packages that compile device code while they run with a compiler they carry (found by
content: ``BinaryFacts.compilers``, probe.binary.rtcompilers): one JIT row per package and GPU.

What the compiler can make comes from its own tables: the targets it names (NVRTC's
``-arch=compute_XX`` list, the NVPTX backend's processors) and the PTX ISA it emits (NVRTC: its
release's; NVPTX: the newest its feature table names). On a GPU:

- among its targets: it compiles for the GPU's own target (``ok``);
- older than its oldest target: it cannot compile for it (``fails``; NVRTC 13 has no target
  below compute_75);
- newer than a target it has: it can emit PTX for an older target, which the driver
  JIT-compiles for the GPU if the driver knows that PTX ISA (kb/runtime_compilers.json
  "ptx_jit": PTX forward compatibility). Whether the package asks for that older target is
  the package's own rule (kb "packages": taichi caps its target at sm_86, warp compiles PTX for
  compute_75 when NVRTC lacks the GPU's target); a package with no entry is ``unknown``;
- a package with a compiler found but no entry gets ``unknown`` rows that say what was found.

Whatever it compiles runs only where the driver runs: a driver older than the GPU
architecture's first one (or past its last branch) runs nothing there, and NVRTC's code is of
its release's CUDA major, which needs a driver that runs that major (warp 1.19.0 enumerates no
CUDA device below a driver of its toolkit's major, context.py min_driver_version); such a
driver makes the row ``fails`` with the driver named, as the load model's checks 1 and 2 say.
"""

from __future__ import annotations

from collections.abc import Sequence

from archgap.analysis.fixes.engine import Fix, worded
from archgap.analysis.jit.findings import Fact, JitFinding, JitStatus, gpu_finding
from archgap.analysis.verdicts.compat import GpuTarget
from archgap.analysis.verdicts.drivers import cuda_majors
from archgap.kb import runtime_compilers as kb
from archgap.kb.load import gpu_architecture
from archgap.kb.toolchain import (
    driver_runs_runtime,
    max_ptx_isa_for_driver,
    toolkit_release,
)
from archgap.probe.facts import BinaryFacts, Distribution, PythonEnvironment, RuntimeCompiler

WHEN = "when it first compiles a kernel for the GPU"
NAMES = {"nvrtc": "NVRTC", "nvptx": "LLVM NVPTX backend"}


def runtime_compiler_findings(
    env: PythonEnvironment,
    binaries: Sequence[BinaryFacts],
    targets: Sequence[GpuTarget],
    driver_version: str | None = None,
    driver_source: str = "nvidia-smi",
) -> tuple[JitFinding, ...]:
    """A row per package that carries a run-time compiler, and per GPU judged."""
    by_path = {b.path: b for b in binaries if b.compilers}
    found: list[JitFinding] = []
    for dist in env.distributions:
        carried = [(p, c) for p in dist.native_files if p in by_path
                   for c in by_path[p].compilers or ()]  # fmt: skip
        if carried and not any(dist.name.startswith(p) for p, _ in kb.no_row()):
            majors = {p: cuda_majors(by_path[p], dist.name) for p, _ in carried}
            found.extend(_rows(dist, carried, majors, targets, driver_version, driver_source))
    return tuple(found)


def _rows(
    dist: Distribution,
    carried: list[tuple[str, RuntimeCompiler]],
    majors: dict[str, dict[int, tuple[str, str]]],
    targets: Sequence[GpuTarget],
    driver_version: str | None,
    driver_source: str,
) -> list[JitFinding]:
    """One package's rows, a row per GPU: judged by the compiler its model names (or the first
    it carries), ``unknown`` where the model's compiler is not among what it carries."""
    model = kb.package_compilers().get(dist.name)
    chosen = [pc for pc in carried if model is None or pc[1].kind == model.compiler]
    if not chosen and model is not None:
        kinds = ", ".join(sorted({NAMES[c.kind] for _, c in carried}))
        why = (
            f"{dist.name} compiles with {NAMES[model.compiler]}, which is not among what it "
            f"carries ({kinds})"
        )
        return [_row(dist.name, dist.version, t, "unknown", why, [], []) for t in targets]
    path, compiler = chosen[0]
    judge = (path, compiler, model, driver_version, driver_source, majors[path])
    return [_judge(dist.name, dist.version, target, *judge) for target in targets]


def _judge(
    package: str,
    version: str,
    target: GpuTarget,
    path: str,
    compiler: RuntimeCompiler,
    model: kb.PackageCompiler | None,
    driver: str | None,
    driver_source: str,
    majors: dict[int, tuple[str, str]],
) -> JitFinding:
    cc = target.compute_capability
    gpu = cc.major * 10 + cc.minor
    name, isa = _describe(compiler)
    chain = [Fact(f"{name} in {path.rsplit('/', 1)[-1]}: {_span(compiler.targets)}", path)]
    if model is None:
        span = _span(compiler.targets)
        cause = f"{package} carries {name} ({span}); how it picks its target is not modelled"
        return _row(package, version, target, "unknown", cause, chain, [])
    chain.append(Fact(f"{package}: {model.newer_gpu}", model.source))
    where = (name, chain, driver, driver_source, majors)
    early = _cannot_judge(package, version, target, compiler, *where)
    if early is not None:
        return early
    if gpu in compiler.targets:
        cause = f"{package} on {target.label}: its {name} compiles for sm_{gpu} itself"
        return _row(package, version, target, "ok", cause, chain, [])
    older = _older_targets(model, compiler, gpu)
    if not older:
        return _no_target(package, version, target, name, compiler, model, chain)
    rule = kb.ptx_jit_rule()
    chain.append(Fact(rule.rule, rule.source))
    have = max_ptx_isa_for_driver(driver) if driver else None
    via = (
        f"PTX for an older target (compute_{max(older)} at most), JIT-compiled by the driver"
        f" for {cc.major}.{cc.minor}"
    )
    if have is not None and isa is not None and _isa(have) < _isa(isa):
        chain.append(Fact(f"driver {driver} JITs PTX ISA <= {have}", driver_source))
        status: JitStatus = "fails" if compiler.kind == "nvrtc" else "unknown"
        cause = f"{via}, but its {name} emits PTX ISA {isa}"
        if status == "unknown":
            cause = f"{via}; it emits PTX ISA up to {isa}, driver {driver} JITs <= {have}"
        fix = worded("runtime-compiler-ptx-isa", kind="upgrade", isa=isa)
        return _row(package, version, target, status, cause, chain, [fix])
    if have is None and isa is not None:
        via += f" (a driver that knows PTX ISA {isa})"
    return _row(package, version, target, "ok", f"{package} on {target.label}: {via}", chain, [])


def _cannot_judge(
    package: str,
    version: str,
    target: GpuTarget,
    compiler: RuntimeCompiler,
    name: str,
    chain: list[Fact],
    driver: str | None,
    driver_source: str,
    majors: dict[int, tuple[str, str]],
) -> JitFinding | None:
    """The row where the targets do not decide: a driver that runs nothing the compiler makes
    on the GPU (``fails``), targets that could not be read (``unknown``)."""
    refused = _driver_refuses(target, compiler, name, driver, majors) if driver else None
    if refused is not None:
        chain.append(Fact(f"driver {driver}", driver_source))
        fix = worded("runtime-compiler-driver", kind="upgrade", gpu=target.label, compiler=name)
        return _row(package, version, target, "fails", refused, chain, [fix])
    if not compiler.targets:
        return _row(package, version, target, "unknown",
                    f"the targets of its {name} could not be read", chain, [])  # fmt: skip
    return None


def _older_targets(model: kb.PackageCompiler, compiler: RuntimeCompiler, gpu: int) -> list[int]:
    """The compiler's targets older than the GPU that the package may ask for (none where it
    asks for the GPU's own target only)."""
    if model.own_target_only:
        return []
    return [t for t in compiler.targets if t < gpu]


def _no_target(
    package: str,
    version: str,
    target: GpuTarget,
    name: str,
    compiler: RuntimeCompiler,
    model: kb.PackageCompiler,
    chain: list[Fact],
) -> JitFinding:
    """``fails``: the compiler lacks the GPU's target and the package asks for no other (its
    own target only), or it has no target at or below the GPU's."""
    gpu = target.compute_capability.major * 10 + target.compute_capability.minor
    if model.own_target_only and compiler.targets[0] < gpu:
        cause = (
            f"{package} asks its {name} for sm_{gpu}, the GPU's own target, which it does not "
            f"have (newest compute_{compiler.targets[-1]}): 'nvrtc: error: invalid value for "
            f"--gpu-architecture (-arch)'"
        )
        fix = worded("runtime-compiler-newer-build", kind="upgrade", package=package, sm=gpu)
        return _row(package, version, target, "fails", cause, chain, [fix])
    cause = f"its {name} has no target at or below sm_{gpu} (oldest compute_{compiler.targets[0]})"
    fix = worded("runtime-compiler-older-build", kind="upgrade", package=package, sm=gpu)
    return _row(package, version, target, "fails", cause, chain, [fix])


def _driver_refuses(
    target: GpuTarget,
    compiler: RuntimeCompiler,
    name: str,
    driver: str,
    majors: dict[int, tuple[str, str]],
) -> str | None:
    """Why nothing the compiler makes runs on the GPU with this driver (None: the driver runs
    it): the GPU's architecture outside the driver's range (kb/drivers.json
    gpu_architectures, the load model's check 1), or NVRTC's CUDA major not run by the driver
    (minor-version compatibility's floor, check 2: CUDA 13 needs >= 580)."""
    outside = _outside_driver(target, driver)
    if outside is not None:
        return outside
    if compiler.kind == "nvrtc" and compiler.release:
        runs, rule = driver_runs_runtime(driver, compiler.release)
        if runs is False:
            major = compiler.release.split(".")[0]
            return (
                f"its {name} makes CUDA {major} code, which driver {driver} does not run ({rule})"
            )
    for cuda, (what, _source) in sorted(majors.items()):
        runs, rule = driver_runs_runtime(driver, f"{cuda}.0")
        if runs is False:
            return (
                f"the library that carries its {name} is CUDA {cuda} ({what}), which driver "
                f"{driver} does not run ({rule}): it does not load, nor compile"
            )
    return None


def _outside_driver(target: GpuTarget, driver: str) -> str | None:
    """Why the driver runs nothing on the GPU's architecture (None: it runs it)."""
    arch = gpu_architecture(str(target.compute_capability))
    gap = arch.driver_gap(driver) if arch is not None else None
    if gap is None:
        return None
    which, why = gap
    return f"{why}: nothing it compiles runs on {target.label}" if which == "first" else why


def _describe(compiler: RuntimeCompiler) -> tuple[str, str | None]:
    """(its name, the PTX ISA it emits at most)."""
    if compiler.kind == "nvrtc":
        release = toolkit_release(compiler.release) if compiler.release else None
        name = f"NVRTC {compiler.release}" if compiler.release else "NVRTC"
        return name, release.ptx_isa if release else None
    return f"LLVM NVPTX backend (PTX ISA up to {compiler.ptx_isa})", compiler.ptx_isa


def _span(targets: tuple[int, ...]) -> str:
    return f"targets sm_{targets[0]} ... sm_{targets[-1]}" if targets else "no target read"


def _isa(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".") if p.isdigit())


def _row(
    package: str,
    version: str,
    target: GpuTarget,
    status: JitStatus,
    cause: str,
    chain: Sequence[Fact],
    fixes: Sequence[Fix],
) -> JitFinding:
    return gpu_finding(package, version, target, status, None, cause, chain, fixes, WHEN)


__all__ = ["runtime_compiler_findings"]
