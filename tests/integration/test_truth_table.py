"""The truth table on the small real wheels of the torch 2.14.1+cu130 environment (CI).

nvidia-cuda-runtime 13.0.96 and nvidia-cuda-cupti 13.0.85 are the exact wheels torch 2.14.1
installs; scripts/testdata puts each in a venv of its own. Expectations are worked out from what
cuobjdump 13.5 lists (run here on the files, or on the cubins the deep read found, extracted to
loose files) and NVIDIA's rules, written out below independently of archgap's code:
- SASS sm_XY runs on X.Z with Z >= Y; on the integrated GPUs (Xavier 7.2, Orin 8.7, Thor 11.0)
  only on exactly X.Y (CUDA C++ Programming Guide, binary compatibility: "not supported for Tegra").
- libcudadevrt.a is a device-link archive (an nvlink input): never loaded, never a verdict.
- CUPTI/nvperf/checkpoint libraries are profiler libraries: "profiling unavailable" notes only.
The whole environment's table is in test_scan_torch_realenv.py (opt-in: -m realenv).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from archgap.probe.binary.fatbin import read_binary
from tests.helpers import DATA, json_output, run_cli

GPUS = {
    "V100": "7.0",
    "T4": "7.5",
    "A100": "8.0",
    "L40S": "8.9",
    "H100": "9.0",
    "B200": "10.0",
    "B300": "10.3",
    "RTX PRO 6000": "12.0",
    "GB10": "12.1",
    "Thor": "11.0",
    "Orin": "8.7",
}
INTEGRATED = {"7.2", "8.7", "11.0"}
CUOBJDUMP = next(
    iter(sorted(DATA.glob("venv-cuobjdump/lib/python*/site-packages/nvidia/*/bin/cuobjdump"))), None
)
RUNTIME = DATA / "venv-nvidia-cuda-runtime-13.0.96"
CUPTI = DATA / "venv-nvidia-cuda-cupti-13.0.85"

pytestmark = pytest.mark.skipif(
    CUOBJDUMP is None or not RUNTIME.exists() or not CUPTI.exists(),
    reason="scripts/testdata installs cuobjdump and the nvidia-cuda-runtime/-cupti wheels",
)


def plain_sass_runs(arch: str, cc: str) -> bool:
    """The rule, restated: sm_XY on X.Z, Z >= Y; exact only where either side is Tegra."""
    number = int(re.sub(r"[af]$", "", arch[3:]))
    target = f"{number // 10}.{number % 10}"
    if target in INTEGRATED or cc in INTEGRATED:
        return target == cc
    major, minor = (int(x) for x in cc.split("."))
    return number // 10 == major and number % 10 <= minor


def cuobjdump_archs_of_bare_cubins(path: Path, tmp: Path) -> set[str]:
    """Every uncompressed cubin the deep read found outside what cuobjdump lists (bare, or in
    containers inside data sections), extracted to a loose file and named by cuobjdump."""
    assert CUOBJDUMP is not None
    data = path.read_bytes()
    names: set[str] = set()
    for i, entry in enumerate(read_binary(str(path), deep=True).entries):
        if entry.kind != "sass" or entry.compression != "none" or entry.listed:
            continue
        start = entry.offset  # a bare cubin, or the header of a container entry before it
        if data[start : start + 4] != b"\x7fELF":
            start += int.from_bytes(data[start + 4 : start + 8], "little")  # entry header size
        loose = tmp / f"{path.name}.{i}.cubin"
        loose.write_bytes(data[start : start + entry.stored_size])
        done = subprocess.run(
            [str(CUOBJDUMP), "--list-elf", str(loose)], capture_output=True, text=True, check=False
        )
        # cuobjdump 13.5 names every cubin it lists; for sm_35 it refuses, naming the target:
        # "Support for 'sm_35' has been removed"
        names |= set(re.findall(r"\.(sm_\d+[af]?)\.cubin", done.stdout))
        names |= set(re.findall(r"Support for '(sm_\d+[af]?)'", done.stderr))
    return names


def scan(venv: Path) -> tuple[int, dict[str, Any]]:
    args = [a for gpu in GPUS for a in ("--gpu", gpu)]
    result = run_cli("scan", "--python", str(venv / "bin" / "python"), *args, "--json", timeout=300)
    return result.returncode, json_output(result, "scan")


def test_old_cubin_without_a_targets_is_not_arch_specific(tmp_path: Path) -> None:
    # CUPTI embeds a CUDA 9.0 sm_60 cubin whose e_flags set 0x800; cuobjdump names it sm_60:
    # 'a' targets exist only from sm_90 on.
    lib = next(CUPTI.glob("lib/python*/site-packages/nvidia/cu13/lib/libcupti.so.13"))
    found = {e.target for e in read_binary(str(lib), deep=True).entries if e.arch < 90}
    assert found == cuobjdump_archs_of_bare_cubins(lib, tmp_path) & found
    assert "sm_60" in found and not any(t.endswith("a") for t in found)


def test_cuda_runtime_wheel_has_no_kernel_library() -> None:
    archive = next(RUNTIME.glob("lib/python*/site-packages/nvidia/cu13/lib/libcudadevrt.a"))
    assert CUOBJDUMP is not None
    listing = subprocess.run(
        [str(CUOBJDUMP), "--list-elf", str(archive)], capture_output=True, text=True, check=True
    ).stdout
    assert "sm_75" in listing and "sm_70" not in listing  # it would be 'none' on V100 if counted
    code, doc = scan(RUNTIME)
    verdicts = {p["gpu"]: p for p in doc["packages"] if p["package"] == "nvidia-cuda-runtime"}
    assert set(verdicts) == set(GPUS)
    for gpu, verdict in verdicts.items():
        assert verdict["verdict"] == "no-kernels", gpu
        (library,) = verdict["libraries"]
        assert library["role"] == "device-link archive"
        assert "nvlink" in library["role_reason"]
    # x86-64 wheels named against aarch64 systems (GB10, Thor, Orin): the host-platform gap
    assert {f["gpu"] for f in doc["platform"]} == {"GB10", "Thor", "Orin"}
    assert code == 1


def test_cupti_wheel_is_profiling_only(tmp_path: Path) -> None:
    libs = sorted(CUPTI.glob("lib/python*/site-packages/nvidia/cu13/lib/lib*.so*"))
    archs = {lib.name: cuobjdump_archs_of_bare_cubins(lib, tmp_path) for lib in libs}
    code, doc = scan(CUPTI)
    for gpu, cc in GPUS.items():
        (verdict,) = [p for p in doc["packages"] if p["gpu"] == gpu]
        assert verdict["verdict"] == "no-kernels"
        assert {lib["role"] for lib in verdict["libraries"]} == {"profiler"}
        unavailable = {
            name
            for name, found in archs.items()
            if found and not any(plain_sass_runs(a, cc) for a in found)
        }
        expected = {
            f"profiling unavailable on {gpu}: {name} has nothing for {cc}" for name in unavailable
        }
        assert set(verdict["notes"]) == expected, gpu
    # cuobjdump names sm_62 and sm_75 beside nothing between: V100 (7.0) has no CUPTI kernels
    assert any(
        "libcupti.so.13" in n for p in doc["packages"] if p["gpu"] == "V100" for n in p["notes"]
    )
    # x86-64 wheels named against aarch64 systems (GB10, Thor, Orin): the host-platform gap
    assert {f["gpu"] for f in doc["platform"]} == {"GB10", "Thor", "Orin"}
    assert code == 1
