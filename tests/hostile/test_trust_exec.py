"""Hostile corpus: which programs archgap runs, and what they may leave running.

A toolkit's ``nvcc``/``ptxas`` is found through an environment (the shell's, or a service's via
``--env-from PID|FILE``), a directory listing or a package's files: it is data, not a program
the user named. The rules the outcomes follow:

- Versions are read, not run: ``<toolkit>/version.json`` (``cuda_nvcc``), ``version.txt``
  ("CUDA Version 10.2.89"), or the "Cuda compilation tools, release X.Y, VX.Y.Z" line the
  binary itself carries.
- Where none says, the binary runs only if it and every directory on its path (links and the
  directories holding them included) are owned by root or the effective user and not writable
  by group or others (a sticky directory excepted): anyone else who can write one of them can
  put any program there, which would run as this user (root, judging a service). Else the
  toolkit is "untrusted" with a reason that names the file or directory and why.
- A program archgap ran leaves nothing running once it returns: its process group, its session
  and whatever it setsid'd (it still carries the run's RUN_MARK) are killed and gone.

Each planted program, if run, leaves a marker file (outside what is inspected). Run as root (as
in CI) the foreign owner is uid 65534 (``nobody``); otherwise the same class is planted as a
directory or file writable by others, which the same rule refuses.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from archgap.probe.environment.service_env import system_with_env_from
from archgap.probe.environment.system import System
from archgap.probe.environment.toolkit import discover_toolchains
from tests.hangs import alive
from tests.helpers import json_output, run_cli
from tests.toolkit_stubs import BANNERS, wait_for_exec

ROOT = os.geteuid() == 0
NOBODY = 65534
# What the rule says of a planted foreign file or directory, as root and otherwise.
FOREIGN = f"is owned by uid {NOBODY}" if ROOT else "is writable by others"


def foreign(path: Path) -> None:
    """Make ``path`` another user's (root: chown to nobody, the link itself for a link), or,
    not being root, writable by others: either way one that anyone else may change."""
    if ROOT:
        os.lchown(path, NOBODY, NOBODY)
    else:
        path.chmod(path.stat().st_mode | 0o002)


def stub(path: Path, marker: Path, extra: str = "") -> Path:
    """A program at ``path`` that, if run, leaves ``marker`` and prints nvcc 12.8's real banner
    (tests/fixtures/nvcc_banners): run, it would be reported as a working CUDA 12.8."""
    path.parent.mkdir(parents=True, exist_ok=True)
    banner = BANNERS / "nvcc-12.8.txt"
    path.write_text(f"#!/bin/sh\n{extra}touch '{marker}'\ncat '{banner}'\n")
    path.chmod(0o755)
    return path


def environment(**env: str) -> System:
    return System(env=tuple(sorted({"PATH": "/usr/bin:/bin", **env}.items())), env_source="test")


@dataclass
class Plant:
    """What a class planted: the system whose toolkits are read, which lookup finds the planted
    one, and what must be said of it (None: untrusted, else the version read instead)."""

    system: System
    found_by: str
    why: str | None = None  # words of the reason ("<path> is owned by uid 65534")
    version: tuple[str, str] | None = None  # (major.minor, full) read from files
    read_from: str = ""  # the end of version_from


@dataclass
class World:
    tmp: Path
    marker: Path

    def home(self, name: str = "cuda") -> Path:
        home = self.tmp / name
        stub(home / "bin" / "nvcc", self.marker)
        return home


def nvcc_foreign(w: World) -> Plant:
    home = w.home()
    foreign(home / "bin" / "nvcc")
    return Plant(environment(CUDA_HOME=str(home)), "CUDA_HOME", f"{home}/bin/nvcc {FOREIGN}")


def bin_foreign(w: World) -> Plant:
    home = w.home()
    foreign(home / "bin")
    why = f"{home}/bin (a directory on its path) {FOREIGN}"
    return Plant(environment(CUDA_HOME=str(home)), "CUDA_HOME", why)


def home_foreign(w: World) -> Plant:
    home = w.home()
    foreign(home)
    why = f"{home} (a directory on its path) {FOREIGN}"
    return Plant(environment(CUDA_HOME=str(home)), "CUDA_HOME", why)


def bin_writable_by_others(w: World) -> Plant:
    home = w.home()
    (home / "bin").chmod(0o777)
    why = f"{home}/bin (a directory on its path) is writable by others"
    return Plant(environment(CUDA_HOME=str(home)), "CUDA_HOME", why)


def bin_writable_by_group(w: World) -> Plant:
    home = w.home()
    (home / "bin").chmod(0o775)
    why = f"{home}/bin (a directory on its path) is writable by its group"
    return Plant(environment(CUDA_HOME=str(home)), "CUDA_HOME", why)


def nvcc_writable_by_others(w: World) -> Plant:
    home = w.home()
    (home / "bin" / "nvcc").chmod(0o757)
    why = f"{home}/bin/nvcc is writable by others"
    return Plant(environment(CUDA_HOME=str(home)), "CUDA_HOME", why)


def nvcc_links_into_foreign_dir(w: World) -> Plant:
    """The toolkit is the user's; its bin/nvcc is a link into a directory nobody owns."""
    evil = w.tmp / "evil"
    stub(evil / "nvcc", w.marker)
    foreign(evil)
    home = w.tmp / "cuda"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "nvcc").symlink_to(evil / "nvcc")
    why = f"{evil} (a directory on its path) {FOREIGN}"
    return Plant(environment(CUDA_HOME=str(home)), "CUDA_HOME", why)


def home_is_a_link_in_foreign_dir(w: World) -> Plant:
    """CUDA_HOME is a link to a sound toolkit, but the link sits in a directory another user may
    change: what it points at is theirs to choose, the moment before nvcc runs."""
    sound = w.home("sound")
    shared = w.tmp / "shared"
    shared.mkdir()
    (shared / "cuda").symlink_to(sound)
    foreign(shared)
    why = f"{shared} (a directory on its path) {FOREIGN}"
    return Plant(environment(CUDA_HOME=str(shared / "cuda")), "CUDA_HOME", why)


def path_nvcc_foreign(w: World) -> Plant:
    home = w.home()
    foreign(home / "bin")
    why = f"{home}/bin (a directory on its path) {FOREIGN}"
    return Plant(environment(PATH=f"{home}/bin:/usr/bin:/bin"), "PATH", why)


def triton_ptxas_foreign(w: World) -> Plant:
    ptxas = stub(w.tmp / "tools" / "ptxas", w.marker)
    foreign(ptxas.parent)
    why = f"{ptxas.parent} (a directory on its path) {FOREIGN}"
    return Plant(environment(TRITON_PTXAS_PATH=str(ptxas)), "TRITON_PTXAS_PATH", why)


def env_file_names_foreign_home(w: World) -> Plant:
    """``--env-from FILE``: the service's env file names another user's toolkit."""
    home = w.home()
    foreign(home / "bin" / "nvcc")
    env_file = w.tmp / "sglang.env"
    env_file.write_text(f"CUDA_HOME={home}\nPATH=/usr/bin:/bin\n")
    system, problem = system_with_env_from(str(env_file), System())
    assert problem is None and system is not None
    return Plant(system, "CUDA_HOME", f"{home}/bin/nvcc {FOREIGN}")


def version_json_instead(w: World) -> Plant:
    home = w.home()
    foreign(home / "bin" / "nvcc")
    versions = {"cuda": {"version": "12.8.1"}, "cuda_nvcc": {"version": "12.8.93"}}
    (home / "version.json").write_text(json.dumps(versions))
    return Plant(
        environment(CUDA_HOME=str(home)), "CUDA_HOME", None, ("12.8", "12.8.93"), "version.json"
    )


def version_txt_instead(w: World) -> Plant:
    home = w.home()
    foreign(home / "bin" / "nvcc")
    (home / "version.txt").write_text("CUDA Version 10.2.89\n")
    return Plant(
        environment(CUDA_HOME=str(home)), "CUDA_HOME", None, ("10.2", "10.2.89"), "version.txt"
    )


def release_line_instead(w: World) -> Plant:
    """No version file, but the binary carries its release line (as nvcc and ptxas do)."""
    home = w.tmp / "cuda"
    line = "# Cuda compilation tools, release 12.9, V12.9.86\n"
    stub(home / "bin" / "nvcc", w.marker, extra=line)
    foreign(home / "bin" / "nvcc")
    read_from = f"the release line in {home}/bin/nvcc"
    return Plant(
        environment(CUDA_HOME=str(home)), "CUDA_HOME", None, ("12.9", "12.9.86"), read_from
    )


TRUST: dict[str, Callable[[World], Plant]] = {
    "nvcc-owned-by-another-user": nvcc_foreign,
    "bin-dir-owned-by-another-user": bin_foreign,
    "toolkit-dir-owned-by-another-user": home_foreign,
    "bin-dir-writable-by-others": bin_writable_by_others,
    "bin-dir-writable-by-group": bin_writable_by_group,
    "nvcc-writable-by-others": nvcc_writable_by_others,
    "nvcc-links-into-a-foreign-dir": nvcc_links_into_foreign_dir,
    "cuda-home-link-in-a-foreign-dir": home_is_a_link_in_foreign_dir,
    "path-nvcc-in-a-foreign-dir": path_nvcc_foreign,
    "triton-ptxas-path-foreign": triton_ptxas_foreign,
    "env-file-names-a-foreign-toolkit": env_file_names_foreign_home,
    "version-json-read-not-run": version_json_instead,
    "version-txt-read-not-run": version_txt_instead,
    "release-line-read-not-run": release_line_instead,
}


@pytest.mark.parametrize("plant", list(TRUST.values()), ids=list(TRUST))
def test_trust_exec_class(plant: Callable[[World], Plant], tmp_path: Path) -> None:
    world = World(tmp_path / "world", tmp_path / "ran")
    world.tmp.mkdir()
    planted = plant(world)
    facts = discover_toolchains(planted.system, ())
    assert not world.marker.exists(), "archgap ran a program another user controls"
    (tk,) = [t for t in facts.toolkits if t.found_by == planted.found_by]
    assert_outcome(tk, planted)


def assert_outcome(tk: Any, planted: Plant) -> None:
    if planted.why is None:  # read from files instead
        assert planted.version is not None
        assert (tk.status, tk.version, tk.full_version) == ("ok", *planted.version)
        assert tk.version_from.endswith(planted.read_from), tk.version_from
        return
    assert (tk.status, tk.version) == ("untrusted", None)
    assert (tk.reason or "").startswith("not run: "), tk.reason
    assert planted.why in (tk.reason or ""), tk.reason


def test_proc_environ_of_another_user(tmp_path: Path) -> None:
    """The issue's case, whole: a process of uid 65534 (when root) whose CUDA_HOME is its own
    toolkit; ``--env-from PID`` reads it, and its nvcc is not run."""
    marker = tmp_path / "ran"
    home = tmp_path / "world" / "cuda"
    stub(home / "bin" / "nvcc", marker)
    foreign(home / "bin" / "nvcc")
    env = {"CUDA_HOME": str(home), "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen(["sleep", "300"], env=env, user=NOBODY if ROOT else None)
    try:
        wait_for_exec(proc.pid)
        system, problem = system_with_env_from(str(proc.pid), System())
        assert problem is None and system is not None
        facts = discover_toolchains(system, ())
    finally:
        proc.kill()
        proc.wait()
    assert not marker.exists(), "archgap ran the nvcc another user's process names"
    (tk,) = [t for t in facts.toolkits if t.found_by == "CUDA_HOME"]
    assert tk.origin == f"env CUDA_HOME (/proc/{proc.pid}/environ)"
    assert_outcome(tk, Plant(system, "CUDA_HOME", f"{home}/bin/nvcc {FOREIGN}"))


def test_scan_env_from_file_end_to_end(tmp_path: Path) -> None:
    """``archgap scan --env-from FILE --json``: the env file names another user's toolkit; the
    document (valid against its schema) says "untrusted" and why, and nothing ran."""
    marker = tmp_path / "ran"
    home = tmp_path / "world" / "cuda"
    stub(home / "bin" / "nvcc", marker)
    foreign(home / "bin")
    env_file = tmp_path / "service.env"
    env_file.write_text(f"CUDA_HOME={home}\nPATH=/usr/bin:/bin\n")
    result = run_cli("scan", "--env-from", str(env_file), "--gpu", "12.0", "--json")
    assert not marker.exists(), "archgap scan ran the nvcc a service's env file names"
    doc = json_output(result, "scan")
    toolkits = doc["toolchains"]["toolkits"]
    (tk,) = [t for t in toolkits if t["found_by"] == "CUDA_HOME"]
    assert tk["status"] == "untrusted" and tk["reason"].startswith("not run: ")
    assert f"{home}/bin (a directory on its path) {FOREIGN}" in tk["reason"]


# What a program archgap runs may leave behind. Each stand-in nvcc (trusted: the user's own, no
# version file, no release line in its text, so it is run) starts a process that records its pid
# in ``pids`` and then sleeps far longer than the test, its stdio closed so that nvcc's exit
# ends archgap's read; nvcc waits for the pid to be written, prints its banner and exits 0.
LEFT_BEHIND = {
    # setsid(1): a new session and group: outside the process group archgap kills.
    "setsid-daemon-after-exit": "setsid sh -c 'echo $$ >> \"$P\"; exec sleep 300'",
    # A plain background child stays in the group, but clears its environment (no RUN_MARK).
    "group-member-without-the-mark": 'env -i P="$P" sh -c \'echo $$ >> "$P"; exec sleep 300\'',
    # The classic daemon: fork, setsid, fork again, the middle one exits (re-parented to init).
    "double-fork-daemon": (
        f"{sys.executable} -c 'import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        '        open(os.environ["P"], "a").write("%d\\n" % os.getpid())\n'
        "        time.sleep(300)\n"
        "    os._exit(0)\n"
        "'"
    ),
}


@pytest.fixture
def recorded(tmp_path: Path) -> Iterator[Path]:
    """The pid file the stand-ins write; whatever it names is killed after the test whatever
    the outcome, so a failing class leaves nothing running either."""
    pids = tmp_path / "pids"
    yield pids
    for line in pids.read_text().split() if pids.exists() else ():
        if alive(int(line)):
            os.kill(int(line), signal.SIGKILL)


@pytest.mark.parametrize("start", list(LEFT_BEHIND.values()), ids=list(LEFT_BEHIND))
def test_reap_class(start: str, tmp_path: Path, recorded: Path) -> None:
    home = tmp_path / "cuda"
    body = (
        f"P='{recorded}'; export P\n"
        f"{start} </dev/null >/dev/null 2>&1 &\n"
        f'while [ ! -s "$P" ]; do sleep 0.01; done\n'
    )
    stub(home / "bin" / "nvcc", tmp_path / "ran", extra=body)
    facts = discover_toolchains(environment(CUDA_HOME=str(home)), ())
    (tk,) = [t for t in facts.toolkits if t.found_by == "CUDA_HOME"]
    assert (tk.status, tk.version) == ("ok", "12.8")  # it ran, and exited by itself
    assert tk.version_from == f"`{home}/bin/nvcc --version`"
    left = [int(pid) for pid in recorded.read_text().split()]
    assert left and not [pid for pid in left if alive(pid)], f"{left} outlived archgap"


def test_reap_through_system_run(tmp_path: Path, recorded: Path) -> None:
    """The same for any command the probe runs (nvidia-smi, an interpreter): System.run."""
    start = LEFT_BEHIND["setsid-daemon-after-exit"]
    script = f"P='{recorded}'; export P; {start} </dev/null >/dev/null 2>&1 &\n"
    script += 'while [ ! -s "$P" ]; do sleep 0.01; done; echo done'
    result = System.local().run(["sh", "-c", script])
    assert result.ok and result.stdout == "done\n"
    (pid,) = [int(p) for p in recorded.read_text().split()]
    assert not alive(pid), f"{pid} outlived the command"


def test_a_sound_toolkit_in_a_sticky_world_writable_dir_still_runs(tmp_path: Path) -> None:
    """Not every loose directory refuses: in a sticky one (``/tmp``) nobody else may rename or
    remove the user's entries, so the user's own toolkit there runs (and /tmp's tests did)."""
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    marker = tmp_path / "ran"
    home = sticky / "cuda"
    stub(home / "bin" / "nvcc", marker)
    facts = discover_toolchains(environment(CUDA_HOME=str(home)), ())
    (tk,) = [t for t in facts.toolkits if t.found_by == "CUDA_HOME"]
    assert (tk.status, tk.full_version) == ("ok", "12.8.93") and marker.exists()


def test_nvidia_smi_on_a_foreign_path_is_not_run(tmp_path: Path) -> None:
    """nvidia-smi is found on the PATH of the environment judged (a service's, with --env-from):
    one that another user can replace is data, not a program to run as this user."""
    from archgap.probe.environment.gpu import probe_gpus

    marker = tmp_path / "ran"
    bin_dir = tmp_path / "svc" / "bin"
    stub(bin_dir / "nvidia-smi", marker)
    foreign(bin_dir)
    facts = probe_gpus(environment(PATH=str(bin_dir)))
    assert not marker.exists()
    said = " ".join(p.reason for p in facts.problems if p.subject == "nvidia-smi")
    assert "not run" in said and FOREIGN in said, facts.problems
