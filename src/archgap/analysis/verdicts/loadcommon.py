"""What the load model's checks share: a finding (one broken link), how a library's blocks are
recorded, and where a run-time compiler is found (load, drivers)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from archgap.probe.facts import BinaryFacts, LoaderFacts, PythonEnvironment, ToolchainFacts

Check = Literal[
    "driver-gpu",
    "driver-cuda",
    "needed-library",
    "dlopen-library",
    "picked-build",
    "extension-gate",
    "compiler",
    "companion",
    "driver-jit",
]
# "fails": it cannot load; "unknown": a fact that would decide is missing; "note": it loads,
# something worth saying is off (a companion pin the loader does not hold it to: companions)
Status = Literal["fails", "unknown", "note"]


@dataclass(frozen=True)
class LoadFinding:
    check: Check
    status: Status  # "fails": it cannot load; "unknown": a fact that would decide is missing
    gpu: str  # the GPU target's label; "" when it holds on every GPU
    package: str  # the distribution; "" for the driver
    libraries: tuple[str, ...]  # the files it is about (paths); () for the driver
    chain: tuple[str, ...]  # the links, from the package (or the GPU) to what breaks
    cause: str
    fix: str
    source: str  # the knowledge that decided
    gates_exit_code: bool


def find_compiler(
    env: PythonEnvironment,
    loader: LoaderFacts | None,
    toolchains: ToolchainFacts | None,
    library: str,
    wheel: str,
) -> tuple[str | None, str] | None:
    """(the compiler's version, or None when not known; where it was found), in the order
    cuda.pathfinder and XLA search: site-packages (its wheel, or the file), then the system (a
    toolkit's ptxas, the loader's libraries)."""
    for dist in env.distributions:
        if dist.name == wheel:
            return dist.version, f"the wheel {dist.name} {dist.version}"
    if library == "ptxas":  # a program: the toolkits the toolchain section found
        return _toolkit_ptxas(toolchains)
    shipped = [p for d in env.distributions for p in d.native_files if base(p) == library]
    if shipped:
        return None, shipped[0]
    return _system_library(loader, library) if loader is not None else None


def _toolkit_ptxas(toolchains: ToolchainFacts | None) -> tuple[str | None, str] | None:
    """The ptxas of the first toolkit the toolchain section found working (its version, where)."""
    for tk in toolchains.toolkits if toolchains is not None else ():
        if tk.tool in ("ptxas", "nvcc") and tk.status == "ok" and tk.version:
            return tk.full_version or tk.version, f"{tk.home}/bin/ptxas ({tk.origin})"
    return None


def _system_library(loader: LoaderFacts, library: str) -> tuple[str | None, str] | None:
    """The library in a toolkit's directory the loader section listed (its version from the
    directory's name, /usr/local/cuda-12.8/...), else in the dynamic loader's cache."""
    for directory, names in loader.toolkit_dirs:
        if library in names:
            version = re.search(r"/cuda-(\d+\.\d+)/", directory + "/")
            return (version.group(1) if version else None), f"{directory}/{library}"
    if library in loader.names:
        return None, f"{library} in the dynamic loader's cache"
    return None


def block(blocked: dict[tuple[str, str], str], path: str, why: str) -> None:
    """Record one more broken link of the library at ``path`` (on every GPU)."""
    known = blocked.get((path, ""))
    blocked[(path, "")] = f"{known}; {why}" if known else why


def base(path: str) -> str:
    return os.path.basename(path)


ORIGIN = ("$ORIGIN", "${ORIGIN}")


def search_dirs(binary: BinaryFacts) -> list[str]:
    """The library's own RPATH/RUNPATH directories, ``$ORIGIN`` made its directory, normalized
    (relative where the library's path is: a wheel member)."""
    here = os.path.dirname(os.path.normpath(binary.path))
    found = []
    for directory in binary.runpath:
        for origin in ORIGIN:
            directory = directory.replace(origin, here)
        found.append(os.path.normpath(directory))
    return found


def names(binaries: Iterable[BinaryFacts]) -> str:
    names = sorted({base(b.path) for b in binaries})
    return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")


__all__ = [
    "ORIGIN", "Check", "LoadFinding", "Status", "base", "block", "find_compiler", "names",
    "search_dirs",
]  # fmt: skip
