"""Host platform, --driver, --strict and bare-major GPU names on real wheels (scan CLI).

- nvidia-cuda-cupti 13.0.85 from PyPI is a manylinux x86_64 wheel: its ELF files are x86-64
  (e_machine 62). GB10 (DGX Spark) is an aarch64 system (NVIDIA's product page: a 20-core Arm
  CPU): that environment cannot run there at all, whatever SASS it has.
- nvidia-cuda-runtime 13.0.96 is CUDA 13.0's runtime: CUDA 13.0 needs driver >= 580.65.06, and
  minor-version compatibility for 13.x needs >= 580 (CUDA release notes, Table 2); a 575 driver
  (CUDA 12.9) cannot run it.
"""

from __future__ import annotations

import pytest

from archgap.analysis.scan import ScanReport
from archgap.analysis.verdicts.compat import resolve_gpu
from archgap.analysis.verdicts.verdicts import PackageVerdict
from archgap.probe.facts import GpuFacts, PythonEnvironment
from tests.helpers import DATA, json_output, run_cli

CUPTI = DATA / "venv-nvidia-cuda-cupti-13.0.85" / "bin" / "python"
RUNTIME = DATA / "venv-nvidia-cuda-runtime-13.0.96" / "bin" / "python"
pytestmark = pytest.mark.skipif(
    not CUPTI.exists() or not RUNTIME.exists(), reason="scripts/testdata installs the wheels"
)


def test_x86_environment_named_against_gb10_cannot_run_there() -> None:
    result = run_cli("scan", "--python", str(CUPTI), "--gpu", "GB10", "--gpu", "H100", "--json")
    doc = json_output(result, "scan")
    assert [(f["gpu"], f["environment_cpu"], f["host_cpu"]) for f in doc["platform"]] == [
        ("GB10", "x86-64", "aarch64")
    ]
    assert result.returncode == 1
    text = run_cli("scan", "--python", str(CUPTI), "--gpu", "GB10")
    assert "cannot run on GB10" in text.stdout and "aarch64" in text.stdout
    assert run_cli("scan", "--python", str(CUPTI), "--gpu", "H100").returncode == 0


@pytest.mark.parametrize(("driver", "fails"), [("575.57.08", True), ("580.65.06", False)])
def test_named_driver_against_the_cuda_runtime_wheel(driver: str, fails: bool) -> None:
    result = run_cli(
        "scan", "--python", str(RUNTIME), "--gpu", "H100", "--driver", driver, "--json"
    )
    doc = json_output(result, "scan")
    assert doc["driver"] == {"version": driver, "source": "--driver"}
    runtime = [f for f in doc["jit"] if f["package"] == "nvidia-cuda-runtime"]
    assert bool(runtime) is fails
    if fails:
        assert runtime[0]["error"] == "CUDA driver version is insufficient for CUDA runtime version"
    assert result.returncode == (1 if fails else 0)


def test_bad_driver_and_bare_major_are_usage_errors() -> None:
    result = run_cli("scan", "--python", str(RUNTIME), "--gpu", "12")
    assert result.returncode == 2 and "12.0" in result.stderr
    result = run_cli("scan", "--python", str(RUNTIME), "--gpu", "H100", "--driver", "latest")
    assert result.returncode == 2 and "--driver" in result.stderr


def test_strict_makes_partial_a_gap() -> None:
    gpu = resolve_gpu("H100")
    partial = PackageVerdict("pkg", "1", gpu.label, "partial", "1 of 2 libraries ...", ())
    env = PythonEnvironment("/py", "3.11", ("/sp",), (), ())
    facts = GpuFacts((), None, None, "none")
    relaxed = ScanReport(env, facts, (gpu,), (), (partial,))
    strict = ScanReport(env, facts, (gpu,), (), (partial,), strict=True)
    assert not relaxed.has_gap
    assert strict.has_gap and strict.gaps == (partial,)


def test_named_driver_judges_the_ptx_isa_of_ptx_only_libraries() -> None:
    # libptxonly.so (build.sh: code=compute_80, nvcc 13.0) holds only PTX ISA 9.0. A 535 driver
    # (CUDA 12.2) JIT-compiles PTX up to ISA 8.2: "the provided PTX was compiled with an
    # unsupported toolchain" -> blocked (a newer driver runs it); a 580 driver (CUDA 13.0, ISA
    # 9.0) compiles it -> jit.
    from archgap.analysis.scan import report_from_facts
    from archgap.codec import encode
    from archgap.probe.binary.fatbin import read_binary
    from archgap.probe.facts import Distribution, ProbeResponse
    from tests.helpers import CUDA_BIN

    lib = read_binary(str(CUDA_BIN / "libptxonly.so"), deep=True)
    dist = Distribution("pkg", "1.0", "/sp/pkg-1.0.dist-info", (lib.path,))
    env = PythonEnvironment("/py", "3.11", ("/sp",), (dist,), ())
    facts = ProbeResponse(sections={"python": encode(env), "binaries": [encode(lib)]})
    old = report_from_facts(facts, ["H100"], driver="535.104.05")
    assert [(p.verdict, p.package) for p in old.packages] == [("blocked", "pkg")]
    assert "unsupported toolchain" in old.packages[0].libraries[0].reason
    assert old.driver_source == "--driver" and old.has_gap
    new = report_from_facts(facts, ["H100"], driver="580.65.06")
    assert [p.verdict for p in new.packages] == ["jit"]


CURAND = DATA / "venv-nvidia-curand-10.4.0.35" / "bin" / "python"
EM_X86_64 = 62  # the ELF header's e_machine for x86-64 (System V ABI, AMD64 supplement)


@pytest.mark.skipif(not CURAND.exists(), reason="scripts/testdata installs the wheel")
def test_capabilities_only_arm_systems_have_make_an_x86_environment_fail() -> None:
    # developer.nvidia.com/cuda-gpus and the legacy page: 8.7 is only Jetson Orin, 7.2 only
    # Xavier, 11.0 only Thor (10.1 its number in CUDA 12.8-12.9), 12.1 only GB10 -- all Arm
    # systems. 9.0 is H100 (x86-64 hosts) as well as GH200, 12.0 the RTX PRO 6000: no CPU fixed.
    (lib,) = (CURAND.parent.parent / "lib").glob(
        "python3*/site-packages/nvidia/cu13/lib/libcurand.so*"
    )
    assert int.from_bytes(lib.read_bytes()[18:20], "little") == EM_X86_64
    arm, any_cpu = ["8.7", "7.2", "11.0", "10.1", "12.1"], ["9.0", "12.0"]
    args = [a for cc in arm + any_cpu for a in ("--gpu", cc)]
    result = run_cli("scan", "--python", str(CURAND), *args, "--driver", "580.65.06", "--json")
    doc = json_output(result, "scan")
    assert sorted(f["gpu"] for f in doc["platform"]) == sorted(arm)
    assert {f["host_cpu"] for f in doc["platform"]} == {"aarch64"}
    verdicts = {p["gpu"]: p["verdict"] for p in doc["packages"]}
    # x86-64 libcurand.so.10 holds SASS sm_75..sm_121 (cuobjdump --list-elf), sm_121 among it:
    # it would run on GB10 (12.1) but for the host CPU -> blocked; desktop SASS never runs on an
    # integrated GPU (Orin 8.7, Xavier 7.2, Thor 11.0: CUDA Programming Guide) -> none
    assert verdicts == {**{cc: "none" for cc in arm if cc != "12.1"}, "12.1": "blocked",
                        "9.0": "native", "12.0": "native"}, verdicts  # fmt: skip
    assert result.returncode == 1
    alone = run_cli("scan", "--python", str(CURAND), "--gpu", "8.7", "--driver", "580.65.06")
    assert "8.7 systems are aarch64" in alone.stdout and alone.returncode == 1
    fine = run_cli("scan", "--python", str(CURAND), "--gpu", "9.0", "--gpu", "12.0", "--json")
    assert json_output(fine, "scan")["platform"] == []
