"""Run-time compilers in the load model, on real packages (tests/.data, installed --no-deps by
scripts/testdata): ``scan --json`` as a user runs it.

CuPy 14.2.0 (its own source, installed in tests/.data/venv-cupy-cuda12x-14.2.0):
- cupy/_environment.py lines 142-160: ``_get_cuda_path`` finds NVRTC with cuda.pathfinder's
  ``load_nvidia_dynamic_lib('nvrtc')`` (site-packages, conda, the system, CUDA_PATH). The wheel's
  RECORD lists no libnvrtc; nvidia-cuda-nvrtc-cu12's does. This host has no libnvrtc in the
  loader's cache or under /usr/local (its CUDA 13.0 toolkit there has only the compilers).
- cupy/cuda/compiler.py lines 193-205 (``_get_max_compute_capability``): NVRTC 12.0-12.7 -> '90';
  lines 209-218 (``_get_arch``): a non-Tegra GPU is asked for min(its arch, that cap); lines
  222-236 make it ``-arch=sm_<arch>`` (a cubin) when arch <= the cap. So NVRTC 12.6 on RTX PRO
  6000 (compute capability 12.0) builds sm_90 cubins, and SASS never runs across majors (CUDA C
  Programming Guide, binary compatibility): no kernel image; NVRTC targets sm_120 only from CUDA
  12.8 (CUDA 12.8 release notes). On H100 (9.0) it builds sm_90, which runs.

JAX: jax-cuda12-plugin 0.4.38 (tests/.data/venv-jax-cuda12-mismatch) runs the ptxas of the
nvidia-cuda-nvcc-cu12 wheel (jax_plugins/cuda/plugin_setup.py, its with-cuda extra) for the
GPU's own sm; nvidia-cuda-nvcc-cu12 12.9.86 (tests/.data) ships nvidia/cuda_nvcc/bin/ptxas.
NVIDIA: sm_120 from CUDA 12.8; sm_110 (Jetson Thor) from CUDA 13.0 (CUDA 13.0 release notes:
sm_101 renamed sm_110), so ptxas 12.9 knows sm_120 and not sm_110.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import DATA, json_output, make_venv, need_data, run_cli

CUPY = "venv-cupy-cuda12x-14.2.0"
CUPY_NVRTC_12_6 = "venv-cupy-cuda12x-nvrtc-12.6"


def venv_python(venv: Path) -> str:
    need_data(venv.name)
    return str(venv / "bin" / "python")


def compiler_findings(python: str, gpu: str) -> list[dict[str, Any]]:
    result = run_cli("scan", "--python", python, "--gpu", gpu, "--json")
    doc = json_output(result, "scan")
    return [f for f in doc["load"] if f["check"] == "compiler"]


def test_cupy_without_nvrtc_compiles_nothing() -> None:
    (finding,) = compiler_findings(venv_python(DATA / CUPY), "RTX PRO 6000")
    assert (finding["package"], finding["status"], finding["gpu"]) == ("cupy-cuda12x", "fails", "")
    assert "libnvrtc.so.12" in finding["cause"]
    assert finding["fix"] == "pip install nvidia-cuda-nvrtc-cu12"
    assert "cupy/cuda/compiler.py" in finding["source"]


def test_nvrtc_12_6_builds_sm_90_cubins_which_rtx_pro_6000_cannot_run() -> None:
    (finding,) = compiler_findings(venv_python(DATA / CUPY_NVRTC_12_6), "RTX PRO 6000")
    assert (finding["package"], finding["gpu"]) == ("cupy-cuda12x", "RTX PRO 6000")
    assert "NVRTC 12.6.85" in finding["cause"] and "sm_90" in finding["cause"]
    assert finding["fix"] == "pip install 'nvidia-cuda-nvrtc-cu12>=12.8'"


def test_nvrtc_12_6_serves_h100() -> None:
    assert compiler_findings(venv_python(DATA / CUPY_NVRTC_12_6), "H100") == []


@pytest.fixture(scope="module")
def jax_with_ptxas_12_9(tmp_path_factory: pytest.TempPathFactory) -> str:
    """jax-cuda12-plugin 0.4.38 beside nvidia-cuda-nvcc-cu12 12.9.86, in one environment: the
    installed files of both test-data sets, linked (not copied) into a fresh venv."""
    venv = tmp_path_factory.mktemp("jax") / "venv"
    site = make_venv(venv)
    plugin = ("jax_cuda12_plugin", "jax_cuda12_plugin-0.4.38.dist-info")
    nvcc = ("nvidia", "nvidia_cuda_nvcc_cu12-12.9.86.dist-info")
    for source, names in (
        ("venv-jax-cuda12-mismatch", plugin),
        ("venv-nvidia-cuda-nvcc-cu12-12.9.86", nvcc),
    ):
        venv_python(DATA / source)
        (other,) = (DATA / source).glob("lib/python*/site-packages")
        for name in names:
            os.symlink(other / name, site / name)
    return str(venv / "bin" / "python")


def test_ptxas_12_9_has_no_sm_110_for_jetson_thor(jax_with_ptxas_12_9: str) -> None:
    # the host-platform finding (Thor is aarch64, this environment x86-64) is another check's
    (finding,) = compiler_findings(jax_with_ptxas_12_9, "11.0")
    assert finding["package"] == "jax-cuda12-plugin" and finding["status"] == "fails"
    assert "ptxas 12.9.86" in finding["cause"] and "sm_110" in finding["cause"]
    assert finding["fix"] == "pip install jax-cuda13-plugin nvidia-cuda-nvcc (CUDA 13)"


def test_ptxas_12_9_knows_sm_120(jax_with_ptxas_12_9: str) -> None:
    assert compiler_findings(jax_with_ptxas_12_9, "RTX PRO 6000") == []


def test_cupy_asks_jetson_thor_for_the_cap_like_any_desktop_gpu() -> None:
    # cupy/cuda/compiler.py line 189: _tegra_archs = ('32', '53', '62', '72', '87'), the only GPUs
    # _get_arch (lines 209-218) asks for their own arch; Thor (11.0) is not one, so NVRTC 12.6
    # is asked for min(110, 90) = sm_90, whose cubins do not run on 11.0 (SASS across majors)
    (finding,) = compiler_findings(venv_python(DATA / CUPY_NVRTC_12_6), "11.0")
    assert "for sm_90," in finding["cause"] and "do not run on 11.0" in finding["cause"]
    assert finding["fix"] == "pip install cupy-cuda13x nvidia-cuda-nvrtc (CUDA 13)"
