"""``fleet --slurm`` never leaves an allocation behind (issue 40 item 2), on the real Slurm of
scripts/services.

srun asks the controller for an allocation and waits while it is pending; on SIGTERM (or SIGINT)
it revokes it ("Job allocation N has been revoked"), but a srun killed outright cannot, and the
pending job stays in the queue to take its nodes later, long after archgap gave up. A job held
with ``--begin=now+1hour`` is pending for an hour: after ``--timeout`` the job must be cancelled,
not pending (squeue keeps a finished job's record for MinJobAge, 300 s by default, so its state
is read back).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

from tests.helpers import run_cli
from tests.integration.test_remote_services import require


def job_states(env: dict[str, str], name: str) -> list[str]:
    done = subprocess.run(["squeue", "-h", "-t", "all", "-n", name, "-o", "%T"], env=env,
                          capture_output=True, text=True, timeout=30, check=True)  # fmt: skip
    return done.stdout.split()


def test_a_timed_out_allocation_is_cancelled_not_left_pending() -> None:
    info = require("slurm")
    env = {**os.environ, "SLURM_CONF": str(info["conf"])}
    name = f"archgap-pending-{uuid.uuid4().hex[:8]}"
    try:
        done = run_cli("fleet", "--slurm", "--python", sys.executable, "--gpu", "T4",
                       "--timeout", "3", "--", "-N1", "--begin=now+1hour", f"--job-name={name}",
                       env={"SLURM_CONF": str(info["conf"])})  # fmt: skip
        assert "Traceback" not in done.stderr, done.stderr
        assert done.returncode == 2, done.stdout + done.stderr  # nothing answered: unreachable
        assert "srun gave no answer within 3 s" in done.stdout + done.stderr
        assert job_states(env, name) == ["CANCELLED"]
    finally:
        subprocess.run(["scancel", f"--name={name}"], env=env, timeout=30, check=False)
