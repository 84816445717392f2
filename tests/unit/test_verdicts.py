"""Library and package verdicts from hand-made kernel facts."""

from dataclasses import replace

from archgap.analysis.verdicts.compat import resolve_gpu
from archgap.analysis.verdicts.verdicts import group_by_package, library_verdict, package_verdict
from archgap.probe.facts import (
    BinaryFacts,
    Distribution,
    EntryKind,
    KernelEntry,
    PythonEnvironment,
    as_variant,
)


def entry(
    target: str, section: str = ".nv_fatbin", listed: bool = True, isa: str = "9.0"
) -> KernelEntry:
    """'sm_90a' -> SASS, 'compute_80' -> PTX, 'lto_90' -> LTO-IR."""
    prefix, _, rest = target.partition("_")
    variant = as_variant(rest[-1] if rest[-1] in "af" else "")
    arch = int(rest.rstrip("af"))
    kinds: dict[str, EntryKind] = {"sm": "sass", "compute": "ptx", "lto": "ltoir"}
    kind = kinds[prefix]
    return KernelEntry(
        kind=kind,
        arch=arch,
        variant=variant,
        ptx_isa=isa if kind == "ptx" else None,
        compression="none",
        stored_size=64,
        uncompressed_size=64,
        section=section,
        offset=0,
        debug=False,
        listed=listed,
    )


def lib(path: str, *entries: KernelEntry, error: str | None = None) -> BinaryFacts:
    return BinaryFacts(path, 1000, "elf", tuple(entries), True, error)


# -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=[sm_90,compute_90]
TYPICAL = lib("/sp/pkg/libk.so", entry("sm_80"), entry("sm_90"), entry("compute_90"))


def test_native_names_the_cubin_the_runtime_picks() -> None:
    verdict = library_verdict(TYPICAL, resolve_gpu("8.6"))
    assert verdict.verdict == "native"
    assert verdict.deciding_entry == "sm_80 SASS in .nv_fatbin"


def test_ptx_only_for_a_newer_gpu_is_jit() -> None:
    verdict = library_verdict(TYPICAL, resolve_gpu("RTX PRO 6000"))
    assert verdict.verdict == "jit"
    assert verdict.deciding_entry is not None and verdict.deciding_entry.startswith("compute_90")


def test_older_gpu_gets_none_with_the_runtime_error() -> None:
    verdict = library_verdict(TYPICAL, resolve_gpu("T4"))
    assert verdict.verdict == "none"
    assert "no kernel image is available" in verdict.reason
    assert "sm_80" in verdict.reason  # says what the library does have


def test_driver_too_old_for_the_ptx_isa() -> None:
    verdict = library_verdict(TYPICAL, resolve_gpu("12.0"), driver_ptx_isa=(8, 8))
    assert verdict.verdict == "none"
    assert "unsupported toolchain" in verdict.reason


def test_ptx_newer_than_the_driver_blames_the_driver_not_the_kernels() -> None:
    # build.sh's libptxonly.so: nvcc 13.0, compute_80 PTX only; `cuobjdump -ptx` shows
    # ".version 9.0". A 570 driver runs CUDA up to 12.8, whose PTX ISA is 8.7 (NVIDIA's PTX ISA
    # release history): it cannot JIT ISA 9.0, whatever GPU runs it.
    from pathlib import Path

    from archgap.probe.binary.fatbin import read_binary

    ptx = read_binary(str(Path(__file__).parents[1] / "fixtures/cuda/bin/libptxonly.so"))
    a100 = resolve_gpu("A100")
    verdict = library_verdict(ptx, a100, driver_ptx_isa=(8, 7))
    assert verdict.verdict == "none" and "ISA 8.7" in verdict.load and "9.0" in verdict.load
    package = package_verdict("pkg", "1", a100, [verdict])
    assert package.reason.startswith("nothing loads on 8.0: the driver JIT-compiles PTX up to")
    # a driver that knows ISA 9.0 (CUDA 13): JIT at load, nothing broken
    assert library_verdict(ptx, a100, driver_ptx_isa=(9, 0)).load == ""


def test_arch_specific_cubin_does_not_run_on_the_next_minor() -> None:
    sm100a = lib("/sp/x.so", entry("sm_100a"))
    assert library_verdict(sm100a, resolve_gpu("B200")).verdict == "native"
    assert library_verdict(sm100a, resolve_gpu("B300")).verdict == "none"


def test_listed_fatbin_with_kernels_decides_over_unlisted_containers() -> None:
    # cuSPARSE 12.6 (CUDA 13): cuobjdump lists sm_75..sm_120 in .nv_fatbin and no sm_70; an old
    # bundle in .rodata carries sm_70. The runtime registers the listed fatbin: V100 gets none.
    sparse = lib("/sp/libsparse.so", entry("sm_75"), entry("sm_70", ".rodata", listed=False))
    verdict = library_verdict(sparse, resolve_gpu("V100"))
    assert verdict.verdict == "none"
    assert not verdict.from_deep_search
    assert "sm_70 SASS in .rodata" in verdict.reason  # shown, not hidden


def test_unlisted_containers_decide_when_the_listed_fatbin_is_kernel_less() -> None:
    # cuFFT-style: the listed fatbin is an nvlink stub (sm_75, no .text); kernels are in .ldata.
    stub = replace(entry("sm_75"), kernels=False)
    fft = lib("/sp/libfft.so", stub, entry("sm_90", ".ldata", listed=False))
    verdict = library_verdict(fft, resolve_gpu("H100"))
    assert verdict.verdict == "native"
    assert verdict.from_deep_search
    assert verdict.deciding_entry == "sm_90 SASS in .ldata"
    assert library_verdict(fft, resolve_gpu("V100")).verdict == "none"


def test_relocatable_copies_and_lto_ir_do_not_count_in_a_shared_object() -> None:
    rdc = lib("/sp/librdc.so", entry("sm_120", "__nv_relfatbin", listed=False), entry("lto_120"))
    verdict = library_verdict(rdc, resolve_gpu("12.0"))
    assert verdict.verdict == "none"


def test_unreadable_library_is_unknown_with_reason() -> None:
    broken = lib("/sp/broken.so", error="truncated: section header table past end of file")
    verdict = library_verdict(broken, resolve_gpu("12.0"))
    assert verdict.verdict == "unknown"
    assert "truncated" in verdict.reason


def test_package_rollup() -> None:
    gpu = resolve_gpu("12.0")
    native = library_verdict(lib("/sp/a.so", entry("sm_120")), gpu)
    hopper_only = library_verdict(lib("/sp/sm90/b.so", entry("sm_90a")), gpu)
    jit = library_verdict(lib("/sp/c.so", entry("compute_80")), gpu)
    unknown = library_verdict(lib("/sp/d.so", error="permission denied"), gpu)

    partial = package_verdict("pkg", "1.0", gpu, [native, hopper_only])
    assert partial.verdict == "partial"
    assert "b.so" in partial.reason and "a.so" not in partial.reason

    assert package_verdict("pkg", "1.0", gpu, [hopper_only]).verdict == "none"
    assert package_verdict("pkg", "1.0", gpu, [native, jit]).verdict == "jit"
    assert package_verdict("pkg", "1.0", gpu, [native]).verdict == "native"
    assert package_verdict("pkg", "1.0", gpu, [unknown]).verdict == "unknown"
    with_unknown = package_verdict("pkg", "1.0", gpu, [native, unknown])
    assert with_unknown.verdict == "native" and "d.so" in with_unknown.reason


def test_grouping_by_record_owner() -> None:
    dist = Distribution("torch", "2.14.1", "/sp/torch-2.14.1.dist-info", ("/sp/torch/lib/a.so",))
    env = PythonEnvironment("/py", "3.11", ("/sp",), (dist,), ("/sp/stray.so",))
    no_device_code = lib("/sp/torch/lib/cpu.so")
    groups = group_by_package(
        env,
        [
            lib("/sp/torch/lib/a.so", entry("sm_90")),
            lib("/sp/stray.so", entry("sm_80")),
            no_device_code,
        ],
    )
    assert [(g.package, [b.path for b in g.binaries]) for g in groups] == [
        ("(no distribution)", ["/sp/stray.so"]),
        ("torch", ["/sp/torch/lib/a.so"]),
    ]


def test_a_reason_names_no_internal_field() -> None:
    # sm_90 SASS only in a container cuobjdump does not list; the listed fatbin has sm_80:
    # the runtime loads the listed one, so nothing runs on 9.0 -- said in words
    binary = lib("/sp/pkg/libk.so", entry("sm_80"), entry("sm_90", ".nv_fatbin.x", listed=False))
    reason = library_verdict(binary, resolve_gpu("9.0")).reason
    assert "does not count" in reason
    assert not any(word in reason for word in ("False", "True", "None", "has kernels"))
