"""The one fix engine that ``scan`` and ``explain`` share: fixes for a JIT failure on one exact GPU.

A fix is offered only when the model says it removes the failure: the package's own rules for
its installed version (kb/jit.json, read off the released sources), the targets each toolkit can
build (kb/toolkits.json) and the compatibility rules (a cubin built for 12.0a does not run on a
12.1 GB10). Everything is per exact compute capability, never per major.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from archgap.analysis.fixes.flashinfer_rules import (
    normalise_arch,
    parse_flashinfer_arch_list,
    target_name,
)
from archgap.analysis.verdicts.compat import ComputeCapability, sass_runs_on
from archgap.kb import toolchain as kb
from archgap.kb.fixes import fix_words
from archgap.probe.facts import Toolkit

# Kinds of fix ("avoid" is a configuration change); the engine orders a case's fixes, least
# invasive first, and ``ranked`` keeps that order wherever fixes are shown.
TOOLKIT, ENV, UPGRADE, PATCH, AVOID = "toolkit", "env", "upgrade", "patch", "avoid"


@dataclass(frozen=True)
class Fix:
    action: str  # one line: "point CUDA_HOME at /usr/local/cuda-13.0 (nvcc 13.0 found there)"
    tradeoff: str
    env: tuple[tuple[str, str], ...] = ()  # variables to set (an env file), if that is the fix
    command: str | None = None  # a command to run instead (pip install ...)
    kind: str = ""  # toolkit, env, upgrade, patch, avoid


@dataclass(frozen=True)
class FlashinferCase:
    """What the FlashInfer fixes depend on, from probe facts or from a log."""

    version: str | None  # the installed flashinfer-python, when known
    cc: ComputeCapability  # the exact GPU
    cuda: str | None  # the CUDA version of the nvcc FlashInfer resolves, when known
    home: str | None = None  # that toolkit's home (not offered again)
    toolkits: tuple[Toolkit, ...] = ()  # working nvcc toolkits on the machine
    torch_cuda: str | None = None
    driver: str | None = None  # the NVIDIA driver present or named (--driver), when known
    # the CUDA_HOME/CUDA_PATH FlashInfer resolves when it has no bin/nvcc: nothing builds there,
    # so no fix that keeps the current toolkit is offered
    no_nvcc: str | None = None


def runs_on(major: int, minor_text: str, cc: ComputeCapability) -> bool:
    digits = "".join(c for c in minor_text if c.isdigit())
    variant = minor_text[len(digits) :]
    if not digits or variant not in ("", "a", "f"):
        return False
    return sass_runs_on(major * 10 + int(digits), variant, cc)


def flashinfer_supports(cc: ComputeCapability) -> bool:
    """check_cuda_arch(): a GPU below the minimum is rejected whatever the toolkit."""
    minimum = kb.major_minor(kb.jit_rules().flashinfer.min_compute_capability) or (7, 5)
    return (cc.major, cc.minor) >= minimum


def normalised_target(
    rng: kb.FlashinferRange | None, cc: ComputeCapability, cuda: str
) -> str | None:
    """The target FlashInfer ``rng`` builds for ``cc`` with nvcc ``cuda``, if it builds one."""
    if rng is None:
        return None
    norm = normalise_arch(rng, cc.major, cc.minor, cuda)
    if norm.raises or norm.minor_text is None:
        return None
    target = target_name(cc.major, norm.minor_text)
    ok = kb.toolkit_can_target(cuda, target) and runs_on(cc.major, norm.minor_text, cc)
    return target if ok else None


def worded(key: str, kind: str, env: tuple[tuple[str, str], ...] = (), **fields: object) -> Fix:
    """The fix worded by the kb template ``key`` (kb/fixes*.json), with its fields filled in."""
    words = fix_words(key, **fields)
    return Fix(words.text, words.why, env=env, command=words.command, kind=kind)


def flashinfer_fixes(case: FlashinferCase) -> tuple[Fix, ...]:
    """Every fix that removes a FlashInfer JIT failure on ``case.cc``, least invasive first."""
    rules = kb.jit_rules().flashinfer
    avoid = worded("flashinfer-avoid", kind=AVOID, avoid_options=rules.avoid_options)
    cc = case.cc
    if not flashinfer_supports(cc):
        release = f"FlashInfer {case.version}" if case.version else "FlashInfer"
        unsupported = worded(
            "flashinfer-unsupported-gpu", kind=AVOID, release=release, sm=cc.sm, cc=cc,
            avoid_options=rules.avoid_options, source=rules.min_compute_capability_source,
        )  # fmt: skip
        return (unsupported,)
    rng = kb.flashinfer_range(case.version) if case.version else None
    if case.version and rng is None:
        return (avoid,)  # a release before the modelled ones (no FLASHINFER_CUDA_ARCH_LIST yet)
    keeps, breaks, needs_driver = _toolkit_fixes(case, rng)
    # A toolkit switch that would break an installed build (torch's C++ extensions, built for
    # another CUDA major) comes after every fix that keeps the toolkit: never first. With no
    # nvcc where FlashInfer looks, a fix that keeps that toolkit builds nothing: not offered.
    here = [] if case.no_nvcc else [*_arch_list_fixes(case, rng), *_upgrade_fixes(case, rng)]
    fixes = [*keeps, *here, *breaks]
    if not keeps and not breaks:  # no toolkit here works: the releases that would
        fixes.extend(_install_toolkit(case, rng))
    # A toolkit the driver cannot run (CUDA 13 on an R570 driver) needs a driver upgrade
    # first: after every fix the driver can run.
    fixes.extend(needs_driver)
    fixes.append(avoid)
    return tuple(fixes)


def ranked(fixes: Iterable[Fix]) -> list[Fix]:
    """Several findings' fixes shown together (scan, explain, fix): grouped by kind, the kinds
    in the order the engine ranks them (a kind's first fix decides), avoiding the package last
    (the answer when nothing else is) — the one ranking."""
    listed = list(fixes)
    order = [*dict.fromkeys(f.kind for f in listed if f.kind != AVOID), AVOID]
    return sorted(listed, key=lambda f: order.index(f.kind))


def numbering(fixes: Iterable[Fix]) -> dict[tuple[str, str], int]:
    """The one numbering of fixes that scan, explain and fix show: each distinct fix (kind and
    action) numbered from 1 in the ranking of all of them (``ranked``)."""
    numbers: dict[tuple[str, str], int] = {}
    for fix in ranked(fixes):
        numbers.setdefault((fix.kind, fix.action), len(numbers) + 1)
    return numbers


def _toolkit_fixes(
    case: FlashinferCase, rng: kb.FlashinferRange | None
) -> tuple[list[Fix], list[Fix], list[Fix]]:
    """Another toolkit on the machine with which detection and the JIT build both succeed:
    those that keep torch's CUDA major (or torch's is unknown), those that do not, and those
    the driver present or named cannot run (NVIDIA's minor-version compatibility, kb/drivers.json:
    a CUDA 13.x build needs a driver >= 580), which need a driver upgrade first."""
    keeps: list[Fix] = []
    breaks: list[Fix] = []
    needs_driver: list[Fix] = []
    torch_major_minor = kb.major_minor(case.torch_cuda) if case.torch_cuda else None
    for tk in case.toolkits:
        if tk.version is None or case.home in (tk.home, tk.real_home):
            continue
        target = normalised_target(rng, case.cc, tk.version)
        if target is None:
            continue
        note = ""
        tk_major_minor = kb.major_minor(tk.version)
        other_major = bool(
            torch_major_minor and tk_major_minor and torch_major_minor[0] != tk_major_minor[0]
        )
        if torch_major_minor and tk_major_minor:
            note = (
                f" torch was built with CUDA {case.torch_cuda}: a different major can break "
                "torch C++ extension builds."
                if other_major
                else f" Matches torch's CUDA major ({case.torch_cuda})."
            )
        runs, rule = kb.driver_runs_runtime(case.driver, tk.version) if case.driver else (None, "")
        if runs is False:
            needs_driver.append(_driver_first(case, tk, target, rule))
            continue
        (breaks if other_major else keeps).append(
            # CUDA_HOME alone: FlashInfer runs $CUDA_HOME/bin/nvcc (jit/cpp_ext.py
            # get_cuda_path: CUDA_HOME first; build.ninja `nvcc = $cuda_home/bin/nvcc`);
            # PATH is not read while CUDA_HOME is set, so no PATH is proposed.
            worded(
                "flashinfer-cuda-home",
                kind=TOOLKIT,
                env=(("CUDA_HOME", tk.home),),
                home=tk.home,
                nvcc=tk.version,
                origin=tk.origin,
                target=target,
                note=note,
            )
        )
    return keeps, breaks, needs_driver


def _driver_first(case: FlashinferCase, tk: Toolkit, target: str, rule: str) -> Fix:
    """A toolkit switch the driver cannot run: the driver upgrade first, said so. No variables
    to apply: written alone, CUDA_HOME would move the JIT to a build the driver refuses."""
    return worded(
        "flashinfer-driver-first", kind=UPGRADE, driver=case.driver, nvcc=tk.version,
        home=tk.home, origin=tk.origin, rule=rule, target=target,
    )  # fmt: skip


def _arch_list_fixes(case: FlashinferCase, rng: kb.FlashinferRange | None) -> list[Fix]:
    """FLASHINFER_CUDA_ARCH_LIST with a suffix for this exact GPU: used verbatim by every
    release, so the CUDA version check is skipped; and the patch that returns the same target.
    With the nvcc unknown (a log that does not say), the fix names the nvcc it needs."""
    cc, cuda = case.cc, case.cuda
    for suffix in ("a", "f"):
        value = f"{cc.major}.{cc.minor}{suffix}"
        if rng is not None and parse_flashinfer_arch_list(value, rng, cuda).error:
            continue
        target = target_name(cc.major, f"{cc.minor}{suffix}")
        limit = toolkit_limit(target)
        builds = kb.toolkit_can_target(cuda, target) if cuda else limit is not None
        if not builds or not runs_on(cc.major, f"{cc.minor}{suffix}", cc):
            continue
        nvcc = f"nvcc {cuda} can build {target}" if cuda else f"needs nvcc {limit} for {target}"
        portability = (
            f"sm_{cc.sm}a cubins run only on compute capability {cc}"
            if suffix == "a"
            else f"sm_{cc.sm}f cubins run on the {cc.major}.x family from {cc}"
        )
        env = (("FLASHINFER_CUDA_ARCH_LIST", value),)
        return [
            worded("flashinfer-arch-list", kind=ENV, env=env, value=value, nvcc=nvcc,
                 portability=portability),
            worded("flashinfer-patch-normalise", kind=PATCH, major=cc.major,
                 minor=f"{cc.minor}{suffix}", cc=cc, nvcc=f"{nvcc[0].upper()}{nvcc[1:]}"),
        ]  # fmt: skip
    return []


def _upgrade_fixes(case: FlashinferCase, rng: kb.FlashinferRange | None) -> list[Fix]:
    """A FlashInfer release whose rules work with the current toolkit on this GPU."""
    rules = kb.jit_rules().flashinfer
    fixed_in = rules.fixed_in
    newer = kb.flashinfer_range(fixed_in)
    if newer is None or newer == rng or not case.cuda:
        return []
    if case.version and not kb.version_in_range(case.version, None, fixed_in):
        return []
    target = normalised_target(newer, case.cc, case.cuda)
    if target is None:
        return []
    upgrade = worded(
        "flashinfer-upgrade", kind=UPGRADE, fixed_in=fixed_in, target=target, cuda=case.cuda,
        source=rules.fixed_in_source,
    )  # fmt: skip
    return [upgrade]


def toolkit_limit(target: str) -> str | None:
    """The toolkits that can build ``target``: "CUDA >= 12.9", or "CUDA <= 12.9" for a target
    a newer toolkit dropped (CUDA 13.0 dropped sm_50-sm_72)."""
    span = kb.toolkit_range_for(target)
    if span is None:
        return None
    first, last = span
    return f"CUDA <= {last}" if last else f"CUDA >= {first}"


def _install_toolkit(case: FlashinferCase, rng: kb.FlashinferRange | None) -> list[Fix]:
    """No toolkit here works: the CUDA releases with which FlashInfer builds this GPU's target
    (with the FlashInfer version unknown, the strictest of its releases' rules)."""
    found = [_toolkit_need(case.cc, r) for r in ((rng,) if rng else kb.flashinfer_ranges())]
    needs = [n for n in found if n is not None]
    if not needs:
        return []
    target, limit = max(needs, key=lambda n: kb.major_minor(n[1].split()[-1]) or (0, 0))
    install = worded(
        "flashinfer-install-toolkit", kind=TOOLKIT, limit=limit.removeprefix("CUDA "),
        driver_cap=_driver_cap(case.driver), target=target,
    )  # fmt: skip
    return [install]


def _driver_cap(driver: str | None) -> str:
    """ " (CUDA 12.x at most: driver 570.124.06 cannot run CUDA 13.x)" when the driver present
    or named cannot run the newest CUDA major (kb/drivers.json); "" otherwise."""
    majors = sorted({r.cuda.split(".")[0] for r in kb.toolkit_releases()}, key=int)
    if not driver or not majors:
        return ""
    runs = [m for m in majors if kb.driver_runs_runtime(driver, f"{m}.0")[0] is not False]
    if not runs or runs[-1] == majors[-1]:
        return ""
    return f" (CUDA {runs[-1]}.x at most: driver {driver} cannot run CUDA {majors[-1]}.x)"


def _toolkit_need(cc: ComputeCapability, rng: kb.FlashinferRange) -> tuple[str, str] | None:
    """(target, "CUDA >= X.Y" or "CUDA <= X.Y") with which ``rng``'s rules build for ``cc``: the
    target its normalisation (kb/jit.json) gives with the newest CUDA; None when that raises
    whatever the CUDA (no toolkit builds it)."""
    minor_text = normalise_arch(rng, cc.major, cc.minor, "99.9").minor_text
    if minor_text is None:
        return None
    target = target_name(cc.major, minor_text)
    limit = toolkit_limit(target)
    span = kb.toolkit_range_for(target)
    needs = [n[0] for step in rng.normalise if step.major == cc.major for n in step.needs]
    if limit is None or span is None:
        return None
    if span[1] is None and needs:
        least = min(needs, key=lambda v: kb.major_minor(v) or (0, 0))
        limit = f"CUDA >= {max([span[0], least], key=lambda v: kb.major_minor(v) or (0, 0))}"
    return target, limit


def fixes_of_kind(fixes: Sequence[Fix], kind: str) -> list[Fix]:
    return [f for f in fixes if f.kind == kind]
