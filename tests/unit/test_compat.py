"""The compatibility rules, checked against the CUDA Programming Guide's statements."""

import pytest

from archgap.analysis.verdicts.compat import (
    ComputeCapability,
    UnknownGpu,
    ptx_jits_on,
    resolve_gpu,
    sass_runs_on,
)

CC = ComputeCapability.parse


def capability(text: str) -> ComputeCapability:
    parsed = CC(text)
    assert parsed is not None
    return parsed


@pytest.mark.parametrize(
    ("arch", "variant", "cc", "runs"),
    [
        # "GPUs with minor compute capability >= the cubin's ... can execute it", same major only
        (86, "", "8.6", True),
        (86, "", "8.9", True),
        (86, "", "8.0", False),
        (86, "", "9.0", False),
        (100, "", "10.3", True),
        (100, "", "12.0", False),
        (120, "", "12.1", True),
        (120, "", "13.0", False),  # an unknown future major: never across majors
        # 'a' runs on exactly one compute capability
        (90, "a", "9.0", True),
        (100, "a", "10.3", False),
        (120, "a", "12.1", False),
        # 'f' runs on its family (Table 28)
        (100, "f", "10.3", True),
        (100, "f", "12.0", False),
        (103, "f", "10.0", False),
        (120, "f", "12.1", True),
        (121, "f", "12.0", False),
        # CUDA C++ Programming Guide, binary compatibility: "not supported for Tegra" across
        # minors, nor between desktop and Tegra (Xavier 7.2, Orin 8.7, Thor 11.0)
        (80, "", "8.7", False),
        (86, "", "8.7", False),
        (87, "", "8.7", True),
        (87, "", "8.9", False),
        (72, "", "7.5", False),
        (70, "", "7.2", False),
        (110, "", "11.0", True),
        (110, "f", "11.0", True),
        # the family table: {10.0, 10.3, 10.7}, {11.0}, {12.0, 12.1}; XYf runs from X.Y up
        (100, "f", "10.7", True),
        (103, "f", "10.7", True),
        (103, "f", "10.0", False),
        (107, "f", "10.3", False),
        (100, "f", "11.0", False),
        (110, "f", "12.0", False),
    ],
)
def test_sass(arch: int, variant: str, cc: str, runs: bool) -> None:
    assert sass_runs_on(arch, variant, capability(cc)) is runs


@pytest.mark.parametrize(
    ("arch", "variant", "cc", "jits"),
    [
        (80, "", "12.0", True),  # plain PTX is forward compatible across majors
        (80, "", "7.5", False),
        (120, "", "13.0", True),
        (90, "a", "9.0", True),
        (90, "a", "10.0", False),  # 'a' PTX is not forward compatible
        (120, "f", "12.1", True),
        (120, "f", "13.0", False),
    ],
)
def test_ptx(arch: int, variant: str, cc: str, jits: bool) -> None:
    assert ptx_jits_on(arch, variant, capability(cc)) is jits


@pytest.mark.parametrize(
    ("text", "major", "minor"),
    [("12.0", 12, 0), ("sm_120", 12, 0), ("sm120", 12, 0), ("compute_90a", 9, 0), ("75", 7, 5)],
)
def test_parse(text: str, major: int, minor: int) -> None:
    assert CC(text) == ComputeCapability(major, minor)


def test_parse_rejects_garbage() -> None:
    assert CC("twelve") is None
    assert CC("12.10") is None


@pytest.mark.parametrize(
    ("name", "cc"),
    [
        ("RTX PRO 6000", "12.0"),  # every RTX PRO 6000 edition is 12.0
        ("H100", "9.0"),
        ("B200", "10.0"),
        ("B300", "10.3"),
        ("GB10", "12.1"),
        ("T4", "7.5"),
        ("V100", "7.0"),
        ("A10", "8.6"),  # a whole word: not A100
        ("RTX 5090", "12.0"),
        ("13.0", "13.0"),  # a capability no table knows yet
    ],
)
def test_resolve_gpu(name: str, cc: str) -> None:
    target = resolve_gpu(name)
    assert str(target.compute_capability) == cc
    assert target.role == "named"


def test_unknown_and_ambiguous_names_are_usage_errors() -> None:
    with pytest.raises(UnknownGpu, match="unknown GPU"):
        resolve_gpu("Voodoo 5")
    with pytest.raises(UnknownGpu, match="ambiguous"):
        resolve_gpu("RTX")  # RTX 20xx .. RTX PRO 6000 span many capabilities


def test_thor_renumbering_is_undocumented_not_a_guess() -> None:
    # CUDA 13.0 renamed Thor's sm_101 to sm_110; loading old sm_101 cubins is not documented.
    from archgap.analysis.verdicts.compat import sass_compat

    thor = capability("11.0")
    compat = sass_compat(101, "", thor)
    assert compat.runs is None
    assert "sm_110" in compat.rule
    assert sass_runs_on(101, "", thor) is False


@pytest.mark.parametrize(
    ("name", "cc"),
    [
        # names as nvidia-smi --query-gpu=name prints them; compute capability per
        # https://developer.nvidia.com/cuda-gpus (by chip: GA102 8.6, AD10x 8.9, GB100 10.0)
        ("NVIDIA H100 80GB HBM3", "9.0"),
        ("NVIDIA A100-SXM4-80GB", "8.0"),
        ("H100 PCIe", "9.0"),
        ("NVIDIA A10G", "8.6"),
        ("RTX 6000 Ada Generation", "8.9"),
        ("NVIDIA GB10", "12.1"),
        ("NVIDIA Thor", "11.0"),
        ("NVIDIA L20", "8.9"),
        ("NVIDIA B100", "10.0"),
        ("NVIDIA GeForce RTX 4090 Laptop GPU", "8.9"),
        ("NVIDIA GeForce RTX 4090 D", "8.9"),
        # Jetson Orin under JetPack 6 (nvidia-smi 540.4.0: "GPU 0: Orin (nvgpu)"): Orin is 8.7
        ("Orin (nvgpu)", "8.7"),
        ("NVIDIA TITAN RTX", "7.5"),  # Turing (the legacy page)
        ("Tesla K80", "3.7"),  # Kepler GK210 (the legacy page)
        ("NVIDIA GeForce MX450", "7.5"),  # Turing TU117
        ("NVIDIA RTX A500 Laptop GPU", "8.6"),  # Ampere GA107
        ("NVIDIA RTX PRO 500 Blackwell Generation Laptop GPU", "12.0"),  # Blackwell GB207
    ],
)
def test_names_as_nvidia_smi_prints_them(name: str, cc: str) -> None:
    assert str(resolve_gpu(name).compute_capability) == cc


def test_bare_major_is_a_usage_error_with_a_suggestion() -> None:
    with pytest.raises(UnknownGpu, match=r"did you mean compute capability 12\.0"):
        resolve_gpu("12")
    assert str(resolve_gpu("90").compute_capability) == "9.0"  # sm number of a real GPU


def test_jetson_orin_under_jetpack_6_is_an_arm_system() -> None:
    assert resolve_gpu("Orin (nvgpu)").host_cpu == "aarch64"


@pytest.mark.parametrize(
    ("name", "vendor"),
    [("MI300X", "AMD"), ("AMD Instinct MI250", "AMD"), ("Intel Data Center GPU Max", "Intel")],
)
def test_another_vendors_gpu_is_not_a_cuda_gpu(name: str, vendor: str) -> None:
    # CUDA binaries run on NVIDIA GPUs only: no NVIDIA name is suggested for these
    with pytest.raises(UnknownGpu) as raised:
        resolve_gpu(name)
    message = str(raised.value)
    assert f"is an {vendor} GPU, not a CUDA GPU" in message
    assert "did you mean" not in message


@pytest.mark.parametrize(
    ("cc", "host"),
    [
        # only Arm systems have these (developer.nvidia.com/cuda-gpus and the legacy page):
        ("5.3", "aarch64"),  # Jetson Nano / TX1
        ("6.2", "aarch64"),  # Jetson TX2
        ("7.2", "aarch64"),  # Jetson Xavier
        ("8.7", "aarch64"),  # Jetson Orin
        ("10.1", "aarch64"),  # Thor, as CUDA 12.8-12.9 number it
        ("11.0", "aarch64"),  # Thor
        ("12.1", "aarch64"),  # GB10 (DGX Spark)
        # x86-64 and Arm hosts alike: H100 and GH200, B200 and GB200, RTX PRO 6000
        ("9.0", None),
        ("10.0", None),
        ("12.0", None),
        ("13.0", None),  # no product known
    ],
)
def test_a_capability_fixes_the_host_cpu_only_when_all_its_products_share_one(
    cc: str, host: str | None
) -> None:
    assert resolve_gpu(cc).host_cpu == host
    assert resolve_gpu(f"sm_{cc.replace('.', '')}").host_cpu == host


@pytest.mark.parametrize(
    ("driver", "runs"),
    [("525.53", False), ("525.60.13", True), ("525.85.12", True), ("520.61.05", False)],
)
def test_cuda_12_needs_driver_525_60_13(driver: str, runs: bool) -> None:
    # CUDA release notes, Table 2 (minor-version compatibility): CUDA 12.x needs >= 525.60.13;
    # 525.60.13 is CUDA 12.0 GA's own minimum (Table 3)
    from archgap.kb.toolchain import driver_runs_runtime

    assert driver_runs_runtime(driver, "12.4")[0] is runs
