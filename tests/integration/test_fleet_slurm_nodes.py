"""fleet --slurm names each host by its Slurm NodeName and shows why a node failed in the text
report too, on the real slurmctld/slurmd of scripts/services (one node, NodeName from its
slurm.conf).

srun --verbose says which node it starts each task on ("launching StepId=N.0 on host NODE, 1
tasks: 0", src/srun/launch.c); the node's hostname can differ from its NodeName (NodeHostname=),
and Slurm's own commands (scontrol, sinfo, --nodelist, drain) take the NodeName.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from archgap.transport.slurm import task_nodes
from tests.helpers import run_cli
from tests.integration.test_remote_services import require


def test_srun_verbose_names_the_node_of_each_task() -> None:
    info = require("slurm")
    env = {**os.environ, "SLURM_CONF": str(info["conf"])}
    ran = subprocess.run(["srun", "-v", "--label", "--ntasks-per-node=1", "-N1", "true"], env=env,
                         capture_output=True, timeout=120, check=False)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert task_nodes(ran.stderr.splitlines()) == {0: info["node"]}


def test_task_ranges_in_the_launch_line() -> None:
    """srun prints a node's task ids as a range list ("0-3", "0,4")."""
    lines = [
        b"srun: launching StepId=7.0 on host gpu017, 2 tasks: 0,4",
        b"srun: launch/slurm: launch_p_step_launch: launching StepId=7.0 on host n2, 3 tasks: 1-3",
        b"srun: defined options",
    ]
    assert task_nodes(lines) == {0: "gpu017", 4: "gpu017", 1: "n2", 2: "n2", 3: "n2"}


def test_fleet_slurm_names_hosts_and_shows_stderr_reasons() -> None:
    info = require("slurm")
    env = {"SLURM_CONF": str(info["conf"])}
    good = run_cli("fleet", "--slurm", "--json", "--python", sys.executable, "--", "-N1", env=env)
    doc = json.loads(good.stdout)
    assert [h["name"] for h in doc["hosts"]] == [info["node"]], good.stdout + good.stderr
    # --export=NONE: the job gets no PATH, so a bare python3 is not found; the reason is on
    # slurmstepd's stderr, and the text report shows it under the node's name.
    bare = run_cli("fleet", "--slurm", "--", "-N1", "--export=NONE", env=env)
    assert bare.returncode == 2, bare.stdout + bare.stderr
    text = bare.stdout.split("Not probed", 1)[1]
    assert f"  {info['node']}: probe-failed" in text
    assert "stderr: " in text and "execve(): python3: No such file or directory" in text
