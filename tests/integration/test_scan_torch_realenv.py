"""archgap scan on a real CUDA 13 torch environment (opt-in: scripts/test -m realenv).

The venv is bench/.data/venv-torch with ``pip install torch==2.14.1`` (a CUDA 13 build with its
nvidia-* wheels), made by bench/setup_torch_venv. Expectations come from PyTorch's published
build matrix, not from archgap: the cu130 wheels are built for TORCH_CUDA_ARCH_LIST
7.5;8.0;8.6;9.0;10.0;12.0 (pytorch RELEASE.md support matrix, PR #197555), so sm_120 SASS serves
an RTX PRO 6000, sm_75 a T4, and nothing serves a V100 (7.0: Volta was dropped in 2.11).
"""

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import DATA, ROOT, json_output, run_cli

VENV = ROOT / "bench" / ".data" / "venv-torch" / "bin" / "python"

pytestmark = [
    pytest.mark.realenv,
    pytest.mark.skipif(not VENV.exists(), reason=f"{VENV} missing: run bench/setup_torch_venv"),
]


def scan(*gpus: str) -> tuple[int, dict[str, Any]]:
    args = [a for gpu in gpus for a in ("--gpu", gpu)]
    result = run_cli("scan", "--python", str(VENV), *args, "--json", timeout=600)
    return result.returncode, json_output(result, "scan")


def torch_verdict(doc: dict[str, Any], gpu: str) -> dict[str, Any]:
    return next(p for p in doc["packages"] if p["package"] == "torch" and p["gpu"] == gpu)


def library(verdict: dict[str, Any], name: str) -> dict[str, Any]:
    return next(lib for lib in verdict["libraries"] if Path(lib["path"]).name == name)


@pytest.mark.parametrize("gpu", ["RTX PRO 6000", "sm_120"])
def test_blackwell_workstation_runs_natively(gpu: str) -> None:
    code, doc = scan(gpu)
    torch = torch_verdict(doc, gpu)
    assert torch["verdict"] == "native"
    assert library(torch, "libtorch_cuda.so")["deciding_entry"] == "sm_120 SASS in .nv_fatbin"
    assert code == 0


def test_t4_runs_on_sm75_cubins() -> None:
    _, doc = scan("T4")
    torch = torch_verdict(doc, "T4")
    # cuobjdump lists no sm_75 in libtorch_cuda_linalg.so: partial
    assert torch["verdict"] == "partial"
    assert library(torch, "libtorch_cuda.so")["deciding_entry"] == "sm_75 SASS in .nv_fatbin"


def test_v100_is_a_gap() -> None:
    code, doc = scan("V100")
    torch = torch_verdict(doc, "V100")
    assert torch["verdict"] == "none"
    assert "no kernel image is available" in library(torch, "libtorch_cuda.so")["reason"]
    assert code == 1


# --- the truth table: every package x 11 GPUs --------------------------------------------------

TABLE_GPUS = {
    "V100": "7.0", "T4": "7.5", "A100": "8.0", "L40S": "8.9", "H100": "9.0", "B200": "10.0",
    "B300": "10.3", "RTX PRO 6000": "12.0", "GB10": "12.1", "Thor": "11.0", "Orin": "8.7",
}  # fmt: skip
TEGRA = {72, 87, 110}  # Xavier, Orin, Thor: CUDA C++ Programming Guide, binary compatibility
CUOBJDUMP = next(
    iter(sorted(DATA.glob("venv-cuobjdump/lib/python*/site-packages/nvidia/*/bin/cuobjdump"))), None
)


def listed_targets(path: str) -> set[tuple[str, int, str]]:
    """What cuobjdump 13.5 --list-elf/--list-ptx lists: (ELF|PTX, arch, a/f)."""
    assert CUOBJDUMP is not None
    out = subprocess.run(
        [str(CUOBJDUMP), "--list-elf", "--list-ptx", path],
        capture_output=True, text=True, timeout=600, check=False,
    ).stdout  # fmt: skip
    return {
        (m.group(1), int(m.group(2)), m.group(3))
        for m in re.finditer(r"^(ELF|PTX) file +\d+: .*\.(?:sm|compute)_(\d+)([af]?)\.", out, re.M)
    }


def rule(kind: str, arch: int, variant: str, cc: str) -> bool:
    """NVIDIA's rules restated: SASS same major, minor up, exact on Tegra; 'a' exact; plain PTX
    from its arch up."""
    major, minor = (int(x) for x in cc.split("."))
    here = major * 10 + minor
    if kind == "PTX":
        return arch == here if variant else here >= arch
    if variant == "a" or arch in TEGRA or here in TEGRA:
        return arch == here
    return arch // 10 == major and arch % 10 <= minor


@pytest.fixture(scope="module")
def table() -> dict[str, Any]:
    args = [a for gpu in TABLE_GPUS for a in ("--gpu", gpu)]
    result = run_cli("scan", "--python", str(VENV), *args, "--json", timeout=1200)
    return json_output(result, "scan")


@pytest.mark.skipif(CUOBJDUMP is None, reason="scripts/testdata installs cuobjdump")
def test_truth_table_against_cuobjdump_and_the_rules(table: dict[str, Any]) -> None:
    by_package: dict[str, dict[str, dict[str, Any]]] = {}
    for p in table["packages"]:
        by_package.setdefault(p["package"], {})[p["gpu"]] = p
    # Kernel libraries whose listed fatbin has kernels: cuobjdump's listing decides.
    # cuFFT is the exception: its listed cubin is a 1.9 KiB nvlink stub (cuobjdump -elf: no
    # .text) and its kernels are in .ldata, which cuobjdump does not list: native everywhere
    # but V100 (CUDA 13 builds no sm_70).
    for package, gpus in by_package.items():
        libs = [lib for lib in gpus["T4"]["libraries"] if lib["role"] == "kernel library"]
        if not libs:
            assert {p["verdict"] for p in gpus.values()} == {"no-kernels"}, package
            continue
        if package == "nvidia-cufft":
            assert {g: p["verdict"] for g, p in gpus.items()} == {
                g: ("none" if g == "V100" else "native") for g in TABLE_GPUS
            }
            continue
        listings = {lib["path"]: listed_targets(lib["path"]) for lib in libs}
        for gpu, cc in TABLE_GPUS.items():
            per_lib = []
            for targets in listings.values():
                if any(rule(k, a, v, cc) for k, a, v in targets if k == "ELF"):
                    per_lib.append("native")
                elif any(rule(k, a, v, cc) for k, a, v in targets if k == "PTX"):
                    per_lib.append("jit")
                else:
                    per_lib.append("none")
            expected = (
                "none" if set(per_lib) == {"none"}
                else "partial" if "none" in per_lib
                else "jit" if "jit" in per_lib
                else "native"
            )  # fmt: skip
            assert gpus[gpu]["verdict"] == expected, (package, gpu, per_lib)
    # roles: these packages hold no kernel library (archives, CUPTI, Triton's CUPTI copies)
    for package in ("nvidia-cuda-runtime", "nvidia-cuda-cupti", "triton"):
        assert by_package[package]["V100"]["verdict"] == "no-kernels"
    assert any("profiling unavailable on V100" in n for n in by_package["triton"]["V100"]["notes"])
    # an x86-64 environment on the aarch64 systems
    assert {f["gpu"] for f in table["platform"]} == {"GB10", "Thor", "Orin"}
