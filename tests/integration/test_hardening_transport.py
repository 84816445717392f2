"""Transports under hostile conditions: no injection through any wrapper, bounded output, and a
timeout reaches every process the command started."""

from __future__ import annotations

import json
from pathlib import Path

from archgap.transport.run import MAX_ECHOED_LINE, TransportFailure, run_probe
from archgap.transport.target import via_target
from tests.hangs import gone
from tests.helpers import run_cli
from tests.integration.test_remote_services import ssh_env


def test_via_with_a_wrapper_before_ssh_injects_nothing(tmp_path: Path) -> None:
    # `env ssh ...`: ssh still hands the command to the remote shell, though its first word is
    # not "ssh". The test sshd runs on loopback, so a command run "remotely" shows up here.
    via = f"env ssh -F {ssh_env()['ARCHGAP_SSH_CONFIG']} alpha"
    marker = tmp_path / "pwned"
    result = run_cli("probe", "--via", via, "--python", f"touch {marker} #", "--sections", "gpu")
    assert result.returncode == 2
    assert "--python" in result.stderr and "shell" in result.stderr
    assert not marker.exists()
    # The same wrapper with a plain interpreter name works: the program travels on stdin.
    result = run_cli("probe", "--via", via, "--sections", "gpu", "--json")
    assert result.returncode == 0, result.stderr
    assert "gpu" in json.loads(result.stdout)["facts"]["sections"]


def test_remote_output_is_capped_and_echoed_lines_are_cut(tmp_path: Path) -> None:
    # The flood records its shell's pid and, should it get to the end of its 100 MB, a marker.
    pid_file, marker = tmp_path / "pid", tmp_path / "flooded"
    flood = (
        f'sh -c \'echo $$ > {pid_file}; head -c 3000000 /dev/zero | tr "\\0" x >&2; '
        f"head -c 100000000 /dev/zero; touch {marker}' sh"
    )
    result = run_probe(via_target(flood), {"gpu": {}}, timeout=60)
    assert isinstance(result, TransportFailure) and result.kind == "probe-failed"
    # Stopped at the cap, not read to the end (nor left to write on into a closed pipe).
    assert gone(int(pid_file.read_text())) and not marker.exists()
    assert "the answer was cut: output over 67108864 bytes" in result.message
    assert all(len(line) <= MAX_ECHOED_LINE + 10 for line in result.stderr.split("\n"))


def test_a_timeout_kills_setsid_descendants_of_the_transport(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    via = f"sh -c 'setsid sleep 300 & echo $! > {pid_file}; sleep 300' sh"
    result = run_probe(via_target(via), {"gpu": {}}, timeout=1)
    assert isinstance(result, TransportFailure) and result.kind == "timeout"
    pid = int(pid_file.read_text())
    assert gone(pid), f"setsid'd sleep {pid} survived the transport's timeout"


def test_a_host_that_reads_the_probe_then_hangs_is_a_timeout() -> None:
    # The probe is sent on stdin and the pipe closed once it is all written; a host that reads
    # it and never answers must still be a timeout value (stopping it once flushed the closed
    # pipe: ValueError "flush of closed file", a traceback).
    result = run_probe(via_target("sh -c 'cat >/dev/null; sleep 300' sh"), {"gpu": {}}, timeout=1)
    assert isinstance(result, TransportFailure) and result.kind == "timeout"
