"""Run-time compilers in the load model: CuPy compiles its kernels with NVRTC when first used.

Expectations from CuPy 14.2.0's source (kb/load.json "compilers"): cupy/_environment.py lines
142-160 find libnvrtc through cuda.pathfinder (site-packages first); cupy/cuda/compiler.py
_get_max_compute_capability (lines 193-205) caps the target at sm_90 for NVRTC 12.0-12.7,
sm_120 for 12.8 and sm_121 from 12.9; _get_arch (209-218) asks for min(GPU, that cap), a Tegra
GPU for its own; lines 231-236 make a cubin of it when NVRTC knows it. NVRTC knows what nvcc of
its version knows (sm_120 from CUDA 12.8, sm_110 from 13.0: kb/toolkits.json); an sm_90 cubin
does not run on compute capability 12.0 (SASS never runs across majors).
"""

from __future__ import annotations

import pytest

from archgap.analysis.verdicts.compat import resolve_gpu
from archgap.analysis.verdicts.load import load_model
from archgap.probe.facts import Distribution, LoaderFacts, PythonEnvironment

CUPY = Distribution(
    "cupy-cuda12x", "14.2.0", "/sp/cupy_cuda12x-14.2.0.dist-info",
    ("/sp/cupy_backends/cuda/libs/nvrtc.cpython-311-x86_64-linux-gnu.so",),
)  # fmt: skip
NOTHING = LoaderFacts(("libc.so.6",), ("/etc/ld.so.cache",))


def nvrtc(version: str) -> Distribution:
    return Distribution(
        "nvidia-cuda-nvrtc-cu12", version, f"/sp/nvidia_cuda_nvrtc_cu12-{version}.dist-info",
        ("/sp/nvidia/cuda_nvrtc/lib/libnvrtc.so.12",),
    )  # fmt: skip


def compiler_findings(dists: tuple[Distribution, ...], gpu: str) -> list[tuple[str, str]]:
    env = PythonEnvironment("python", "3.11", ("/sp",), dists, ())
    model = load_model(env, [], [resolve_gpu(gpu)], None, "", NOTHING)
    return [(f.gpu, f.fix) for f in model.findings if f.check == "compiler"]


def test_no_nvrtc_anywhere_compiles_nothing() -> None:
    assert compiler_findings((CUPY,), "H100") == [("", "pip install nvidia-cuda-nvrtc-cu12")]


@pytest.mark.parametrize(
    ("version", "gpu", "fix"),
    [
        ("12.6.85", "RTX PRO 6000", "pip install 'nvidia-cuda-nvrtc-cu12>=12.8'"),  # sm_90 cubin
        # Thor (11.0, Tegra: its own sm_110): no NVRTC 12 knows it; CuPy's CUDA 13 build does
        ("12.9.86", "11.0", "pip install cupy-cuda13x nvidia-cuda-nvrtc (CUDA 13)"),
        ("12.8.93", "B200", None),  # sm_100: NVRTC 12.8 knows it
        ("12.9.86", "H100", None),
    ],
)
def test_the_target_cupy_asks_nvrtc_for(version: str, gpu: str, fix: str | None) -> None:
    found = compiler_findings((CUPY, nvrtc(version)), gpu)
    assert [f for _, f in found] == ([fix] if fix else [])


# JAX's CUDA plugin: XLA compiles its PTX with ptxas for the GPU's own target (kb/load.json:
# jax plugin_setup.py pins nvidia-cuda-nvcc-cu12 in its with-cuda extra; XLA's ptxas search
# list, and nvJitLink when there is no ptxas). ptxas knows what nvcc of its version knows.
JAX = Distribution(
    "jax-cuda12-plugin", "0.10.2", "/sp/jax_cuda12_plugin-0.10.2.dist-info",
    ("/sp/jax_cuda12_plugin/_linalg.so",),
)  # fmt: skip


NVJITLINK = "/sp/nvidia/nvjitlink/lib/libnvJitLink.so.12"


def wheel(name: str, version: str, *files: str) -> Distribution:
    return Distribution(name, version, f"/sp/{name}-{version}.dist-info", files)


@pytest.mark.parametrize(
    ("dists", "gpu", "fixes"),
    [
        # ptxas 12.9 has no sm_110: Jetson Thor needs the CUDA 13 plugin and its ptxas
        ((wheel("nvidia-cuda-nvcc-cu12", "12.9.86"),), "11.0",
         ["pip install jax-cuda13-plugin nvidia-cuda-nvcc (CUDA 13)"]),
        ((wheel("nvidia-cuda-nvcc-cu12", "12.6.85"),), "RTX PRO 6000",
         ["pip install 'nvidia-cuda-nvcc-cu12>=12.8'"]),
        ((wheel("nvidia-cuda-nvcc-cu12", "12.9.86"),), "RTX PRO 6000", []),
        # no ptxas, but nvJitLink: XLA links with it
        ((wheel("nvidia-nvjitlink-cu12", "12.9.86", NVJITLINK),), "H100", []),
        ((), "H100", ["pip install nvidia-cuda-nvcc-cu12"]),
    ],
)  # fmt: skip
def test_the_ptxas_jax_runs(dists: tuple[Distribution, ...], gpu: str, fixes: list[str]) -> None:
    assert [f for _, f in compiler_findings((JAX, *dists), gpu)] == fixes


# NVRTC outside site-packages (cupy/_environment.py: cuda.pathfinder falls back to the system's
# loader search and the CUDA toolkit). A toolkit directory says its version in its name (NVIDIA's
# installer puts CUDA X.Y in /usr/local/cuda-X.Y); NVRTC 12.6 knows sm_90 but not sm_120, and
# CuPy asks an NVRTC below 12.8 for sm_90 at most, whose cubin does not run on 12.0. A library
# the loader's cache names, or /usr/local/cuda without a version, is installed (no finding that
# it is missing) of a release not known: nothing to compare the GPU's target with.
TOOLKIT_126 = "/usr/local/cuda-12.6/targets/x86_64-linux/lib"


def system_nvrtc_findings(loader: LoaderFacts, gpu: str) -> list[tuple[str, str]]:
    env = PythonEnvironment("python", "3.11", ("/sp",), (CUPY,), ())
    model = load_model(env, [], [resolve_gpu(gpu)], None, "", loader)
    return [(f.gpu, f.fix) for f in model.findings if f.check == "compiler"]


@pytest.mark.parametrize(
    ("gpu", "fixes"),
    [("RTX PRO 6000", ["pip install 'nvidia-cuda-nvrtc-cu12>=12.8'"]), ("H100", [])],
)
def test_nvrtc_of_a_toolkit_directory_has_its_version(gpu: str, fixes: list[str]) -> None:
    loader = LoaderFacts(NOTHING.names, NOTHING.directories,
                         toolkit_dirs=((TOOLKIT_126, ("libnvrtc.so.12",)),))  # fmt: skip
    assert [f for _, f in system_nvrtc_findings(loader, gpu)] == fixes


@pytest.mark.parametrize(
    "loader",
    [
        LoaderFacts(("libc.so.6", "libnvrtc.so.12"), NOTHING.directories),
        LoaderFacts(NOTHING.names, NOTHING.directories,
                    toolkit_dirs=(("/usr/local/cuda/lib64", ("libnvrtc.so.12",)),)),
    ],
    ids=["loader-cache", "unversioned-toolkit"],
)  # fmt: skip
def test_nvrtc_of_a_release_not_known_is_installed_and_not_judged(loader: LoaderFacts) -> None:
    assert system_nvrtc_findings(loader, "RTX PRO 6000") == []
