"""Toolkit discovery on real binaries (nvcc 13.0, the nvidia-cuda-nvcc-cu12 wheels' ptxas) and
stub nvcc executables printing real recorded banners; hanging and crashing ones are reported."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from archgap.probe.environment.system import System
from archgap.probe.environment.toolkit import discover_toolchains, parse_release
from tests.hangs import Sleeper
from tests.toolkit_stubs import (
    REAL_CUDA_13,
    banner_toolkit,
    crashing_toolkit,
    site_packages,
)


def env_system(**env: str) -> System:
    return System(env=tuple(sorted({"PATH": "/usr/bin:/bin", **env}.items())), env_source="test")


def by_found(facts: Any, found_by: str) -> list[Any]:
    return [t for t in facts.toolkits if t.found_by == found_by]


def test_release_line_parsing() -> None:
    text = (Path(__file__).parent.parent / "fixtures/nvcc_banners/nvcc-12.8.txt").read_text()
    assert parse_release(text) == (
        "12.8",
        "12.8.93",
        "Cuda compilation tools, release 12.8, V12.8.93",
    )
    assert parse_release("nvcc: something else") is None


def test_cuda_home_stub_reports_its_banner_version(tmp_path: Path) -> None:
    home = banner_toolkit(tmp_path, "12.9")
    facts = discover_toolchains(env_system(CUDA_HOME=str(home)), ())
    (tk,) = by_found(facts, "CUDA_HOME")
    assert (tk.status, tk.version, tk.full_version) == ("ok", "12.9", "12.9.41")
    assert tk.version_from == f"`{home}/bin/nvcc --version`"
    assert tk.origin == "env CUDA_HOME (test)"
    assert [(e.name, e.source) for e in facts.env if e.name == "CUDA_HOME"] == [
        ("CUDA_HOME", "test")
    ]


@pytest.mark.skipif(not (REAL_CUDA_13 / "bin/nvcc").exists(), reason="no real nvcc 13.0")
def test_real_nvcc_13_found_in_usr_local() -> None:
    facts = discover_toolchains(env_system(), ())
    real = [t for t in by_found(facts, "/usr/local/cuda-*") if t.home == str(REAL_CUDA_13)]
    assert real and real[0].status == "ok" and real[0].version == "13.0"
    assert real[0].full_version == "13.0.88"  # `nvcc --version` on this machine: V13.0.88


def test_hanging_nvcc_is_cut_off_and_reported(tmp_path: Path) -> None:
    home = tmp_path / "cuda-hangs"
    sleeper = Sleeper(tmp_path / "nvcc")
    sleeper.script(home / "bin" / "nvcc")  # records its pids, sleeps, then leaves a marker
    facts = discover_toolchains(env_system(CUDA_HOME=str(home)), (), timeout=1.0)
    (tk,) = by_found(facts, "CUDA_HOME")
    assert tk.status == "timeout" and tk.version is None
    assert "timed out after 1 s" in (tk.reason or "")
    sleeper.assert_cut_short()  # stopped at the timeout, not waited for


def test_crashing_and_missing_nvcc_are_reported(tmp_path: Path) -> None:
    crash = crashing_toolkit(tmp_path)
    facts = discover_toolchains(
        env_system(CUDA_HOME=str(crash), CUDA_PATH=str(tmp_path / "nowhere")), ()
    )
    (crashed,) = by_found(facts, "CUDA_HOME")
    assert crashed.status == "broken" and "killed by signal 11" in (crashed.reason or "")
    (missing,) = by_found(facts, "CUDA_PATH")
    assert missing.status == "missing" and "does not exist" in (missing.reason or "")


def test_non_executable_nvcc_is_broken(tmp_path: Path) -> None:
    home = banner_toolkit(tmp_path, "12.8")
    (home / "bin" / "nvcc").chmod(0o644)
    facts = discover_toolchains(env_system(CUDA_HOME=str(home)), ())
    (tk,) = by_found(facts, "CUDA_HOME")
    assert tk.status == "broken" and "not executable" in (tk.reason or "")


@pytest.mark.parametrize(("version", "full"), [("12.8", "12.8.93"), ("12.9", "12.9.86")])
def test_real_ptxas_of_the_nvcc_wheels(version: str, full: str) -> None:
    site = site_packages(f"venv-nvidia-cuda-nvcc-cu12-{full}")  # skips without scripts/testdata
    facts = discover_toolchains(env_system(), site)
    (tk,) = by_found(facts, "wheel")
    # The wheel ships ptxas only; its --version runs for real.
    assert (tk.tool, tk.status, tk.version, tk.full_version) == ("ptxas", "ok", version, full)
    assert tk.component == "nvcc" and tk.tool_path.endswith("nvidia/cuda_nvcc/bin/ptxas")
    assert tk.origin == f"RECORD of nvidia_cuda_nvcc_cu12-{full}.dist-info"


def test_which_nvcc_follows_the_given_path(tmp_path: Path) -> None:
    home = banner_toolkit(tmp_path, "12.6")
    facts = discover_toolchains(env_system(PATH=f"{home}/bin:/usr/bin"), ())
    assert facts.which_nvcc == f"{home}/bin/nvcc"
    (tk,) = by_found(facts, "PATH")
    assert tk.home == str(home) and tk.version == "12.6"


def test_source_checks_report_lines_of_the_installed_flashinfer() -> None:
    from archgap.kb.toolchain import all_source_checks

    site = site_packages("venv-flashinfer-python-0.6.8")
    facts = discover_toolchains(env_system(), site, all_source_checks())
    found = {(c.key, c.needle): c for c in facts.source_checks}
    # Line numbers read off the released 0.6.8 files by hand (stack_gates.md 1.2).
    raise_ = found[("sm12_raise", 'raise RuntimeError("SM 12.x requires CUDA >= 12.9")')]
    assert raise_.found and raise_.line == 56
    assert found[("broad_except", "except Exception as e:")].line == 80
    check = next(c for c in facts.source_checks if c.key == "check_cuda_arch_raise" and c.found)
    assert check.file.endswith("flashinfer/jit/core.py") and check.line == 108
    # 0.7.1's messages are not in 0.6.8.
    assert not found[("sm120_raise", 'raise RuntimeError("SM 120 requires CUDA >= 12.8")')].found
    pkg = {p.name: p.version for p in facts.packages}
    assert pkg == {"flashinfer-python": "0.6.8"}
