"""The real servers behind the remote and fleet tests, and checks that they are what we think.

``scripts/test`` starts them once (``scripts/services start DIR``) and exports
ARCHGAP_TEST_SERVICES=DIR; a plain ``pytest`` run starts them here and stops them (by pid) at exit.
Tests that need a part that could not start skip with the reason scripts/services recorded.
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
_STATUS: dict[str, Any] | None = None


def services() -> dict[str, Any]:
    """status.json of the running services (starting them first if nobody did)."""
    global _STATUS
    if _STATUS is not None:
        return _STATUS
    base = os.environ.get("ARCHGAP_TEST_SERVICES")
    if not base or not (Path(base) / "status.json").is_file():
        base = tempfile.mkdtemp(prefix="archgap-services-")
        script = str(ROOT / "scripts" / "services")
        subprocess.run([sys.executable, script, "start", base], check=False, timeout=1200)
        atexit.register(subprocess.run, [sys.executable, script, "stop", base], check=False)
        os.environ["ARCHGAP_TEST_SERVICES"] = base  # one set of services for every test module
    _STATUS = json.loads((Path(base) / "status.json").read_text())
    return _STATUS


def require(part: str) -> dict[str, Any]:
    """The part's status, or skip the test with the reason it could not be started (printed)."""
    info: dict[str, Any] = services()[part]
    if not info.get("ok"):
        reason = f"{part} test service could not be started: {info.get('reason')}"
        print(reason, file=sys.stderr)
        pytest.skip(reason)
    return info


def ssh_env() -> dict[str, str]:
    """Environment for archgap runs against the test sshd: its own ssh config, never ~/.ssh."""
    info = require("ssh")
    return {"ARCHGAP_SSH_CONFIG": info["config"]}


def host_spec(name: str) -> str:
    info = require("ssh")["hosts"][name]
    return f"root@{info['address']}:{info['port']}"


def snapshot(*dirs: str) -> dict[str, set[str]]:
    """The names in each directory (to prove a run left nothing behind)."""
    return {d: set(os.listdir(d)) if os.path.isdir(d) else set() for d in dirs}


def leftovers(before: dict[str, set[str]]) -> dict[str, set[str]]:
    """New entries since ``before`` whose name mentions archgap, plus anything in a test TMPDIR."""
    found = {}
    for d, names in before.items():
        new = set(os.listdir(d)) - names if os.path.isdir(d) else set()
        dedicated = "remote-tmp" in d or "remote-home" in d
        hits = {n for n in new if dedicated or "archgap" in n.lower()}
        if hits:
            found[d] = hits
    return found


class SilentListener:
    """A TCP listener that accepts connections and never says a word (a hung sshd)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = int(self.sock.getsockname()[1])
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


def closed_port() -> int:
    """A loopback port with nothing listening (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_test_sshd_hosts_have_their_own_environment() -> None:
    info = require("ssh")
    config = info["config"]
    for name in ("alpha", "beta", "gamma"):
        done = subprocess.run(
            ["ssh", "-F", config, "-o", "BatchMode=yes", name, "echo CUDA_HOME=$CUDA_HOME"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        expected = info["hosts"][name]["env"].get("CUDA_HOME", "")
        assert done.stdout.strip() == f"CUDA_HOME={expected}"


def test_single_node_slurm_runs_a_step() -> None:
    info = require("slurm")
    done = subprocess.run(
        ["srun", "--ntasks-per-node=1", "hostname"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SLURM_CONF": info["conf"]},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == socket.gethostname()
