"""Verdicts: can a library, and a package, run on a GPU? Pure functions over facts.

Every file with device code gets a role first (kb/roles.json); only *kernel libraries* (shared
objects whose kernels are loaded at run time) decide a package's verdict. *Device-link archives*
(``libcudadevrt.a``: inputs to nvlink, never loaded), *kernel-less* files (nvlink output with no
``.text``: nothing can fail to load) and *profiler* libraries (CUPTI, nvperf: loaded only when
profiling) are shown with their role and the reason, and never make a package ``partial``.

Per library x GPU: ``native`` (SASS that loads on it), ``jit`` (only PTX the driver must compile
at load), ``partial`` (it serves the GPU with a tiny fraction of its modules: kb/roles.json
"thin_coverage"), ``blocked`` (it has kernels for the GPU but cannot load there: a driver, a
library, a platform or a companion is missing; the fix is to install that), ``none`` (it has
nothing for the GPU: "no kernel image is available for execution on the device"; the fix is
another build), ``unknown`` (the file could not be read, or NVIDIA does not document the case),
``no-kernels``.
What a library can load: its listed fatbin (``.nv_fatbin``, what cuobjdump lists and the runtime
registers), and the containers outside it that a deep read finds in its data sections (cuFFT's
``.ldata``, cuBLASLt's ``.cask_resource``: the library loads them itself), unless their cubins
are relocatable (``nvcc -rdc`` output, ELF type ET_REL: device-link inputs, as cuSPARSE's
``.rodata`` bundles for nvJitLink), or the library has no way to load them (it neither imports
nor names a function to load a module with, nor needs or opens libcuda: loads_device_code;
they are listed, and named where they would have decided). The listed fatbin decides where it
serves as well.
Per package: ``native``, ``partial`` (some kernel libraries have nothing for that GPU or cannot
load: packages ship arch-specific extras by design; or one serves it thinly), ``jit``,
``blocked`` (nothing runs, and some library would once the missing piece is installed), ``none``
(no library has anything for it), ``unknown``, ``no-kernels``. Worst first (``RANK``): none,
blocked, unknown, partial, jit, native, no-kernels.

A verdict is ``native`` (or ``jit``) only when the library would also load and run there
(verdicts/load.py): a library that cannot load (the driver does not run the GPU or its CUDA,
a needed library is missing, its PTX is newer than the driver, its CPU is not the host's) is
``blocked`` with ``load`` naming the broken link, or ``none`` when it has nothing for the GPU
anyway (``load`` still names the link); a build its package does not load (kb/load.json
"loaders") is shown with the role "not loaded" and decides nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final, Literal, NamedTuple

from archgap.analysis.verdicts.compat import (
    ComputeCapability,
    GpuTarget,
    is_integrated,
    ptx_jits_on,
    sass_compat,
    target_name,
)
from archgap.kb import roles

if TYPE_CHECKING:
    from archgap.analysis.verdicts.load import LoadModel
from archgap.probe.binary.deep_plan import kernel_less, loads_device_code, runtime_entries
from archgap.probe.facts import BinaryFacts, KernelEntry, PythonEnvironment

Verdict = Literal["native", "jit", "none", "blocked", "unknown", "partial", "no-kernels"]
NATIVE: Final = "native"
JIT: Final = "jit"
NONE: Final = "none"
BLOCKED: Final = "blocked"
UNKNOWN: Final = "unknown"
PARTIAL: Final = "partial"
NO_KERNELS: Final = "no-kernels"
UNOWNED = "(no distribution)"
# Worst first, the one order every report sorts and ranks by: none (what is installed can never
# run there: another build), blocked (it runs once the missing driver, library or companion is
# installed), unknown (nothing proven), partial, jit, native, no-kernels (nothing to run).
RANK: Final[dict[str, int]] = {
    NONE: 0,
    BLOCKED: 1,
    UNKNOWN: 2,
    PARTIAL: 3,
    JIT: 4,
    NATIVE: 5,
    NO_KERNELS: 6,
}
KERNEL_LIBRARY, DEVICE_LINK_ARCHIVE, KERNEL_LESS, PROFILER, NOT_LOADED = (
    "kernel library",
    "device-link archive",
    "kernel-less",
    "profiler",
    "not loaded",
)


@dataclass(frozen=True)
class LibraryVerdict:
    path: str
    gpu: str  # the GpuTarget label
    verdict: Verdict
    reason: str  # one sentence: why, naming the deciding entry
    deciding_entry: str | None  # "sm_120 SASS in .nv_fatbin", "compute_90 PTX (ISA 9.0)"
    from_deep_search: bool  # decided by containers cuobjdump does not list
    role: str = KERNEL_LIBRARY  # only kernel libraries count towards the package's verdict
    role_reason: str = ""  # why a file of another role does not count
    load: str = ""  # why it cannot load or run there (a broken link: verdicts/load.py), or ""


@dataclass(frozen=True)
class PackageVerdict:
    package: str
    version: str
    gpu: str
    verdict: Verdict
    reason: str
    libraries: tuple[LibraryVerdict, ...]
    notes: tuple[str, ...] = ()  # "profiling unavailable on V100: libcupti.so.13 has nothing ..."


def _isa(text: str | None) -> tuple[int, int] | None:
    try:
        major, minor = (text or "").split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return None


def has_device_code(binary: BinaryFacts) -> bool:
    """Whether the file holds device code that can run: listed, or kept elsewhere by a library
    that can load it (deep_plan.loads_device_code; one with no way to load its hidden entries
    is judged as a CPU-only file, as a scan that does not search it finds it)."""
    entries = runtime_entries(binary)
    return any(e.listed for e in entries) or (bool(entries) and loads_device_code(binary) != "")


def role_of(binary: BinaryFacts) -> tuple[str, str]:
    """The file's role, and (for every role but a kernel library) why it does not count."""
    name = binary.path.rsplit("/", 1)[-1]
    profiler = roles.profiler_library(name)  # its static archives too (libcupti_static.a)
    if profiler is not None:
        return PROFILER, (
            f"{profiler.what}: loaded only when profiling, never by a workload's kernels "
            f"({profiler.source})"
        )
    if binary.format == "archive" or name.endswith(".o"):
        rule = roles.device_link_archive()
        return DEVICE_LINK_ARCHIVE, f"{rule.what} ({rule.source})"
    entries = runtime_entries(binary)
    if entries and all(kernel_less(e) for e in entries):
        return KERNEL_LESS, roles.kernel_less().what
    return KERNEL_LIBRARY, ""


def _where(entry: KernelEntry) -> str:
    member = f" ({entry.member})" if entry.member else ""
    return f"{entry.section or 'file'}{member}"


def _decide(
    entries: Sequence[KernelEntry], cc: ComputeCapability, driver_ptx_isa: tuple[int, int] | None
) -> tuple[Verdict, str, str, str] | None:
    """(verdict, reason, deciding entry, the broken link of the load model or "") from one tier
    of entries, or None if none of them runs."""
    sass = [e for e in entries if e.kind == "sass" and sass_compat(e.arch, e.variant, cc).runs]
    if sass:
        # The runtime picks the closest cubin (highest arch not above the GPU). Name a plain one
        # when there is one: 'a'/'f' cubins are usually a few specialised kernels beside them.
        best = max(sass, key=lambda e: (e.arch, e.variant == ""))
        name = f"{best.target} SASS in {_where(best)}"
        return NATIVE, f"{name} runs on {cc}", name, ""
    ptx = [e for e in entries if e.kind == "ptx" and ptx_jits_on(e.arch, e.variant, cc)]
    if not ptx:
        return _undocumented(entries, cc)
    best = max(ptx, key=lambda e: (e.arch, _isa(e.ptx_isa) or (0, 0)))
    name = f"{best.target} PTX (ISA {best.ptx_isa}) in {_where(best)}"
    isa = _isa(best.ptx_isa)
    if driver_ptx_isa is not None and isa is not None and isa > driver_ptx_isa:
        newest = ".".join(map(str, driver_ptx_isa))
        link = f"the driver JIT-compiles PTX up to ISA {newest}, this PTX is ISA {best.ptx_isa}"
        reason = (
            f"only {name}, and the driver JIT-compiles PTX up to ISA {newest}: "
            "'the provided PTX was compiled with an unsupported toolchain' (a newer driver "
            "runs it)"
        )
        return BLOCKED, reason, name, link
    note = "" if driver_ptx_isa is not None else f"; the driver must know PTX ISA {best.ptx_isa}"
    reason = f"no SASS for {cc}; {name} is JIT-compiled at load (slow first start{note})"
    return JIT, reason, name, ""


def _undocumented(
    entries: Sequence[KernelEntry], cc: ComputeCapability
) -> tuple[Verdict, str, str, str] | None:
    """UNKNOWN when the only candidates are cubins whose loading NVIDIA does not document."""
    for e in entries:
        compat = sass_compat(e.arch, e.variant, cc) if e.kind == "sass" else None
        if compat is not None and compat.runs is None:
            name = f"{e.target} SASS in {_where(e)}"
            return UNKNOWN, f"only {name} could serve {cc}: {compat.rule}", name, ""
    return None


def _present_targets(entries: Iterable[KernelEntry]) -> str:
    names = sorted({e.target for e in entries}, key=lambda t: (t.startswith("compute"), t))
    shown = ", ".join(names[:12]) + (f" … ({len(names)} targets)" if len(names) > 12 else "")
    return shown or "nothing"


def _tegra_note(entries: Iterable[KernelEntry], cc: ComputeCapability) -> str:
    """Why same-major SASS does not serve an integrated GPU (or a Tegra cubin a desktop one)."""
    near = sorted({e.target for e in entries if e.kind == "sass" and e.arch // 10 == cc.major})
    if not near:
        return ""
    other = [t for t in near if is_integrated(ComputeCapability.of_arch(int(t[3:].rstrip("af"))))]
    if not is_integrated(cc) and not other:
        return ""
    rule = sass_compat(int(near[0][3:].rstrip("af")), "", cc).rule
    return f" ({', '.join(near)} cannot serve it: {rule})"


class _Library(NamedTuple):
    """What decides one library's verdict on any GPU, worked out once for all of them."""

    binary: BinaryFacts
    role: str
    why: str
    entries: tuple[KernelEntry, ...]  # what the runtime can load
    real: list[KernelEntry]  # those with kernels
    listed: list[KernelEntry]  # those of the listed fatbin (what the runtime registers)
    hidden: list[KernelEntry]  # those of containers cuobjdump does not list, loadable as they are
    links: list[KernelEntry]  # unlisted relocatable device code: device-link inputs
    modules: tuple[tuple[str, int, str, int], ...]  # (kind, arch, variant, count) it can load
    stranded: list[KernelEntry]  # hidden ones of a library that has no way to load them


def _library(binary: BinaryFacts, not_loaded: str = "") -> _Library:
    role, why = (NOT_LOADED, not_loaded) if not_loaded else role_of(binary)
    entries = runtime_entries(binary)
    real = [e for e in entries if not kernel_less(e)]
    listed = [e for e in real if e.listed]
    hidden, links, stranded = _unlisted(binary, real)
    modules: Counter[tuple[str, int, str]] = Counter()
    for e in listed + hidden:  # a summary row counts the entries it stands for
        modules[(e.kind, e.arch, e.variant)] += e.count
    counted = tuple((kind, arch, variant, n) for (kind, arch, variant), n in modules.items())
    return _Library(binary, role, why, entries, real, listed, hidden, links, counted, stranded)


def _unlisted(
    binary: BinaryFacts, real: list[KernelEntry]
) -> tuple[list[KernelEntry], list[KernelEntry], list[KernelEntry]]:
    """The entries with kernels cuobjdump does not list: (those the library can load as they
    are, the relocatable ones, those of a library with no way to load them)."""
    hidden = [e for e in real if not e.listed and e.relocatable is not True]
    links = [e for e in real if not e.listed and e.relocatable is True]
    if hidden and loads_device_code(binary) == "":
        return [], links, hidden
    return hidden, links, []


def library_verdict(
    binary: BinaryFacts, gpu: GpuTarget, driver_ptx_isa: tuple[int, int] | None = None
) -> LibraryVerdict:
    """One library on one GPU: its listed fatbin and the containers it loads itself."""
    return _verdict(_library(binary), gpu, driver_ptx_isa)


def _verdict(
    library: _Library,
    gpu: GpuTarget,
    driver_ptx_isa: tuple[int, int] | None,
    load: LoadModel | None = None,
) -> LibraryVerdict:
    """The library's verdict from its kernels, then from whether it loads (``load``)."""
    judged = _kernels_verdict(library, gpu, driver_ptx_isa)
    blocked = load.why_blocked(judged.path, gpu.label) if load is not None else ""
    if not blocked or judged.role not in (KERNEL_LIBRARY, PROFILER):  # what a process loads
        return judged
    link = "; ".join(x for x in (blocked, judged.load) if x)
    if judged.verdict == NONE:  # nothing for the GPU: another build, whatever else is missing
        return replace(
            judged, reason=f"{judged.reason}; it cannot load either: {blocked}", load=link
        )
    reason = f"cannot load: {blocked} (its kernels: {judged.reason})"
    return replace(judged, verdict=BLOCKED, reason=reason, load=link)


# How well a verdict serves: a hidden entry decides only where it serves better than the
# listed fatbin (so a listed native cubin decides alone, as deep_plan relies on).
_RANK: Final = {NATIVE: 4, JIT: 3, UNKNOWN: 2, BLOCKED: 1, NONE: 0}


def _tiers(
    library: _Library, cc: ComputeCapability, driver_ptx_isa: tuple[int, int] | None
) -> tuple[tuple[Verdict, str, str, str] | None, bool]:
    """(what decides, whether an unlisted container does). The device code a library can load
    is its listed fatbin (the runtime registers it) and every container outside it that is not
    relocatable (cuFFT's .ldata, cuBLASLt's .cask_resource: the library loads them itself with
    cuModuleLoadData/cuLibraryLoadData); the listed fatbin decides where it serves as well."""
    listed = _decide(library.listed, cc, driver_ptx_isa) if library.listed else None
    if (listed is not None and listed[0] == NATIVE) or not library.hidden:
        return listed, False
    both = _decide(library.listed + library.hidden, cc, driver_ptx_isa)
    if both is None or (listed is not None and _RANK[both[0]] <= _RANK[listed[0]]):
        return listed, False
    return both, True


def _kernels_verdict(
    library: _Library, gpu: GpuTarget, driver_ptx_isa: tuple[int, int] | None
) -> LibraryVerdict:
    binary, role, why, entries, real = library[:5]
    cc = gpu.compute_capability
    if binary.error and not entries:
        return LibraryVerdict(binary.path, gpu.label, UNKNOWN, binary.error, None, False, role, why)
    if role == KERNEL_LESS:
        return LibraryVerdict(binary.path, gpu.label, NO_KERNELS, why, None, False, role, why)
    decided, from_deep = _tiers(library, cc, driver_ptx_isa)
    loadable = library.listed + library.hidden
    if library.stranded:  # what it has is what it can load
        entries, real = tuple(_without(entries, library.stranded)), _without(real, library.stranded)
    if decided is not None:
        verdict, reason, entry, link = decided
        if from_deep:
            reason += _hidden_note(library)
        elif verdict != NATIVE:
            reason += _link_inputs(library.links, cc) + _stranded(library, cc, verdict)
        thin = _thin(library.modules, cc) if verdict in (NATIVE, JIT) else ""
        if thin:
            verdict, reason = PARTIAL, f"{thin} ({reason})"
        return LibraryVerdict(
            binary.path, gpu.label, verdict, reason, entry, from_deep, role, why, link
        )
    reason = (
        f"nothing runs on {cc}: it has {_present_targets(loadable or real or entries)}"
        + _tegra_note(loadable or real, cc)
        + (f" (read stopped early: {binary.error})" if binary.error else "")
        + ' -> "no kernel image is available for execution on the device"'
        + _link_inputs(library.links, cc)
        + _stranded(library, cc, NONE)
    )
    return LibraryVerdict(binary.path, gpu.label, NONE, reason, None, False, role, why)


def _thin(modules: Sequence[tuple[str, int, str, int]], cc: ComputeCapability) -> str:
    """Why the library serves ``cc`` with a tiny fraction of its modules (kb/roles.json
    "thin_coverage"), or "". A module is a cubin or a PTX entry it can load; those that serve
    ``cc`` are SASS that runs on it and PTX it can JIT."""
    if len(modules) < 2:  # one target: all of it or nothing
        return ""
    total = sum(n for *_, n in modules)
    share = total / len(modules)
    serving = {
        target_name(kind, arch, variant): n
        for kind, arch, variant, n in modules
        if (sass_compat(arch, variant, cc).runs is True if kind == "sass" else False)
        or (kind == "ptx" and ptx_jits_on(arch, variant, cc))
    }
    served = sum(serving.values())
    if not served or served >= roles.thin_coverage().min_share * share:
        return ""
    order = sorted(serving, key=lambda t: (t.startswith("compute"), t))
    which = ", ".join(f"{serving[t]} {t}" for t in order)
    return (
        f"only {served:,} of {total:,} modules serve {cc} ({which}; an even share of its "
        f"{len(modules)} targets is {share:,.0f}): most of its kernels have nothing for it "
        '-> "no kernel image is available for execution on the device" when one is called'
    )


def _hidden_note(library: _Library) -> str:
    """Where an entry that decides comes from: a container cuobjdump does not list."""
    if library.listed:
        listed = f"has only {_present_targets(library.listed)}"
    else:
        listed = "is " + ("kernel-less" if any(e.listed for e in library.entries) else "absent")
    return (
        " (a container cuobjdump does not list, which the library loads itself; the listed "
        f"fatbin {listed})"
    )


def _link_inputs(links: Sequence[KernelEntry], cc: ComputeCapability) -> str:
    """A note when relocatable device code could serve the GPU but does not count."""
    found = _decide(links, cc, None)
    if found is None or found[0] != NATIVE:
        return ""
    return (
        f"; {found[2]} is relocatable device code (nvcc -rdc, in a container cuobjdump does "
        "not list) and does not count: it must be device-linked (nvlink, nvJitLink) before "
        "anything can load it"
    )


def _without(entries: Sequence[KernelEntry], left: Sequence[KernelEntry]) -> list[KernelEntry]:
    gone = {id(e) for e in left}
    return [e for e in entries if id(e) not in gone]


def _stranded(library: _Library, cc: ComputeCapability, verdict: str) -> str:
    """A note when containers the library has no way to load would serve the GPU better than
    what decided (``verdict``): they are not counted."""
    found = _decide(library.stranded, cc, None) if library.stranded else None
    if found is None or _RANK[found[0]] <= _RANK.get(verdict, 0):
        return ""
    return (
        f"; {found[2]} would serve it, but that container is not listed and the library has "
        "no way to load it: it neither imports nor names a function to load a module with "
        "(cuModuleLoad*, cuLibraryLoad*, cudaLibraryLoad*, cuGetProcAddress*) and neither "
        "needs nor opens libcuda, and the runtime registers only the listed fatbin"
    )


def _names(libraries: Iterable[LibraryVerdict]) -> str:
    """File names, sorted; a name several copies share once, with the count ("libcupti.so (2)")."""
    counts = Counter(lib.path.rsplit("/", 1)[-1] for lib in libraries)
    return ", ".join(f"{n} ({c})" if c > 1 else n for n, c in sorted(counts.items()))


def package_verdict(
    package: str, version: str, gpu: GpuTarget, libraries: Sequence[LibraryVerdict]
) -> PackageVerdict:
    """Roll a package's kernel libraries up into one verdict; the other roles are shown apart."""
    counted = [lib for lib in libraries if lib.role == KERNEL_LIBRARY]
    others = [lib for lib in libraries if lib.role != KERNEL_LIBRARY]
    cc = gpu.compute_capability
    notes = tuple(
        f"profiling unavailable on {gpu.label}: {_names([lib])} has nothing for {cc}"
        for lib in others
        if lib.role == PROFILER and lib.verdict == NONE
    )
    if not counted:
        reason = f"no file loads kernels at run time: {_by_role(others)}"
        return PackageVerdict(
            package, version, gpu.label, NO_KERNELS, reason, tuple(libraries), notes
        )
    verdict, reason = _rollup(counted, cc)
    if others:
        reason += f"; not counted: {_by_role(others)}"
    return PackageVerdict(package, version, gpu.label, verdict, reason, tuple(libraries), notes)


def _by_role(libraries: Sequence[LibraryVerdict]) -> str:
    by_role: dict[str, list[LibraryVerdict]] = {}
    for lib in libraries:
        by_role.setdefault(lib.role, []).append(lib)
    return "; ".join(f"{role}: {_names(libs)}" for role, libs in sorted(by_role.items()))


def _rollup(libraries: Sequence[LibraryVerdict], cc: ComputeCapability) -> tuple[Verdict, str]:
    """A package runs where one of its libraries does; where none does, it is ``blocked`` when one
    of them has kernels for the GPU and only cannot load (installing the missing piece makes it
    run, at worst ``partial``), else ``none``."""
    by_verdict: dict[str, list[LibraryVerdict]] = {}
    for lib in libraries:
        by_verdict.setdefault(lib.verdict, []).append(lib)
    decided = [lib for lib in libraries if lib.verdict != UNKNOWN]
    none, blocked = by_verdict.get(NONE, []), by_verdict.get(BLOCKED, [])
    jit, thin = by_verdict.get(JIT, []), by_verdict.get(PARTIAL, [])
    unknown = by_verdict.get(UNKNOWN, [])
    verdict: Verdict
    if not decided:
        verdict, reason = UNKNOWN, f"no library could be judged: {_names(unknown)}"
    elif len(none) + len(blocked) == len(decided):
        verdict, reason = _nothing_runs(none, blocked, cc)
    elif none or blocked:
        verdict, reason = PARTIAL, _some_run(none, blocked, len(decided), cc)
    elif thin:
        verdict = PARTIAL
        reason = f"{_names(thin)} serves {cc} thinly: {thin[0].reason}"
    elif jit:
        verdict = JIT
        reason = f"PTX JIT only (no SASS for {cc}) in {_names(jit)}"
    else:
        verdict, reason = NATIVE, f"SASS for {cc} in every library ({len(decided)})"
    if unknown and decided:
        reason += f"; unknown: {_names(unknown)}"
    return verdict, reason


def _nothing_runs(
    none: Sequence[LibraryVerdict], blocked: Sequence[LibraryVerdict], cc: ComputeCapability
) -> tuple[Verdict, str]:
    """No judged library runs: ``blocked`` (with its first broken links) when one of them has
    kernels for the GPU and only cannot load, else ``none``."""
    if blocked:
        links = sorted({link for lib in blocked for link in lib.load.split("; ")})
        more = f"; and {len(links) - 3} more" if len(links) > 3 else ""
        reason = f"nothing loads on {cc}: {'; '.join(links[:3])}{more} ({_names(blocked)})"
        if none:
            reason += f"; nothing for {cc} in {_names(none)} either"
        return BLOCKED, reason
    return NONE, f"no library has kernels for {cc}: {_names(none)}"


def _some_run(
    none: Sequence[LibraryVerdict],
    blocked: Sequence[LibraryVerdict],
    decided: int,
    cc: ComputeCapability,
) -> str:
    """Why a package of which some judged libraries (``decided`` in all) run is partial: those
    with nothing for the GPU, and those that cannot load."""
    count = f"{len(none)} of {decided} libraries"
    parts = [f"{count} have nothing for {cc}: {_names(none)}"] if none else []
    if blocked:
        count = f"{len(blocked)} of {decided} libraries"
        parts.append(f"{count} cannot load: {blocked[0].load} ({_names(blocked)})")
    return "; ".join(parts)


@dataclass(frozen=True)
class PackageBinaries:
    """A package (or the unowned libraries) and the device-code files it holds."""

    package: str
    version: str
    binaries: tuple[BinaryFacts, ...]


def group_by_package(
    env: PythonEnvironment, binaries: Iterable[BinaryFacts]
) -> tuple[PackageBinaries, ...]:
    """Each file with device code (or unreadable) under the distribution whose RECORD owns it."""
    owner: dict[str, tuple[str, str]] = {}
    for dist in env.distributions:
        for path in dist.native_files:
            owner[path] = (dist.name, dist.version)
    groups: dict[tuple[str, str], list[BinaryFacts]] = {}
    for binary in binaries:
        unread = binary.error or binary.format in ("unreadable", "unknown")
        if not has_device_code(binary) and not unread:  # a truncated ELF is unread, not CPU-only
            continue
        key = owner.get(binary.path, (UNOWNED, ""))
        groups.setdefault(key, []).append(binary)
    return tuple(
        PackageBinaries(name, version, tuple(sorted(files, key=lambda b: b.path)))
        for (name, version), files in sorted(groups.items(), key=lambda kv: kv[0][0].lower())
    )


def verdicts_for(
    groups: Sequence[PackageBinaries],
    gpus: Sequence[GpuTarget],
    driver_ptx_isa: tuple[int, int] | None = None,
    load: LoadModel | None = None,
) -> tuple[PackageVerdict, ...]:
    """Every package x GPU verdict; with ``load``, only what would load counts as running."""
    verdicts: list[PackageVerdict] = []
    not_loaded = load.not_loaded if load is not None else {}
    for group in groups:
        libraries = [_library(b, not_loaded.get(b.path, "")) for b in group.binaries]
        for gpu in gpus:
            judged = [_verdict(library, gpu, driver_ptx_isa, load) for library in libraries]
            verdicts.append(package_verdict(group.package, group.version, gpu, judged))
    return tuple(verdicts)
