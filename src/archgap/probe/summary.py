"""What the "binaries" section sends: every entry (``detail``), or one row per kind of entry.

A torch host has ~48,000 fatbin entries in ~120 files, but they differ in few ways: the analysis
reads only kind, arch, variant, PTX ISA, section, member and whether cuobjdump lists them (and
whether any of the merged cubins has a kernel). The summary merges the entries of a file that
agree on all of these (and on compression and debug)
into one ``KernelEntry`` with ``count`` set and the sizes added: ~700 rows instead of 48,000,
a document of a few hundred KB instead of 20 MB, and the same verdicts. ``kernels --all`` and
``kernels --json`` ask for the detail.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from .facts import BinaryFacts, KernelEntry

# What tells entries apart in a summary: everything but where they are and how big.
EntryKey = Tuple[str, int, str, Any, str, str, bool, bool, Any, Any]


def summarized(facts: BinaryFacts, kernel_less_max: Optional[int] = None) -> BinaryFacts:
    """``facts`` with entries that differ only in offset and size merged (first offset kept).

    A compressed cubin is told kernel-less by its size alone (``deep_plan.kernel_less``: at most
    ``kernel_less_max`` bytes unpacked, kb/roles.json), and a merged row by its average: so such
    cubins merge only with others on the same side of that size (without it, only with others
    of the same size). A device-link stub (1.4 KiB) and a small real kernel (2.9 KiB) averaged
    2.2 KiB: a kernel-less row."""
    merged: Dict[EntryKey, List[Any]] = {}
    for e in facts.entries:
        side: Any = None
        if e.kind == "sass" and e.compression != "none" and e.kernels is None:
            size = e.uncompressed_size
            side = size if kernel_less_max is None else size <= kernel_less_max
        key = (e.kind, e.arch, e.variant, e.ptx_isa, e.compression, e.section, e.debug, e.listed,
               e.member, side)  # fmt: skip
        row = merged.get(key)
        if row is None:
            merged[key] = [e, e.count, e.stored_size, e.uncompressed_size, e.kernels]
        else:
            row[1] += e.count
            row[2] += e.stored_size
            row[3] += e.uncompressed_size
            row[4] = _any_kernels(row[4], e.kernels)
    if len(merged) == len(facts.entries):
        return facts
    entries = tuple(
        KernelEntry(e.kind, e.arch, e.variant, e.ptx_isa, e.compression, stored, unpacked,
                    e.section, e.offset, e.debug, e.listed, e.member, count, kernels)
        for e, count, stored, unpacked, kernels in merged.values()
    )  # fmt: skip
    return BinaryFacts(
        facts.path, facts.size, facts.format, entries, facts.deep, facts.error, facts.machine
    )


def _any_kernels(a: Optional[bool], b: Optional[bool]) -> Optional[bool]:
    """Whether merged cubins hold a kernel: True if any does, False if none does, else None.
    (nvcc's device-link stub of a target merges with the target's real cubin: True.)"""
    if a or b:
        return True
    return None if a is None or b is None else False


def binary_json(
    facts: BinaryFacts, detail: bool = True, kernel_less_max: Optional[int] = None
) -> Dict[str, Any]:
    """``dataclasses.asdict(facts)`` (summarized unless ``detail``), without asdict's deep copy
    of every value (which cost 11 s for a torch host's 48,000 entries)."""
    if not detail:
        facts = summarized(facts, kernel_less_max)
    data = dict(vars(facts))
    data["entries"] = [dict(vars(e)) for e in facts.entries]
    return data


__all__ = ["binary_json", "summarized"]
