"""The facts the probe reports: the frozen dataclasses that cross the wire as JSON (the "binaries"
section's are ``probe.binary.facts``, named here too).

Serialised with ``dataclasses.asdict``; ``archgap.codec.decode`` turns the JSON back into these
classes on the analysing side. Field names are part of the versioned JSON contract. The modules
that collect them (``toolkit``, ``jit_caches``, ``source.*``) import them from here, so the pure
analysis can name them without loading the AST scanners. Nothing here but types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from .binary.facts import TOOLKIT_DIRS as TOOLKIT_DIRS

# The "binaries" section's facts live with the code that reads them; named here as well.
from .binary.facts import BinaryFacts as BinaryFacts
from .binary.facts import BinaryFormat as BinaryFormat
from .binary.facts import Compression as Compression
from .binary.facts import EntryKind as EntryKind
from .binary.facts import KernelEntry as KernelEntry
from .binary.facts import RuntimeCompiler as RuntimeCompiler
from .binary.facts import Variant as Variant
from .binary.facts import as_variant as as_variant

# Bump when a field is renamed or removed; adding an optional field keeps the version.
FACTS_VERSION = 1


@dataclass(frozen=True)
class ProbeResponse:
    """The probe's answer (``collect.collect``): the envelope around its sections.

    Decoded once where facts enter (a transport, the in-process probe, a ``fleet --from``
    document); the sections stay JSON until the analysis decodes the ones it reads. Fields after
    ``facts_version`` default for documents that are not a probe run's (wheels, images).
    """

    facts_version: int = FACTS_VERSION
    host: str = ""
    platform: Optional[str] = None  # "Linux 6.8.0 x86_64"; None where there is no host
    probe_python: str = ""
    env: Dict[str, str] = field(default_factory=dict)
    env_source: str = "shell"
    sections: Dict[str, Any] = field(default_factory=dict)  # section name -> its JSON data
    errors: Dict[str, str] = field(default_factory=dict)  # section name -> why it failed
    seconds: Dict[str, float] = field(default_factory=dict)  # what each section took there
    # When the facts were collected there, UTC ISO 8601 ("2026-12-06T07:43:30Z"); None in a
    # document from an archgap that did not record it
    collected_at: Optional[str] = None

    def section(self, name: str) -> Any:
        """A section's JSON data, None when it was not asked for or failed."""
        return self.sections.get(name)


@dataclass(frozen=True)
class Problem:
    """Something the probe could not read, and why (a failure kept as a value)."""

    subject: str  # a path, a command, or a fact's name
    reason: str


@dataclass(frozen=True)
class Distribution:
    """An installed distribution and the native files its RECORD lists."""

    name: str
    version: str
    dist_info: str  # path of the .dist-info directory
    native_files: Tuple[str, ...]  # absolute paths of shared libraries, cubins and fatbins
    # METADATA's Requires-Dist lines as written (PEP 508): the versions of its companions
    requires: Tuple[str, ...] = ()
    # (module, "file:line") of each module its import needs (an import at module level of its
    # own modules) that no site-packages directory and not the interpreter provides; read only
    # when a Requires-Dist outside an extra names a distribution that is not installed
    # (probe.environment.imports)
    unresolved_imports: Tuple[Tuple[str, str], ...] = ()
    # Windows: the directories its own modules add to the DLL search path (os.add_dll_directory,
    # delvewheel's patch; "*" of a glob kept; None: its modules were not read), and "file:line"
    # of each addition whose directory depends on more than the package's place
    # (probe.environment.dlldirs)
    dll_directories: Optional[Tuple[str, ...]] = None
    dll_directories_unread: Tuple[str, ...] = ()
    # The library names and patterns ("libcudart.so.*[0-9]") its top-level __init__.py files
    # load through ctypes before their extensions (probe.environment.preloads); () when none
    preloads: Tuple[str, ...] = ()


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
class LoaderFacts:
    """What the target's dynamic loader finds by name alone (probe.environment.loader)."""

    names: Tuple[str, ...]  # library file names in its cache and searched directories
    directories: Tuple[str, ...]  # where they were read: /etc/ld.so.cache, LD_LIBRARY_PATH ...
    error: Optional[str] = None  # why the cache could not be read (fully)
    # each CUDA toolkit library directory under /usr/local (TOOLKIT_DIRS), and the library
    # names in it
    toolkit_dirs: Tuple[Tuple[str, Tuple[str, ...]], ...] = ()


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


# --- trace, gates, code: source facts ---


@dataclass(frozen=True)
class Guard:
    """One condition a statement sits under, innermost last."""

    kind: str  # "if", "else", "while", "for", "try", "except", "try-else", "finally"
    condition: str  # the test ("else": the test it is the else of); "" for try/finally
    line: int


@dataclass(frozen=True)
class Frame:
    """One step of a call path: a function and the line in it (a call, or the final read)."""

    function: str  # dotted module + qualname: flashinfer.jit.cpp_ext.get_cuda_path
    path: str
    line: int


@dataclass(frozen=True)
class Knob:
    """An environment variable that feeds a write."""

    variable: str
    access: str  # "os.environ[...]", "os.environ.get", "os.getenv", "in os.environ", ...
    path: str
    line: int
    text: str
    call_path: Tuple[Frame, ...]  # from the writing function to the one that reads it


@dataclass(frozen=True)
class Raiser:
    """A ``raise`` that can reach a handler, and how."""

    exception: str
    message: str
    path: str
    line: int
    function: str
    call_path: Tuple[Frame, ...]  # first frame: the call inside the ``try`` body


@dataclass(frozen=True)
class CallSite:
    call: str
    line: int


@dataclass(frozen=True)
class Swallow:
    """A ``try`` whose broad ``except`` only logs, warns or passes."""

    path: str
    try_line: int
    except_line: int
    handler: str  # "except Exception as e:"
    action: str  # the handler's first statement
    raisers: Tuple[Raiser, ...]
    external_calls: Tuple[CallSite, ...]  # calls outside the distribution that may raise too


@dataclass(frozen=True)
class Occurrence:
    kind: str  # "write" or "read"
    form: str  # assign, augassign, annassign, unpack, for, with, mutate:add, subscript-assign, ...
    path: str
    module: str
    line: int
    function: str  # enclosing function/class qualname, "<module>" at module level
    text: str  # the source line, stripped
    branch: Tuple[Guard, ...]
    knobs: Tuple[Knob, ...] = ()
    swallowed: Tuple[Swallow, ...] = ()


@dataclass(frozen=True)
class TraceFacts:
    name: str
    roots: Tuple[str, ...]
    files_scanned: int
    candidate_files: int
    defining_files: Tuple[str, ...]  # where the name is defined (listed first)
    occurrences: Tuple[Occurrence, ...]  # writes first (defining files first), then reads
    problems: Tuple[Problem, ...]
    error: Optional[str] = None  # why nothing could be traced (unknown distribution, bad name)


@dataclass(frozen=True)
class Gate:
    kind: str  # capability-call, arch-list-call, device-properties-call, nvml-call,
    # comparison, arch-env, raise, assert, warning
    line: int
    text: str  # the source line, stripped
    detail: str  # the call, the comparison, the variable, or the exception type
    condition: str  # the branch conditions it sits under, outermost first ("" at top level)
    message: str  # raise/assert/warning message ("" for the others)


@dataclass(frozen=True)
class GateFunction:
    path: str
    module: str
    function: str  # qualname, "<module>" for module-level code
    line: int  # of the def (1 for module level)
    gates: Tuple[Gate, ...]


@dataclass(frozen=True)
class GatesTarget:
    label: str  # "flashinfer-python 0.6.8", or the scanned path
    files_scanned: int
    candidate_files: int
    functions: Tuple[GateFunction, ...]


@dataclass(frozen=True)
class GatesFacts:
    targets: Tuple[GatesTarget, ...]
    problems: Tuple[Problem, ...]
    error: Optional[str] = None


@dataclass(frozen=True)
class Binding:
    """Where a name the condition reads gets its value, inside the same function."""

    name: str
    line: int
    text: str  # the assigning line, stripped
    loop: str  # "major, minor in ctx.TARGET_CUDA_ARCHS" when assigned inside a for loop, else ""
    reads: Tuple[str, ...]  # names the assigned value and the loop's iterable read


@dataclass(frozen=True)
class CodeSite:
    requested_path: str  # site-packages-relative path asked for
    requested_line: int  # the line a log named (0: find ``requested_code`` instead)
    requested_code: str  # the code text the log printed, or the raise site's known text
    distribution: str  # the distribution that owns the file ("" when none does)
    version: str
    path: str  # the file on the examined host ("" when not installed)
    line: int  # the installed line (0 when not found)
    text: str  # that line, stripped
    function: str  # enclosing qualname, "<module>" at module level
    guards: Tuple[Guard, ...]  # outermost first
    reads: Tuple[str, ...]  # names the innermost if/else/while condition reads
    bindings: Tuple[Binding, ...]
    error: Optional[str] = None  # why the site could not be read


@dataclass(frozen=True)
class CodeFacts:
    site_packages: Tuple[str, ...]
    sites: Tuple[CodeSite, ...]
    problems: Tuple[Problem, ...]


# --- toolchain: CUDA toolkits and JIT packages (probe.environment.toolkit) ---


@dataclass(frozen=True)
class EnvVar:
    """A variable of the environment JIT compilers will run with, and whose environment it is."""

    name: str
    value: str
    source: str  # "shell", "/proc/1234/environ", "/etc/sglang.env"


@dataclass(frozen=True)
class Toolkit:
    """One toolkit candidate: where it is, how it was found, and which version its tool reports."""

    home: str  # toolkit root as the target sees it: /usr/local/cuda-12.8, .../nvidia/cu13
    found_by: str  # CUDA_HOME, CUDA_PATH, PATH, /usr/local/cuda, /usr/local/cuda-*, CONDA_PREFIX,
    # wheel, triton, TRITON_PTXAS_PATH, TRITON_PTXAS_BLACKWELL_PATH
    origin: str  # readable: "env CUDA_HOME (shell)", "RECORD of nvidia_cuda_nvcc_cu12-12.8.93"
    tool: str  # "nvcc", "ptxas", "ptxas-blackwell" or "" (a wheel with no binary, e.g. cudart)
    tool_path: Optional[str]  # the binary (target path), None when there is none
    status: str  # "ok", "missing", "broken", "timeout", "wheel" (version from the wheel only)
    version: Optional[str]  # "12.8"
    full_version: Optional[str]  # "12.8.93"
    version_from: str  # "`/usr/local/cuda-12.8/bin/nvcc --version`" or "wheel METADATA (...)"
    reason: Optional[str] = None  # why status is not "ok"
    banner: Optional[str] = None  # the release line the tool printed
    component: str = ""  # wheel component: "nvcc", "runtime", "nvrtc" ("" for system toolkits)
    real_home: str = ""  # home with links resolved: two candidates may be one toolkit


@dataclass(frozen=True)
class InstalledPackage:
    name: str  # normalised distribution name: flashinfer-python, torch, triton
    version: str
    dist_info: str


@dataclass(frozen=True)
class TorchBuild:
    """torch's own record of its build: ``torch/version.py``."""

    version: Optional[str]  # "2.9.0+cu128"
    cuda: Optional[str]  # "12.8"; None for a CPU build
    file: str
    # TORCH_CUDA_ARCH_LIST names its cpp_extension accepts, read from the installed source
    supported_arches: Optional[Tuple[str, ...]] = None
    supported_arches_file: Optional[str] = None
    # named architectures ("Hopper" -> "9.0+PTX"), in the order cpp_extension replaces them
    named_arches: Optional[Tuple[Tuple[str, str], ...]] = None


@dataclass(frozen=True)
class SourceCheck:
    """Whether a line a rule depends on is really in the installed package's source."""

    package: str
    key: str  # which rule it confirms: "sm12_requires_12_9_raise", "broad_except" ...
    file: str  # absolute path of the source file
    needle: str  # the exact text looked for
    found: bool
    line: Optional[int]  # 1-based line of the first occurrence
    reason: Optional[str] = None  # why it could not be checked (file missing, unreadable)
    sha256: Optional[str] = None  # the file's hash, when the check asks (archgap's own patch)


@dataclass(frozen=True)
class ToolchainFacts:
    env_source: str
    env: Tuple[EnvVar, ...]
    which_nvcc: Optional[str]  # the nvcc that `which nvcc` finds with that environment's PATH
    toolkits: Tuple[Toolkit, ...]
    packages: Tuple[InstalledPackage, ...]
    torch: Optional[TorchBuild]
    source_checks: Tuple[SourceCheck, ...]
    site_packages: Tuple[str, ...]
    problems: Tuple[Problem, ...] = ()


# --- jit caches (probe.jit_caches) ---


@dataclass(frozen=True)
class CacheEntry:
    """One compiled artifact in a cache, with what its cache recorded about it."""

    path: str
    key: str  # the path below the cache root, without the file name
    binary: BinaryFacts
    package_version: Optional[str]  # FlashInfer's version directory, Triton's triton_version
    dir_archs: Optional[
        str
    ]  # what the directory name says (FlashInfer "120a", torch "py311_cu128")
    python_tag: Optional[str]  # torch extensions: "py311"
    cuda_tag: Optional[str]  # torch extensions: "cu128" (torch's CUDA when it was built)
    toolkit_home: Optional[str]  # build.ninja's cuda_home (FlashInfer) or nvcc's directory (torch)
    toolkit_version: Optional[str]  # that toolkit's version.json now (it may have changed since)
    gencode: Tuple[str, ...]  # the code= targets its build.ninja asked nvcc for
    metadata_arch: Optional[int]  # Triton: target.arch in the kernel's JSON


@dataclass(frozen=True)
class CacheRoot:
    cache: str  # "flashinfer", "torch_extensions", "triton"
    path: str
    found_by: str  # "FLASHINFER_WORKSPACE_BASE", "HOME", "TORCH_EXTENSIONS_DIR" ...
    exists: bool
    filesystem: Optional[str]  # the fstype of the mount that holds it (/proc/self/mountinfo)
    mount_point: Optional[str]
    network: bool
    entries: Tuple[CacheEntry, ...]
    truncated: bool  # more than MAX_ENTRIES binaries: the rest were not read
    problem: Optional[str] = None
    mount_source: Optional[str] = None  # what is mounted there: "fs01:/export/home"
