"""Windows DLLs that need no package (``windows.json``): the system's, the Visual C++ runtime's
and the NVIDIA driver's, and the DLL search order a Python process uses, with their sources."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from archgap.kb import load_json


@dataclass(frozen=True)
class DllGroup:
    names: frozenset[str]  # lower case: Windows file names are not case-sensitive
    prefixes: tuple[str, ...]
    source: str

    def holds(self, name: str) -> bool:
        lower = name.lower()
        return lower in self.names or lower.startswith(self.prefixes)


@dataclass(frozen=True)
class SearchOrder:
    what: str
    source: str


def _group(key: str) -> DllGroup:
    entry = load_json("windows.json")[key]
    return DllGroup(
        frozenset(n.lower() for n in entry["names"]),
        tuple(p.lower() for p in entry.get("prefixes", ())),
        entry["source"],
    )


@cache
def system_dlls() -> DllGroup:
    return _group("system")


@cache
def runtime_dlls() -> DllGroup:
    return _group("runtime")


@cache
def driver_dlls() -> DllGroup:
    return _group("driver")


@cache
def search_order() -> SearchOrder:
    entry = load_json("windows.json")["search_order"]
    return SearchOrder(entry["what"], entry["source"])


def outside_packages(name: str) -> DllGroup | None:
    """The group of a DLL no package has to ship (found in System32 or as an API set), or
    None."""
    return next((g for g in (system_dlls(), runtime_dlls(), driver_dlls()) if g.holds(name)), None)


__all__ = ["DllGroup", "SearchOrder", "driver_dlls", "outside_packages", "search_order"]
