"""The facts the "binaries" section reports, as they cross the wire (``probe.facts`` holds the
rest and names these): what a file holds of device code, what its host image needs and names,
the run-time compilers it carries. Apart, so that reading files (``archgap kernels``) builds only
these classes. Nothing here but types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional, Tuple

# Closed sets, checked when a document is decoded (archgap.codec).
EntryKind = Literal["sass", "ptx", "ltoir"]  # an ELF cubin, PTX text, LTO IR
Variant = Literal["", "a", "f"]  # plain, arch-specific (sm_90a), family-specific (sm_100f)
Compression = Literal["none", "zstd", "lz4", "unknown"]
# The directories the loader section lists (``LoaderFacts.toolkit_dirs``: one of these it does
# not list does not exist); a library's other absolute RUNPATH directories are looked up with
# the library (``BinaryFacts.runpath_found``).
TOOLKIT_DIRS = "/usr/local/cuda"
BinaryFormat = Literal["elf", "pe", "archive", "cubin", "fatbin", "other", "unreadable", "unknown"]


def as_variant(text: str) -> Variant:
    """A target name's suffix as a ``Variant``; anything else is a ValueError."""
    if text == "a":
        return "a"
    if text == "f":
        return "f"
    if text == "":
        return ""
    raise ValueError("not a target variant: %r" % text)


@dataclass(frozen=True)
class RuntimeCompiler:
    """A compiler a library carries to make device code while it runs (probe.binary.rtcompilers)."""

    kind: str  # "nvrtc" (static or bundled NVRTC) or "nvptx" (LLVM's NVPTX backend)
    # the SM numbers of the targets its tables name (NVRTC: -arch=compute_XX; NVPTX: its
    # processors), ascending
    targets: Tuple[int, ...]
    ptx_isa: Optional[str]  # NVPTX: the newest PTX ISA its feature table names ("7.5")
    release: Optional[str]  # NVRTC: the CUDA release its banner names ("13.4")


@dataclass(frozen=True)
class KernelEntry:
    """One entry of a fatbin container (or one loose cubin)."""

    kind: EntryKind
    arch: int  # SM number: 75, 90, 120 ...
    variant: Variant
    ptx_isa: Optional[str]  # "9.0" for PTX entries, None otherwise
    compression: Compression
    stored_size: int  # payload bytes in the file
    uncompressed_size: int  # payload bytes once decompressed (== stored_size when not compressed)
    section: str  # ".nv_fatbin", "__nv_relfatbin", ".cask_resource", ... ("" for a loose file)
    offset: int  # file offset of the entry header (of the ELF image for a raw cubin)
    debug: bool  # built with -G
    listed: bool  # cuobjdump --list-elf / --list-ptx would list it (the default view)
    member: Optional[str] = None  # static-archive member that holds it
    # Entries this one stands for: 1 for an entry as read; more in a summary
    # (probe.binary.summary), with the sizes added and the first entry's offset.
    count: int = 1
    # SASS only: whether the cubin has a .text section (a kernel). False for an nvlink output
    # that holds only .nv.callgraph/.nv.rel.action; None when not looked at (compressed, large).
    kernels: Optional[bool] = None
    # Whether the entry is relocatable device code (an ``nvcc -rdc`` object: ELF type ET_REL),
    # which must be device-linked (nvlink, cuLink*, nvJitLink) before anything can load it; for a
    # container entry, whether its container's cubins are. Read for the cubins a deep search
    # finds outside the listed fatbin; None when not read (listed, or no cubin it could unpack).
    relocatable: Optional[bool] = None

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
    format: BinaryFormat
    entries: Tuple[KernelEntry, ...]
    deep: bool  # containers outside .nv_fatbin were searched too
    error: Optional[str] = None  # why the file could not be read (fully); entries read so far stay
    # the host ELF's e_machine, or a PE image's Machine: "x86-64", "aarch64", "ppc64" ...
    machine: Optional[str] = None
    # What the dynamic loader must find for it: DT_NEEDED names (None: not read, or no host
    # shared object/executable) and the RUNPATH (else RPATH) directories, "$ORIGIN" unexpanded.
    # For a PE image ("pe"): the DLLs of its import and delay-load import tables, no RUNPATH.
    needed: Optional[Tuple[str, ...]] = None
    runpath: Tuple[str, ...] = ()
    # The CUDA releases ("12.8", "13.0") that its cubins' toolkit notes (.note.nv.tkinfo) name,
    # oldest first: of the first cubin stored as is in each container (16 per file at most), and
    # of each bare cubin. () when none was read (compressed cubins, notes older than CUDA 12.8).
    toolkits: Tuple[str, ...] = ()
    # What it may open at run time by name (probe.binary.dlnames): the lib*.so* strings of its
    # read-only data when its dynamic symbol table imports dlopen; () when it does not import
    # dlopen; None when not read (not a linked 64-bit host ELF, or its tables were not kept).
    dlopens: Optional[Tuple[str, ...]] = None
    # The run-time compilers its read-only data carries (probe.binary.rtcompilers): () when
    # none, None when not read (not a linked host ELF, or its bytes were not kept).
    compilers: Optional[Tuple[RuntimeCompiler, ...]] = None
    # The newest CUDA release a toolkit banner ('Cuda compilation tools, release 13.4, ...') in
    # its read-only data names (probe.binary.banner): "" when none does, None when not read
    # (not a linked host ELF, its cubins' notes already name a release: ``toolkits``, or its
    # bytes were not kept).
    cuda_release: Optional[str] = None
    # The CUDA functions through which it may load device code itself (probe.binary.loadsyms:
    # cuModuleLoad*, cuLibraryLoad*, cudaLibraryLoad*, cuGetProcAddress*,
    # cudaGetDriverEntryPoint*) that its dynamic symbol table imports, sorted; () when none;
    # None when not read (as ``dlopens``).
    loader_imports: Optional[Tuple[str, ...]] = None
    # The module loaders it names in its read-only data (cuModuleLoadData, cuLibraryLoadData,
    # cudaLibraryLoadData: resolved by name, through dlsym or cuGetProcAddress, as a statically
    # linked CUDA runtime or a dlopen stub does; probe.binary.loadsyms), sorted; () when none;
    # None when not read (as ``dlopens``).
    loader_names: Optional[Tuple[str, ...]] = None
    # The names it needs or dlopens that lie in its absolute RUNPATH/RPATH directories on the
    # target (probe.binary.runpath), sorted; None when not looked at (no such directory, a
    # directory that could not be read, a wheel or image member).
    runpath_found: Optional[Tuple[str, ...]] = None
