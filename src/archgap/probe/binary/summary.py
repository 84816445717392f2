"""What the "binaries" section sends: every entry (``detail``), or one row per kind of entry.

A torch host has ~48,000 fatbin entries in ~120 files, but they differ in few ways: the analysis
reads only kind, arch, variant, PTX ISA, section, member, whether cuobjdump lists them and
whether they are relocatable (and whether any of the merged entries holds a kernel). The summary
merges the entries of a file that agree on all of these (and on compression and debug) into
one ``KernelEntry`` with ``count`` set and the sizes added: ~700 rows instead of 48,000, a
document of a few hundred KB instead of 20 MB, and the same verdicts. ``kernels --all`` and
``kernels --json`` ask for the detail. A reader given a ``Summary`` merges each entry into its row
as it finds it, so a summarized read makes no object per entry (``Reader.found``).
"""

from __future__ import annotations

import operator
from dataclasses import replace
from typing import Any, Dict, List, Optional, Tuple

from .binreader import entry_keeper
from .facts import BinaryFacts, KernelEntry

# What tells entries apart in a summary: everything but where they are and how big.
EntryKey = Tuple[str, int, str, Any, str, str, bool, bool, Any, Any]
# KernelEntry's fields in its order: Summary.add takes them so.
_FIELDS = operator.attrgetter(
    "kind", "arch", "variant", "ptx_isa", "compression", "stored_size", "uncompressed_size",
    "section", "offset", "debug", "listed", "member", "count", "kernels", "relocatable",
)  # fmt: skip


class Summary:
    """One file's entries merged into one row per kind as they are found (``Reader.found``):
    what ``summarized`` makes of them, without an object per entry (46,000 on a torch host).

    Entries that differ only in offset and size become one row: the first one's offset, the
    sizes and counts added, and whether any of them holds a kernel (``_any_kernels``)."""

    def __init__(self) -> None:
        self.rows: Dict[EntryKey, List[Any]] = {}  # [offset, count, stored, unpacked, kernels]

    def add(
        self,
        kind: str,
        arch: int,
        variant: str,
        ptx_isa: Optional[str],
        compression: str,
        stored_size: int,
        uncompressed_size: int,
        section: str,
        offset: int,
        debug: bool,
        listed: bool,
        member: Optional[str] = None,
        count: int = 1,
        kernels: Optional[bool] = None,
        relocatable: Optional[bool] = None,
    ) -> None:
        """One entry (or row) with ``KernelEntry``'s fields."""
        key = (kind, arch, variant, ptx_isa, compression, section, debug, listed, member,
               relocatable)  # fmt: skip
        row = self.rows.get(key)
        if row is None:
            self.rows[key] = [offset, count, stored_size, uncompressed_size, kernels]
        else:
            row[1] += count
            row[2] += stored_size
            row[3] += uncompressed_size
            if kernels is not row[4]:
                row[4] = _any_kernels(row[4], kernels)

    def entries(self) -> Tuple[KernelEntry, ...]:
        """The rows, in the order their first entries were found."""
        rows: List[KernelEntry] = []
        keep = entry_keeper(rows)
        for key, (offset, count, stored, unpacked, kernels) in self.rows.items():
            kind, arch, variant, ptx_isa, compression, section, debug, listed, member, rel = key
            keep(kind, arch, variant, ptx_isa, compression, stored, unpacked, section, offset,
                 debug, listed, member, count, kernels, rel)  # fmt: skip
        return tuple(rows)


def summarized(facts: BinaryFacts) -> BinaryFacts:
    """``facts`` with entries that differ only in offset and size merged (``Summary``)."""
    summary = Summary()
    for e in facts.entries:
        summary.add(*_FIELDS(e))
    if len(summary.rows) == len(facts.entries):
        return facts
    return replace(facts, entries=summary.entries())


def _any_kernels(a: Optional[bool], b: Optional[bool]) -> Optional[bool]:
    """Whether merged cubins hold a kernel: True if any does, False if none does, else None.
    (nvcc's device-link stub of a target merges with the target's real cubin: True.)"""
    if a or b:
        return True
    return None if a is None or b is None else False


def binary_json(facts: BinaryFacts, detail: bool = True) -> Dict[str, Any]:
    """``dataclasses.asdict(facts)`` (summarized unless ``detail``), without asdict's deep copy
    of every value (which cost 11 s for a torch host's 48,000 entries)."""
    if not detail:
        facts = summarized(facts)
    data = dict(vars(facts))
    data["entries"] = [dict(vars(e)) for e in facts.entries]
    if facts.needed is not None:  # as JSON has them (tuples are lists there)
        data["needed"], data["runpath"] = list(facts.needed), list(facts.runpath)
    data["toolkits"] = list(facts.toolkits)
    if facts.dlopens is not None:
        data["dlopens"] = list(facts.dlopens)
    if facts.loader_imports is not None:
        data["loader_imports"] = list(facts.loader_imports)
    if facts.loader_names is not None:
        data["loader_names"] = list(facts.loader_names)
    if facts.runpath_found is not None:
        data["runpath_found"] = list(facts.runpath_found)
    if facts.compilers is not None:
        data["compilers"] = [dict(vars(c), targets=list(c.targets)) for c in facts.compilers]
    return data


__all__ = ["Summary", "binary_json", "summarized"]
