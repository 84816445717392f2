"""`archgap fleet --ray` against a real Ray cluster of two nodes on loopback: a head (127.0.0.10)
and a second node (127.0.0.11) started here with `ray start --block`, each in a session of its
own, and stopped by process id (with every process that carries this cluster's temp directory).
Ray maps 127.0.0.1 to the machine's outward address, so the nodes use other loopback addresses.
libmix.so has SASS sm_75 ... sm_120: native on a T4 (7.5), so no gap on either node.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.hangs import GUARD
from tests.helpers import (
    CUDA_BIN,
    install_fake_distribution,
    json_output,
    make_venv,
    run_cli,
    wait_for_port,
)

RAY = Path(sys.executable).parent / "ray"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):  # ray start, its raylet, GCS and workers
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _stop_leftovers(marker: str) -> None:
    """Any process of this cluster still alive (its command line names the temp directory)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline and int(entry.name) != os.getpid():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry.name), signal.SIGKILL)


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    base = tmp_path_factory.mktemp("ray")
    port = _free_port()
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    common = ["--block", "--num-cpus=1", "--num-gpus=0", f"--temp-dir={base}",
              "--disable-usage-stats"]  # fmt: skip
    procs: list[subprocess.Popen[bytes]] = []

    def start(args: list[str], log: str) -> None:
        with open(base / log, "wb") as out:
            procs.append(
                subprocess.Popen([str(RAY), "start", *args, *common], stdout=out,
                                 stderr=subprocess.STDOUT, start_new_session=True, env=env)
            )  # fmt: skip

    try:
        start(["--head", "--node-ip-address=127.0.0.10", f"--port={port}",
               "--include-dashboard=false"], "head.log")  # fmt: skip
        wait_for_port("127.0.0.10", port, 60)
        start([f"--address=127.0.0.10:{port}", "--node-ip-address=127.0.0.11"], "node.log")
        yield f"127.0.0.10:{port}"
    finally:
        _stop(procs)
        _stop_leftovers(str(base))


def _fleet_of_both_nodes(address: str, *args: str) -> tuple[Any, dict[str, Any]]:
    """``fleet --ray`` once both nodes have registered (the second joins a few seconds after the
    head): the run and its document. The wait is a hang guard (tests.hangs.GUARD), not a timing
    claim; the caller's asserts say what was missing if it expires."""
    deadline = time.monotonic() + GUARD
    while True:
        result = run_cli("fleet", "--ray", address, *args, "--json", timeout=300)
        doc = json_output(result, "fleet")
        if len(doc["hosts"]) + len(doc["unreachable"]) >= 2 or time.monotonic() > deadline:
            return result, doc
        time.sleep(1)


def test_fleet_over_a_two_node_ray_cluster(ray_cluster: str, tmp_path: Path) -> None:
    venv = tmp_path / "good"
    install_fake_distribution(
        make_venv(venv), "fakekernels", "1.2.3", {"fakekernels/libmix.so": CUDA_BIN / "libmix.so"}
    )
    python = str(venv / "bin" / "python")
    result, doc = _fleet_of_both_nodes(ray_cluster, "--python", python, "--gpu", "T4")
    assert result.returncode == 0, result.stderr
    hosts = doc["hosts"]
    assert len(hosts) == 2 and not doc["unreachable"]
    # Both nodes run on this machine: the names tell them apart by address and port.
    names = sorted(h["name"].rsplit(":", 1)[0] for h in hosts)
    assert names == [f"{socket.gethostname()}@127.0.0.{n}" for n in (10, 11)]
    assert [g["size"] for g in doc["groups"]] == [2]
    assert all(h["packages"] == ["fakekernels==1.2.3"] for h in hosts)
    # Without --python each node inspects its Ray worker's interpreter: this test's venv.
    result = run_cli("fleet", "--ray", ray_cluster, "--json", "--sections", "gpu,python",
                     timeout=180)  # fmt: skip
    doc = json_output(result, "fleet")
    interpreters = {Path(h["python"].split(" ", 1)[1]) for h in doc["hosts"]}
    assert {p.parent for p in interpreters} == {Path(sys.executable).parent}, interpreters


def test_fleet_ray_without_a_cluster_is_an_unreachable_host() -> None:
    result = run_cli("fleet", "--ray", f"127.0.0.1:{_free_port()}", "--json", timeout=180)
    doc = json_output(result, "fleet")
    assert result.returncode == 2
    assert [u["kind"] for u in doc["unreachable"]] == ["unreachable"]


def test_fleet_ray_judges_the_jobs_runtime_env(ray_cluster: str, tmp_path: Path) -> None:
    """A Ray job runs in its runtime_env (Ray docs, "Environment Dependencies"): env_vars set in
    its workers, py_executable the interpreter they run. The raylet's environment (this test's
    venv, no TORCH_CUDA_ARCH_LIST) is not the job's. The job's interpreter here is a venv that
    can start a Ray worker (a .pth to the directory ray is installed in) and holds fakekernels."""
    import ray

    venv = tmp_path / "job"
    site = make_venv(venv)
    install_fake_distribution(
        site, "fakekernels", "1.2.3", {"fakekernels/libmix.so": CUDA_BIN / "libmix.so"}
    )
    (site / "ray_base.pth").write_text(f"{Path(ray.__file__).parents[1]}\n")
    job_python = venv / "bin" / "python"
    runtime_env = {"env_vars": {"TORCH_CUDA_ARCH_LIST": "12.0"}, "py_executable": str(job_python)}
    env_file = tmp_path / "runtime_env.json"
    env_file.write_text(json.dumps(runtime_env))
    _, doc = _fleet_of_both_nodes(
        ray_cluster, "--runtime-env", f"@{env_file}", "--sections", "gpu,python"
    )
    hosts = doc["hosts"]
    assert len(hosts) == 2 and not doc["unreachable"], doc["unreachable"]
    for host in hosts:
        assert host["env"] == ["TORCH_CUDA_ARCH_LIST=12.0"], host["env"]
        assert Path(host["python"].split(" ", 1)[1]) == job_python, host["python"]
        assert "fakekernels==1.2.3" in host["packages"]
    # The same cluster without it: the raylet's own environment, none of the job's.
    result = run_cli("fleet", "--ray", ray_cluster, "--json", "--sections", "gpu,python",
                     timeout=180)  # fmt: skip
    for host in json_output(result, "fleet")["hosts"]:
        assert host["env"] != ["TORCH_CUDA_ARCH_LIST=12.0"]
        assert "fakekernels==1.2.3" not in host["packages"]
    # A runtime_env Ray cannot build is each node's failure, never the raylet's env judged.
    broken = json.dumps({"py_executable": str(tmp_path / "missing" / "python")})
    result = run_cli("fleet", "--ray", ray_cluster, "--runtime-env", broken, "--json",
                     "--sections", "gpu", "--timeout", "15", timeout=300)  # fmt: skip
    doc = json_output(result, "fleet")
    assert result.returncode == 2 and not doc["hosts"], doc["hosts"]
    assert len(doc["unreachable"]) == 2
