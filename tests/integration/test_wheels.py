"""Wheels judged before installing them, against the same wheels installed --no-deps.

Both come from the package index through scripts/testdata: tests/.data/wheels holds the wheel
files, tests/.data/venv-NAME-VERSION the same wheel installed. A wheel's native member and the
installed file are the same bytes, so the reader must find the same entries at the same offsets,
and the analysis must give the same verdict per package and GPU (one analysis, two sources).
"""

from __future__ import annotations

import hashlib
import shutil
import zipfile
from pathlib import Path
from typing import IO

import pytest

from archgap.analysis.verdicts.verdicts import Verdict
from archgap.api import scan, scan_archives
from archgap.archives.wheel import read_wheel
from archgap.probe.binary.fatbin import read_binary
from archgap.probe.facts import BinaryFormat, KernelEntry
from tests.helpers import DATA, in_child, json_output, run_cli
from tests.integration.test_kernels_cuobjdump import CUOBJDUMP, cuobjdump_names, our_names

WHEELS = DATA / "wheels"
CURAND = next(iter(WHEELS.glob("nvidia_curand-10.4.0.35-*.whl")), None)
RUNTIME = next(iter(WHEELS.glob("nvidia_cuda_runtime-13.0.96-*.whl")), None)
VENVS = {
    "nvidia-curand": DATA / "venv-nvidia-curand-10.4.0.35",
    "nvidia-cuda-runtime": DATA / "venv-nvidia-cuda-runtime-13.0.96",
}
GPUS = ["12.0", "10.0", "9.0", "8.0", "7.0", "GB10"]

pytestmark = pytest.mark.skipif(
    CURAND is None or RUNTIME is None or CUOBJDUMP is None,
    reason="scripts/testdata downloads the wheels and cuobjdump",
)


def site_packages(venv: Path) -> Path:
    return next(venv.glob("lib/python*/site-packages"))


Row = tuple[str, str, str, Verdict, str]


def verdict_rows(name: str) -> tuple[set[Row], set[Row], str]:
    """(rows from the wheel, rows from the installed package, the wheel's distribution name)."""
    wheel = CURAND if name == "nvidia-curand" else RUNTIME
    assert wheel is not None
    from_wheel = scan_archives([str(wheel)], gpus=GPUS)
    installed = scan(str(VENVS[name] / "bin" / "python"), gpus=GPUS)
    wheel_rows = {(p.package, p.version, p.gpu, p.verdict, p.reason) for p in from_wheel.packages}
    installed_rows = {
        (p.package, p.version, p.gpu, p.verdict, p.reason)
        for p in installed.packages
        if p.package == name
    }
    return wheel_rows, installed_rows, from_wheel.environment.distributions[0].name


@pytest.mark.parametrize("name", ["nvidia-curand", "nvidia-cuda-runtime"])
def test_wheel_verdicts_equal_the_installed_packages(name: str) -> None:
    wheel_rows, installed_rows, dist = in_child(verdict_rows, name)
    assert wheel_rows == installed_rows
    assert len(wheel_rows) == len(GPUS)  # one package, each GPU judged
    assert dist == name


def sha256_of(stream: IO[bytes]) -> str:
    digest = hashlib.sha256()
    while chunk := stream.read(1 << 20):
        digest.update(chunk)
    return digest.hexdigest()


def member_checks(name: str) -> list[tuple[str, bool, bool, list[str], list[str], bool]]:
    """Per native member: (member, same bytes as installed, same facts as the file reader finds
    in the installed file, our listed targets, cuobjdump's, has entries)."""
    wheel = CURAND if name == "nvidia-curand" else RUNTIME
    assert wheel is not None
    site = site_packages(VENVS[name])
    contents = read_wheel(str(wheel))
    assert contents.problems == []
    rows = []
    with zipfile.ZipFile(wheel) as zf:
        for member in contents.binaries:
            relative = member.path[len(str(wheel)) + 1 :]
            installed = site / relative
            with zf.open(relative) as a, installed.open("rb") as b:
                same_bytes = sha256_of(a) == sha256_of(b)
            facts = read_binary(str(installed), deep=True)
            same = (member.format, member.size, member.machine, member.entries) == (
                facts.format, facts.size, facts.machine, facts.entries
            )  # fmt: skip
            ours = our_names(member, "sass") + our_names(member, "ptx")
            theirs = cuobjdump_names(installed, "--list-elf") + cuobjdump_names(
                installed, "--list-ptx"
            )
            rows.append((relative, same_bytes, same, ours, theirs, bool(member.entries)))
    return rows


@pytest.mark.parametrize("name", ["nvidia-curand", "nvidia-cuda-runtime"])
def test_members_read_like_the_installed_files_and_like_cuobjdump(name: str) -> None:
    """Every native member: same bytes as the installed file, same entries (kind, target,
    offset, sizes) as the file reader finds there, and cuobjdump lists the same targets."""
    rows = in_child(member_checks, name)
    for member, same_bytes, same, ours, theirs, _ in rows:
        assert same_bytes and same, member
        assert ours == theirs, member
    # libcurand.so.10 has SASS from sm_75 to sm_121 (cuobjdump above); the runtime wheel's
    # device code is in libcudadevrt.a
    assert sum(row[5] for row in rows) == 1


def test_scan_cli_reads_a_directory_of_wheels() -> None:
    result = run_cli("scan", str(WHEELS), "--gpu", "12.0", "--gpu", "sm_70", "--json")
    # libcurand has no sm_70 SASS and its only PTX is compute_121 (cuobjdump --list-ptx):
    # a gap on 7.0, exit 1
    assert result.returncode == 1, result.stderr
    doc = json_output(result, "scan")
    verdicts = {(p["package"], p["gpu"]): p["verdict"] for p in doc["packages"]}
    assert verdicts[("nvidia-curand", "12.0")] == "native"
    assert verdicts[("nvidia-curand", "sm_70")] == "none"
    # libcudadevrt.a is a device-link archive: never loaded at run time
    assert verdicts[("nvidia-cuda-runtime", "12.0")] == "no-kernels"
    assert len(doc["python"]["site_packages"]) == 2


def test_kernels_cli_lists_a_wheels_members() -> None:
    assert CURAND is not None
    result = run_cli("kernels", str(CURAND), "--json")
    assert result.returncode == 0, result.stderr
    doc = json_output(result, "kernels")
    paths = [f["path"] for f in doc["files"]]
    assert paths == [f"{CURAND}/nvidia/cu13/lib/libcurand.so.10"]


def test_a_corrupt_wheel_is_a_reason_and_exit_2(tmp_path: Path) -> None:
    assert CURAND is not None
    broken = tmp_path / "broken-1.0-py3-none-any.whl"
    with CURAND.open("rb") as whole:
        broken.write_bytes(whole.read(1 << 20))  # the central directory is cut off
    contents = read_wheel(str(broken))
    assert contents.distributions == [] and contents.binaries == []
    assert "not a readable wheel" in contents.problems[0].reason
    result = run_cli("scan", str(broken))
    assert result.returncode == 2
    assert "not a readable wheel" in result.stderr and "Traceback" not in result.stderr
    listed = run_cli("kernels", str(broken))
    assert listed.returncode == 2 and "Traceback" not in listed.stderr


def altered_member(path: str) -> tuple[str, str | None, str]:
    contents = read_wheel(path)
    [member] = contents.binaries
    return member.format, member.error, contents.distributions[0].name


def test_a_member_with_a_bad_crc_is_unreadable_and_the_rest_is_judged(tmp_path: Path) -> None:
    """A wheel whose libcurand bytes were altered after zipping: zipfile's CRC check fails while
    streaming; that member is an unreadable row with the reason, not a traceback."""
    assert CURAND is not None
    altered = tmp_path / CURAND.name
    shutil.copy(CURAND, altered)
    with zipfile.ZipFile(CURAND) as zf:
        info = zf.getinfo("nvidia/cu13/lib/libcurand.so.10")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    with altered.open("r+b") as handle:
        handle.seek(start + info.compress_size // 2)
        byte = handle.read(1)
        handle.seek(-1, 1)
        handle.write(bytes([byte[0] ^ 0xFF]))
    kind, error, dist = in_child(altered_member, str(altered))
    assert kind == "unreadable" and error and "corrupt member" in error
    assert dist == "nvidia-curand"


def test_nothing_is_written_next_to_the_wheel(tmp_path: Path) -> None:
    assert RUNTIME is not None
    copy = tmp_path / RUNTIME.name
    shutil.copy(RUNTIME, copy)
    before = sorted(p.name for p in tmp_path.iterdir())
    read_wheel(str(copy))
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_summary_and_markdown_name_the_wheels_not_a_python() -> None:
    assert RUNTIME is not None
    summary = run_cli("scan", str(RUNTIME), "--gpu", "12.0", "--format", "summary")
    assert summary.returncode == 0, summary.stderr
    assert f"· Archives {RUNTIME.name} ·" in summary.stdout and "Python" not in summary.stdout
    markdown = run_cli("scan", str(RUNTIME), "--gpu", "12.0", "--format", "markdown")
    assert "- Archives nvidia\\_cuda\\_runtime-13.0.96" in markdown.stdout
    assert "(not installed)" in markdown.stdout


MemberRow = tuple[str, BinaryFormat, int, tuple[KernelEntry, ...], str | None, str | None]


def streamed_members(
    path: str, in_memory_max: int, no_file_writes: bool
) -> dict[bool, list[MemberRow]]:
    """The wheel's members read plainly and deeply (the keys), those over ``in_memory_max`` read
    as they stream by (in
    a spawned child: the module's bound and the process's limits are its own). With
    ``no_file_writes`` the child may not write one byte to any file (RLIMIT_FSIZE 0: a write
    fails with EFBIG), and its TMPDIR is an empty directory that must stay empty."""
    import os
    import resource
    import signal
    import tempfile

    from archgap.archives import wheel as archive

    archive.IN_MEMORY_MAX = in_memory_max
    empty = ""
    if no_file_writes:
        empty = tempfile.mkdtemp(prefix="archgap-empty-tmp-")
        os.environ["TMPDIR"] = empty
        tempfile.tempdir = None
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    rows = {}
    for deep in (False, True):
        contents = archive.read_wheel(path, deep=deep)
        rows[deep] = [
            (b.path, b.format, b.size, b.entries, b.error, b.machine) for b in contents.binaries
        ]
    if no_file_writes:
        assert os.listdir(empty) == []
        os.rmdir(empty)
    return rows


def test_a_member_over_the_memory_bound_is_read_as_it_streams_like_the_installed_file() -> None:
    """With the bound at 64 KiB, every native member of the two wheels is read in one pass as
    it is inflated (libcurand.so.10: 127 MiB, its section table at the end), by a process that
    cannot write a byte to any file: the same format, size, machine, entries (kind, target,
    variant, PTX ISA, compression, sizes, section, offset) and errors as the file reader finds
    in the installed file."""
    assert CURAND is not None and RUNTIME is not None
    checked = 0
    for name, wheel in (("nvidia-curand", CURAND), ("nvidia-cuda-runtime", RUNTIME)):
        site = site_packages(VENVS[name])
        for deep, streamed in in_child(streamed_members, str(wheel), 64 << 10, True).items():
            checked += sum(len(row[3]) for row in streamed)
            for path, fmt, size, entries, error, machine in streamed:
                installed = read_binary(str(site / path[len(str(wheel)) + 1 :]), deep)
                assert (fmt, size, machine, entries, error) == (
                    installed.format, installed.size, installed.machine, installed.entries,
                    installed.error,
                ), path  # fmt: skip
    # plain and deep: libcurand.so.10's 109 entries (cuobjdump lists its SASS and PTX, test
    # above), the runtime's libcudadevrt.a's 11 (its members' __nv_relfatbin)
    assert checked == 2 * 120
