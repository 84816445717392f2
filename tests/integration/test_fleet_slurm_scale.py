"""``fleet --slurm`` at 1,000 nodes, through a stand-in srun (tests/fixtures/slurm/srun) that runs
the real probe once and replays its answer as srun's ``--label`` output for every task.

Each node's answer is capped on its own, never all of them together: 1,000 nodes of FlashInfer
0.6.8's facts plus one node that prints 65 MiB (more than the per-node cap) are read, the big one
reported alone as a failed probe.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers import json_output, run_cli
from tests.toolkit_stubs import venv_python

STANDIN = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"


def test_a_thousand_nodes_and_one_that_answers_too_much() -> None:
    python = venv_python("venv-flashinfer-python-0.6.8")
    if not python.exists():
        pytest.skip("scripts/testdata has not installed the flashinfer wheels")
    env = {"PATH": f"{STANDIN}:{os.environ['PATH']}", "SRUN_STANDIN_HUGE_TASK": "999"}
    done = run_cli("fleet", "--json", "--slurm", "--python", str(python), "--gpu", "12.0",
                   "--", "-N1000", env=env, timeout=300)  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    doc = json_output(done, "fleet")
    names = sorted(h["name"] for h in doc["hosts"])
    assert names == [f"gpu{n:04d}" for n in range(999)]
    ((unreachable),) = doc["unreachable"]
    assert unreachable["name"] == "task 999" and "more than" in unreachable["message"]
    assert [g["size"] for g in doc["groups"]] == [999]  # identical nodes: one group
