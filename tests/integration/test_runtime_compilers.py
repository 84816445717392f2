"""Run-time compilers found by content in real packages (scripts/testdata; read, never imported).

What each binary holds, stated without archgap (``strings`` finds the same):

- taichi 1.7.4 links LLVM's NVPTX backend into taichi_python.so: its triple
  ``nvptx64-nvidia-cuda`` and its subtarget tables (llvm/lib/Target/NVPTX/NVPTX.td), whose
  newest processor is "Target SM 8.6" and newest PTX feature "Use PTX version 7.5". Taichi caps
  the target at sm_86 (taichi/rhi/cuda/cuda_context.cpp: ``if (compute_capability_ > 86)
  compute_capability_ = 86;``) and loads the PTX through the driver (cuModuleLoadDataEx).
- warp-lang 1.19.0 links NVRTC 13.4 into warp.so (its METADATA: "use CUDA Toolkit 13.4"):
  NVRTC's "nvrtc: error: " messages and its target list "-arch=compute_75" ... "compute_121f"
  (CUDA 13 dropped every target below sm_75). Warp compiles PTX for compute_75 where NVRTC
  lacks the GPU's target (warp/_src/context.py 1.19.0, lines 6371 and 6420-6424).
- nvidia-cuda-nvrtc-cu12 12.6.85 is NVRTC itself (libnvrtc.so.12: compute_50 ... compute_90a,
  "Cuda compilation tools, release 12.6"), installed for CuPy: NVIDIA's package gets no row.

NVIDIA's rule applied (CUDA C++ Programming Guide, "Application Compatibility"): PTX for
compute_XY is JIT-compiled by the driver for any GPU of compute capability >= X.Y if the driver
knows its PTX ISA; a compiler cannot emit code for a target older than its oldest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from archgap.archives.wheel import read_wheel
from archgap.probe.binary.fatbin import read_binary
from archgap.probe.facts import RuntimeCompiler
from tests.helpers import json_output, member_wheel, need_data, run_cli


def site(name: str) -> Path:
    (venv,) = need_data(name)
    return next(venv.glob("lib/python*/site-packages"))


def jit_rows(venv: str, gpus: list[str], driver: str) -> dict[str, dict[str, Any]]:
    (path,) = need_data(venv)
    args = [a for gpu in gpus for a in ("--gpu", gpu)]
    result = run_cli("scan", "--python", str(path / "bin" / "python"), *args, "--driver", driver,
                     "--json")  # fmt: skip
    doc = json_output(result, "scan")
    return {f"{j['package']}@{j['gpu']}": j for j in doc["jit"]}


def test_taichis_nvptx_backend_is_read_from_its_tables() -> None:
    lib = (
        site("venv-taichi-1.7.4") / "taichi/_lib/core/taichi_python.cpython-311-x86_64-linux-gnu.so"
    )
    data = lib.read_bytes()
    assert b"\0Target SM 8.6\0" in data and b"Target SM 8.7" not in data
    assert b"\0Use PTX version 7.5\0" in data and b"Use PTX version 7.6" not in data
    (found,) = read_binary(str(lib), False).compilers or ()
    assert found == RuntimeCompiler("nvptx", found.targets, "7.5", None)
    assert found.targets[-1] == 86 and {75, 80, 86} <= set(found.targets)


def test_warps_static_nvrtc_and_nvidias_libnvrtc() -> None:
    warp = site("venv-warp-lang-1.19.0") / "warp/bin/warp.so"
    (found,) = read_binary(str(warp), False).compilers or ()
    assert (found.kind, found.release) == ("nvrtc", "13.4")
    assert (found.targets[0], found.targets[-1]) == (75, 121)
    nvrtc = site("venv-cupy-cuda12x-nvrtc-12.6") / "nvidia/cuda_nvrtc/lib/libnvrtc.so.12"
    (found,) = read_binary(str(nvrtc), False).compilers or ()
    assert (found.kind, found.release, found.targets[0], found.targets[-1]) == (
        "nvrtc", "12.6", 50, 90
    )  # fmt: skip


def test_taichi_rows_newer_gpus_through_the_driver_jit() -> None:
    rows = jit_rows("venv-taichi-1.7.4", ["A10", "H100", "RTX PRO 6000"], "580.65.06")
    assert {k: r["status"] for k, r in rows.items()} == {
        "taichi@A10": "ok",  # sm_86 is its own target
        "taichi@H100": "ok",  # PTX for compute_86, JIT-compiled for 9.0
        "taichi@RTX PRO 6000": "ok",
    }
    assert "compute_86" in rows["taichi@H100"]["cause"]
    assert "JIT-compiled by the driver" in rows["taichi@H100"]["cause"]
    # driver 470 (CUDA 11.4) is older than Hopper's first driver (CUDA 11.8's, kb/drivers.json):
    # it runs nothing on an H100, whatever PTX ISA the backend emits (the load model's check 1)
    old = jit_rows("venv-taichi-1.7.4", ["H100"], "470.57.02")
    assert old["taichi@H100"]["status"] == "fails"
    assert "older than Hopper's first driver" in old["taichi@H100"]["cause"]


def test_warp_rows_and_no_row_for_nvidias_nvrtc() -> None:
    rows = jit_rows("venv-warp-lang-1.19.0", ["V100", "A100", "RTX PRO 6000"], "580.65.06")
    assert {k: r["status"] for k, r in rows.items()} == {
        "warp-lang@V100": "fails",  # NVRTC 13 has no target below compute_75
        "warp-lang@A100": "ok",
        "warp-lang@RTX PRO 6000": "ok",
    }
    assert "compute_75" in rows["warp-lang@V100"]["cause"]
    cupy = jit_rows("venv-cupy-cuda12x-nvrtc-12.6", ["H100"], "580.65.06")
    assert not [k for k in cupy if k.startswith("nvidia-cuda-nvrtc")]


def test_a_compiler_without_a_model_is_unknown_with_what_was_found() -> None:
    """jax-cuda12-pjrt 0.4.36's xla_cuda_plugin.so links XLA's NVPTX backend (sm_100 at most);
    the kb has no entry for how it picks its target."""
    rows = jit_rows("venv-jax-cuda12-mismatch", ["H100"], "580.65.06")
    row = rows["jax-cuda12-pjrt@H100"]
    assert row["status"] == "unknown"
    assert "LLVM NVPTX backend" in row["cause"] and "not modelled" in row["cause"]


def test_a_streamed_wheel_member_reads_its_compiler_as_installed(tmp_path: Path) -> None:
    """warp.so (298 MB) in a wheel is read as it streams by: the bytes at NVRTC's table strings
    and the toolkit's banners are kept, so the member's compiler is the installed file's
    (NVRTC's '-arch=compute_75' ... 'compute_121' list, "release 13.4"), and warp-lang's row on
    an A100 with driver 580 is judged (``ok``: NVRTC 13.4 targets compute_80, the driver runs
    CUDA 13). At eb60471 the tables were not kept and the row was ``unknown``."""
    warp = site("venv-warp-lang-1.19.0")
    member = "warp/bin/warp.so"
    wheel = tmp_path / "warp_lang-1.19.0-py3-none-manylinux_2_28_x86_64.whl"
    info = "warp_lang-1.19.0.dist-info"
    member_wheel(warp, member, info, wheel)
    (lib,) = read_wheel(str(wheel), deep=False).binaries
    assert lib.compilers == read_binary(str(warp / member), False).compilers
    (nvrtc,) = lib.compilers or ()
    assert (nvrtc.kind, nvrtc.release, min(nvrtc.targets), max(nvrtc.targets)) == (
        "nvrtc",
        "13.4",
        75,
        121,
    )
    result = run_cli("scan", str(wheel), "--gpu", "A100", "--driver", "580.65.06", "--json")
    (row,) = json_output(result, "scan")["jit"]
    assert (row["package"], row["status"]) == ("warp-lang", "ok")
