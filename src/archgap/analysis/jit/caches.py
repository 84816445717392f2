"""JIT cache audit: does each cached build run on the GPUs, and does it match what is installed?

Pure. Per entry: the verdict of its binary on each GPU (verdicts.library_verdict, the same rules
as the packages'), and flags:
- ``other-gpu``: nothing in it runs natively on a GPU that is present or named. How much that
  matters depends on the cache's key: torch extensions are loaded by name whatever the GPU (a
  shared cache built on another GPU means "no kernel image" or a PTX JIT on every start), FlashInfer
  keys its directory by the arch list (the entry is used when the list names it, e.g.
  FLASHINFER_CUDA_ARCH_LIST="12.0a" on a GB10), Triton and CuPy key by target (an unused leftover);
- ``other-version``: built by another package version (FlashInfer's version directory, Triton's
  triton_version, torch's ``py<XY>_cu<XYZ>`` directory) than the one installed;
- ``other-toolkit``: built with another CUDA toolkit than the one the package resolves now
  (FlashInfer's cache key has no toolkit, so the old build is loaded after a toolkit change).
Per cache root: ``network-fs`` (nfs, lustre ...), and ``shared`` when a cache on a network
filesystem holds builds for GPUs other than this host's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from archgap.analysis.verdicts.compat import GpuTarget
from archgap.analysis.verdicts.verdicts import (
    BLOCKED,
    NATIVE,
    NONE,
    has_device_code,
    library_verdict,
)
from archgap.codec import decode
from archgap.kb.toolchain import major_minor, toolkit_releases
from archgap.probe.facts import CacheEntry, CacheRoot, ProbeResponse, ToolchainFacts

PACKAGE_OF = {
    "flashinfer": "flashinfer-python",
    "torch_extensions": "torch",
    "triton": "triton",
    "cupy": "cupy",
}
# The toolkit lookup of FlashInfer's get_cuda_path and torch's CUDA_HOME: env first, then PATH.
TOOLKIT_ORDER = ("CUDA_HOME", "CUDA_PATH", "PATH", "/usr/local/cuda")


@dataclass(frozen=True)
class Flag:
    kind: str  # "other-gpu", "other-version", "other-toolkit", "network-fs", "shared"
    severity: str  # "error" (it will fail), "warning" (slow or stale and loaded), "info" (unused)
    message: str


@dataclass(frozen=True)
class EntryVerdict:
    gpu: str
    compute_capability: str
    verdict: str
    reason: str


@dataclass(frozen=True)
class AuditedEntry:
    path: str
    key: str
    targets: tuple[str, ...]  # read from the binary: "sm_120a", "compute_90"
    package_version: str | None
    toolkit: str | None  # "12.8 (build.ninja cuda_home /usr/local/cuda-12.8)"
    verdicts: tuple[EntryVerdict, ...]
    flags: tuple[Flag, ...]


@dataclass(frozen=True)
class AuditedCache:
    cache: str
    path: str
    found_by: str
    exists: bool
    filesystem: str | None
    entries: tuple[AuditedEntry, ...]
    flags: tuple[Flag, ...]
    truncated: bool
    problem: str | None


@dataclass(frozen=True)
class CacheReport:
    home: str | None
    env_source: str
    caches: tuple[AuditedCache, ...]

    @property
    def flagged(self) -> int:
        return sum(1 for c in self.caches for e in c.entries if e.flags) + sum(
            1 for c in self.caches if c.flags
        )


def _targets(entry: CacheEntry) -> tuple[str, ...]:
    names = {e.target for e in entry.binary.entries if e.kind in ("sass", "ptx")}
    return tuple(sorted(names, key=lambda t: (t.startswith("compute"), t)))


def _ptx_toolkit(entry: CacheEntry) -> str | None:
    """The toolkit a PTX entry's ISA version names (ISA 8.7 -> CUDA 12.8)."""
    isas = {e.ptx_isa for e in entry.binary.entries if e.kind == "ptx" and e.ptx_isa}
    for release in toolkit_releases():
        if release.ptx_isa in isas and not release.ptx_isa_inferred:
            return release.cuda
    return None


def _toolkit(entry: CacheEntry, toolchains: ToolchainFacts | None) -> tuple[str | None, str | None]:
    """(major.minor, how it is known) of the toolkit that built the entry, where recorded."""
    if entry.toolkit_version:
        parsed = major_minor(entry.toolkit_version)
        version = f"{parsed[0]}.{parsed[1]}" if parsed else entry.toolkit_version
        return version, f"build.ninja cuda_home {entry.toolkit_home} (its version.json now)"
    home = (entry.toolkit_home or "").rstrip("/")
    for tk in toolchains.toolkits if toolchains is not None and home else ():
        if tk.version and tk.tool == "nvcc" and home in (tk.home.rstrip("/"), tk.real_home):
            return tk.version, f"build.ninja cuda_home {home} (its nvcc now)"
    if entry.cuda_tag and entry.cuda_tag.startswith("cu") and len(entry.cuda_tag) >= 4:
        digits = entry.cuda_tag[2:]
        return f"{digits[:-1]}.{digits[-1]}", f"directory {entry.dir_archs}"
    ptx = _ptx_toolkit(entry)
    return (ptx, "PTX ISA of its PTX entry") if ptx else (None, None)


def resolved_toolkit(toolchains: ToolchainFacts | None) -> tuple[str, str] | None:
    """(version, where) of the toolkit JIT builds resolve now: CUDA_HOME, CUDA_PATH, PATH, then
    /usr/local/cuda (FlashInfer's get_cuda_path; torch's CUDA_HOME lookup is the same order)."""
    if toolchains is None:
        return None
    for found_by in TOOLKIT_ORDER:
        for tk in toolchains.toolkits:
            if tk.found_by == found_by and tk.status == "ok" and tk.tool == "nvcc" and tk.version:
                return tk.version, f"{tk.home} ({tk.found_by})"
    return None


def _installed(toolchains: ToolchainFacts | None, package: str) -> str | None:
    if toolchains is None:
        return None
    return next((p.version for p in toolchains.packages if p.name == package), None)


def _gpu_flags(cache: str, verdicts: Sequence[EntryVerdict], targets: Sequence[str]) -> list[Flag]:
    flags = []
    built = ", ".join(targets) or "no device code"
    for v in verdicts:
        if v.verdict == NATIVE:
            continue
        gpu = f"{v.gpu} ({v.compute_capability})"
        if cache == "torch_extensions":
            severity = "error" if v.verdict in (NONE, BLOCKED) else "warning"
            effect = (
                "'no kernel image is available'"
                if v.verdict == NONE
                else f"it cannot load: {v.reason}"
                if v.verdict == BLOCKED
                else "only PTX: the driver JIT-compiles it at load (slow start)"
            )
            message = f"built for {built}; torch loads it by name on any GPU: on {gpu} {effect}"
        elif cache == "flashinfer":
            severity = "warning"
            message = (
                f"built for {built}: nothing native for {gpu}; FlashInfer loads it whenever its "
                "arch list names this directory (FLASHINFER_CUDA_ARCH_LIST set for another GPU)"
            )
        else:
            severity = "info"
            message = f"built for {built}: not for {gpu} (its cache key has the target: unused)"
        flags.append(Flag("other-gpu", severity, message))
    return flags


def _version_flags(
    cache: str, entry: CacheEntry, toolchains: ToolchainFacts | None, python_version: str
) -> list[Flag]:
    flags = []
    installed = _installed(toolchains, PACKAGE_OF[cache])
    if entry.package_version and installed and entry.package_version != installed:
        flags.append(
            Flag(
                "other-version",
                "info",
                f"built by {PACKAGE_OF[cache]} {entry.package_version}, installed {installed}: "
                "never loaded again (stale)",
            )
        )
    wanted = "py" + "".join(python_version.split(".")[:2]) if python_version else None
    if entry.python_tag and wanted and not entry.python_tag.startswith(wanted):
        flags.append(
            Flag(
                "other-version",
                "info",
                f"built for Python {entry.python_tag}, this environment is {wanted}: unused here",
            )
        )
    return flags


def _toolkit_flags(cache: str, entry: CacheEntry, toolchains: ToolchainFacts | None) -> list[Flag]:
    built, how = _toolkit(entry, toolchains)
    if cache == "torch_extensions" and toolchains is not None and toolchains.torch is not None:
        now = toolchains.torch.cuda
        if built and now and built != now:
            message = f"built with torch's CUDA {built} ({how}); installed torch has CUDA {now}"
            return [Flag("other-toolkit", "info", message + ": unused (another directory)")]
        return []
    current = resolved_toolkit(toolchains)
    if cache != "flashinfer" or not built or current is None or built == current[0]:
        return []
    message = (
        f"built with CUDA {built} ({how}); FlashInfer now resolves CUDA {current[0]} at "
        f"{current[1]}: its cache key has no toolkit, so this old build is still loaded"
    )
    return [Flag("other-toolkit", "warning", message)]


def _audit_entry(
    cache: str,
    entry: CacheEntry,
    gpus: Sequence[GpuTarget],
    toolchains: ToolchainFacts | None,
    python_version: str,
) -> AuditedEntry:
    targets = _targets(entry)
    verdicts = tuple(
        EntryVerdict(g.label, str(g.compute_capability), v.verdict, v.reason)
        for g in gpus
        for v in (library_verdict(entry.binary, g),)
    )
    gating = [v for v, g in zip(verdicts, gpus, strict=True) if g.gates_exit_code]
    # FlashInfer and Triton key their caches by target: a build that serves one of the GPUs is
    # where it belongs. torch extensions are loaded by name, so every GPU it misses counts.
    keyed = cache != "torch_extensions" and any(v.verdict == NATIVE for v in gating)
    flags = (
        _gpu_flags(cache, gating, targets) if has_device_code(entry.binary) and not keyed else []
    )
    flags += _version_flags(cache, entry, toolchains, python_version)
    flags += _toolkit_flags(cache, entry, toolchains)
    built, how = _toolkit(entry, toolchains)
    return AuditedEntry(
        entry.path,
        entry.key,
        targets,
        entry.package_version,
        f"{built} ({how})" if built else None,
        verdicts,
        tuple(flags),
    )


def _root_flags(root: CacheRoot, entries: Sequence[AuditedEntry]) -> tuple[Flag, ...]:
    if not root.network:
        return ()
    flags = [
        Flag(
            "network-fs",
            "warning",
            f"on a network filesystem ({root.filesystem} at {root.mount_point}): every host that "
            "mounts it shares these builds",
        )
    ]
    foreign = sorted(
        {t for e in entries if any(f.kind == "other-gpu" for f in e.flags) for t in e.targets}
    )
    if foreign:
        flags.append(
            Flag(
                "shared",
                "warning",
                f"shared by different GPUs: it holds builds for {', '.join(foreign)}, which do not "
                "run natively on this host's GPUs",
            )
        )
    return tuple(flags)


def audit_caches(
    data: Mapping[str, Any],
    gpus: Sequence[GpuTarget],
    toolchains: ToolchainFacts | None = None,
    python_version: str = "",
) -> CacheReport:
    """The probe's "caches" section judged against ``gpus``."""
    audited = []
    for raw in data.get("roots") or ():
        root = decode(CacheRoot, raw)
        entries = tuple(
            _audit_entry(root.cache, e, gpus, toolchains, python_version) for e in root.entries
        )
        audited.append(
            AuditedCache(
                root.cache,
                root.path,
                root.found_by,
                root.exists,
                root.filesystem,
                entries,
                _root_flags(root, entries),
                root.truncated,
                root.problem,
            )
        )
    return CacheReport(data.get("home"), str(data.get("env_source") or ""), tuple(audited))


@dataclass(frozen=True)
class SharedCache:
    """One cache on a network filesystem that hosts with different GPUs use."""

    cache: str
    share: str  # "fs01:/export/home u/.cache/torch_extensions" (mount source + path below it)
    filesystem: str
    hosts: tuple[str, ...]  # "gpu01 (9.0)"
    compute_capabilities: tuple[str, ...]
    message: str


def _host_capabilities(facts: ProbeResponse) -> tuple[str, ...]:
    gpus = (facts.section("gpu") or {}).get("gpus") or ()
    return tuple(sorted({str(g.get("compute_capability")) for g in gpus if isinstance(g, dict)}))


def _share_key(root: CacheRoot) -> tuple[str, str] | None:
    if not (root.network and root.exists and root.mount_point):
        return None
    below = root.path[len(root.mount_point) :].lstrip("/")
    return root.mount_source or f"{root.filesystem}:{root.mount_point}", below


@dataclass(frozen=True)
class ShareUse:
    """One host's use of a cache on a network filesystem (what a fleet keeps per host)."""

    cache: str
    source: str  # mount source: "fs01:/export/home"
    below: str  # the cache's path below the mount point
    filesystem: str
    host: str
    compute_capabilities: tuple[str, ...]


def cache_shares(name: str, facts: ProbeResponse) -> tuple[ShareUse, ...]:
    """The caches on network filesystems in one host's facts."""
    data = facts.section("caches")
    capabilities = _host_capabilities(facts)
    uses = []
    for raw in data.get("roots") or () if isinstance(data, dict) else ():
        root = decode(CacheRoot, raw)
        key = _share_key(root)
        if key is not None:
            uses.append(ShareUse(root.cache, *key, root.filesystem or "?", name, capabilities))
    return tuple(uses)


def shared_caches(uses: Iterable[ShareUse]) -> tuple[SharedCache, ...]:
    """Caches that hosts with different GPUs share over a network filesystem: the same mount
    source and the same path below the mount."""
    by_share: dict[tuple[str, str, str], list[ShareUse]] = {}
    for use in uses:
        by_share.setdefault((use.cache, use.source, use.below), []).append(use)
    found = []
    for (cache, source, below), seen in sorted(by_share.items()):
        capabilities = tuple(sorted({cc for u in seen for cc in u.compute_capabilities}))
        if len(capabilities) < 2:
            continue
        shown = tuple(f"{u.host} ({', '.join(u.compute_capabilities) or 'no GPU'})" for u in seen)
        message = (
            f"{cache} cache {source} {below} is shared by hosts with GPUs "
            f"{', '.join(capabilities)}"
            + (
                ": torch loads an extension by name, so each host runs what the first one built"
                if cache == "torch_extensions"
                else ""
            )
        )
        found.append(
            SharedCache(
                cache, f"{source} {below}", seen[0].filesystem, shown, capabilities, message
            )
        )
    return tuple(found)
