"""kb/builds.json: how a package's own build is told its GPU targets, and the oldest GPU a package
supports, as explain's no-kernel-image rule words them.

Expectations from each project's build documentation: llama.cpp (ggml) builds for the CUDA
architectures CMake's CMAKE_CUDA_ARCHITECTURES names (digits: 120 for 12.0); CTranslate2's
CMakeLists reads CUDA_ARCH_LIST as capabilities ("12.0"); MXNet's make takes nvcc -gencode flags;
bellperson passes BELLMAN_CUDA_NVCC_ARGS to nvcc and, per its README at v0.27.0, supports Turing
(7.5) and newer only.
"""

from __future__ import annotations

import pytest

from archgap.analysis.explain.rules import kernel_image
from archgap.analysis.explain.rules.facts import DETERMINED
from archgap.kb import builds
from tests.unit.test_explain_fix_wording import _facts


def _rebuild(cc: str, package: str, **stated: str) -> str:
    ruling = kernel_image.no_kernel_image(_facts(cc, package=package, **stated))
    assert ruling is not None
    return ruling.fixes[-1].action


@pytest.mark.parametrize(
    ("package", "expected"),
    [
        ("ggml", "CMAKE_CUDA_ARCHITECTURES=120"),
        ("ctranslate2", '-DCUDA_ARCH_LIST="12.0"'),
        ("mxnet", "CUDA_ARCH=-gencode arch=compute_120,code=sm_120"),
        ("bellperson", "--gpu-architecture=sm_120 --generate-code=arch=compute_120,code=sm_120"),
    ],
)
def test_a_package_with_its_own_build_gets_its_own_switch(package: str, expected: str) -> None:
    assert expected in _rebuild("12.0", package)


def test_any_other_package_gets_cmake_and_torchs_switches_where_the_log_shows_torch() -> None:
    action = _rebuild("12.0", "onnxruntime", torch="2.7.1")
    assert 'CMAKE_CUDA_ARCHITECTURES=120, TORCH_CUDA_ARCH_LIST="12.0"' in action


def test_a_log_without_torch_gets_cmakes_and_nvccs_switches_only() -> None:
    # only torch.utils.cpp_extension reads TORCH_CUDA_ARCH_LIST
    action = _rebuild("12.0", "onnxruntime")
    assert "CMAKE_CUDA_ARCHITECTURES=120" in action and "arch=compute_120,code=sm_120" in action
    assert "TORCH_CUDA_ARCH_LIST" not in action


def test_a_gpu_below_a_packages_minimum_is_told_so_with_the_source() -> None:
    # V100 (7.0): Volta, before Turing
    ruling = kernel_image.no_kernel_image(_facts("7.0", package="bellperson"))
    assert ruling is not None and ruling.status == DETERMINED
    assert "compute capability 7.5 and newer only" in ruling.cause
    (fix,) = ruling.fixes
    assert "BELLMAN_NO_GPU=1" in fix.action and "v0.27.0" in fix.tradeoff
    turing = kernel_image.no_kernel_image(_facts("7.5", package="bellperson"))  # T4: supported
    assert turing is not None and "and newer only" not in turing.cause


def test_every_switch_names_the_target_it_is_given() -> None:
    every = (*builds.build_switches().values(), builds.default_switch(), builds.cmake_switch())
    for switch in every:
        told = switch.for_gpu("12.0")
        assert "120" in told or "12.0" in told, switch
        assert switch.source.strip()


def test_a_switch_reworded_in_the_data_is_what_the_rule_says(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    amended = dict(builds.build_switches())
    amended["ggml"] = builds.BuildSwitch("GGML_CUDA_ARCHS={cc}", "a test's own wording")
    monkeypatch.setattr(builds, "build_switches", lambda: amended)
    assert "GGML_CUDA_ARCHS=12.0" in _rebuild("12.0", "ggml")
