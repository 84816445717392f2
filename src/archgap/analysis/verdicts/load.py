"""The load model: a library's SASS fitting the GPU is not enough; it must load and run there.

Each check is one link of the chain from an installed package to a kernel running on the GPU,
decided by knowledge with its source (kb/drivers.json, kb/load.json, kb/toolkits.json):

1. **The driver runs the GPU**: from the driver of the first CUDA toolkit that supports the
   architecture up to its last driver branch (NVIDIA's architecture matrix). Below it nothing
   runs on that GPU at all: one finding for the GPU, and every library there cannot load.
2. **The driver runs the library's CUDA**: a library of CUDA major N needs a driver that runs
   CUDA N.x (minor-version compatibility's floor, NVIDIA's Table 2: CUDA 13 needs >= 580); its
   major is read from its content first (its PTX ISA, its cubins' toolkit notes), then the CUDA
   runtime its ``DT_NEEDED`` names (``libcudart.so.13``), then the wheel's path or name.
3. **Its needed libraries resolve**: each ``DT_NEEDED`` name is a library the driver installs,
   a file an installed package ships, or one the target's dynamic loader finds by name (its
   cache and trusted directories, LD_LIBRARY_PATH: probe.loader). A CUDA library that none of
   them gives is a gap, named with the package that ships it. A Windows DLL's imports are
   searched for by the DLL search order of a Python process instead (``dllsearch``).
   The CUDA libraries it opens at run time by soname (dlopen) are searched for as dlopen(3)
   does for that library (``dlopen``).
4. **The package loads this build**: a package that ships one build per CUDA version loads one
   of them by its documented rule (kb/load.json "loaders": bitsandbytes by torch's CUDA version
   or BNB_CUDA_VERSION); the others are shown as not loaded and decide nothing. A package
   that loads its compiled extensions only with a new enough torch (kb/load.json
   "torch_gates": torchao) does not load them with an older one.
5. **Its run-time compiler can target the GPU**: a package that compiles its kernels when they
   are first used (kb/load.json "compilers": CuPy with NVRTC) needs that compiler installed, and
   asks it for a target by its own rule, which the compiler must know and the GPU must run.
6. **Its companions are installed, at the versions it was built with** (``companions``): a
   ``Requires-Dist`` (PEP 508) on an installed package that ships native files, which its
   installed version does not satisfy (jax-cuda12-plugin 0.4.38 pins jax-cuda12-pjrt
   ==0.4.38), is a pair that does not load together; one that is not installed, whose module
   its import needs (spconv imports cumm at module level), is a ModuleNotFoundError.
7. **The driver can JIT the PTX it is given**: a package whose compiler emits PTX that the driver
   compiles (kb/load.json "driver_jit": numba-cuda with NVVM) needs that compiler, and, without a
   linker that compiles the PTX itself (nvJitLink), a driver that knows the PTX ISA of its CUDA.

Pure: facts in, findings out. Each finding is one broken link, with its chain and its fix.
Checks 1, 2 and 7 (against the driver) are in ``drivers``, check 5 in ``load_compilers``; what
the checks share (the finding, how a block is recorded, where a compiler is found) in
``loadcommon``.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from archgap.analysis.verdicts.companions import companions
from archgap.analysis.verdicts.compat import GpuTarget
from archgap.analysis.verdicts.dllsearch import dll_search
from archgap.analysis.verdicts.dlopen import dlopened
from archgap.analysis.verdicts.drivers import driver_cuda, driver_gpu, driver_jit
from archgap.analysis.verdicts.load_compilers import compilers
from archgap.analysis.verdicts.loadcommon import LoadFinding, Status, search_dirs
from archgap.analysis.verdicts.loadcommon import base as _base
from archgap.analysis.verdicts.loadcommon import block as _block
from archgap.analysis.verdicts.loadcommon import names as _names
from archgap.analysis.verdicts.platform import other_system_files
from archgap.analysis.verdicts.verdicts import has_device_code
from archgap.kb import load as kb
from archgap.kb.fixes import fix_text
from archgap.kb.toolchain import version_tuple
from archgap.probe.facts import (
    TOOLKIT_DIRS,
    BinaryFacts,
    Distribution,
    EnvVar,
    LoaderFacts,
    PythonEnvironment,
    ToolchainFacts,
)

LOADER_SEARCH = (
    "ld.so(8) (https://man7.org/linux/man-pages/man8/ld.so.8.html): a DT_NEEDED name is looked "
    "up in DT_RUNPATH, LD_LIBRARY_PATH, /etc/ld.so.cache and the trusted directories"
)

# A Python extension module's file name: a module name, a PEP 3149 or stable-ABI tag, ".so"
EXTENSION_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.(?:cpython-[^.]+|abi3))?\.so$")


@dataclass(frozen=True)
class LoadModel:
    findings: tuple[LoadFinding, ...] = ()
    # (library path or "", GPU label or "") -> why it cannot load ("" is every library / GPU)
    blocked: Mapping[tuple[str, str], str] = field(default_factory=dict)
    not_loaded: Mapping[str, str] = field(default_factory=dict)  # path -> why it is not picked

    def why_blocked(self, path: str, gpu: str) -> str:
        """Why the library cannot load on the GPU ("" when nothing stops it)."""
        blocked = self.blocked
        return blocked.get(("", gpu)) or blocked.get((path, "")) or blocked.get((path, gpu), "")


def load_model(
    env: PythonEnvironment,
    binaries: Sequence[BinaryFacts],
    targets: Sequence[GpuTarget],
    driver: str | None,
    driver_source: str,
    loader: LoaderFacts | None = None,
    toolchains: ToolchainFacts | None = None,
    platform: str | None = None,
) -> LoadModel:
    """Every broken link of every package's libraries on the judged GPUs; ``platform``: the
    host's (uname), whose loader loads only its own system's format."""
    findings: list[LoadFinding] = []
    blocked: dict[tuple[str, str], str] = {}
    gating = any(t.gates_exit_code for t in targets)
    if driver:
        findings += driver_gpu(targets, driver, driver_source, blocked)
    owner = {path: dist.name for dist in env.distributions for path in dist.native_files}
    not_loaded: dict[str, str] = other_system_files(binaries, platform)
    picked = _picked_builds(binaries, owner, toolchains, not_loaded, blocked, gating)
    picked += _torch_gates(env, toolchains, not_loaded)
    # only what the packages load has to load (a build they never pick may need anything)
    elves = [b for b in binaries if b.needed is not None and b.path not in not_loaded]
    if driver:
        findings += driver_cuda(elves, owner, driver, driver_source, blocked, gating)
    # A Windows image's imports resolve by the DLL search order (dllsearch), not ld.so's
    linux = [b for b in elves if b.format != "pe"]
    findings += _needed(env, linux, owner, loader, blocked, gating)
    findings += dll_search(env, [b for b in elves if b.format == "pe"], owner, blocked, gating)
    findings += dlopened(env, linux, owner, loader, blocked, gating)
    findings += compilers(env, loader, toolchains, targets, blocked)
    findings += companions(env, blocked, gating, binaries)
    findings += driver_jit(env, loader, toolchains, driver, blocked, gating)
    return LoadModel(tuple(findings + picked), blocked, not_loaded)


def _needed(
    env: PythonEnvironment,
    elves: Sequence[BinaryFacts],
    owner: Mapping[str, str],
    loader: LoaderFacts | None,
    blocked: dict[tuple[str, str], str],
    gating: bool,
) -> list[LoadFinding]:
    """Check 3: one finding per package and missing provider (a package, or the library when
    no entry names one), for the CUDA libraries: those with device code or a CUDA library in
    their DT_NEEDED (a ROCm or CPU build beside them is never loaded on an NVIDIA GPU)."""
    known = kb.cuda_libraries()
    missing = _missing_needed(env, elves, owner, loader, known)
    return [
        _needed_finding(key, names, loader, known, blocked, gating)
        for key, names in sorted(missing.items())
    ]


def _missing_needed(
    env: PythonEnvironment,
    elves: Sequence[BinaryFacts],
    owner: Mapping[str, str],
    loader: LoaderFacts | None,
    known: Mapping[str, kb.CudaLibrary],
) -> dict[tuple[str, str, Status], dict[str, list[BinaryFacts]]]:
    """(package, provider, status) -> each DT_NEEDED name that nothing gives -> the CUDA
    libraries that need it."""
    driver_libs, _ = kb.driver_libraries()
    files = _shipped(env, elves)
    loaded = _loaded_with_python(elves, files)
    preloads = {d.name: d.preloads for d in env.distributions}
    system = set(loader.names) if loader is not None else None
    missing: dict[tuple[str, str, Status], dict[str, list[BinaryFacts]]] = {}
    for binary in elves:
        needed = binary.needed or ()
        if not (has_device_code(binary) or any(n in known for n in needed)):
            continue
        there, unread = _runpath_libraries(binary, loader)
        status: Status = "unknown" if system is None or unread else "fails"
        for name in _not_given(needed, (driver_libs, there), system, known):
            mine = preloads.get(owner.get(binary.path, ""), ())
            if _found_by_path(binary, name, files, loaded, mine):
                continue
            entry = known.get(name)
            provider = entry.package if entry else name
            names = missing.setdefault((owner.get(binary.path, ""), provider, status), {})
            names.setdefault(name, []).append(binary)
    return missing


def _shipped(env: PythonEnvironment, elves: Sequence[BinaryFacts]) -> dict[str, set[str]]:
    """The environment's native files: file name -> the directories that hold one."""
    paths = [p for d in env.distributions for p in d.native_files]
    paths += [*env.unowned_native_files, *(b.path for b in elves)]
    found: dict[str, set[str]] = {}
    for path in paths:
        directory, name = os.path.split(os.path.normpath(path))
        found.setdefault(name, set()).add(directory)
    return found


class _Loaded(NamedTuple):
    """What a Python process has loaded once the environment's modules are imported."""

    names: set[str]  # the libraries' file names (the process has them by soname)
    dirs: set[str]  # the RPATH/RUNPATH directories of those libraries


def _loaded_with_python(elves: Sequence[BinaryFacts], files: Mapping[str, set[str]]) -> _Loaded:
    """The environment's extension modules (``_C.cpython-311-x86_64-linux-gnu.so``,
    ``_swigfaiss.so``; and a library named like one, which a package loads with ctypes) and,
    transitively, what they need and find in the directories of what is loaded (a library's
    own RUNPATH; its loader's RPATH, which ld.so(8) also searches for it: auditwheel's
    ``faiss_gpu_cu12.libs``), as torch/_C -> libtorch_python.so -> ... -> libtorch_cuda.so ->
    nvidia/cublas/lib/libcublas.so.12."""
    by_path = {os.path.normpath(b.path): b for b in elves}
    todo = [b for b in elves if EXTENSION_MODULE.match(_base(b.path))]
    loaded = _Loaded({_base(b.path) for b in todo}, set())
    grew = True
    while grew:  # until nothing more is found: each library found may name more directories
        grew = False
        for binary in list(todo):
            loaded.dirs.update(search_dirs(binary))
        for binary in list(todo):
            for name in binary.needed or ():
                there = sorted(files.get(name, set()) & loaded.dirs)
                if name in loaded.names or not there:
                    continue
                loaded.names.add(name)
                grew = True
                found = by_path.get(os.path.join(there[0], name))
                if found is not None:
                    todo.append(found)
    return loaded


def _found_by_path(
    binary: BinaryFacts,
    name: str,
    files: Mapping[str, set[str]],
    loaded: _Loaded,
    preloads: Sequence[str] = (),
) -> bool:
    """Whether ld.so finds ``name``, a file of the environment, for ``binary``: in a directory
    of its own RUNPATH/RPATH (``$ORIGIN`` made its directory), loaded already (by its soname,
    as torch's nvidia-* libraries are for every torch extension; or by its package's own
    import, ``preloads``: pycolmap-cuda12's ``ctypes.CDLL`` of ``libcudart.so.*[0-9]``), or,
    for a library that is loaded itself, in a directory of what is loaded. A file that lies
    only elsewhere in site-packages is found by none, as ld.so(8) does not search site-packages
    (cuequivariance-ops-cu12 0.13.0: libcue_ops.so, no RUNPATH, needs libnvrtc.so.12, which
    nvidia-cuda-nvrtc-cu12 installs in nvidia/cuda_nvrtc/lib; `import cuequivariance_ops`
    prints "libnvrtc.so.12: cannot open shared object file")."""
    held = files.get(name) or set()
    if held & set(search_dirs(binary)) or name in loaded.names:
        return True
    if held and any(fnmatch.fnmatchcase(name, pattern) for pattern in preloads):
        return True
    return _base(binary.path) in loaded.names and bool(held & loaded.dirs)


def _not_given(
    needed: Iterable[str],
    given: tuple[Collection[str], ...],
    system: set[str] | None,
    known: Mapping[str, kb.CudaLibrary],
) -> list[str]:
    """The names of ``needed`` that neither ``given`` nor the target's loader (``system``, its
    names) has; when the loader was not read, only the CUDA libraries among them (a system
    library, libc or libstdc++, is the target's)."""
    absent = [name for name in needed if not any(name in names for names in given)]
    if system is None:
        return [name for name in absent if name in known]
    return [name for name in absent if name not in system]


def _needed_finding(
    key: tuple[str, str, Status],
    names: Mapping[str, list[BinaryFacts]],
    loader: LoaderFacts | None,
    known: Mapping[str, kb.CudaLibrary],
    blocked: dict[tuple[str, str], str],
    gating: bool,
) -> LoadFinding:
    """The finding for one package, provider and status; a library that surely cannot load
    ("fails") is blocked for each name it misses."""
    package, provider, status = key
    where = _not_found_where(loader, status)
    libs = sorted({b.path: b for group in names.values() for b in group}.values(),
                  key=lambda b: b.path)  # fmt: skip
    listed = ", ".join(sorted(names))
    if status == "fails":
        for name, group in names.items():
            for binary in group:
                _block(blocked, binary.path, f"{name} is not found")
    entry = next((known[n] for n in sorted(names) if n in known), None)
    if entry:
        fix = fix_text("needed-library-provider", provider=provider)
    else:
        fix = fix_text("needed-library-unknown", libraries=listed)
    cause = (
        f"{_names(libs)} of {package or 'no distribution'} needs {listed}: {where} "
        f"('{sorted(names)[0]}: cannot open shared object file')"
    )
    chain = (f"{_names(libs)} needs {listed} (DT_NEEDED)", where)
    return LoadFinding(
        "needed-library",
        status,
        "",
        package,
        tuple(b.path for b in libs),
        chain,
        cause,
        fix,
        entry.source if entry else LOADER_SEARCH,
        gating and status == "fails",
    )


NOT_FOUND = "no installed package ships it and the dynamic loader does not find it"


def _not_found_where(loader: LoaderFacts | None, status: Status) -> str:
    """Where a needed library was looked for (``status`` "unknown": not everywhere)."""
    if loader is None:
        return "no installed package ships it (the target's loader cache was not read)"
    if status == "unknown":
        return (
            "no installed package ships it and the dynamic loader's cache does not name it; "
            "its RUNPATH names a directory that was not read"
        )
    return f"{NOT_FOUND} ({', '.join(loader.directories)}, RUNPATH)"


def _runpath_libraries(
    binary: BinaryFacts, loader: LoaderFacts | None
) -> tuple[frozenset[str], bool]:
    """The library names in the binary's absolute RUNPATH directories that the loader section
    listed (the toolkits' under /usr/local) or the probe found in the others
    (``runpath_found``), and whether one of them was not read. A toolkit directory the probe
    did not list does not exist ($ORIGIN ones are the environment's)."""
    listed = dict(loader.toolkit_dirs) if loader is not None else {}
    names: set[str] = set(binary.runpath_found or ())
    looked = binary.runpath_found is not None  # the others were looked up on the target
    unread = False
    for directory in binary.runpath:
        if not directory.startswith("/"):
            continue
        directory = directory.rstrip("/")
        if directory in listed:
            names.update(listed[directory])
        elif not directory.startswith(TOOLKIT_DIRS) and not looked:
            unread = True
    return frozenset(names), unread


def _picked_builds(
    binaries: Sequence[BinaryFacts],
    owner: Mapping[str, str],
    toolchains: ToolchainFacts | None,
    not_loaded: dict[str, str],
    blocked: dict[tuple[str, str], str],
    gating: bool,
) -> list[LoadFinding]:
    """Check 4: for a package with a loader rule, which of its builds it loads."""
    findings = []
    for package, rule in kb.loader_rules().items():
        builds: dict[tuple[int, int], str] = {}
        for binary in binaries:
            version = rule.build(_base(binary.path))
            if owner.get(binary.path) == package and version is not None:
                builds[version] = binary.path
        if not builds:
            continue
        wanted, why, overridden = _wanted_version(rule, toolchains)
        if wanted is None:
            findings.append(
                LoadFinding(
                    "picked-build",
                    "unknown",
                    "",
                    package,
                    tuple(sorted(builds.values())),
                    (rule.what, why),
                    f"{package}: which of its {len(builds)} builds it loads "
                    f"is not known ({why}): every build is judged",
                    fix_text(
                        "picked-build-undecided", decider=rule.cuda_from, override=rule.override
                    ),
                    rule.source,
                    False,
                )
            )
            continue
        picked = _select(builds, wanted, overridden)
        label = f"{wanted[0]}.{wanted[1]}"
        for version, path in builds.items():
            if version != picked:
                not_loaded[path] = (
                    f"{package} loads the build for CUDA {label} ({why}), not this one"
                )
        if picked is None:
            name = rule.library.format(major=wanted[0], minor=wanted[1])
            reason = f"{package} would load {name} ({why}), which it does not ship"
            for path in builds.values():
                not_loaded.pop(path, None)
                _block(blocked, path, reason)
            findings.append(
                LoadFinding(
                    "picked-build",
                    "fails",
                    "",
                    package,
                    tuple(sorted(builds.values())),
                    (rule.what, why, f"no build for CUDA {wanted[0]}.x"),
                    reason,
                    fix_text(
                        "picked-build-missing",
                        package=package,
                        major=wanted[0],
                        override=rule.override,
                    ),
                    rule.source,
                    gating,
                )
            )
    return findings


def _torch_gates(
    env: PythonEnvironment, toolchains: ToolchainFacts | None, not_loaded: dict[str, str]
) -> list[LoadFinding]:
    """Check 4, for packages whose extensions load only with a new enough torch."""
    findings = []
    gates = kb.torch_gates()
    for dist in env.distributions:
        gate = gates.get(dist.name)
        release = gate.torch_min.get(dist.version) if gate else None
        if gate is None or release is None:
            continue
        files = tuple(p for p in dist.native_files if fnmatch.fnmatch(_base(p), gate.files))
        found = _torch_gate(dist, gate, files, release, toolchains, not_loaded) if files else None
        if found is not None:
            findings.append(found)
    return findings


def _torch_gate(
    dist: Distribution,
    gate: kb.TorchGate,
    files: tuple[str, ...],
    release: tuple[str, str],
    toolchains: ToolchainFacts | None,
    not_loaded: dict[str, str],
) -> LoadFinding | None:
    """Whether the package's gated extensions (``files``) load, by the torch its release
    (``release``: the torch it needs, the source) needs: None when they do; a finding, and
    ``not_loaded`` said for each file, when they do not."""
    torch_min, source = release
    skipped = _env_var(toolchains, gate.skip)
    torch = toolchains.torch if toolchains else None
    have = torch.version.split("+")[0] if torch and torch.version else None
    first = f"{dist.name} {dist.version} loads {gate.files} only with torch >= {torch_min}"
    if skipped is not None and skipped.value == "1":
        why = f"{gate.skip}=1 ({skipped.source}) skips them"
        fix = fix_text("extension-gate-skipped", variable=gate.skip)
    elif have is None:
        return LoadFinding(
            "extension-gate",
            "unknown",
            "",
            dist.name,
            files,
            (first,),
            f"{dist.name}: whether it loads its extensions is not known: torch's "
            "version was not found",
            fix_text("extension-gate-torch-unknown"),
            source,
            False,
        )
    elif (version_tuple(have) or ()) < (version_tuple(torch_min) or ()):
        why = f"torch {torch.version if torch else have} is installed"
        fix = fix_text(
            "extension-gate-old-torch", torch_min=torch_min, package=dist.name, torch=have
        )
    else:
        return None
    for path in files:
        not_loaded[path] = f"{first}: {why}"
    return LoadFinding(
        "extension-gate",
        "fails",
        "",
        dist.name,
        files,
        (first, why),
        f"{dist.name} {dist.version} does not load its compiled extensions "
        f"({_names_of(files)}): {why}; it goes on without their kernels",
        fix,
        source,
        False,
    )


def _env_var(toolchains: ToolchainFacts | None, name: str) -> EnvVar | None:
    """The environment variable ``name`` as the toolchain section read it (None: it is unset,
    or the section was not collected)."""
    if toolchains is None:
        return None
    return next((v for v in toolchains.env if v.name == name), None)


def _names_of(paths: Iterable[str]) -> str:
    return ", ".join(sorted({_base(p) for p in paths}))


def _wanted_version(
    rule: kb.LoaderRule, toolchains: ToolchainFacts | None
) -> tuple[tuple[int, int] | None, str, bool]:
    """The CUDA version whose build the package loads, why, and whether the override named it."""
    if toolchains is None:
        return None, "the environment's toolchain facts were not collected", False
    override = next((v.value for v in toolchains.env if v.name == rule.override), None)
    if override is not None:
        if override.isdigit() and len(override) >= 2:
            return (int(override[:-1]), int(override[-1])), f"{rule.override}={override}", True
        return None, f"{rule.override}={override!r} is not a version like 128", True
    torch = toolchains.torch
    if torch is None or not torch.cuda:
        return None, "torch is not installed, or is a CPU build", False
    major, _, minor = torch.cuda.partition(".")
    if not (major.isdigit() and minor[:1].isdigit()):
        return None, f"torch.version.cuda is {torch.cuda!r}", False
    wanted = (int(major), int(minor.split(".")[0]))
    return wanted, f"torch {torch.version} is built for CUDA {torch.cuda}", False


def _select(
    builds: Mapping[tuple[int, int], str], wanted: tuple[int, int], overridden: bool
) -> tuple[int, int] | None:
    """The build the rule picks: the exact one; unless overridden, else the highest of the same
    major below it, else the lowest of the same major above it; never another major."""
    if wanted in builds or overridden:
        return wanted if wanted in builds else None
    same = [v for v in builds if v[0] == wanted[0]]
    lower = [v for v in same if v < wanted]
    higher = [v for v in same if v > wanted]
    return max(lower) if lower else min(higher) if higher else None


__all__ = ["LoadFinding", "LoadModel", "load_model"]
