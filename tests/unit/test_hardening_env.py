"""Hostile environments and interpreters: one bad distribution is reported for itself, nothing
blocks, and what an interpreter answers is checked before it is used."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from archgap.probe.__main__ import run as probe_run
from archgap.probe.environment.pyenv import (
    discover_environment,
    installed_distributions,
    interpreter_paths,
)
from archgap.probe.environment.system import System
from tests.hangs import GUARD, Sleeper, gone
from tests.helpers import CUDA_BIN, install_fake_distribution, make_venv, run_cli
from tests.unit.test_hardening_binaries import within


def two_distributions(tmp_path: Path) -> tuple[Path, Path]:
    """A venv with ``kern`` (libmix.so: SASS sm_75..sm_120, no sm_70 code at all) and
    ``other`` (its own copy); returns (venv, other's dist-info)."""
    venv = tmp_path / "venv"
    site = make_venv(venv)
    install_fake_distribution(site, "kern", "1.0", {"kern/libmix.so": CUDA_BIN / "libmix.so"})
    install_fake_distribution(site, "other", "2.0", {"other/libmix.so": CUDA_BIN / "libmix.so"})
    return venv, site / "other-2.0.dist-info"


@pytest.mark.parametrize(
    "bad_row", ["other/\0evil.so,,", "other/" + "x" * (200 << 10) + ".so,,"], ids=["nul", "huge"]
)
def test_a_bad_record_row_costs_only_that_row(tmp_path: Path, bad_row: str) -> None:
    venv, other = two_distributions(tmp_path)
    record = other / "RECORD"
    record.write_text(bad_row + "\n" + record.read_text())
    site = next((venv / "lib").glob("python*/site-packages"))
    dists, problems = installed_distributions((str(site),))
    native = {d.name: d.native_files for d in dists}
    assert native == {
        "kern": (str(site / "kern" / "libmix.so"),),
        "other": (str(site / "other" / "libmix.so"),),
    }
    ((subject, reason),) = [(p.subject, p.reason) for p in problems]
    assert subject == str(other) and reason.startswith("RECORD line 1: ")


def test_a_nul_in_one_record_does_not_turn_a_failing_gate_into_a_pass(tmp_path: Path) -> None:
    # V100 is sm_70: libmix.so holds SASS for sm_75 and newer and PTX no older than compute_75,
    # and PTX only JIT-compiles forward, so nothing of kern runs there: `--require V100` fails.
    venv, other = two_distributions(tmp_path)
    record = other / "RECORD"
    record.write_text("other/\0x.so,,\n" + record.read_text())
    python = str(venv / "bin" / "python")
    result = run_cli("scan", "--python", python, "--require", "V100", "--json")
    assert result.returncode == 1, result.stderr


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("name", ["RECORD", "METADATA"])
def test_a_fifo_for_a_metadata_file_is_a_problem_not_a_hang(tmp_path: Path, name: str) -> None:
    venv, other = two_distributions(tmp_path)
    (other / name).unlink()
    fifo(other / name)
    site = next((venv / "lib").glob("python*/site-packages"))
    dists, problems = within(10, lambda: installed_distributions((str(site),)))
    assert "kern" in {d.name for d in dists}
    assert [p.reason for p in problems if p.subject == str(other)] == [
        f"unreadable {name}: not a regular file"
    ]


def stub_python(tmp_path: Path, body: str) -> str:
    """An 'interpreter' that is a shell script (the inspected environment decides what runs)."""
    path = tmp_path / "python"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_the_interpreter_check_honours_the_timeout(tmp_path: Path) -> None:
    sleeper = Sleeper(tmp_path / "sleeper")
    python = stub_python(tmp_path, sleeper.shell() + "\n")
    facts = probe_run({"request": {"python": {"python": python}}, "timeout": 1})
    (problem,) = facts["sections"]["python"]["problems"]
    assert problem["reason"] == f"cannot run {python}: timed out after 1 s"
    sleeper.assert_cut_short()  # stopped at the timeout, not waited for


def test_interpreter_output_is_bounded(tmp_path: Path) -> None:
    python = stub_python(tmp_path, "exec yes 0123456789012345678901234567890123456789\n")
    _, _, dirs, problem = interpreter_paths(System.local(), python)
    assert dirs == ()
    assert problem is not None and problem.reason.startswith(f"cannot run {python}: output over")


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        # The answer is NUL-separated: executable, version, then the paths ("" for none).
        ("/x\x003.12.1" + "\x00/p" * 65, "paths are more than 64"),
        ("5\x003.12.1\x00/p", "executable is not a path"),
        ("/x\x00[]\x00/p", "version is not a version"),
        ("/x\x003.12\x007", "paths holds something"),
        ('{"executable": "/x", "version": "3.12", "paths": []}', "not NUL-separated"),
        ("[" * 100000, "not NUL-separated"),
    ],
)
def test_interpreter_answers_are_checked(tmp_path: Path, answer: str, why: str) -> None:
    (tmp_path / "answer").write_text(answer)
    python = stub_python(tmp_path, f"cat {tmp_path / 'answer'}\n")
    env = discover_environment(System.local(), python)
    assert env.site_packages == ()
    (problem,) = env.problems
    assert problem.reason.startswith("unexpected interpreter answer: " + why)


def test_setsid_descendants_die_with_a_timed_out_command(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = (
        f"import os, subprocess, time\n"
        f"p = subprocess.Popen(['setsid', 'sleep', '300'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n"
        f"time.sleep(300)\n"
    )
    # The timeout must come after the child has started its setsid'd sleep (a busy machine can
    # take longer than any fixed number of seconds to start Python): until it has, try again
    # with twice the time. What is checked holds whichever timeout it took.
    timeout = 2
    while True:
        result = System.local().run([sys.executable, "-c", script], timeout=timeout)
        assert result.error == f"timed out after {timeout} s"
        if pid_file.exists() and pid_file.read_text():
            break
        assert timeout < GUARD, f"the child never started its sleep within {timeout} s"
        timeout *= 2
    pid = int(pid_file.read_text())
    assert gone(pid), f"setsid'd sleep {pid} survived the timeout"
