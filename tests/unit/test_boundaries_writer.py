"""Branches of the fix writer that a healthy run never enters (probe/actions: fixer, journal).

The rules (probe/actions/fixer.py and journal.py docstrings, SECURITY.md): a file is restored only
from a backup that has the hash the journal recorded (else nothing is restored); a file that
differs from what the plan was made from — including one deleted since — is refused before
anything is written.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from archgap.probe.actions import fixer
from archgap.probe.actions.fixfiles import Steps
from archgap.probe.actions.journal import Journal

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


# -- recovery (journal.py): a 'pending' record is a change a killed run left half made. The file
# holding the old bytes is rolled back, the new bytes completed; anything else is a change by
# someone else since, and is refused with the journal kept and nothing written.


def interrupted(root: Path, holds: bytes | None) -> tuple[Path, dict[str, Any]]:
    root.mkdir()
    env, state, edits = setup(root)
    assert call("apply", state, edits)["error"] is None
    written = env.read_bytes()
    journal = Journal(str(state), Steps())
    journal.load()
    journal.records[0]["state"] = "pending"  # as a run killed before it marked it applied
    journal.save()
    env.write_bytes(written if holds is None else holds)
    return env, call("status", state, [])


def test_an_interrupted_change_is_settled_only_when_the_file_holds_either_version(
    tmp_path: Path,
) -> None:
    env, done = interrupted(tmp_path / "new", None)
    assert done["error"] is None
    assert done["recovered"] == [f"completed an interrupted change of {env}"]
    env, back = interrupted(tmp_path / "old", ORIGINAL)
    assert back["recovered"] == [f"rolled back an interrupted change of {env} (file unchanged)"]
    env, other = interrupted(tmp_path / "other", b"CUDA_HOME=/opt/someone-elses\n")
    assert "changed while an archgap change of it was interrupted" in (other["error"] or "")
    assert env.read_bytes() == b"CUDA_HOME=/opt/someone-elses\n"


def test_undo_keeps_only_the_owner_it_recorded(tmp_path: Path) -> None:
    """journal.py: a restored file keeps the owner it has only when that is the owner archgap
    recorded reading it; a file given to someone else since is restored as the writer's own,
    never handed to that other owner. Only root can give a file to another user (elsewhere the
    owners are all ours and the case is the kept one)."""
    root = os.geteuid() == 0
    env, state, edits = setup(tmp_path)
    mine = (os.geteuid(), os.getegid())
    recorded, other = ((4242, 4343), (5252, 5353)) if root else (mine, None)
    os.chown(env, *recorded)
    assert call("apply", state, edits)["error"] is None
    assert call("undo", state, [])["error"] is None
    assert (env.stat().st_uid, env.stat().st_gid) == recorded  # the owner it recorded: kept
    assert env.read_bytes() == ORIGINAL
    if other is not None:
        assert call("apply", state, edits)["error"] is None
        os.chown(env, *other)
        assert call("undo", state, [])["error"] is None
        assert env.read_bytes() == ORIGINAL
        assert (env.stat().st_uid, env.stat().st_gid) == mine
