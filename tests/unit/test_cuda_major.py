"""Which CUDA major a library is of, and what says so, content first (analysis.verdicts.drivers).

Rules, from NVIDIA's documents: PTX ISA 9.x is emitted by CUDA 13.x toolkits (9.0 by 13.0), 8.x
by CUDA 12.x (the PTX ISA's release history); a CUDA 13.x runtime needs driver >= 580, 12.x
>= 525.60.13 (CUDA 13.2.2 release notes, Table 2). A cubin's .note.nv.tkinfo carries the banner
of the ptxas/nvlink that wrote it ("Cuda compilation tools, release 13.0").
"""

from __future__ import annotations

from archgap.analysis.verdicts.drivers import cuda_majors, driver_cuda
from archgap.probe.binary.fatbin import read_binary
from archgap.probe.facts import BinaryFacts, KernelEntry
from tests.nvcc_build import build


def ptx(isa: str) -> KernelEntry:
    return KernelEntry("ptx", 80, "", isa, "none", 10, 10, ".nv_fatbin", 0, False, True)


def lib(
    entries: tuple[KernelEntry, ...] = (),
    needed: tuple[str, ...] = (),
    toolkits: tuple[str, ...] = (),
) -> BinaryFacts:
    return BinaryFacts("/sp/pkg/libk.so", 1, "elf", entries, False, needed=needed,
                       toolkits=toolkits)  # fmt: skip


def test_content_comes_before_the_runtime_it_names() -> None:
    majors = cuda_majors(lib((ptx("8.7"), ptx("9.0")), needed=("libcudart.so.12",)), "pkg")
    assert majors[13][0] == "its PTX is ISA 9.0, which CUDA 13.0 emits"
    assert majors[12][0] == "it needs libcudart.so.12"
    noted = cuda_majors(lib(toolkits=("12.8", "13.0"), needed=("libcudart.so.13",)), "pkg")
    assert noted[13][0] == "its cubins' toolkit note says 'Cuda compilation tools, release 13.0'"
    assert noted[12][0] == "its cubins' toolkit note says 'Cuda compilation tools, release 12.8'"


def test_a_ptx_isa_newer_than_the_table_keeps_its_major() -> None:
    (major,) = cuda_majors(lib((ptx("9.9"),)), "pkg")
    assert major == 13
    assert cuda_majors(lib((ptx("99.0"),)), "pkg") == {}  # no toolkit places it: nothing claimed


def test_a_major_without_a_rule_blocks_nothing() -> None:
    # a note no NVIDIA table knows ("release 99.0"): no floor to compare, so no claim
    blocked: dict[tuple[str, str], str] = {}
    odd = lib(toolkits=("99.0",))
    assert driver_cuda([odd], {odd.path: "pkg"}, "570.124.06", "--driver", blocked, True) == []
    assert blocked == {}
    cuda13 = lib(toolkits=("13.0",))
    (finding,) = driver_cuda(
        [cuda13], {cuda13.path: "pkg"}, "570.124.06", "--driver", blocked, True
    )
    assert finding.check == "driver-cuda" and "driver >= 580" in finding.fix
    assert blocked[(cuda13.path, "")].startswith("needs driver >= 580 (CUDA 13: its cubins'")


def test_the_probe_reads_the_toolkit_note_of_a_listed_cubin() -> None:
    # nvcc 13.0, SASS only, runtime linked statically: the note is the only CUDA 13 fact
    path = build(["-shared", "-Xcompiler", "-fPIC", "-cudart", "static",
                  "-gencode", "arch=compute_80,code=sm_80"], "-static-sass.so")  # fmt: skip
    facts = read_binary(str(path))
    assert facts.toolkits == ("13.0",) and facts.error is None
    assert not any(e.kind == "ptx" for e in facts.entries)
    assert not any("libcudart" in n for n in facts.needed or ())
