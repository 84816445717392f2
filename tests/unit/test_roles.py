"""Library roles: only files whose kernels are loaded at run time decide a package's verdict.

Expectations come from what cuobjdump 13.5 shows for each file and from NVIDIA's rules:
- build.sh's libstub.so / libstub_z.so are a device link of code without a __global__ function;
  `cuobjdump -elf` shows their only listed cubin with sections .nv.info, .nv.callgraph and
  .nv.rel.action and no .text: no kernel can fail to load (the shape of libcufftw.so.12's cubin).
  libnokernel_lz4.so is the same code built without -rdc, LZ4-compressed: `cuobjdump -elf` shows
  its two sm_75 cubins with no .text, `cuobjdump -ptx` its compute_75 PTX with no .entry.
- a kernel is a .text section of a cubin or an .entry of PTX, whatever its size (kb/roles.json).
- a static archive (libcudadevrt.a) is an input to the device linker, never loaded at run time.
- CUPTI / nvperf / checkpoint libraries are loaded only by profilers.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from archgap.analysis.verdicts.compat import resolve_gpu
from archgap.analysis.verdicts.verdicts import (
    DEVICE_LINK_ARCHIVE,
    KERNEL_LESS,
    KERNEL_LIBRARY,
    PROFILER,
    library_verdict,
    package_verdict,
    role_of,
)
from archgap.probe.binary.fatbin import read_binary
from archgap.probe.facts import BinaryFacts, KernelEntry

BIN = Path(__file__).resolve().parents[1] / "fixtures" / "cuda" / "bin"


def sass(arch: int, listed: bool = True, section: str = ".nv_fatbin", **kw: object) -> KernelEntry:
    entry = KernelEntry("sass", arch, "", None, "none", 9000, 9000, section, 0, False, listed)
    return replace(entry, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "listed"),
    [
        # cuobjdump --list-elf: one sm_75 cubin; -elf: no .text section in it
        ("libstub.so", [("sm_75", "none")]),
        # cuobjdump --list-elf / --list-ptx: two sm_75 cubins and compute_75 PTX, all LZ4
        # (-elf: no .text; -ptx: no .entry): unpacked and read
        ("libnokernel_lz4.so", [("sm_75", "lz4"), ("compute_75", "lz4"), ("sm_75", "lz4")]),
    ],
)
def test_kernel_less_files_are_told_by_their_content(
    name: str, listed: list[tuple[str, str]]
) -> None:
    facts = read_binary(str(BIN / name), deep=True)
    entries = [e for e in facts.entries if e.listed]
    assert [(e.target, e.compression) for e in entries] == listed
    assert all(e.kernels is False for e in entries)
    role, why = role_of(facts)
    assert role == KERNEL_LESS and "no .text" in why and "no .entry" in why
    assert library_verdict(facts, resolve_gpu("T4")).verdict == "no-kernels"


def test_a_small_lz4_kernel_is_a_kernel_and_an_unreadable_stub_may_be_one() -> None:
    # libtiny_lz4.so: cuobjdump -elf shows the device link's stub (no .text) and the empty
    # kernel's cubin with .text._Z13archgap_emptyv, both LZ4: a kernel library, native on T4.
    tiny = read_binary(str(BIN / "libtiny_lz4.so"))
    assert sorted(str(e.kernels) for e in tiny.entries) == ["False", "True"]
    assert role_of(tiny)[0] == KERNEL_LIBRARY
    assert library_verdict(tiny, resolve_gpu("T4")).verdict == "native"
    # libstub_z.so: the kernel-less stub zstd-compressed, which Python before 3.14 cannot
    # unpack: nothing shows it holds no kernel, so it is judged as a kernel library.
    stub_z = read_binary(str(BIN / "libstub_z.so"))
    (entry,) = [e for e in stub_z.entries if e.listed]
    if entry.kernels is None:
        assert role_of(stub_z)[0] == KERNEL_LIBRARY
    else:  # compression.zstd (Python 3.14) read it
        assert entry.kernels is False and role_of(stub_z)[0] == KERNEL_LESS


def test_real_kernels_beside_device_link_stubs_make_a_kernel_library() -> None:
    # nvcc 13 device-links every .so: a kernel-less stub per target beside the real cubin.
    facts = read_binary(str(BIN / "libmix.so"))
    by_target = {(e.target, e.kernels) for e in facts.entries if e.kind == "sass"}
    assert ("sm_75", True) in by_target and ("sm_75", False) in by_target
    assert role_of(facts)[0] == KERNEL_LIBRARY
    # T4 runs the sm_75 cubin that has kernels
    assert library_verdict(facts, resolve_gpu("T4")).verdict == "native"


def test_archives_and_profilers_do_not_count() -> None:
    archive = BinaryFacts("/sp/nvidia/lib/libcudadevrt.a", 1, "archive", (sass(75),), True)
    hidden = sass(75, False, ".rodata")
    cupti = BinaryFacts("/sp/nvidia/lib/libcupti.so.13", 1, "elf", (hidden,), True)
    kernels = BinaryFacts("/sp/pkg/libk.so", 1, "elf", (sass(80),), True)
    assert role_of(archive)[0] == DEVICE_LINK_ARCHIVE
    assert role_of(cupti)[0] == PROFILER
    v100 = resolve_gpu("V100")
    libs = [library_verdict(b, v100) for b in (archive, cupti, kernels)]
    assert [lib.verdict for lib in libs] == ["none", "none", "none"]
    only_tools = package_verdict("nvidia-cuda-cupti", "13.0", v100, libs[:2])
    assert only_tools.verdict == "no-kernels"
    note = "profiling unavailable on V100: libcupti.so.13 has nothing for 7.0"
    assert only_tools.notes == (note,)
    # a kernel library with nothing for V100 beside them: none (not partial), the others named
    mixed = package_verdict("pkg", "1", v100, libs)
    assert mixed.verdict == "none"
    assert "device-link archive: libcudadevrt.a" in mixed.reason


def test_kernel_less_file_does_not_make_its_package_partial() -> None:
    # nvidia-cufft: libcufft.so.12 has kernels (in .ldata) and libcufftw.so.12 only a stub.
    fft = BinaryFacts(
        "/sp/libcufft.so.12",
        1,
        "elf",
        (sass(75, kernels=False), sass(120, False, ".ldata"), sass(90, False, ".ldata")),
        True,
    )
    fftw = BinaryFacts("/sp/libcufftw.so.12", 1, "elf", (sass(75, kernels=False),), True)
    for gpu, expected in (("RTX PRO 6000", "native"), ("H100", "native"), ("V100", "none")):
        target = resolve_gpu(gpu)
        libs = [library_verdict(b, target) for b in (fft, fftw)]
        assert package_verdict("nvidia-cufft", "12.0", target, libs).verdict == expected, gpu


def test_scan_and_the_build_gate_judge_a_kernel_less_file_alike() -> None:
    # libnokernel_lz4.so holds no kernel (its cubins have no .text, its PTX no .entry): scan
    # does not count it towards its package, and `kernels --require` has nothing to fail in it.
    # libtiny_lz4.so's sm_75 kernel runs on 7.5 (T4), not across majors on 8.0 (A100).
    from archgap.analysis.recipe.gate import check_build

    stub = read_binary(str(BIN / "libnokernel_lz4.so"))
    tiny = read_binary(str(BIN / "libtiny_lz4.so"))
    assert check_build([stub], [resolve_gpu("H100")]).passed
    gate = check_build([stub, tiny], [resolve_gpu("A100"), resolve_gpu("T4")])
    assert [(f.path.rsplit("/", 1)[-1], f.gpu) for f in gate.failures] == [
        ("libtiny_lz4.so", "A100")
    ]


@pytest.mark.parametrize(
    "name", ["libcupti_static.a", "libnvperf_host_static.a", "libnvperf_target_static.a"]
)
def test_cuptis_static_archives_are_profiler_libraries(name: str) -> None:
    # CUPTI ships static builds of itself and of PerfWorks for profilers to link
    # (https://docs.nvidia.com/cupti/: libcupti_static.a, libnvperf_host_static.a): a profiler's
    # own code, not relocatable device code for nvlink
    archive = BinaryFacts(f"/usr/local/cuda/extras/CUPTI/lib64/{name}", 1, "archive", (), True)
    assert role_of(archive)[0] == PROFILER
