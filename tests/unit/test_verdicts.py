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
    # compute_90 PTX JIT-compiles for 12.0; only the driver's PTX ISA stops it: a newer driver
    # runs it, so it cannot load here (blocked), not "no kernels for this GPU" (none)
    verdict = library_verdict(TYPICAL, resolve_gpu("12.0"), driver_ptx_isa=(8, 8))
    assert verdict.verdict == "blocked"
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
    assert verdict.verdict == "blocked" and "ISA 8.7" in verdict.load and "9.0" in verdict.load
    package = package_verdict("pkg", "1", a100, [verdict])
    assert package.verdict == "blocked"
    assert package.reason.startswith("nothing loads on 8.0: the driver JIT-compiles PTX up to")
    # a driver that knows ISA 9.0 (CUDA 13): JIT at load, nothing broken
    assert library_verdict(ptx, a100, driver_ptx_isa=(9, 0)).load == ""


def test_arch_specific_cubin_does_not_run_on_the_next_minor() -> None:
    sm100a = lib("/sp/x.so", entry("sm_100a"))
    assert library_verdict(sm100a, resolve_gpu("B200")).verdict == "native"
    assert library_verdict(sm100a, resolve_gpu("B300")).verdict == "none"


def test_relocatable_device_code_outside_the_listed_fatbin_does_not_count() -> None:
    # cuSPARSE 12.6 (CUDA 13): cuobjdump lists sm_75..sm_120 in .nv_fatbin and no sm_70; its
    # .rodata bundles (for nvJitLink) carry sm_70 cubins of ELF type ET_REL: relocatable device
    # code, which must be device-linked before anything loads it. V100 gets none.
    rodata = replace(entry("sm_70", ".rodata", listed=False), relocatable=True)
    sparse = lib("/sp/libsparse.so", entry("sm_75"), rodata)
    verdict = library_verdict(sparse, resolve_gpu("V100"))
    assert verdict.verdict == "none"
    assert not verdict.from_deep_search
    assert "sm_70 SASS in .rodata is relocatable device code" in verdict.reason  # shown


def test_a_small_listed_fatbin_does_not_hide_the_containers_a_library_loads_itself() -> None:
    # cuFFT 12.0 (CUDA 13): the listed fatbin holds one sm_75 cubin whose content is not read
    # (Zstandard); the kernels for every other GPU are linked cubins (ET_EXEC) in .ldata.
    ldata = [
        replace(entry(t, ".ldata", listed=False), relocatable=False) for t in ("sm_80", "sm_90")
    ]
    unread = replace(entry("sm_120", ".ldata", listed=False), compression="zstd")  # not read
    fft = lib("/sp/libcufft.so.12", entry("sm_75"), *ldata, unread)
    for gpu, target in (("A100", "sm_80"), ("H100", "sm_90"), ("RTX PRO 6000", "sm_120")):
        verdict = library_verdict(fft, resolve_gpu(gpu))
        assert verdict.verdict == "native", gpu
        assert verdict.deciding_entry == f"{target} SASS in .ldata"
        assert verdict.from_deep_search
        assert "the listed fatbin has only sm_75" in verdict.reason
    t4 = library_verdict(fft, resolve_gpu("T4"))  # the listed fatbin serves: it decides alone
    assert (t4.verdict, t4.deciding_entry, t4.from_deep_search) == (
        "native", "sm_75 SASS in .nv_fatbin", False,
    )  # fmt: skip
    assert library_verdict(fft, resolve_gpu("V100")).verdict == "none"


def test_an_unlisted_container_decides_only_where_it_serves_better() -> None:
    # listed: PTX the driver JIT-compiles; unlisted: nothing better for 8.0 (sm_90 SASS)
    binary = lib("/sp/libk.so", entry("compute_80"), entry("sm_90", ".ldata", listed=False))
    verdict = library_verdict(binary, resolve_gpu("A100"))
    assert (verdict.verdict, verdict.from_deep_search) == ("jit", False)
    assert library_verdict(binary, resolve_gpu("H100")).from_deep_search  # native beats jit


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
    # sm_90 SASS only in relocatable device code cuobjdump does not list; the listed fatbin has
    # sm_80: nothing runs on 9.0 -- said in words
    rel = replace(entry("sm_90", ".nv_fatbin.x", listed=False), relocatable=True)
    binary = lib("/sp/pkg/libk.so", entry("sm_80"), rel)
    reason = library_verdict(binary, resolve_gpu("9.0")).reason
    assert "does not count" in reason
    assert not any(word in reason for word in ("False", "True", "None", "has kernels"))
