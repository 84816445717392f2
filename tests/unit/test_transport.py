"""The transport without a network: target parsing, argument vectors, the loader on real local
interpreters through real command prefixes, and error classification of real ssh messages."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from archgap.analysis.fleet import coverage_matrix, fleet_report
from archgap.probe.facts import ProbeResponse
from archgap.report.html import fleet_html
from archgap.transport.bootstrap import probe_input, probe_sources, remote_argv, standalone_script
from archgap.transport.fleet import HostInput
from archgap.transport.run import TransportFailure, classify, run_probe
from archgap.transport.target import (
    LOCAL,
    TargetError,
    container_target,
    parse_host,
    pod_target,
    ssh_target,
    via_target,
)
from tests.hangs import Sleeper

PY38 = Path("/root/.pyenv/versions/3.8.18/bin/python3")
PY37 = Path("/root/.pyenv/versions/3.7.16/bin/python3")
PY27 = Path("/root/.pyenv/versions/2.7.18/bin/python")


HostParts = tuple[str | None, str, int | None]  # user, host, port


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("gpu1", (None, "gpu1", None)),
        ("root@gpu1", ("root", "gpu1", None)),
        ("root@10.0.0.7:2222", ("root", "10.0.0.7", 2222)),
        ("svc_user@node-01.cluster.local", ("svc_user", "node-01.cluster.local", None)),
        ("[::1]:22", (None, "::1", 22)),
        ("admin@[fe80::1%eth0]", ("admin", "fe80::1%eth0", None)),
    ],
)
def test_parse_host_accepts_real_names(
    text: str, expected: tuple[str | None, str, int | None]
) -> None:
    assert parse_host(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "-oProxyCommand=sh",
        "gpu1;id",
        "gpu1 id",
        "$(id)",
        "`id`",
        "gpu'1",
        'gpu"1',
        "gpu1:0",
        "gpu1:99999",
        "gpu1:22x",
        "ro;ot@gpu1",
        "[::1",
        "gpu1|id",
        "gpu1&",
    ],
)
def test_parse_host_refuses_unsafe_text(text: str) -> None:
    with pytest.raises(TargetError):
        parse_host(text)


def test_ssh_argv_quotes_every_remote_argument() -> None:
    python = "/opt/my venv/bin/python; touch /tmp/x '$(id)'"
    target = ssh_target("svc@gpu1:2222", python, connect_timeout=3, ssh_config="/etc/cfg")
    argv = target.command(remote_argv(python))
    assert argv[:2] == ["ssh", "-T"]
    assert "BatchMode=yes" in argv and "ConnectTimeout=3" in argv
    assert argv[argv.index("-F") + 1] == "/etc/cfg"
    assert argv[argv.index("-p") + 1] == "2222" and argv[argv.index("-l") + 1] == "svc"
    assert argv[-3:-1] == ["--", "gpu1"]
    # The remote shell splits the one command string back into exactly the words we meant.
    assert shlex.split(argv[-1]) == [python, "-I", "-S", "-"]


def test_container_pod_and_via_argv() -> None:
    assert container_target("sglang-0", engine="podman").command(["p"]) == [
        "podman", "exec", "-i", "sglang-0", "p",
    ]  # fmt: skip
    assert pod_target("ml/server-7:worker").command(["p"]) == [
        "kubectl", "exec", "-i", "-n", "ml", "server-7", "-c", "worker", "--", "p",
    ]  # fmt: skip
    assert via_target("env -i FOO='a b'").command(["p"]) == ["env", "-i", "FOO=a b", "p"]
    # The remote command is shell-neutral words, the same through ssh's remote shell or not.
    assert via_target("ssh -J bastion gpu1").command(remote_argv("python3")) == [
        "ssh", "-J", "bastion", "gpu1", "python3", "-I", "-S", "-",
    ]  # fmt: skip
    for bad in ("", "-x", "'unclosed"):
        with pytest.raises(TargetError):
            via_target(bad)
    with pytest.raises(TargetError):
        container_target("-it")
    with pytest.raises(TargetError):
        pod_target("Bad_Pod")


def test_probe_over_env_prefix_matches_local_collect() -> None:
    # trace runs from the source/ subpackage: the in-memory loader must make it a package.
    here = str(Path(__file__).parent)
    request = {
        "gpu": {},
        "python": {"python": sys.executable},
        "trace": {"name": "LOCAL", "paths": [here]},
    }
    remote = run_probe(via_target("env", sys.executable), request, timeout=60)
    local = run_probe(LOCAL, request)
    assert isinstance(remote, ProbeResponse) and isinstance(local, ProbeResponse)
    assert remote.sections == local.sections
    assert remote.errors == {}
    assert remote.section("trace")["occurrences"]  # this file reads LOCAL


def test_probe_leaves_no_file_behind(tmp_path: Path) -> None:
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    prefix = f"env -i HOME={home} TMPDIR={tmp} PATH=/usr/bin:/bin"
    facts = run_probe(via_target(prefix, sys.executable), {"gpu": {}}, timeout=60)
    assert isinstance(facts, ProbeResponse), facts
    assert facts.env["HOME"] == str(home)
    assert list(home.iterdir()) == [] and list(tmp.iterdir()) == []


@pytest.mark.skipif(
    not os.access(PY38, os.X_OK), reason=f"no Python 3.8 this user can run at {PY38}"
)
def test_python_3_8_runs_the_probe_and_the_standalone_script(tmp_path: Path) -> None:
    facts = run_probe(via_target("env -i", str(PY38)), {"gpu": {}, "python": {}}, timeout=60)
    assert isinstance(facts, ProbeResponse) and facts.probe_python.startswith("3.8")
    assert facts.errors == {}
    script = tmp_path / "probe.py"
    script.write_text(standalone_script(probe_input({"gpu": {}})))
    done = subprocess.run(
        [str(PY38), "-I", str(script)], capture_output=True, text=True, timeout=60, check=True
    )
    standalone = json.loads(done.stdout)
    assert standalone["probe_python"].startswith("3.8") and "gpu" in standalone["sections"]
    assert sorted(os.listdir(tmp_path)) == ["probe.py"]  # no __pycache__ either


@pytest.mark.parametrize(
    ("python", "version"), [(PY37, "3.7.16"), (PY27, None)], ids=["3.7", "2.7"]
)
def test_too_old_interpreters_are_named(python: Path, version: str | None) -> None:
    if not os.access(python, os.X_OK):
        pytest.skip(f"no interpreter this user can run at {python}")
    result = run_probe(via_target("env", str(python)), {"gpu": {}}, timeout=60)
    assert isinstance(result, TransportFailure)
    assert result.kind == "interpreter-too-old"
    if version:
        assert version in result.message


def test_missing_interpreter_and_missing_transport() -> None:
    result = run_probe(via_target("env", "/nonexistent/python"), {"gpu": {}}, timeout=30)
    assert isinstance(result, TransportFailure) and result.kind == "no-interpreter"
    result = run_probe(via_target("archgap-no-such-transport-cmd"), {"gpu": {}}, timeout=30)
    assert isinstance(result, TransportFailure) and result.kind == "transport-missing"


def test_total_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    # The sleeper's background sleep holds stdout open: killing only the shell would wait for it.
    sleeper = Sleeper(tmp_path)
    result = run_probe(via_target(f"sh -c '{sleeper.shell()}' sh"), {"gpu": {}}, timeout=1)
    assert isinstance(result, TransportFailure) and result.kind == "timeout"
    sleeper.assert_cut_short()


def test_total_timeout_does_not_wait_for_a_process_that_left_the_group(tmp_path: Path) -> None:
    # setsid puts the sleeper in a session of its own: killing the group cannot end it, and it
    # holds stdout open; the timeout still answers (killed by its mark, or abandoned after the
    # kill grace), not once the sleeper wakes and leaves its marker.
    left, sleeper = Sleeper(tmp_path / "setsid"), Sleeper(tmp_path)
    via = f"sh -c 'setsid {left.script(tmp_path / 'left')} & {sleeper.shell()}' sh"
    result = run_probe(via_target(via), {"gpu": {}}, timeout=1)
    assert isinstance(result, TransportFailure) and result.kind == "timeout"
    assert not left.marker.exists()
    sleeper.assert_cut_short()


def test_a_crashing_probe_is_probe_failed_with_its_stderr() -> None:
    # A "python" that reads the probe and dies: what the user sees is its stderr.
    prefix = "sh -c 'cat >/dev/null; echo boom: segfault in libfoo >&2; exit 139' sh"
    result = run_probe(via_target(prefix), {"gpu": {}}, timeout=30)
    assert isinstance(result, TransportFailure) and result.kind == "probe-failed"
    assert "boom: segfault in libfoo" in result.stderr


def test_an_answer_that_is_not_facts_is_probe_failed_where_it_enters(tmp_path: Path) -> None:
    # A "python" that answers with the facts marker and a document whose sections are a number:
    # decoded once by the transport, it never reaches a command as facts.
    answer = tmp_path / "answer"
    answer.write_text('@@ARCHGAP-FACTS@@ {"facts_version": 1, "sections": 5}\n')
    prefix = f"sh -c 'cat >/dev/null; cat {answer}' sh"
    result = run_probe(via_target(prefix), {"gpu": {}}, timeout=30)
    assert isinstance(result, TransportFailure) and result.kind == "probe-failed"
    assert "malformed: ProbeResponse.sections: expected an object" in result.message


# Real OpenSSH 9.2 client messages (exit status 255).
@pytest.mark.parametrize(
    ("stderr", "kind"),
    [
        ("ssh: connect to host 10.1.1.1 port 22: Connection refused", "unreachable"),
        ("ssh: connect to host 10.1.1.1 port 22: Connection timed out", "unreachable"),
        (
            "Connection timed out during banner exchange\r\n"
            "Connection to 127.0.0.1 port 4 timed out",
            "unreachable",
        ),
        ("ssh: Could not resolve hostname gpu9: Name or service not known", "unreachable"),
        ("Host key verification failed.", "host-key"),
        ("root@127.0.0.2: Permission denied (publickey).", "auth"),
    ],
)
def test_ssh_failures_are_told_apart(stderr: str, kind: str) -> None:
    result = classify(ssh_target("gpu1"), 255, "", stderr)
    assert isinstance(result, TransportFailure) and result.kind == kind


def test_probe_sources_are_the_whole_probe_package() -> None:
    sources = probe_sources()
    probe_dir = Path(__file__).resolve().parents[2] / "src" / "archgap" / "probe"
    expected = {
        ".".join(p.relative_to(probe_dir).with_suffix("").parts) for p in probe_dir.rglob("*.py")
    }
    assert set(sources) == {m.removesuffix("__init__").removesuffix(".") for m in expected}
    assert "__main__" in sources and "collect" in sources
    assert "source" in sources and "source.trace" in sources  # a subpackage and its modules


def _facts(host: str, packages: dict[str, str], cuda_home: str) -> ProbeResponse:
    dists = [
        {"name": n, "version": v, "dist_info": f"/s/{n}.dist-info", "native_files": []}
        for n, v in packages.items()
    ]
    return ProbeResponse(
        host=host,
        env={"CUDA_HOME": cuda_home},
        sections={
            "gpu": {
                "gpus": [],
                "driver_version": "580.65.06",
                "driver_cuda_version": "13.0",
                "source": "nvidia-smi",
                "problems": [],
            },
            "python": {
                "executable": "/v/bin/python",
                "python_version": "3.12.3",
                "site_packages": ["/s"],
                "distributions": dists,
                "unowned_native_files": [],
                "problems": [],
            },
        },
    )


def test_fleet_report_groups_and_drift_from_hand_made_facts() -> None:
    hosts = [
        HostInput("n1", _facts("n1", {"torch": "2.9.0"}, "/usr/local/cuda-12.8")),
        HostInput("n2", _facts("n2", {"torch": "2.9.0"}, "/usr/local/cuda-12.8")),
        HostInput("n3", _facts("n3", {"torch": "2.8.0"}, "/usr/local/cuda-12.8")),
        HostInput("n4", None, "unreachable", "n4: Connection refused"),
    ]
    report = fleet_report(hosts)
    assert [g.hosts for g in report.groups] == [("n1", "n2"), ("n3",)]
    # The biggest group is A in every report (text and HTML).
    assert list(report.group_letters.items()) == [
        (report.groups[0].fingerprint, "A"),
        (report.groups[1].fingerprint, "B"),
    ]
    # n3's group against the baseline (the largest group, n1 + n2): only the torch version.
    drift = [(d.group, d.field, d.added, d.removed) for d in report.drift]
    assert drift == [
        (report.groups[1].fingerprint, "packages", ("torch==2.8.0",), ("torch==2.9.0",))
    ]
    assert [(u.name, u.kind) for u in report.unreachable] == [("n4", "unreachable")]
    assert coverage_matrix(report) == ((), (("n1", ()), ("n2", ()), ("n3", ())))


def test_html_escapes_what_hosts_report() -> None:
    evil = "<script>alert(1)</script>"
    report = fleet_report(
        [HostInput("n1", _facts(evil, {evil: "1"}, evil)), HostInput(evil, None, "auth", evil)]
    )
    page = fleet_html(report, evil)
    assert "<script>" not in page and "&lt;script&gt;" in page


def test_fleet_report_judges_each_distinct_host_once_from_a_stream(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from archgap.analysis import fleet

    judged: list[str] = []
    real = fleet.summarise_host

    def counting(name: str, facts: Any, named: Any = ()) -> Any:
        judged.append(name)
        return real(name, facts, named)

    monkeypatch.setattr(fleet, "summarise_host", counting)

    def stream() -> Iterator[HostInput]:  # hosts arrive one by one, as fleet --from reads them
        for i in range(50):  # the same machine, each probe taking its own time
            same = _facts(f"node{i:02d}", {"torch": "2.9.0"}, "/cuda")
            yield HostInput(f"n{i:02d}", replace(same, seconds={"python": 0.1 + i / 1000}))
        yield HostInput("odd", _facts("odd", {"torch": "2.8.0"}, "/cuda"))

    report = fleet_report(stream())
    # the 49 copies of n00 (but their names and timings) are not judged again
    assert judged == ["n00", "odd"]
    assert [g.hosts for g in report.groups] == [tuple(f"n{i:02d}" for i in range(50)), ("odd",)]
    assert [h.hostname for h in report.hosts[:2]] == ["node00", "node01"]
    assert report.hosts[1] == replace(report.hosts[0], name="n01", hostname="node01")


def test_a_tool_failure_is_its_message_without_kubectl_log_lines() -> None:
    # What kubectl 1.3x prints with no cluster to reach (recorded): four klog lines of its API
    # discovery retries, then its own message; the probe's failure already names that message.
    from archgap.api import describe
    from archgap.transport.run import TransportFailure

    refused = (
        "The connection to the server localhost:8080 was refused - did you specify the right "
        "host or port?"
    )
    klog = (
        'E1201 19:20:30.067279    2787 memcache.go:265] "Unhandled Error" err="couldn\'t get '
        'current server API group list: Get \\"http://localhost:8080/api?timeout=32s\\": dial '
        'tcp 127.0.0.1:8080: connect: connection refused"'
    )
    failure = TransportFailure(
        "probe-failed",
        f"default/nosuch: the probe failed ({refused})",
        "\n".join([klog] * 4 + [refused]),
    )
    assert describe(failure) == f"probe-failed: default/nosuch: the probe failed ({refused})"
    more = TransportFailure("auth", "gpu1: permission denied", "Permission denied (publickey).")
    assert describe(more) == "auth: gpu1: permission denied\nPermission denied (publickey)."
