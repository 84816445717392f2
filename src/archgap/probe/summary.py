"""What the "binaries" section sends: every entry (``detail``), or one row per kind of entry.

A torch host has ~48,000 fatbin entries in ~120 files, but they differ in few ways: the analysis
reads only kind, arch, variant, PTX ISA, section, member, whether cuobjdump lists them and
whether a cubin has kernels. The summary merges the entries of a file that agree on all of these
(and on compression and debug)
into one ``KernelEntry`` with ``count`` set and the sizes added: ~700 rows instead of 48,000,
a document of a few hundred KB instead of 20 MB, and the same verdicts. ``kernels --all`` and
``kernels --json`` ask for the detail.
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from .facts import BinaryFacts, KernelEntry

# What tells entries apart in a summary: everything but where they are and how big.
EntryKey = Tuple[str, int, str, Any, str, str, bool, bool, Any, Any]


def summarized(facts: BinaryFacts) -> BinaryFacts:
    """``facts`` with entries that differ only in offset and size merged (first offset kept)."""
    merged: Dict[EntryKey, List[Any]] = {}
    for e in facts.entries:
        key = (e.kind, e.arch, e.variant, e.ptx_isa, e.compression, e.section, e.debug, e.listed,
               e.member, e.kernels)  # fmt: skip
        row = merged.get(key)
        if row is None:
            merged[key] = [e, e.count, e.stored_size, e.uncompressed_size]
        else:
            row[1] += e.count
            row[2] += e.stored_size
            row[3] += e.uncompressed_size
    if len(merged) == len(facts.entries):
        return facts
    entries = tuple(
        KernelEntry(e.kind, e.arch, e.variant, e.ptx_isa, e.compression, stored, unpacked,
                    e.section, e.offset, e.debug, e.listed, e.member, count, e.kernels)
        for e, count, stored, unpacked in merged.values()
    )  # fmt: skip
    return BinaryFacts(
        facts.path, facts.size, facts.format, entries, facts.deep, facts.error, facts.machine
    )


def binary_json(facts: BinaryFacts, detail: bool = True) -> Dict[str, Any]:
    """``dataclasses.asdict(facts)`` (summarized unless ``detail``), without asdict's deep copy
    of every value (which cost 11 s for a torch host's 48,000 entries)."""
    if not detail:
        facts = summarized(facts)
    data = dict(vars(facts))
    data["entries"] = [dict(vars(e)) for e in facts.entries]
    return data


__all__ = ["binary_json", "summarized"]
