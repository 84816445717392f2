"""Check 5 of the load model: a package that compiles its kernels when they are first used.

A package that compiles at run time (kb/load.json "compilers": CuPy with NVRTC, XLA with ptxas)
needs that compiler installed (``find_compiler``: site-packages, then the system), else its
kernels cannot be compiled on any GPU, unless the package's fallback is there (XLA: nvJitLink
for ptxas). It asks the compiler for a target by its own rule (the GPU's SM, capped at the
newest the compiler version is asked for, kb/load.json "max_arch"); the compiler must know
that target (kb/toolkits.json) and its cubins must run on the GPU (``sass_compat``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from archgap.analysis.verdicts.compat import GpuTarget, sass_compat
from archgap.analysis.verdicts.loadcommon import LoadFinding
from archgap.analysis.verdicts.loadcommon import block as _block
from archgap.analysis.verdicts.loadcommon import find_compiler as _find_compiler
from archgap.kb import load as kb
from archgap.kb.toolchain import first_toolkit_for, toolkit_can_target
from archgap.probe.facts import Distribution, LoaderFacts, PythonEnvironment, ToolchainFacts


def compilers(
    env: PythonEnvironment,
    loader: LoaderFacts | None,
    toolchains: ToolchainFacts | None,
    targets: Sequence[GpuTarget],
    blocked: dict[tuple[str, str], str],
) -> list[LoadFinding]:
    """Check 5: each package that compiles at run time, its compiler, and each GPU's target."""
    findings = []
    for rule in kb.compiler_rules():
        for dist in env.distributions:
            match = rule.package.match(dist.name)
            if match is not None:
                findings += _compiler(rule, match, dist, env, loader, toolchains, targets, blocked)
    return findings


def _compiler(
    rule: kb.CompilerRule,
    match: re.Match[str],
    dist: Distribution,
    env: PythonEnvironment,
    loader: LoaderFacts | None,
    toolchains: ToolchainFacts | None,
    targets: Sequence[GpuTarget],
    blocked: dict[tuple[str, str], str],
) -> list[LoadFinding]:
    """Check 5 for one package the rule names (``match``: its CUDA major is group 1): its
    compiler missing, or each GPU it cannot compile for."""
    major = match.group(1)
    library = rule.library.format(major=major)
    wheel = rule.wheels.get(major, library)
    found = _find_compiler(env, loader, toolchains, library, wheel)
    if found is None and any(
        _find_compiler(env, loader, None, alt.format(major=major), "") is not None
        for alt in rule.alternatives
    ):
        return []  # the package's fallback is there (XLA: nvJitLink for ptxas)
    libs = tuple(p for p in dist.native_files if p.endswith(".so"))
    first = f"{dist.name} {dist.version} compiles its kernels with {rule.compiler}"
    if found is None:
        if loader is None:
            return []  # the target's loader was not read: it may have it
        gating = any(t.gates_exit_code for t in targets)
        return [_compiler_missing(rule, dist, library, wheel, libs, first, blocked, gating)]
    version, where = found
    if version is None:
        return []  # found, of a version not known: nothing to compare
    compiler = (version, where)
    return _compiler_targets(rule, match, dist, libs, first, compiler, targets, blocked)


def _compiler_missing(
    rule: kb.CompilerRule,
    dist: Distribution,
    library: str,
    wheel: str,
    libs: tuple[str, ...],
    first: str,
    blocked: dict[tuple[str, str], str],
    gating: bool,
) -> LoadFinding:
    """The package's compiler is not installed: its libraries are blocked on every GPU."""
    why = f"{rule.compiler} ({library}) is not installed"
    for path in libs:
        _block(blocked, path, why)
    return LoadFinding(
        "compiler",
        "fails",
        "",
        dist.name,
        libs,
        (
            first,
            f"{library}: not in site-packages, the loader's cache or a toolkit under /usr/local",
        ),
        f"{dist.name}: {why}: its kernels cannot be compiled on any GPU",
        f"pip install {wheel}",
        rule.source,
        gating,
    )


def _compiler_targets(
    rule: kb.CompilerRule,
    match: re.Match[str],
    dist: Distribution,
    libs: tuple[str, ...],
    first: str,
    compiler: tuple[str, str],
    targets: Sequence[GpuTarget],
    blocked: dict[tuple[str, str], str],
) -> list[LoadFinding]:
    """One finding per GPU the installed compiler (``compiler``: its version, where it was
    found) cannot compile the package's kernels for: the target it is asked for is one it does
    not know, or one whose cubins do not run on the GPU. Its libraries are blocked there."""
    version, where = compiler
    newest = rule.newest_arch(version)
    findings = []
    for target in targets:
        cc = target.compute_capability
        arch = cc.sm if newest is None or str(cc) in rule.own_arch else min(cc.sm, newest)
        knows = toolkit_can_target(version, f"sm_{arch}")
        runs = sass_compat(arch, "", cc).runs
        if knows and runs is not False:
            continue
        need = first_toolkit_for(f"sm_{cc.sm}") or "a newer CUDA"
        why = f"it asks {rule.compiler} {version} ({where}) for sm_{arch}, " + (
            "which that compiler does not know ('nvrtc: error: invalid value for "
            "--gpu-architecture (-arch)')"
            if not knows
            else f"whose cubins do not run on {cc} ('no kernel image is available')"
        )
        for path in libs:
            blocked[(path, target.label)] = why
        findings.append(
            LoadFinding(
                "compiler",
                "fails",
                target.label,
                dist.name,
                libs,
                (
                    first,
                    f"{rule.compiler} {version}: {where}",
                    f"{target.label} is sm_{cc.sm}; {rule.compiler} {version} is asked for "
                    f"sm_{arch}",
                ),
                f"{dist.name} on {target.label}: {why}",
                _compiler_fix(rule, dist.name, match, need),
                rule.source,
                target.gates_exit_code,
            )
        )
    return findings


def _compiler_fix(rule: kb.CompilerRule, name: str, match: re.Match[str], need: str) -> str:
    """Install a compiler of version ``need``: of the package's own CUDA major, or with the
    package's build for the major that has it (cupy-cuda13x for sm_110)."""
    major = match.group(1)
    wanted = need.split(".")[0]
    if wanted == major or not wanted.isdigit():
        return f"pip install '{rule.wheels.get(major, rule.compiler)}>={need}'"
    build = name[: match.start(1)] + wanted + name[match.end(1) :]
    return f"pip install {build} {rule.wheels.get(wanted, rule.compiler)} (CUDA {wanted})"


__all__ = ["compilers"]
