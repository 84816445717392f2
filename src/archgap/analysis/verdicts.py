"""Verdicts: can a library, and a package, run on a GPU? Pure functions over facts.

Per library x GPU: ``native`` (SASS that loads on it), ``jit`` (only PTX the driver must compile
at load), ``none`` (nothing can run: "no kernel image is available for execution on the device"),
``unknown`` (the file could not be read). Per package: ``native``, ``partial`` (some libraries have
nothing for that GPU: packages ship arch-specific extras by design), ``jit``, ``none``, ``unknown``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from archgap.analysis.compat import ComputeCapability, GpuTarget, ptx_jits_on, sass_runs_on
from archgap.model import BinaryFacts, KernelEntry, PythonEnvironment

NATIVE, JIT, NONE, UNKNOWN, PARTIAL = "native", "jit", "none", "unknown", "partial"
UNOWNED = "(no distribution)"


@dataclass(frozen=True)
class LibraryVerdict:
    path: str
    gpu: str  # the GpuTarget label
    verdict: str
    reason: str  # one sentence: why, naming the deciding entry
    deciding_entry: str | None  # "sm_120 SASS in .nv_fatbin", "compute_90 PTX (ISA 9.0)"
    from_deep_search: bool  # decided by containers cuobjdump does not list


@dataclass(frozen=True)
class PackageVerdict:
    package: str
    version: str
    gpu: str
    verdict: str
    reason: str
    libraries: tuple[LibraryVerdict, ...]


def _isa(text: str | None) -> tuple[int, int] | None:
    try:
        major, minor = (text or "").split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return None


def runtime_entries(binary: BinaryFacts) -> tuple[KernelEntry, ...]:
    """Entries the CUDA runtime or the library itself can load on a GPU.

    LTO-IR needs nvJitLink first; a shared object's ``__nv_relfatbin`` is the relocatable copy kept
    for device linking, not what the runtime launches from.
    """
    is_object = binary.format == "archive" or binary.path.endswith(".o")
    return tuple(
        e
        for e in binary.entries
        if e.kind in ("sass", "ptx") and (is_object or e.section != "__nv_relfatbin")
    )


def has_device_code(binary: BinaryFacts) -> bool:
    return bool(runtime_entries(binary))


def _where(entry: KernelEntry) -> str:
    member = f" ({entry.member})" if entry.member else ""
    return f"{entry.section or 'file'}{member}"


def _decide(
    entries: Sequence[KernelEntry], cc: ComputeCapability, driver_ptx_isa: tuple[int, int] | None
) -> tuple[str, str, str] | None:
    """(verdict, reason, deciding entry) from one tier of entries, or None if none of them runs."""
    sass = [e for e in entries if e.kind == "sass" and sass_runs_on(e.arch, e.variant, cc)]
    if sass:
        # The runtime picks the closest cubin (highest arch not above the GPU). Name a plain one
        # when there is one: 'a'/'f' cubins are usually a few specialised kernels beside them.
        best = max(sass, key=lambda e: (e.arch, e.variant == ""))
        name = f"{best.target} SASS in {_where(best)}"
        return NATIVE, f"{name} runs on {cc}", name
    ptx = [e for e in entries if e.kind == "ptx" and ptx_jits_on(e.arch, e.variant, cc)]
    if not ptx:
        return None
    best = max(ptx, key=lambda e: (e.arch, _isa(e.ptx_isa) or (0, 0)))
    name = f"{best.target} PTX (ISA {best.ptx_isa}) in {_where(best)}"
    isa = _isa(best.ptx_isa)
    if driver_ptx_isa is not None and isa is not None and isa > driver_ptx_isa:
        newest = ".".join(map(str, driver_ptx_isa))
        reason = (
            f"only {name}, and the driver JIT-compiles PTX up to ISA {newest}: "
            "'the provided PTX was compiled with an unsupported toolchain'"
        )
        return NONE, reason, name
    note = "" if driver_ptx_isa is not None else f"; the driver must know PTX ISA {best.ptx_isa}"
    reason = f"no SASS for {cc}; {name} is JIT-compiled at load (slow first start{note})"
    return JIT, reason, name


def _present_targets(entries: Iterable[KernelEntry]) -> str:
    names = sorted({e.target for e in entries}, key=lambda t: (t.startswith("compute"), t))
    shown = ", ".join(names[:12]) + (f" … ({len(names)} targets)" if len(names) > 12 else "")
    return shown or "nothing"


def library_verdict(
    binary: BinaryFacts, gpu: GpuTarget, driver_ptx_isa: tuple[int, int] | None = None
) -> LibraryVerdict:
    """The verdict of one library for one GPU: the listed containers first, then the deep ones."""
    cc = gpu.compute_capability
    entries = runtime_entries(binary)
    if binary.error and not entries:
        return LibraryVerdict(binary.path, gpu.label, UNKNOWN, binary.error, None, False)
    listed = [e for e in entries if e.listed]
    hidden = [e for e in entries if not e.listed]
    decided = _decide(listed, cc, driver_ptx_isa)
    from_deep = False
    if decided is None or decided[0] == NONE:
        deep = _decide(hidden, cc, driver_ptx_isa)
        if deep is not None and deep[0] != NONE:
            decided, from_deep = deep, True
            verdict, reason, entry = deep
            decided = (verdict, f"{reason} (a container cuobjdump does not list)", entry)
    if decided is not None:
        verdict, reason, entry = decided
        return LibraryVerdict(binary.path, gpu.label, verdict, reason, entry, from_deep)
    reason = (
        f"nothing runs on {cc}: it has {_present_targets(entries)}"
        + (f" (read stopped early: {binary.error})" if binary.error else "")
        + ' -> "no kernel image is available for execution on the device"'
    )
    return LibraryVerdict(binary.path, gpu.label, NONE, reason, None, False)


def _names(libraries: Iterable[LibraryVerdict]) -> str:
    return ", ".join(sorted(lib.path.rsplit("/", 1)[-1] for lib in libraries))


def package_verdict(
    package: str, version: str, gpu: GpuTarget, libraries: Sequence[LibraryVerdict]
) -> PackageVerdict:
    """Roll a package's library verdicts up into one."""
    by_verdict: dict[str, list[LibraryVerdict]] = {}
    for lib in libraries:
        by_verdict.setdefault(lib.verdict, []).append(lib)
    decided = [lib for lib in libraries if lib.verdict != UNKNOWN]
    none = by_verdict.get(NONE, [])
    jit = by_verdict.get(JIT, [])
    unknown = by_verdict.get(UNKNOWN, [])
    cc = gpu.compute_capability
    if not decided:
        verdict, reason = UNKNOWN, f"no library could be read: {_names(unknown)}"
    elif len(none) == len(decided):
        verdict, reason = NONE, f"no library has kernels for {cc}: {_names(none)}"
    elif none:
        verdict = PARTIAL
        reason = f"{len(none)} of {len(decided)} libraries have nothing for {cc}: {_names(none)}"
    elif jit:
        verdict = JIT
        reason = f"PTX JIT only (no SASS for {cc}) in {_names(jit)}"
    else:
        verdict, reason = NATIVE, f"SASS for {cc} in every library ({len(decided)})"
    if unknown and decided:
        reason += f"; unreadable: {_names(unknown)}"
    return PackageVerdict(package, version, gpu.label, verdict, reason, tuple(libraries))


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
        if not has_device_code(binary) and binary.format not in ("unreadable", "unknown"):
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
) -> tuple[PackageVerdict, ...]:
    """Every package x GPU verdict."""
    return tuple(
        package_verdict(
            group.package,
            group.version,
            gpu,
            [library_verdict(b, gpu, driver_ptx_isa) for b in group.binaries],
        )
        for group in groups
        for gpu in gpus
    )
