"""The architectures a build claims, read as each syntax's owner reads it.

Expectations come from the owners' rules, not from archgap:
- torch 2.14.1 torch/utils/cpp_extension.py ``_get_cuda_arch_flags``: "X.Y" gives
  ``-gencode=arch=compute_XY,code=sm_XY``; "+PTX" adds ``code=compute_XY``; spaces separate;
  named architectures expand ("Ampere" -> "8.0;8.6+PTX"); anything else raises "Unknown CUDA
  arch (...) or GPU not supported"; unset/empty/"native" means the build machine's GPUs.
- CMake CUDA_ARCHITECTURES: "-real" is real (SASS) only, "-virtual" virtual (PTX) only, no suffix
  both; a non-empty false value (OFF) adds no architectures; all/all-major/native are special.
- nvcc: ``-gencode arch=compute_XY,code=...`` names the codes; ``-arch=sm_XY`` alone is
  ``-arch=compute_XY -code=sm_XY,compute_XY``; ``-arch=compute_XY`` alone embeds that PTX.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archgap.claims import (
    NoClaim,
    cmake_architectures,
    cmake_cache,
    compile_database,
    discover,
    nvcc_flags,
    requested,
    torch_arch_list,
)
from archgap.errors import UsageError


def targets(claims: object) -> list[str]:
    return [c.target for c in claims]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("7.5;8.0;8.6+PTX;9.0a", ["sm_75", "sm_80", "sm_86", "compute_86", "sm_90a"]),
        ("8.0 9.0", ["sm_80", "sm_90"]),
        ("Ampere", ["sm_80", "sm_86", "compute_86"]),
        ("Ampere+Tegra;Hopper", ["sm_87", "sm_90", "compute_90"]),
        ("12.0a+PTX", ["sm_120a", "compute_120a"]),
    ],
    ids=["mixed", "spaces", "named", "combined-name-first", "arch-specific-ptx"],
)
def test_torch_arch_list(value: str, expected: list[str]) -> None:
    assert targets(torch_arch_list(value)) == expected


@pytest.mark.parametrize("value", ["8.5", "sm_80", "8.0;", "9.0f"], ids=str)
def test_torch_rejects_what_torch_rejects(value: str) -> None:
    with pytest.raises(UsageError, match="Unknown CUDA arch"):
        torch_arch_list(value)


@pytest.mark.parametrize("value", ["", "native"], ids=["empty", "native"])
def test_torch_native_claims_nothing(value: str) -> None:
    with pytest.raises(NoClaim):
        torch_arch_list(value)


def test_cmake_real_virtual_and_both() -> None:
    claims = cmake_architectures("75;80;86-real;90a-virtual")
    assert targets(claims) == ["sm_75", "compute_75", "sm_80", "compute_80", "sm_86", "compute_90a"]


@pytest.mark.parametrize("value", ["OFF", "FALSE", "all", "all-major", "native"], ids=str)
def test_cmake_values_that_name_no_list(value: str) -> None:
    with pytest.raises(NoClaim):
        cmake_architectures(value)


def test_cmake_rejects_a_non_architecture() -> None:
    with pytest.raises(UsageError, match="not an architecture"):
        cmake_architectures("80;sm_90")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["-gencode", "arch=compute_80,code=sm_80"], ["sm_80"]),
        (["-gencode=arch=compute_90a,code=[sm_90a,compute_90a]"], ["sm_90a", "compute_90a"]),
        (['--generate-code=arch=compute_80,code="sm_80,sm_86"'], ["sm_80", "sm_86"]),
        (["-gencode", "arch=compute_80,code=compute_80"], ["compute_80"]),
        (["-gencode", "arch=compute_100a,code=lto_100a"], []),
        (["-arch=sm_86"], ["sm_86", "compute_86"]),
        (["-arch", "compute_75"], ["compute_75"]),
        (["-arch=compute_80", "-code=sm_80,sm_86"], ["sm_80", "sm_86"]),
    ],
    ids=["gencode", "brackets", "quoted-list", "ptx", "lto-ir", "arch-sass", "arch-ptx", "code"],
)
def test_nvcc_flags(args: list[str], expected: list[str]) -> None:
    assert targets(nvcc_flags(["nvcc", *args])) == expected


def test_compile_database_reads_nvcc_commands_only(tmp_path: Path) -> None:
    entries = [
        {"directory": "/b", "file": "a.cu", "command": "/usr/local/cuda/bin/nvcc -c a.cu "
         "-gencode arch=compute_80,code=sm_80 --generate-code=arch=compute_90,code=[compute_90]"},
        {"directory": "/b", "file": "b.c", "arguments": ["cc", "-arch", "x86_64", "-c", "b.c"]},
        {"directory": "/b", "file": "c.cu", "arguments": ["nvcc", "-arch=sm_86", "c.cu"]},
    ]  # fmt: skip
    claims = compile_database(json.dumps(entries).encode(), "compile_commands.json")
    assert targets(claims) == ["sm_80", "compute_90", "sm_86", "compute_86"]


def test_cmake_cache_line() -> None:
    cache = (
        b"# comment\n//CUDA architectures\nCMAKE_CUDA_ARCHITECTURES:STRING=80;90a-real\n"
        b"CMAKE_CUDA_COMPILER:FILEPATH=/usr/local/cuda/bin/nvcc\n"
    )
    assert cmake_cache(cache, "CMakeCache.txt") == "80;90a-real"


def test_discovery_order(tmp_path: Path) -> None:
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "CMakeCache.txt").write_text("CMAKE_CUDA_ARCHITECTURES:STRING=86\n")
    # the environment's TORCH_CUDA_ARCH_LIST comes first
    found, _ = discover(environ={"TORCH_CUDA_ARCH_LIST": "9.0"}, cwd=str(tmp_path), config=False)
    assert targets(found.claims) == ["sm_90"] and "TORCH_CUDA_ARCH_LIST" in found.source
    # then a CMakeCache.txt (here in build/); TORCH_CUDA_ARCH_LIST=native claims nothing
    found, passed = discover(
        environ={"TORCH_CUDA_ARCH_LIST": "native"}, cwd=str(tmp_path), config=False
    )
    assert targets(found.claims) == ["sm_86", "compute_86"]
    assert found.source.endswith("build/CMakeCache.txt (CMAKE_CUDA_ARCHITECTURES)")
    assert any("native" in why for why in passed)


def test_nothing_claimed_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no claim found"):
        discover(environ={}, cwd=str(tmp_path), config=False)


def test_claims_from_name_value_and_file(tmp_path: Path) -> None:
    found, _ = discover("CMAKE_CUDA_ARCHITECTURES=80-real", environ={}, cwd=str(tmp_path))
    assert targets(found.claims) == ["sm_80"]
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.archgap]\nrequire = ["H100", "8.0"]\n')
    found, _ = discover(str(pyproject), environ={}, cwd=str(tmp_path))
    assert targets(found.claims) == ["H100", "8.0"]
    with pytest.raises(UsageError, match="no such file or variable"):
        discover(str(tmp_path / "absent.json"), environ={}, cwd=str(tmp_path))


def test_claimed_stands_alone() -> None:
    with pytest.raises(UsageError, match="another run"):
        requested(["claimed", "H100"])
    with pytest.raises(UsageError, match="needs --require claimed"):
        requested(["H100"], "TORCH_CUDA_ARCH_LIST=8.0")
    assert requested(["H100"]) is None
