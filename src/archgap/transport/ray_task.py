"""The Ray task that runs the probe on one node (``archgap fleet --ray``).

Standard library only: Ray ships this module to the workers by value, so the cluster's Python
needs nothing of archgap. The task starts the probe exactly like every other transport: the
interpreter with ``-I -S -`` and the whole probe program on stdin.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys

# Stands for "the worker's own interpreter" in the payload until the task knows which it is.
WORKER_PYTHON = "__archgap_ray_worker_python__"


def probe_on_node(
    python: str | None, loader_args: list[str], payload: bytes, timeout: float
) -> tuple[int | None, str, str, str, str]:
    """(returncode or None, stdout, stderr or why not, hostname, interpreter) on this node."""
    executable = python or sys.executable
    payload = payload.replace(json.dumps(WORKER_PYTHON).encode(), json.dumps(executable).encode())
    host = socket.gethostname()
    try:
        done = subprocess.run(
            [executable, *loader_args],
            input=payload,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None, "", f"no answer within {timeout:g} s", host, executable
    except OSError as exc:
        return None, "", f"cannot run {executable}: {exc.strerror or exc}", host, executable
    out = done.stdout.decode("utf-8", "replace")
    return done.returncode, out, done.stderr.decode("utf-8", "replace"), host, executable
