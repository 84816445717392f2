"""What a library needs in order to load (``load.json``) and which GPUs a driver runs
(``drivers.json`` "gpu_architectures")."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from archgap.kb import load_json
from archgap.kb.toolchain import driver_runs_runtime, driver_tuple, toolkit_release, version_tuple


@dataclass(frozen=True)
class CudaLibrary:
    soname: str  # "libcublas.so.12"
    cuda_major: int | None  # the CUDA major it belongs to; None when the soname does not say
    package: str  # the package that ships it: "nvidia-cublas-cu12"
    source: str


@dataclass(frozen=True)
class GpuArchitecture:
    architecture: str  # "Blackwell"
    compute_capabilities: tuple[str, ...]  # ("10.0", "12.0")
    first_cuda: str  # the first CUDA toolkit that supports it
    min_driver: str | None  # that toolkit's GA driver minimum (toolkits.json); None if unknown
    last_driver_branch: str | None  # "580": the last driver branch that runs it
    source: str

    def driver_gap(self, driver: str) -> tuple[str, str] | None:
        """Why ``driver`` runs nothing of this architecture, as ("first", why) for a driver
        older than its first one, ("last", why) for a branch past its last; None: it runs it
        (or the driver cannot be read)."""
        have = driver_tuple(driver)
        if not have:
            return None
        need = version_tuple(self.min_driver or "")
        if need and have < need:
            return "first", (
                f"driver {driver} is older than {self.architecture}'s first driver "
                f"{self.min_driver} (CUDA {self.first_cuda}'s minimum)"
            )
        last = self.last_driver_branch
        if last and have[0] > int(last):
            return "last", (
                f"driver {driver} is newer than R{last}, the last branch that runs "
                f"{self.architecture}"
            )
        return None


@dataclass(frozen=True)
class LoaderRule:
    """How a package that ships several builds of a library picks the one it loads."""

    package: str
    library: str  # a build's file name: "libbitsandbytes_cuda{major}{minor}.so"
    cuda_from: str  # whose CUDA version decides: "torch"
    override: str  # the environment variable that names the build instead
    what: str
    source: str

    def build(self, file_name: str) -> tuple[int, int] | None:
        """The CUDA (major, minor) of a build by its file name; None for another file. A
        Windows build is the same name with ``.dll`` for ``.so`` (bitsandbytes 0.50.2's
        consts.py: DYNAMIC_LIBRARY_SUFFIX "Windows": ".dll", used by cextension.py)."""
        library = self.library
        if library.endswith(".so") and file_name.endswith(".dll"):
            library = library[: -len(".so")] + ".dll"
        pattern = re.escape(library).replace(r"\{major\}", r"(\d+)")
        match = re.fullmatch(pattern.replace(r"\{minor\}", r"(\d)"), file_name)
        return (int(match.group(1)), int(match.group(2))) if match else None


@cache
def cuda_libraries() -> dict[str, CudaLibrary]:
    return {
        e["soname"]: CudaLibrary(e["soname"], e["cuda_major"], e["package"], e["source"])
        for e in load_json("load.json")["cuda_libraries"]
    }


@cache
def driver_libraries() -> tuple[frozenset[str], str]:
    """The libraries the NVIDIA driver installs (libcuda.so.1, NVML), and the source."""
    entry = load_json("load.json")["driver_libraries"]
    return frozenset(entry["names"]), entry["source"]


@cache
def loader_rules() -> dict[str, LoaderRule]:
    return {
        e["package"]: LoaderRule(
            e["package"],
            e["library"],
            e["cuda_from"],
            e["override"],
            e["what"],
            e["source"],
        )
        for e in load_json("load.json")["loaders"]
    }


@cache
def gpu_architectures() -> tuple[GpuArchitecture, ...]:
    found = []
    for e in load_json("drivers.json")["gpu_architectures"]:
        release = toolkit_release(e["first_cuda"])
        minimum = release.min_driver_linux if release else None
        found.append(
            GpuArchitecture(
                e["architecture"],
                tuple(e["compute_capabilities"]),
                e["first_cuda"],
                minimum,
                e["last_driver_branch"],
                e["source"],
            )
        )
    return tuple(found)


def gpu_architecture(compute_capability: str) -> GpuArchitecture | None:
    return next(
        (a for a in gpu_architectures() if compute_capability in a.compute_capabilities), None
    )


@dataclass(frozen=True)
class CompilerRule:
    """A package that compiles its kernels at run time, and the compiler library it loads."""

    package: re.Pattern[str]  # its distribution name -> the CUDA major (group 1)
    compiler: str  # "NVRTC"
    library: str  # "libnvrtc.so.{major}"
    wheels: dict[str, str]  # CUDA major -> the wheel that ships the compiler
    max_arch: tuple[tuple[str, int], ...]  # (compiler version from, newest SM it asks for)
    alternatives: tuple[str, ...]  # libraries the package uses when the compiler is missing
    own_arch: frozenset[str]  # compute capabilities it asks for their own SM, past the cap
    what: str
    source: str

    def newest_arch(self, version: str) -> int | None:
        """The newest SM the package asks this compiler version for."""
        have = version_tuple(version) or ()
        found = [arch for since, arch in self.max_arch if have >= (version_tuple(since) or ())]
        return found[-1] if found else None


@cache
def compiler_rules() -> tuple[CompilerRule, ...]:
    return tuple(
        CompilerRule(
            re.compile(e["package"]),
            e["compiler"],
            e["library"],
            dict(e["wheels"]),
            tuple((since, int(arch)) for since, arch in e["max_arch"]),
            tuple(e["alternatives"]),
            frozenset(e["own_arch"]),
            e["what"],
            e["source"],
        )
        for e in load_json("load.json")["compilers"]
    )


@dataclass(frozen=True)
class DriverJitRule:
    """A package whose compiler emits PTX that the driver JIT-compiles unless a linker does."""

    package: str
    compiler: str  # "NVVM"
    library: str  # the compiler library's file-name pattern: "libnvvm.so*"
    wheels: dict[str, str]  # CUDA major -> the wheel that ships the compiler
    extras: dict[str, str]  # CUDA major -> what installs the package with its compiler
    linker: str  # the library that links PTX without the driver's JIT: "libnvJitLink.so.{major}"
    what: str
    source: str

    def extra_for(self, driver: str | None) -> str:
        """What installs the package with its compiler for ``driver``: the extra of the newest
        CUDA major in ``extras`` the driver runs (drivers.json), else of the oldest."""
        majors = sorted(self.extras, key=int)
        runs = [m for m in majors if driver and driver_runs_runtime(driver, f"{m}.0")[0]]
        return self.extras[runs[-1] if runs else majors[0]]


@cache
def driver_jit_rules() -> tuple[DriverJitRule, ...]:
    return tuple(
        DriverJitRule(
            e["package"],
            e["compiler"],
            e["library"],
            dict(e["wheels"]),
            dict(e["extras"]),
            e["linker"],
            e["what"],
            e["source"],
        )
        for e in load_json("load.json")["driver_jit"]
    )


@dataclass(frozen=True)
class TorchGate:
    """A package that loads its compiled extensions only with a torch new enough for them."""

    package: str
    files: str  # the extensions' file-name pattern: "_C*.so"
    skip: str  # the environment variable that skips them ("1")
    torch_min: dict[str, tuple[str, str]]  # package version -> (the torch it needs, source)


@cache
def torch_gates() -> dict[str, TorchGate]:
    return {
        e["package"]: TorchGate(
            e["package"],
            e["files"],
            e["skip"],
            {r["version"]: (r["torch_min"], r["source"]) for r in e["releases"]},
        )
        for e in load_json("load.json")["torch_gates"]
    }


@dataclass(frozen=True)
class WheelCudaMajor:
    """How NVIDIA's CUDA component wheels say their CUDA major (a path or a name suffix)."""

    path: re.Pattern[str]  # "/nvidia/cu(\\d+)/" in an installed file's path
    name: re.Pattern[str]  # "^nvidia-.+-cu(\\d+)$": the distribution's name
    what: str
    source: str


@cache
def wheel_cuda_major() -> WheelCudaMajor:
    e = load_json("load.json")["wheel_cuda_major"]
    return WheelCudaMajor(re.compile(e["path"]), re.compile(e["name"]), e["what"], e["source"])


@dataclass(frozen=True)
class InstallNames:
    """What a user installs for a CUDA version: CuPy's wheel, torch's index (load.json)."""

    cupy_per_major_from: int  # CUDA major from which CuPy ships one wheel per major
    cupy_per_major: str  # "cupy-cuda{major}x"
    cupy_per_minor: str  # "cupy-cuda{xy}"
    torch_index: str  # "cu{xy}"
    torch_index_url: str  # "https://download.pytorch.org/whl/{index}"
    source: str

    def cupy(self, cuda: str | None) -> str:
        """CuPy's wheel for a CUDA: ``cupy-cuda12x``; ``cupy-cuda102`` before per-major wheels."""
        parts = version_tuple(cuda or "")
        major = parts[0] if parts else 0
        if major >= self.cupy_per_major_from:
            return self.cupy_per_major.format(major=major)
        return self.cupy_per_minor.format(xy=(cuda or "").replace(".", ""))

    def torch_index_of(self, cuda: str) -> tuple[str, str]:
        """(index name, its URL) of torch's wheels for a CUDA: ("cu128", "https://...")."""
        index = self.torch_index.format(xy=cuda.replace(".", ""))
        return index, self.torch_index_url.format(index=index)


@cache
def install_names() -> InstallNames:
    e = load_json("load.json")["install_names"]
    return InstallNames(
        int(e["cupy_per_major_from"]),
        e["cupy_per_major"],
        e["cupy_per_minor"],
        e["torch_index"],
        e["torch_index_url"],
        f"{e['cupy_source']}; {e['torch_index_source']}",
    )


@dataclass(frozen=True)
class DlopenRules:
    """How a library's dlopen of a CUDA library by soname is searched for and judged."""

    what: str
    source: str
    # package -> (sonames its GPU work needs, what uses them, source)
    required: dict[str, tuple[frozenset[str], str, str]]


@cache
def dlopen_rules() -> DlopenRules:
    e = load_json("load.json")["dlopen"]
    required = {
        r["package"]: (frozenset(r["sonames"]), r["what"], r["source"]) for r in e["required"]
    }
    return DlopenRules(e["what"], e["source"], required)
