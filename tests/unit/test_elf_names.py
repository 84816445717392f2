"""``Sections.named`` and ``any_starting`` (the name-table searches ``cubin_at`` uses for
``.debug_info``, ``.note.nv.tkinfo`` and ``.text*``, and ``hostelf`` for ``.nv_fatbin``) give
exactly what reading every section's name with ``Sections.name`` gives: names that share a
string-table tail, a name cut by the end of the table (no NUL), offsets past the table, and
longer names with the same prefix."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from archgap.probe.binary.elf import Sections

PIECES = [b".text", b".text.k", b".rel.text.k", b".debug_info", b".debug_info2",
          b".note.nv.tkinfo", b".note.nv.tkinfo.x", b".nv.info", b"", b"\xff"]  # fmt: skip
WHOLE = [b".text.k", b".debug_info", b".note.nv.tkinfo"]
PREFIXES = [b".text", b".debug_info", b".note.nv.tkinfo"]


def by_name(sections: Sections, prefix: bytes, whole: bool) -> list[int]:
    text = prefix.decode()
    names = [sections.name(i) for i in range(len(sections.names))]
    return [i for i, n in enumerate(names) if (n == text if whole else n.startswith(text))]


def table(strtab: bytes, names: list[int]) -> Sections:
    n = len(names)
    return Sections(strtab, 0, names, [1] * n, [0] * n, [0] * n, [0] * n)


def test_shared_tails_and_a_name_cut_by_the_end_of_the_table() -> None:
    strtab = b"\0.rel.text.k\0.debug_info2\0.note.nv.tkinfo"  # the last name has no NUL
    rel = strtab.index(b".rel.text.k")
    names = [0, rel, rel + 4, strtab.index(b".debug_info2"), strtab.index(b".note"), 999, rel + 4]
    sections = table(strtab, names)
    assert sections.named(b".text.k") == [2, 6]  # a tail of .rel.text.k, twice
    assert sections.any_starting(b".text")
    assert sections.named(b".debug_info") == []  # .debug_info2 is longer
    assert sections.named(b".note.nv.tkinfo") == [4]  # ended by the end of the table
    for wanted in WHOLE:
        assert sections.named(wanted) == by_name(sections, wanted, True)


@given(
    st.lists(st.sampled_from(PIECES), max_size=8),
    st.booleans(),
    st.lists(st.integers(min_value=0, max_value=120), max_size=12),
)
def test_the_search_finds_what_reading_each_name_finds(
    pieces: list[bytes], ended: bool, names: list[int]
) -> None:
    strtab = b"\0" + b"\0".join(pieces) + (b"\0" if ended else b"")
    sections = table(strtab, names)
    for wanted in WHOLE:
        assert sections.named(wanted) == by_name(sections, wanted, True)
    for prefix in PREFIXES:
        assert sections.any_starting(prefix) == bool(by_name(sections, prefix, False))
