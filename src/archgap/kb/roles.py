"""What a native file is for (kernel library, device-link archive, profiler): ``roles.json``."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from archgap.kb import load_json


@dataclass(frozen=True)
class ProfilerLibrary:
    prefix: str  # file-name prefix: "libcupti"
    what: str
    source: str


@dataclass(frozen=True)
class RoleRule:
    what: str
    source: str


@cache
def profiler_libraries() -> tuple[ProfilerLibrary, ...]:
    entries = load_json("roles.json")["profiler"]
    return tuple(ProfilerLibrary(p["prefix"], p["what"], p["source"]) for p in entries)


@cache
def device_link_archive() -> RoleRule:
    rule = load_json("roles.json")["device_link_archive"]
    return RoleRule(rule["what"], rule["source"])


@cache
def kernel_less() -> RoleRule:
    """A file whose entries hold no kernel (decided by content: ``probe.deep_plan.kernel_less``)."""
    rule = load_json("roles.json")["kernel_less"]
    return RoleRule(rule["what"], rule["source"])


def profiler_library(file_name: str) -> ProfilerLibrary | None:
    return next((p for p in profiler_libraries() if file_name.startswith(p.prefix)), None)


@dataclass(frozen=True)
class CoverageRule:
    min_share: float  # a GPU served by fewer modules than this fraction of an even share is thin
    what: str
    source: str


@cache
def thin_coverage() -> CoverageRule:
    """When a library covers a GPU with too few of its modules to be ``native`` there."""
    rule = load_json("roles.json")["thin_coverage"]
    return CoverageRule(float(rule["min_share"]), rule["what"], rule["source"])
