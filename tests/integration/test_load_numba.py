"""Numba in the load model: numba-cuda compiles its kernels with libNVVM into PTX, and the driver
JIT-compiles that PTX unless nvJitLink does (kb/load.json "driver_jit").

Expectations, from first principles:
- numba-cuda 0.30.4 (tests/.data, installed --no-deps) finds libNVVM through cuda.pathfinder
  (numba_cuda/numba/cuda/cuda_paths.py _get_nvvm, lines 467-517): its own RECORD lists no
  libnvvm, so without the nvidia-cuda-nvcc-cu12 wheel, a toolkit or the loader it has none.
- nvidia-cuda-nvcc-cu12 12.9.86's RECORD lists nvidia/cuda_nvcc/nvvm/lib64/libnvvm.so.
- NVIDIA's PTX ISA release history: CUDA 12.9 emits PTX ISA 8.8, CUDA 12.4 PTX ISA 8.4; CUDA
  12.4's GA Linux driver minimum is 550.54.14 and CUDA 12.9's 575.51.03 (CUDA release notes,
  Table 3). A driver JIT-compiles PTX only of an ISA its CUDA knows; cuda.core's Linker uses
  nvJitLink instead when it is there (numba-cuda cudadrv/driver.py lines 114-136, 2238-2473).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from archgap.analysis.verdicts.load import load_model
from archgap.probe.environment.pyenv import installed_distributions
from archgap.probe.facts import Distribution, LoaderFacts, PythonEnvironment
from tests.helpers import need_data

NOTHING = LoaderFacts(("libc.so.6",), ("/etc/ld.so.cache",))


def site(venv: str) -> str:
    (found,) = need_data(venv)
    return str(next(found.glob("lib/python*/site-packages")))


def environment(*venvs: str, extra: tuple[Distribution, ...] = ()) -> PythonEnvironment:
    dists, _ = installed_distributions(tuple(site(v) for v in venvs))
    return PythonEnvironment("python", "3.11.9", (), dists + extra, ())


def jit_findings(env: PythonEnvironment, driver: str | None) -> list[tuple[str, str]]:
    model = load_model(env, [], [], driver, "nvidia-smi", NOTHING)
    return [(f.package, f.fix) for f in model.findings if f.check == "driver-jit"]


NUMBA = "venv-numba-cuda-0.30.4"
NVCC = "venv-nvidia-cuda-nvcc-cu12-12.9.86"


@pytest.mark.parametrize(
    ("driver", "extra"),
    [("570.124.06", "numba-cuda[cu12]"), ("580.95.05", "numba-cuda[cu13]")],
)
def test_numba_without_any_libnvvm_compiles_nothing(driver: str, extra: str) -> None:
    assert jit_findings(environment(NUMBA), driver) == [("numba-cuda", f"pip install '{extra}'")]


def test_a_libnvvm_newer_than_the_driver_emits_ptx_the_driver_cannot_jit() -> None:
    env = environment(NUMBA, NVCC)
    (finding,) = [f for f in load_model(env, [], [], "550.54.14", "", NOTHING).findings
                  if f.check == "driver-jit"]  # fmt: skip
    assert "PTX ISA 8.8" in finding.cause and "up to 8.4" in finding.cause
    assert finding.fix == (
        "install an NVIDIA driver >= 575.51.03, or pip install 'nvidia-cuda-nvcc-cu12==12.4.*' "
        "(the CUDA the driver runs)"
    )
    assert jit_findings(env, "575.51.03") == []  # CUDA 12.9's own driver knows PTX ISA 8.8
    assert jit_findings(env, None) == []  # no driver: nothing to compare


def test_nvjitlink_compiles_the_ptx_instead_of_the_driver() -> None:
    nvjitlink = Distribution("nvidia-nvjitlink-cu12", "12.9.86", "/sp/x.dist-info",
                             ("/sp/nvidia/nvjitlink/lib/libnvJitLink.so.12",))  # fmt: skip
    assert jit_findings(environment(NUMBA, NVCC, extra=(nvjitlink,)), "550.54.14") == []


def test_the_real_nvcc_wheel_ships_the_libnvvm_numba_loads() -> None:
    record = Path(site(NVCC)).glob("nvidia_cuda_nvcc_cu12-*.dist-info/RECORD")
    assert "nvidia/cuda_nvcc/nvvm/lib64/libnvvm.so," in next(record).read_text()
