"""The load model's checks against the driver (docs/load-model.md, checks 1, 2 and 7).

1. **The driver runs the GPU**: from the driver of the first CUDA toolkit that supports the
   architecture up to its last driver branch (NVIDIA's architecture matrix).
2. **The driver runs the library's CUDA**: a library of CUDA major N needs a driver that runs
   CUDA N.x (minor-version compatibility's floor, NVIDIA's Table 2: CUDA 13 needs >= 580). Its
   major is read from its content first (``cuda_majors``): the highest PTX ISA it carries, the
   toolkit its cubins' notes name, the newest toolkit banner of its read-only data (a static
   runtime's or NVRTC's, the notes of cubins kept in data: CUPTI), then the CUDA runtime its
   ``DT_NEEDED`` names, then the wheel's path or name.
7. **The driver can JIT the PTX it is given** by a package whose compiler emits PTX.

Pure: facts in, findings out.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence

from packaging.utils import canonicalize_name

from archgap.analysis.verdicts.compat import GpuTarget
from archgap.analysis.verdicts.loadcommon import LoadFinding
from archgap.analysis.verdicts.loadcommon import base as _base
from archgap.analysis.verdicts.loadcommon import block as _block
from archgap.analysis.verdicts.loadcommon import find_compiler as _find_compiler
from archgap.analysis.verdicts.loadcommon import names as _names
from archgap.kb import load as kb
from archgap.kb.fixes import fix_text
from archgap.kb.toolchain import (
    ToolkitRelease,
    driver_cuda_version,
    driver_runs_runtime,
    max_ptx_isa_for_driver,
    minor_version_compat,
    toolkit_release,
    toolkit_releases,
    version_tuple,
)
from archgap.probe.facts import (
    BinaryFacts,
    Distribution,
    LoaderFacts,
    PythonEnvironment,
    ToolchainFacts,
)

TKINFO_SOURCE = (
    "the cubin's .note.nv.tkinfo, where ptxas and nvlink write their banner ('Cuda compilation "
    "tools, release X.Y') (docs/reference/fatbin-format.md)"
)
BANNER_SOURCE = (
    "the CUDA toolkit's banner 'Cuda compilation tools, release X.Y, VX.Y.Z', which its tools "
    "write into cubin notes and its static libraries keep as a string (probe/binary/banner.py)"
)


def driver_gpu(
    targets: Sequence[GpuTarget], driver: str, source: str, blocked: dict[tuple[str, str], str]
) -> list[LoadFinding]:
    """Check 1: one finding per GPU the driver cannot run."""
    findings = []
    for target in targets:
        arch = kb.gpu_architecture(str(target.compute_capability))
        gap = arch.driver_gap(driver) if arch is not None else None
        if arch is None or gap is None:
            continue
        which, why = gap
        if which == "first":
            fix = fix_text(
                "driver-for-architecture", min_driver=arch.min_driver, first_cuda=arch.first_cuda
            )
        else:
            fix = fix_text(
                "driver-last-branch",
                last_branch=arch.last_driver_branch,
                architecture=arch.architecture,
            )
        blocked[("", target.label)] = why
        findings.append(
            LoadFinding(
                "driver-gpu",
                "fails",
                target.label,
                "",
                (),
                (
                    f"{target.label}: {arch.architecture} ({target.compute_capability})",
                    f"driver {driver} ({source})",
                    why,
                ),
                f"{why}: no package can run on {target.label} with this driver, whatever its "
                "kernels",
                fix,
                arch.source,
                target.gates_exit_code,
            )
        )
    return findings


def cuda_majors(binary: BinaryFacts, package: str) -> dict[int, tuple[str, str]]:
    """The CUDA majors of the library -> (what says so, its source), the first that says each:
    its content (the highest PTX ISA of its PTX, the toolkit its cubins' notes name, the
    newest toolkit banner in its read-only data: a CUDA 13 build with its runtime linked
    statically needs no libcudart.so.13), then a ``DT_NEEDED`` name of that major, then for
    NVIDIA's own wheels the wheel's path or name."""
    majors = _content_majors(binary)
    known = kb.cuda_libraries()
    for name in binary.needed or ():
        entry = known.get(name)
        if entry is not None and entry.cuda_major is not None:
            majors.setdefault(entry.cuda_major, (f"it needs {name}", entry.source))
    wheel = kb.wheel_cuda_major()
    match = wheel.path.search(binary.path)
    if match:
        majors.setdefault(
            int(match.group(1)), (f"it is in nvidia/cu{match.group(1)}/", wheel.source)
        )
    match = wheel.name.match(package)
    if match:
        majors.setdefault(int(match.group(1)), (f"it is of {package}", wheel.source))
    return majors


def _content_majors(binary: BinaryFacts) -> dict[int, tuple[str, str]]:
    """What the library's content says of its CUDA major, the first that says each: the
    highest PTX ISA, its cubins' toolkit notes, the banner in its read-only data."""
    majors: dict[int, tuple[str, str]] = {}
    isas = [e.ptx_isa for e in binary.entries if e.kind == "ptx" and e.ptx_isa]
    isa = max(isas, key=lambda v: version_tuple(v) or (), default=None)
    release = _release_of_ptx_isa(isa) if isa else None
    if isa and release is not None:
        cuda, exact = release
        named = f"CUDA {cuda.cuda}" if exact else f"a CUDA newer than {cuda.cuda}"
        majors.setdefault(
            _major(cuda.cuda), (f"its PTX is ISA {isa}, which {named} emits", cuda.source)
        )
    for built in sorted(binary.toolkits, key=lambda v: version_tuple(v) or (), reverse=True):
        if built.split(".")[0].isdigit():
            said = f"its cubins' toolkit note says 'Cuda compilation tools, release {built}'"
            majors.setdefault(_major(built), (said, TKINFO_SOURCE))
    banner = binary.cuda_release
    if banner and banner.split(".")[0].isdigit():
        said = f"its read-only data holds the banner 'Cuda compilation tools, release {banner}'"
        majors.setdefault(_major(banner), (said, BANNER_SOURCE))
    return majors


def _major(cuda: str) -> int:
    return int(cuda.split(".")[0])


def _release_of_ptx_isa(isa: str) -> tuple[ToolkitRelease, bool] | None:
    """The toolkit that first emits PTX ISA ``isa`` and True; for an ISA newer than the table
    knows, the newest toolkit of the same ISA major and False (its CUDA major: PTX ISA 9.x is
    CUDA 13's, 8.x CUDA 12's); None for an ISA the table cannot place."""
    want = version_tuple(isa) or ()
    for release in toolkit_releases():
        if version_tuple(release.ptx_isa) == want:
            return release, True
    same = [r for r in toolkit_releases() if (version_tuple(r.ptx_isa) or ())[:1] == want[:1]]
    older = [r for r in same if (version_tuple(r.ptx_isa) or ()) < want]
    return (older[-1], False) if older else None


def driver_cuda(
    elves: Sequence[BinaryFacts],
    owner: Mapping[str, str],
    driver: str,
    source: str,
    blocked: dict[tuple[str, str], str],
    gating: bool,
) -> list[LoadFinding]:
    """Check 2: one finding per package and CUDA major the driver cannot run."""
    failing: dict[tuple[str, int], list[tuple[BinaryFacts, tuple[str, str]]]] = {}
    for binary in elves:
        package = owner.get(binary.path, "")
        for major, said in cuda_majors(binary, package).items():
            if driver_runs_runtime(driver, f"{major}.0")[0] is False:
                failing.setdefault((package, major), []).append((binary, said))
    floors = {rule.runtime_major: rule for rule in minor_version_compat()}
    findings = []
    for (package, major), libs in sorted(failing.items()):
        first, (evidence, evidence_source) = libs[0]
        floor = floors.get(major)
        need = f"driver >= {floor.driver_min}" if floor else f"a driver that runs CUDA {major}"
        lack = f"and driver {driver} does not run CUDA {major}"
        why = f"needs {need} (CUDA {major}: {evidence}), {lack}"
        for binary, (own, _) in libs:  # each library by what its own content says
            _block(blocked, binary.path, f"needs {need} (CUDA {major}: {own}), {lack}")
        chain = (
            f"{_base(first.path)}: {evidence} (CUDA {major}: {evidence_source})",
            f"CUDA {major}.x needs {need}",
            f"driver {driver} ({source})",
        )
        cause = (
            f"{_names(b for b, _ in libs)} of {package or 'no distribution'}: {why} "
            "('CUDA driver version is insufficient for CUDA runtime version')"
        )
        fix = fix_text("driver-for-cuda-major", need=need, package=package or "the library")
        source_of = floor.source if floor else evidence_source
        paths = tuple(b.path for b, _ in libs)
        findings.append(
            LoadFinding(
                "driver-cuda", "fails", "", package, paths, chain, cause, fix, source_of, gating
            )
        )
    return findings


def driver_jit(
    env: PythonEnvironment,
    loader: LoaderFacts | None,
    toolchains: ToolchainFacts | None,
    driver: str | None,
    blocked: dict[tuple[str, str], str],
    gating: bool,
) -> list[LoadFinding]:
    """Check 7: each package whose PTX the driver JIT-compiles has its compiler, and a driver
    that knows that compiler's PTX ISA (or a linker that compiles the PTX instead)."""
    findings = []
    for rule in kb.driver_jit_rules():
        for dist in env.distributions:
            if canonicalize_name(dist.name) != rule.package:
                continue
            gap = _driver_jit_gap(rule, dist, env, loader, toolchains, driver)
            if gap is None:
                continue
            why, evidence, cause, fix = gap
            libs = tuple(p for p in dist.native_files if p.endswith(".so"))
            for path in libs:
                _block(blocked, path, why)
            first = f"{dist.name} {dist.version} compiles its kernels with {rule.compiler}"
            findings.append(
                LoadFinding(
                    "driver-jit", "fails", "", dist.name, libs, (first, *evidence),
                    f"{dist.name}: {why}: {cause}", fix, rule.source, gating,
                )
            )  # fmt: skip
    return findings


def _driver_jit_gap(
    rule: kb.DriverJitRule,
    dist: Distribution,
    env: PythonEnvironment,
    loader: LoaderFacts | None,
    toolchains: ToolchainFacts | None,
    driver: str | None,
) -> tuple[str, tuple[str, ...], str, str] | None:
    """Why the package's kernels cannot be JIT-compiled (its compiler missing, or emitting PTX
    newer than the driver JITs), the evidence, what follows and the fix; None when they can, or
    when the facts cannot tell."""
    found = _find_nvvm(rule, env, loader, toolchains)
    if found is None:
        if loader is None:
            return None  # the target's loader was not read: it may have it
        return (
            f"{rule.compiler} ({rule.library}) is not installed",
            (f"{rule.library}: not in site-packages, a toolkit or the loader",),
            "it cannot compile a kernel on any GPU",
            fix_text("install-jit-compiler", requirement=rule.extra_for(driver)),
        )
    version, where = found
    release = toolkit_release(version) if version else None
    have = max_ptx_isa_for_driver(driver) if driver else None
    if release is None or not release.ptx_isa or have is None:
        return None  # a version not known, or no driver: nothing to compare
    if (version_tuple(release.ptx_isa) or ()) <= (version_tuple(have) or ()):
        return None
    linker = rule.linker.format(major=release.cuda.split(".")[0])
    if _find_compiler(env, loader, None, linker, "") is not None:
        return None  # nvJitLink compiles the PTX: the driver only runs the cubin
    why = (
        f"{rule.compiler} {version} ({where}) emits PTX ISA {release.ptx_isa}, and "
        f"driver {driver} JIT-compiles PTX ISA up to {have} "
        "('CUDA_ERROR_UNSUPPORTED_PTX_VERSION')"
    )
    runs = driver_cuda_version(driver or "") or ""
    wheel = rule.wheels.get(runs.split(".")[0])
    evidence = (
        f"{rule.compiler} {version}: {where}",
        f"without {linker}, the driver JIT-compiles its PTX",
        f"driver {driver}: PTX ISA <= {have}",
    )
    if wheel:
        fix = fix_text(
            "driver-for-ptx-isa-or-older-compiler",
            min_driver=release.min_driver_linux, wheel=wheel, cuda=runs,
        )  # fmt: skip
    else:
        fix = fix_text("driver-for-ptx-isa", min_driver=release.min_driver_linux)
    return why, evidence, "no kernel it compiles loads", fix


def _find_nvvm(
    rule: kb.DriverJitRule,
    env: PythonEnvironment,
    loader: LoaderFacts | None,
    toolchains: ToolchainFacts | None,
) -> tuple[str | None, str] | None:
    """(NVVM's CUDA version, or None when not known; where), in cuda.pathfinder's order: a
    wheel that ships it, any other installed file, a toolkit's nvvm/lib64, the loader's cache."""

    def ships(dist_files: Iterable[str]) -> str | None:
        return next((p for p in dist_files if fnmatch.fnmatch(_base(p), rule.library)), None)

    wheels = set(rule.wheels.values())
    for dist in env.distributions:
        path = ships(dist.native_files)
        if path is not None and dist.name in wheels:
            return dist.version, f"{path} of {dist.name} {dist.version}"
    for dist in env.distributions:
        path = ships(dist.native_files)
        if path is not None:
            return None, path
    for tk in toolchains.toolkits if toolchains is not None else ():
        if tk.tool == "nvcc" and tk.status == "ok" and tk.version:
            return tk.full_version or tk.version, f"{tk.home}/nvvm/lib64 ({tk.origin})"
    named = ships(loader.names) if loader is not None else None
    return (None, f"{named} in the dynamic loader's cache") if named else None


__all__ = ["cuda_majors", "driver_cuda", "driver_gpu", "driver_jit"]
