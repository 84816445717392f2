"""Hostile input: shell metacharacters in host names, interpreter paths and probe parameters.

Each hostile value carries a ``touch CANARY`` that would create a file if any shell on either side
ever interpreted it. The value is either refused with a clear message, or passed as one literal
word (the interpreter is then simply "not found"); the canary never appears.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from archgap.probe.facts import ProbeResponse
from archgap.transport.run import TransportFailure, run_probe
from archgap.transport.target import TargetError, ssh_target, via_target
from tests.helpers import json_output, run_cli
from tests.integration.test_remote_services import require, ssh_env


def payloads(canary: Path) -> list[str]:
    c = str(canary)
    return [
        f"x;touch {c}",
        f"$(touch {c})",
        f"`touch {c}`",
        f"x' ; touch {c} ; '",
        f'x" ; touch {c} ; "',
        f"x && touch {c}",
        f"x | touch {c}",
        f"a b\ttouch {c}",
        f"x\ntouch {c}",
    ]


@pytest.mark.parametrize("index", range(9))
def test_hostile_host_names_are_refused(tmp_path: Path, index: int) -> None:
    canary = tmp_path / "CANARY"
    host = payloads(canary)[index]
    result = run_cli("probe", "--host", host, env=ssh_env(), timeout=60)
    assert result.returncode == 2
    assert "host" in result.stderr and "traceback" not in result.stderr.lower()
    assert not canary.exists()


def test_option_like_host_is_refused(tmp_path: Path) -> None:
    canary = tmp_path / "CANARY"
    result = run_cli("probe", f"--host=-oProxyCommand=touch {canary}", timeout=60)
    assert result.returncode == 2
    assert "may not start with '-'" in result.stderr or "whitespace" in result.stderr
    result = run_cli("probe", "--host=-oProxyCommand=true", timeout=60)
    assert result.returncode == 2 and "may not start with '-'" in result.stderr
    assert not canary.exists()


@pytest.mark.parametrize("index", range(8))  # the newline case is refused before ssh runs
def test_hostile_python_over_ssh_is_one_literal_word(tmp_path: Path, index: int) -> None:
    require("ssh")
    canary = tmp_path / "CANARY"
    python = payloads(canary)[index]
    result = run_cli("probe", "--host", "alpha", "--python", python, env=ssh_env(), timeout=60)
    doc = json_output(result, "probe")
    assert result.returncode == 2
    assert doc["error"]["kind"] == "no-interpreter", doc["error"]
    assert not canary.exists()


def test_python_with_newline_or_leading_dash_is_refused(tmp_path: Path) -> None:
    canary = tmp_path / "CANARY"
    for python in (f"x\ntouch {canary}", f"-c__import__('os').system('touch {canary}')"):
        result = run_cli("probe", "--host", "alpha", "--python", python, env=ssh_env())
        assert result.returncode == 2
        assert "--python" in result.stderr
    assert not canary.exists()


@pytest.mark.parametrize("index", range(8))
def test_hostile_python_through_via_is_one_literal_word(tmp_path: Path, index: int) -> None:
    canary = tmp_path / "CANARY"
    python = payloads(canary)[index]
    # --via never guesses whether its prefix runs a shell: an interpreter name that a shell
    # would read differently is refused before anything runs.
    with pytest.raises(TargetError, match="shell"):
        via_target("sh -c 'exec \"$@\"' sh", python)
    # A shell-neutral name through a prefix that does run a shell stays one word.
    target = via_target("sh -c 'exec \"$@\"' sh", "/no/such/python3")
    result = run_probe(target, {"gpu": {}}, timeout=30)
    assert isinstance(result, TransportFailure)
    assert result.kind == "no-interpreter", result
    assert not canary.exists()


def test_hostile_request_values_travel_as_data_not_arguments(tmp_path: Path) -> None:
    require("ssh")
    canary = tmp_path / "CANARY"
    hostile = payloads(canary)
    target = ssh_target("alpha", "python3", ssh_config=ssh_env()["ARCHGAP_SSH_CONFIG"])
    # Parameters (trace names, paths) go in the JSON on stdin, never on a command line.
    request = {
        "python": {"python": hostile[1]},
        "binaries": {"paths": hostile},
        "trace": {"name": hostile[2], "paths": hostile},
    }
    facts = run_probe(target, request, timeout=60)
    assert isinstance(facts, ProbeResponse), facts
    assert "cannot run" in str(facts.section("python")["problems"])
    assert not canary.exists()


@pytest.mark.parametrize("option", ["--container", "--pod"], ids=["container", "pod"])
def test_hostile_container_and_pod_names_are_refused(tmp_path: Path, option: str) -> None:
    canary = tmp_path / "CANARY"
    for name in [*payloads(canary)[:5], "-it", "../x"]:
        result = run_cli("probe", option, name, timeout=60)
        assert result.returncode == 2, (option, name, result.stdout)
        assert option.strip("-") in result.stderr
    assert not canary.exists()


def test_hostile_fleet_hosts_are_refused(tmp_path: Path) -> None:
    canary = tmp_path / "CANARY"
    hostfile = tmp_path / "hosts"
    hostfile.write_text(f"alpha\n$(touch {canary})\n")
    result = run_cli("fleet", "--hostfile", str(hostfile), env=ssh_env(), timeout=60)
    assert result.returncode == 2 and "host" in result.stderr
    result = run_cli("fleet", "--hosts", f"alpha,x;touch {canary}", env=ssh_env(), timeout=60)
    assert result.returncode == 2 and "host" in result.stderr
    assert not canary.exists()
