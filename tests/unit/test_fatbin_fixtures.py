"""The fatbin reader on the fixture binaries built by tests/fixtures/cuda/build.sh (nvcc 13.0).

Every expectation below is written from the nvcc command line in build.sh, not from the reader's
output: `-gencode arch=compute_90a,code=sm_90a` is a SASS sm_90a entry, `code=compute_75` a PTX
compute_75 entry with PTX ISA 9.0 (CUDA 13.0). nvcc 13 device-links every shared library and
executable, which adds a container with one small cubin per SASS target: each SASS target of a
.so appears twice (docs/reference/fatbin-format.md section 1).
"""

from __future__ import annotations

import functools
import os
import threading
from collections import Counter
from pathlib import Path

import pytest

from archgap.probe.binary.binfiles import walk_binaries
from archgap.probe.binary.fatbin import _read_shared, read_binary, read_bytes
from archgap.probe.facts import BinaryFacts

BIN = Path(__file__).resolve().parents[1] / "fixtures" / "cuda" / "bin"
# Written by build.sh from the flags it gives nvcc: per file, the targets nvcc was asked for.
MANIFEST = {
    name: frozenset(targets.split())
    for name, _, targets in (
        line.rstrip("\n").partition("\t")
        for line in (BIN.parent / "MANIFEST.tsv").read_text().splitlines()
        if not line.startswith("#")
    )
}


def read(name: str, deep: bool = False) -> BinaryFacts:
    facts = read_binary(str(BIN / name), deep=deep)
    assert facts.error is None, facts.error
    return facts


def targets(facts: BinaryFacts, listed: bool | None = True) -> Counter[str]:
    """How many entries each target has (PTX named compute_XY, SASS sm_XY)."""
    return Counter(e.target for e in facts.entries if listed is None or e.listed is listed)


def test_plain_arch_and_family_targets_default_compression() -> None:
    facts = read("libmix.so")
    assert facts.format == "elf"
    assert targets(facts) == {
        "sm_75": 2, "sm_90": 2, "sm_90a": 2, "sm_100a": 2, "sm_103f": 2, "sm_120": 2,
        "sm_120a": 2, "compute_75": 1, "compute_100f": 1, "compute_120a": 1,
    }  # fmt: skip
    assert all(e.section == ".nv_fatbin" and e.member is None for e in facts.entries)
    for entry in facts.entries:
        if entry.kind == "ptx":
            assert entry.ptx_isa == "9.0"
            # nvcc 13's default (balance) compresses PTX with zstd; these small cubins stay raw.
            assert entry.compression == "zstd"
            assert entry.stored_size < entry.uncompressed_size
        else:
            assert entry.ptx_isa is None
            assert entry.compression == "none"
            assert entry.stored_size == entry.uncompressed_size
        assert not entry.debug


@pytest.mark.parametrize(
    ("name", "sass", "ptx"),
    [
        ("libcomp_default.so", "none", "zstd"),
        ("libcomp_nocompress.so", "none", "none"),
        ("libcomp_none.so", "none", "none"),
        ("libcomp_size.so", "zstd", "zstd"),
        ("libcomp_speed.so", "none", "lz4"),
        ("libcomp_all.so", "zstd", "zstd"),
    ],
)
def test_compression_modes(name: str, sass: str, ptx: str) -> None:
    facts = read(name)
    assert targets(facts) == {"sm_80": 2, "sm_120a": 2, "compute_90": 1}
    for entry in facts.entries:
        assert entry.compression == (ptx if entry.kind == "ptx" else sass), entry
        if entry.compression != "none":
            assert 0 < entry.stored_size < entry.uncompressed_size


def test_ptx_only() -> None:
    facts = read("libptxonly.so")
    assert targets(facts) == {"compute_80": 1}
    assert facts.entries[0].kind == "ptx"


def test_debug_build_is_flagged() -> None:
    facts = read("libdebug.so")
    assert targets(facts) == {"sm_80": 2}
    assert all(e.debug for e in facts.entries)


def test_executable_with_two_translation_units() -> None:
    # -arch=sm_90 = SASS sm_90 + PTX compute_90; device-link container + one per .cu file.
    facts = read("exe_two")
    assert facts.format == "elf"
    assert targets(facts) == {"sm_90": 3, "compute_90": 2}


def test_rdc_shared_library_lists_only_the_linked_image() -> None:
    facts = read("librdc.so")
    assert targets(facts) == {"sm_80": 1, "sm_90a": 1, "sm_120f": 1}
    assert all(e.section == ".nv_fatbin" for e in facts.entries)


def test_rdc_shared_library_deep_adds_the_relocatable_fatbins() -> None:
    facts = read("librdc.so", deep=True)
    assert targets(facts) == {"sm_80": 1, "sm_90a": 1, "sm_120f": 1}
    hidden = [e for e in facts.entries if not e.listed]
    assert {e.section for e in hidden} == {"__nv_relfatbin"}
    # two translation units, each with three SASS targets and one PTX target
    assert Counter(e.target for e in hidden) == {
        "sm_80": 2, "sm_90a": 2, "sm_120f": 2, "compute_90": 2,
    }  # fmt: skip


def test_rdc_object_lists_its_relocatable_fatbin() -> None:
    facts = read("rdc_a.o")
    assert facts.format == "elf"
    assert targets(facts) == {"sm_80": 1, "sm_90a": 1, "sm_120f": 1, "compute_90": 1}
    assert {e.section for e in facts.entries} == {"__nv_relfatbin"}


def test_static_archive_of_rdc_objects() -> None:
    facts = read("librdc.a")
    assert facts.format == "archive"
    for member in ("rdc_a.o", "rdc_b.o"):
        mine = [e for e in facts.entries if e.member == member]
        assert Counter(e.target for e in mine) == {
            "sm_80": 1, "sm_90a": 1, "sm_120f": 1, "compute_90": 1,
        }  # fmt: skip
        assert all(e.listed and e.section == "__nv_relfatbin" for e in mine)
    assert len(facts.entries) == 8


def test_static_archive_of_whole_program_object() -> None:
    facts = read("libplain.a")
    assert targets(facts) == {"sm_86": 1, "compute_86": 1}
    assert {e.member for e in facts.entries} == {"k_86.o"}
    assert {e.section for e in facts.entries} == {".nv_fatbin"}


@pytest.mark.parametrize(
    ("name", "target"),
    [("k_sm90a.cubin", "sm_90a"), ("k_sm120f.cubin", "sm_120f"), ("k_sm86.cubin", "sm_86")],
)
def test_loose_cubin(name: str, target: str) -> None:
    facts = read(name)
    assert facts.format == "cubin"
    assert [e.target for e in facts.entries] == [target]
    entry = facts.entries[0]
    assert entry.listed and entry.section == "" and entry.offset == 0
    assert entry.stored_size == facts.size


@pytest.mark.parametrize(("e_flags", "target"), [(0x1000640C, "sm_100a"), (0x6006402, "sm_100")])
def test_cubin_arch_specific_flag_without_a_toolkit_note(e_flags: int, target: str) -> None:
    """A cubin whose .note.nv.tkinfo names no -arch (nvasm writes "nvasm_internal" there, as in
    flashinfer-cubin 0.6.13's fmhaSm100aKernel_*.cubin): in the ABI 8 layout the SM is e_flags
    bits 8-15 and 'a' is bit 3 (EF_CUDA_ACCELERATORS, LLVM BinaryFormat/ELF.h); cuobjdump 13.5
    lists such a cubin with 0x1000640c as sm_100a. Here the nvcc-built sm_90a cubin with the
    note's target blanked and those e_flags."""
    data = bytearray((BIN / "k_sm90a.cubin").read_bytes())
    at = data.find(b"-arch sm_90a")
    data[at : at + 12] = b" " * 12
    data[48:52] = e_flags.to_bytes(4, "little")
    facts = read_bytes("k.cubin", data)
    assert [e.target for e in facts.entries] == [target]


def test_loose_fatbin() -> None:
    facts = read("k.fatbin")
    assert facts.format == "fatbin"
    assert targets(facts) == {"sm_80": 1, "sm_100f": 1, "compute_89": 1}


def test_hidden_in_data_only_deep_finds_it() -> None:
    assert read("libhidden.so").entries == ()
    facts = read("libhidden.so", deep=True)
    # .rodata: the fatbin (SASS sm_86 + sm_110f, PTX compute_89); .data: a bare sm_89 cubin.
    # The decoy (container magic with version 7) must not count.
    assert Counter((e.target, e.section) for e in facts.entries) == {
        ("sm_86", ".rodata"): 1,
        ("sm_110f", ".rodata"): 1,
        ("compute_89", ".rodata"): 1,
        ("sm_89", ".data"): 1,
    }
    assert not any(e.listed for e in facts.entries)


@pytest.mark.parametrize("name", ["libscript.so", "libempty.so"])
def test_not_device_code(name: str) -> None:
    facts = read(name)
    assert facts.format == "other"
    assert facts.entries == ()


def test_deep_keeps_every_default_entry() -> None:
    for path in sorted(BIN.iterdir()):
        shallow = read_binary(str(path))
        deep = read_binary(str(path), deep=True)
        assert set(shallow.entries) <= set(deep.entries), path.name


def test_the_manifest_names_every_built_file() -> None:
    assert set(MANIFEST) == {p.name for p in BIN.iterdir()}


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_a_deep_read_finds_every_target_nvcc_was_asked_for(name: str) -> None:
    # Deep: device-linked libraries list only the linked image (their relocatable fatbins and
    # hidden data hold the rest); every target the build asked for is somewhere in the file.
    assert {e.target for e in read(name, deep=True).entries} == MANIFEST[name]


def test_walk_reads_every_fixture_once() -> None:
    rows = list(walk_binaries([str(BIN), str(BIN / "libmix.so")]))
    names = [Path(r.path).name for r in rows]
    assert sorted(names) == sorted(p.name for p in BIN.iterdir())
    assert all(r.error is None for r in rows)


@pytest.mark.skipif(
    not hasattr(os, "fork") or threading.active_count() > 1, reason="forks only without threads"
)
@pytest.mark.parametrize("deep", [True, False])
def test_a_read_shared_with_the_helper_process_is_the_same(deep: bool) -> None:
    # read_binaries forks the helper only for >= 256 MB with an idle CPU; the fixtures are small,
    # so the sharing step is called directly. Files the helper took but did not send back stay
    # None: a helper that fails, or a transfer that loses rows (or a plain read's strings:
    # dlopen names, loaders, compilers, banner), fails this test.
    paths = [str(p) for p in sorted(BIN.iterdir())]
    results: list[BinaryFacts | None] = [None] * len(paths)
    _read_shared(paths, list(range(len(paths))), functools.partial(read_binary, deep=deep), results)
    assert results == [read_binary(p, deep=deep) for p in paths]
    assert any(r is not None and r.needed and r.dlopens is not None for r in results)  # read


def test_entries_from_the_fast_constructor_are_kernel_entries() -> None:
    # binreader.entry_keeper fills KernelEntries without their dataclass __init__: it must take
    # exactly the dataclass's fields (a field added to KernelEntry fails here) and make an
    # object that is equal, hashes, prints, converts and replaces like one built normally.
    import dataclasses
    import inspect

    from archgap.probe.binary.binreader import entry_keeper
    from archgap.probe.binary.summary import Summary
    from archgap.probe.facts import KernelEntry

    kept: list[KernelEntry] = []
    keep = entry_keeper(kept)
    expected = [
        (f.name, inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default)
        for f in dataclasses.fields(KernelEntry)
    ]
    # Reader.found is either sink: each takes KernelEntry's fields, in order.
    for sink in (keep, Summary().add):
        params = [(p.name, p.default) for p in inspect.signature(sink).parameters.values()]
        assert params == expected, sink
    values = dict(
        kind="ptx", arch=90, variant="a", ptx_isa="9.0", compression="zstd", stored_size=10,
        uncompressed_size=99, section=".nv_fatbin", offset=64, debug=True, listed=True,
        member="a.o", count=2, kernels=False, relocatable=True,
    )  # fmt: skip
    keep(**values)
    fast, slow = kept[0], KernelEntry(**values)  # type: ignore[arg-type]
    assert fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
    assert dataclasses.asdict(fast) == dataclasses.asdict(slow) == values
    assert dataclasses.replace(fast, arch=100) == dataclasses.replace(slow, arch=100)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.arch = 100  # type: ignore[misc]


def test_header_reads_give_the_files_bytes_wherever_they_fall() -> None:
    # Reader.header serves headers from the bytes of its last pread (HEADER_BLOCK): forwards,
    # backwards, across the block's end and past the end of the file it must still give
    # exactly the file's bytes there.
    from archgap.probe.binary.binreader import HEADER_BLOCK, Reader

    path = BIN / "libmix.so"
    data = path.read_bytes()
    size = len(data)
    asks = [(0, 64), (16, 48), (HEADER_BLOCK - 8, 64), (8, 8), (HEADER_BLOCK * 3, 4096),
            (100, 16), (size - 10, 64), (size + 5, 8), (size - 64, 64), (0, 0)]  # fmt: skip
    fd = os.open(path, os.O_RDONLY)
    try:
        reader = Reader(None, size, False, fd)
        for pos, n in asks:
            assert reader.header(pos, n) == data[pos : pos + n], (pos, n)
    finally:
        os.close(fd)
