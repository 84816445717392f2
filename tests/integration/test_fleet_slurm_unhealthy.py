"""fleet --slurm: one unhealthy node never hides the others (issue 40 item 2), on a real
three-node Slurm on loopback: a slurmctld and three slurmd (``slurmd -N n1`` ...: one machine,
three NodeNames, each slurmd on its own port) beside the services' Slurm, sharing its munged.

The rule (slurm.conf(5), Prolog): a Prolog that exits non-zero drains its node, and srun's step
fails on every node ("Task launch for StepId=N.0 failed on node n2: Job prolog failed"), so one
bad node took the whole allocation: `fleet --slurm -- -N3` reported 0 hosts. Now that node is
reported with srun's reason, and the others answer.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import json_output, run_cli
from tests.integration.test_remote_services import require

NODES = ("n1", "n2", "n3")
POLLS = 240  # scontrol queries while three slurmds register again (each a fraction of a second)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _states(env: dict[str, str]) -> dict[str, str]:
    done = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], env=env, capture_output=True,
                          text=True, timeout=30, check=False)  # fmt: skip
    return dict(line.split() for line in done.stdout.splitlines() if len(line.split()) == 2)


def _wait_idle(env: dict[str, str]) -> None:
    """Until the three nodes are idle and responding ("idle*": slurmctld has not heard from the
    node since; it takes no job then, and fleet --slurm rightly leaves it out)."""
    for _ in range(POLLS):  # bounded by questions asked, not by seconds on the clock
        if _states(env) == {n: "idle" for n in NODES}:
            return
        time.sleep(0.5)
    assert _states(env) == {n: "idle" for n in NODES}, "three idle nodes"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, str], Path]]:
    """(environment with SLURM_CONF, hooks directory): hooks/prolog-NODE runs as NODE's Prolog."""
    services = require("slurm")
    munge = re.search(r"AuthInfo=socket=(\S+)", Path(services["conf"]).read_text())
    assert munge, "the services' slurm.conf names no munge socket"
    d = tmp_path_factory.mktemp("slurm3")
    (d / "state").mkdir()
    hooks = d / "hooks"
    hooks.mkdir()
    prolog = d / "prolog"
    prolog.write_text(f'#!/bin/sh\n[ -x "{hooks}/prolog-$SLURMD_NODENAME" ] && '
                      f'exec "{hooks}/prolog-$SLURMD_NODENAME"\nexit 0\n')  # fmt: skip
    prolog.chmod(0o755)
    host = socket.gethostname().split(".")[0]
    ctl = _free_port()
    nodes = "\n".join(
        f"NodeName={n} NodeHostname={host} NodeAddr=127.0.0.1 Port={_free_port()} CPUs=1 "
        "State=UNKNOWN"
        for n in NODES
    )
    conf = d / "slurm.conf"
    conf.write_text(f"""ClusterName=archgap3
SlurmctldHost={host}(127.0.0.1)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge.group(1)}
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ctl}
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool-%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd-%n.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
PlugStackConfig=/dev/null
Prolog={prolog}
{nodes}
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
    env = {**os.environ, "SLURM_CONF": str(conf)}
    daemons = [subprocess.Popen(["slurmctld", "-D", "-i", "-f", str(conf)], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]  # fmt: skip
    daemons += [
        subprocess.Popen(
            ["slurmd", "-D", "-N", n, "-f", str(conf)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for n in NODES
    ]
    try:
        _wait_idle(env)
        yield {"SLURM_CONF": str(conf)}, hooks
    finally:
        for daemon in daemons:
            daemon.send_signal(signal.SIGTERM)
        for daemon in daemons:
            try:
                daemon.wait(30)
            except subprocess.TimeoutExpired:
                daemon.kill()


def test_a_node_whose_prolog_fails_does_not_hide_the_others(
    cluster: tuple[dict[str, str], Path],
) -> None:
    env, hooks = cluster
    bad = hooks / "prolog-n2"
    bad.write_text("#!/bin/sh\nexit 1\n")
    bad.chmod(0o755)
    try:
        result = run_cli("fleet", "--slurm", "--json", "--python", sys.executable, "--", "-N3",
                         env=env, timeout=300)  # fmt: skip
        doc = json_output(result, "fleet")
        assert sorted(h["name"] for h in doc["hosts"]) == ["n1", "n3"], result.stdout
        (refused,) = doc["unreachable"]
        assert refused["name"] == "n2" and refused["message"] == "Slurm: Job prolog failed"
        assert "failed on node n2: Job prolog failed" in refused["stderr"]
        assert result.returncode == 2  # no gap; a node not probed
        # Slurm drained it for its failed Prolog: what an operator sees in sinfo -R too.
        assert _states({**os.environ, **env})["n2"] in ("drained", "draining")
    finally:
        bad.unlink()
        _resume(env, "n2")


def _drain(env: dict[str, str], node: str, reason: str) -> None:
    done = subprocess.run(
        ["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"],
        env={**os.environ, **env}, capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # ("drained*" when slurmctld has not heard from the node since: not responding as well)
    assert _states({**os.environ, **env})[node].startswith(("drained", "draining"))


def _resume(env: dict[str, str], *nodes: str) -> None:
    """Back in service, and heard from: `scontrol reconfigure` has every slurmd register again,
    which clears a "not responding" left by the drain."""
    whole = {**os.environ, **env}
    for node in nodes:
        subprocess.run(["scontrol", "update", f"NodeName={node}", "State=RESUME"],
                       env=whole, timeout=30, check=False)  # fmt: skip
    subprocess.run(["scontrol", "reconfigure"], env=whole, timeout=30, check=False)
    _wait_idle(whole)


def test_a_drained_node_is_left_out_up_front_with_slurms_reason(
    cluster: tuple[dict[str, str], Path],
) -> None:
    """slurm.conf(5)/scontrol(1): a DRAIN node takes no new job, so `srun -N3` on these three
    nodes would wait in the queue for n2 (ReqNodeNotAvail) and probe none. n2 is left out and
    reported with the reason the operator gave; n1 and n3 answer."""
    env, _hooks = cluster
    _drain(env, "n2", "rack 4 PSU")
    try:
        result = run_cli("fleet", "--slurm", "--json", "--python", sys.executable, "--", "-N3",
                         env=env, timeout=300)  # fmt: skip
        doc = json_output(result, "fleet")
        assert sorted(h["name"] for h in doc["hosts"]) == ["n1", "n3"], result.stdout
        (left_out,) = doc["unreachable"]
        assert left_out["name"] == "n2" and left_out["kind"] == "node-unavailable"
        assert left_out["message"].startswith("Slurm: drained")
        assert left_out["message"].endswith(" (rack 4 PSU); left out of the allocation")
        assert result.returncode == 2  # no gap; a node not probed
        # A nodelist naming it asks for the others; the text report names it with the reason.
        _drain(env, "n3", "ECC errors")
        text = run_cli("fleet", "--slurm", "--python", sys.executable, "--",
                       "--nodelist=n[1-3]", env=env, timeout=300)  # fmt: skip
        assert text.returncode == 2, text.stdout + text.stderr
        assert "1/3 hosts answered" in text.stdout
        assert re.search(r"n2: node-unavailable Slurm: drained[^(]*\(rack 4 PSU\)", text.stdout)
        assert "n3: node-unavailable Slurm: drained (ECC errors)" in text.stdout
    finally:
        _resume(env, "n2", "n3")


def test_env_from_on_every_node(cluster: tuple[dict[str, str], Path], tmp_path: Path) -> None:
    """srun --export=ALL (the default) hands each task archgap's own environment; --env-from
    names the one the service's jobs get, read on each node, and each host says so. One that
    cannot be read fails every node, with the reason, never srun's environment judged."""
    env, _hooks = cluster
    _wait_idle({**os.environ, **env})
    service = tmp_path / "service.env"
    service.write_text("CUDA_HOME=/opt/cuda-12.9\nTORCH_CUDA_ARCH_LIST=12.0\n")
    result = run_cli("fleet", "--slurm", "--json", "--python", sys.executable, "--env-from",
                     str(service), "--", "-N3", env=env, timeout=300)  # fmt: skip
    doc = json_output(result, "fleet")
    assert {h["name"]: h["environment"] for h in doc["hosts"]} == dict.fromkeys(
        NODES, str(service)
    ), result.stdout
    assert {tuple(h["env"]) for h in doc["hosts"]} == {
        ("CUDA_HOME=/opt/cuda-12.9", "TORCH_CUDA_ARCH_LIST=12.0")
    }
    gone = run_cli("fleet", "--slurm", "--json", "--python", sys.executable, "--env-from",
                   str(tmp_path / "gone.env"), "--", "-N3", env=env, timeout=300)  # fmt: skip
    doc = json_output(gone, "fleet")
    assert gone.returncode == 2 and doc["hosts"] == []
    assert sorted(u["name"] for u in doc["unreachable"]) == list(NODES)
    assert {u["kind"] for u in doc["unreachable"]} == {"env-unreadable"}
    assert all("gone.env: No such file or directory" in u["message"] for u in doc["unreachable"])
