"""How a package's own build is told its GPU targets, and the oldest GPU a package supports:
``builds.json`` (explain's no-kernel-image rule)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from archgap.kb import load_json


@dataclass(frozen=True)
class BuildSwitch:
    switch: str  # a template: {sm} the target's digits ("120"), {cc} the capability ("12.0")
    source: str

    def for_gpu(self, cc: str) -> str:
        return self.switch.format(sm=cc.replace(".", ""), cc=cc)


@dataclass(frozen=True)
class Minimum:
    cc: str  # the oldest compute capability the package's released source supports
    cpu_switch: str  # how it is told to run without the GPU
    source: str


@cache
def build_switches() -> dict[str, BuildSwitch]:
    """The packages built by their own CMake or make (not torch's extension builder, which
    alone reads TORCH_CUDA_ARCH_LIST), by name: the switch that sets their architectures."""
    return {
        e["package"]: BuildSwitch(e["switch"], e["source"])
        for e in load_json("builds.json")["switches"]
    }


def _switch(key: str) -> BuildSwitch:
    entry = load_json("builds.json")[key]
    return BuildSwitch(entry["switch"], entry["source"])


@cache
def default_switch() -> BuildSwitch:
    """CMake's and torch's: any package, where the log may be a torch extension's."""
    return _switch("default_switch")


@cache
def cmake_switch() -> BuildSwitch:
    """CMake's and nvcc's: a build the log ties to no torch."""
    return _switch("cmake_switch")


def build_switch(package: str | None, torch: bool = True) -> BuildSwitch:
    """The switch that tells ``package``'s build its GPU targets (the default: CMake's and
    torch's; CMake's and nvcc's alone where nothing ties the build to torch)."""
    own = build_switches().get(package or "")
    return own or (default_switch() if torch else cmake_switch())


@cache
def minimums() -> dict[str, Minimum]:
    return {
        e["package"]: Minimum(e["cc"], e["cpu_switch"], e["source"])
        for e in load_json("builds.json")["minimums"]
    }


__all__ = [
    "BuildSwitch",
    "Minimum",
    "build_switch",
    "build_switches",
    "cmake_switch",
    "default_switch",
    "minimums",
]
