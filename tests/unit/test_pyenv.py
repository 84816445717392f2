"""Environment discovery on real venvs: nothing of the inspected environment is imported."""

from __future__ import annotations

from pathlib import Path

import pytest

from archgap.probe.binary.names import is_native_file
from archgap.probe.environment.pyenv import (
    discover_environment,
    interpreter_paths,
    record_names,
    record_native_files,
)
from archgap.probe.environment.system import System
from tests.helpers import CUDA_BIN, DATA, install_fake_distribution, make_venv, need_data


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


DEBIAN_PYTHON = Path("/usr/bin/python3")


def test_a_venv_of_debians_python_is_found_although_its_default_scheme_is_posix_local(
    tmp_path: Path,
) -> None:
    # Debian and Ubuntu patch sysconfig: outside a venv the default scheme is posix_local
    # (<prefix>/local/lib/pythonX.Y/dist-packages). Under -I -S a venv's interpreter is not known
    # to be in a venv, so that scheme applied to the venv's prefix named a directory no venv has,
    # and `scan --python` of an Ubuntu-based venv (the CUDA images' /opt/.../.venv) found nothing.
    # The venv is made by that interpreter itself (python -m venv), as in those images.
    import subprocess

    venv = tmp_path / "debvenv"
    subprocess.run([str(DEBIAN_PYTHON), "-m", "venv", "--without-pip", str(venv)], check=True)
    (site,) = (venv / "lib").glob("python3.*/site-packages")
    _, version, site_packages, problem = interpreter_paths(
        System.local(), str(venv / "bin" / "python")
    )
    assert problem is None and version
    assert site_packages == (str(site),)


def test_debians_system_python_reports_its_dist_packages() -> None:
    # A system interpreter's packages are where site.py would look: Debian's site.py names
    # /usr/lib/python3/dist-packages (apt's python3-* packages) besides /usr/local/....
    _, _, site_packages, problem = interpreter_paths(System.local(), str(DEBIAN_PYTHON))
    assert problem is None
    assert "/usr/lib/python3/dist-packages" in site_packages


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


def test_strays_are_regular_files_outside_metadata_and_symlinks_are_not_followed(
    tmp_path: Path,
) -> None:
    site = make_venv(tmp_path / "venv")
    (site / "deep" / "er").mkdir(parents=True)
    (site / "deep" / "er" / "libx.so.1").write_bytes(b"")
    (site / "deep" / "notes.txt").write_bytes(b"")
    (site / "__pycache__").mkdir()
    (site / "__pycache__" / "cached.so").write_bytes(b"")
    (site / "pkg-1.0.dist-info").mkdir()
    (site / "pkg-1.0.dist-info" / "meta.so").write_bytes(b"")
    (site / "link.so").symlink_to(site / "deep" / "er" / "libx.so.1")
    (site / "linked-dir").symlink_to(site / "deep")
    (site / "loop").symlink_to(site)
    env = discover_environment(System.local(), str(tmp_path / "venv" / "bin" / "python"))
    assert env.unowned_native_files == (str(site / "deep" / "er" / "libx.so.1"),)


def test_an_interpreter_that_does_not_run_is_a_problem(tmp_path: Path) -> None:
    env = discover_environment(System.local(), str(tmp_path / "no-python"))
    assert env.site_packages == ()
    assert "cannot run" in env.problems[0].reason


# RECORD is a CSV file (wheel spec, PEP 376): the first field is the path, quoted when it holds a
# comma or a quote; rows end at "\n" or "\r\n". The fast path must read each row as csv does.
@pytest.mark.parametrize(
    ("line", "name", "problem"),
    [
        ("torch/lib/libc10.so,sha256=abc,123", "torch/lib/libc10.so", None),
        ("torch/lib/libc10.so,sha256=abc,123\r", "torch/lib/libc10.so", None),  # CRLF RECORD
        ('"odd,name/lib.so",sha256=abc,1', "odd,name/lib.so", None),
        ('"say ""hi""/x.so",,', 'say "hi"/x.so', None),
        ("plain name with spaces.so,,", "plain name with spaces.so", None),
        ("", None, None),
        ("a\0b.so,,", None, "RECORD line 2: "),  # csv < 3.11: "line contains NUL"; then: no path
        ('"never closed,,', "never closed,,", None),  # csv (not strict) reads to the line's end
        ("x" * 5000 + ",,", None, "RECORD line 2: not a file name"),  # longer than any path
        ("x" * (128 << 10) + "y,,", None, "RECORD line 2: field larger than field limit"),
    ],
)
def test_record_rows_read_as_csv_reads_them(
    line: str, name: str | None, problem: str | None
) -> None:
    problems: list[str] = []
    names = record_names(f"first.so,,\n{line}\nlast.so,,\n".encode(), False, problems)
    assert names == ["first.so", *([name] if name else []), "last.so"]
    assert len(problems) == (1 if problem else 0)
    assert all(p.startswith(problem or "") for p in problems)


def test_real_records_read_as_csv_reads_them() -> None:
    # pip writes RECORD with csv's "\r\n" row ends; every RECORD of the real test environments
    # (scripts/testdata) gives the first fields csv.reader gives, whole file at once.
    import csv

    need_data("venv-flashinfer-python-0.6.8", "venv-nvidia-curand-10.4.0.35")
    records = sorted(DATA.glob("venv-*/lib/python3*/site-packages/*.dist-info/RECORD"))
    assert len(records) >= 10
    assert any(b"\r\n" in path.read_bytes() for path in records)
    for path in records:
        data = path.read_bytes()
        expected = [row[0] for row in csv.reader(data.decode().splitlines()) if row and row[0]]
        problems: list[str] = []
        assert record_names(data, False, problems) == expected, path
        assert problems == []


def test_native_files_of_a_record_are_its_normalised_paths(tmp_path: Path) -> None:
    dist_info = tmp_path / "kern-1.0.dist-info"
    dist_info.mkdir()
    rows = ["kern/a.py", "kern/../kern/lib.so.12", "kern/lib2.so/.", "kern/x.so/..", "k.cubin"]
    (dist_info / "RECORD").write_text("".join(f"{row},,\n" for row in rows))
    native = record_native_files(str(dist_info), [])
    # normpath: kern/../kern/lib.so.12 -> kern/lib.so.12; kern/lib2.so/. -> kern/lib2.so;
    # kern/x.so/.. -> kern (a directory name, not a native file)
    assert native == tuple(str(tmp_path / p) for p in ("kern/lib.so.12", "kern/lib2.so", "k.cubin"))
