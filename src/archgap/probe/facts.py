"""The facts the probe reports: frozen dataclasses that cross the wire as JSON.

Serialised with ``dataclasses.asdict``; ``archgap.model.decode`` turns the JSON back into these
classes on the analysing side. Field names are part of the versioned JSON contract.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

# Bump when a field is renamed or removed; adding an optional field keeps the version.
FACTS_VERSION = 1


@dataclass(frozen=True)
class Problem:
    """Something the probe could not read, and why (a failure kept as a value)."""

    subject: str  # a path, a command, or a fact's name
    reason: str


@dataclass(frozen=True)
class KernelEntry:
    """One entry of a fatbin container (or one loose cubin)."""

    kind: str  # "sass" (ELF cubin), "ptx", "ltoir"
    arch: int  # SM number: 75, 90, 120 ...
    variant: str  # "" plain, "a" arch-specific, "f" family-specific
    ptx_isa: Optional[str]  # "9.0" for PTX entries, None otherwise
    compression: str  # "none", "zstd", "lz4"
    stored_size: int  # payload bytes in the file
    uncompressed_size: int  # payload bytes once decompressed (== stored_size when not compressed)
    section: str  # ".nv_fatbin", "__nv_relfatbin", ".cask_resource", ... ("" for a loose file)
    offset: int  # file offset of the entry header (of the ELF image for a raw cubin)
    debug: bool  # built with -G
    listed: bool  # cuobjdump --list-elf / --list-ptx would list it (the default view)
    member: Optional[str] = None  # static-archive member that holds it
    # Entries this one stands for: 1 for an entry as read; more in a summary (probe.summary), with
    # the sizes added and the first entry's offset.
    count: int = 1
    # SASS only: whether the cubin has a .text section (a kernel). False for an nvlink output
    # that holds only .nv.callgraph/.nv.rel.action; None when not looked at (compressed, large).
    kernels: Optional[bool] = None

    @property
    def target(self) -> str:
        """The name nvcc uses: ``sm_120a`` for SASS, ``compute_90`` for PTX."""
        prefix = "compute_" if self.kind == "ptx" else "sm_"
        return "%s%d%s" % (prefix, self.arch, self.variant)


@dataclass(frozen=True)
class BinaryFacts:
    """Device code found in one file."""

    path: str
    size: int
    format: str  # "elf", "archive", "cubin", "fatbin", "other", "unreadable", "unknown"
    entries: Tuple[KernelEntry, ...]
    deep: bool  # containers outside .nv_fatbin were searched too
    error: Optional[str] = None  # why the file could not be read (fully); entries read so far stay
    machine: Optional[str] = None  # the host ELF's e_machine: "x86-64", "aarch64", "ppc64" ...


@dataclass(frozen=True)
class Distribution:
    """An installed distribution and the native files its RECORD lists."""

    name: str
    version: str
    dist_info: str  # path of the .dist-info directory
    native_files: Tuple[str, ...]  # absolute paths of shared libraries, cubins and fatbins


@dataclass(frozen=True)
class PythonEnvironment:
    """The inspected interpreter and what is installed for it."""

    executable: str
    python_version: str
    site_packages: Tuple[str, ...]
    distributions: Tuple[Distribution, ...]
    unowned_native_files: Tuple[str, ...]  # native files that no RECORD lists
    problems: Tuple[Problem, ...] = ()


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    uuid: str
    compute_capability: str  # "12.0"
    source: str  # how it was found: "nvidia-smi", "nvml"


@dataclass(frozen=True)
class GpuFacts:
    gpus: Tuple[Gpu, ...]
    driver_version: Optional[str]  # "580.65.06"
    driver_cuda_version: Optional[str]  # the newest CUDA the driver supports: "13.0"
    source: str  # "nvidia-smi", "nvml", "/proc/driver/nvidia/version" or "none"
    problems: Tuple[Problem, ...] = ()
