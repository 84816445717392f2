"""Environment discovery on real venvs: nothing of the inspected environment is imported."""

from pathlib import Path

import pytest

from archgap.probe.pyenv import discover_environment, interpreter_paths, is_native_file
from archgap.probe.system import System
from tests.helpers import CUDA_BIN, install_fake_distribution, make_venv


@pytest.mark.parametrize(
    ("name", "native"),
    [
        ("torch/lib/libtorch_cuda.so", True),
        ("nvidia/cu13/lib/libcublas.so.13", True),
        ("libcupti.so.2026.2.0", True),
        ("libcudadevrt.a", True),
        ("rdc_a.o", True),
        ("k.cubin", True),
        ("k.fatbin", True),
        ("libx.so.bak", False),
        ("solo.py", False),
        ("libx.so.1a", False),
    ],
)
def test_native_files_by_name(name: str, native: bool) -> None:
    assert is_native_file(name) is native


def test_a_venv_is_found_through_pyvenv_cfg_under_isolated_mode(tmp_path: Path) -> None:
    # `python -I -S` skips site.py, which is what normally applies a venv's prefix.
    site = make_venv(tmp_path / "venv")
    _, version, site_packages, problem = interpreter_paths(
        System.local(), str(tmp_path / "venv" / "bin" / "python")
    )
    assert problem is None and version
    assert site_packages == (str(site),)


def test_distributions_own_their_native_files_and_strays_are_kept(tmp_path: Path) -> None:
    site = make_venv(tmp_path / "venv")
    files = {"kern/libmix.so": CUDA_BIN / "libmix.so", "kern/x.py": CUDA_BIN / "libmix.so"}
    install_fake_distribution(site, "kern", "2.0", files)
    (site / "stray.so").write_bytes(b"")
    env = discover_environment(System.local(), str(tmp_path / "venv" / "bin" / "python"))
    (dist,) = env.distributions
    assert (dist.name, dist.version) == ("kern", "2.0")
    assert dist.native_files == (str(site / "kern" / "libmix.so"),)
    assert env.unowned_native_files == (str(site / "stray.so"),)


def test_an_interpreter_that_does_not_run_is_a_problem(tmp_path: Path) -> None:
    env = discover_environment(System.local(), str(tmp_path / "no-python"))
    assert env.site_packages == ()
    assert "cannot run" in env.problems[0].reason
