"""Branches of the fix writer that a healthy run never enters (probe/actions: fixer, journal).

The rules (probe/actions/fixer.py and journal.py docstrings, SECURITY.md): a file is restored only
from a backup that has the hash the journal recorded (else nothing is restored); a file that
differs from what the plan was made from — including one deleted since — is refused before
anything is written.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from archgap.probe.actions import fixer

ORIGINAL = b"# app\nCUDA_HOME=/usr/local/cuda-12.8\n"


def call(op: str, state: Path, edits: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    request = {"op": op, "edits": edits, "state_dir": str(state), **extra}
    answer: dict[str, Any] = fixer.run(request)["fixer"]
    return answer


def setup(tmp_path: Path) -> tuple[Path, Path, list[dict[str, Any]]]:
    env = tmp_path / "etc" / "app.env"
    env.parent.mkdir()
    env.write_bytes(ORIGINAL)
    edits = [
        {"kind": "env-file", "path": str(env), "set": [["FLASHINFER_CUDA_ARCH_LIST", "12.0a"]]}
    ]
    return env, tmp_path / "state", edits


def test_a_damaged_backup_is_never_restored(tmp_path: Path) -> None:
    env, state, edits = setup(tmp_path)
    assert call("apply", state, edits)["error"] is None
    written = env.read_bytes()
    (backup,) = state.glob("*.orig")
    backup.write_bytes(b"CUDA_HOME=/tmp/evil\n")  # same owner and mode, other bytes
    result = call("undo", state, [], force=True)
    assert "missing or damaged" in (result["error"] or "")
    assert env.read_bytes() == written  # nothing restored


def test_a_file_deleted_since_the_plan_is_refused(tmp_path: Path) -> None:
    env, state, edits = setup(tmp_path)
    edits[0]["planned_sha256"] = hashlib.sha256(ORIGINAL).hexdigest()
    env.unlink()
    assert "changed since the plan" in (call("apply", state, edits)["error"] or "")
    assert not env.exists()
