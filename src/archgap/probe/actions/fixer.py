"""The program that makes (and takes back) archgap's fixes on the target: stdlib only, Python 3.8.

It travels like the probe (``run`` with ``{"fix": {...}}``). Operations:

* ``plan``: the exact change of each requested edit (a unified diff; for an env file only the
  lines it adds or changes), nothing written;
* ``apply``: the edits, each journaled before it is made; ``undo``: every journaled change
  (``only``: those of the named files and inside the named directories), newest first, byte
  for byte; ``status``: the journal.

Safety: one run at a time (``flock`` on ``STATE/lock``). A change is made in four durable steps:
the original bytes and the new bytes go to backup files, the journal records the change as
``pending`` (with both hashes and the directory it stays in), the file is replaced atomically
(a temp file in the same directory with the original's permission bits and owner, ``fsync``,
``rename``, ``fsync`` of the directory), then the record becomes ``applied``. Undo marks a
record ``undoing`` before it restores. Every run first finishes what a killed run left
(journal.py), from a journal it has authenticated: the state directory, the journal, its key
and the backups must be the effective user's own. A file is only ever its old bytes or its new
bytes, never half of each. How files are reached (links, temp files): fixfiles.py.

Edits: ``{"kind": "env-file", "path", "set": [[NAME, VALUE], ...]}`` (existing lines kept, a
changed value replaced in place, new names appended; a file that is not an env file is refused:
envedit.py), ``{"kind": "file", "path", "content", "within"}`` (a whole file, e.g. a systemd
drop-in in the unit directory ``within``) and ``{"kind": "patch", "path", "sha256", "old",
"new", "sha256_after", "within"}`` (one exact replacement in a file whose hash must be
``sha256``, inside the directory ``within``). An edit without ``within`` stays in its file's
directory; every journal record carries the one it was made under.
"""

from __future__ import annotations

import errno
import os
import time
from typing import Any, Dict, List, Optional

from ..environment.system import System
from .envedit import context_of, diff, edit_env_text, new_bytes
from .fixfiles import (
    CRASH_HOOK,
    PERMISSIONS,
    Refused,
    Steps,
    atomic_write,
    check_target,
    directory,
    read_at,
    replace_at,
    sha256,
)
from .journal import JOURNAL, Journal, check_state_dir, recover, selection, undo

__all__ = ["CRASH_HOOK", "JOURNAL", "Refused", "atomic_write", "edit_env_text", "plan", "run"]

LOCK = "lock"


def state_dir(explicit: Optional[str] = None) -> str:
    """The target user's state directory for archgap's fixes."""
    if explicit:
        return explicit
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return os.path.join(base, "archgap", "fix")


def _within(edit: Dict[str, Any]) -> str:
    """The directory an edit's file must stay in: the one the plan named, else its own."""
    within = edit.get("within")
    if isinstance(within, str) and within:
        return os.path.abspath(within)
    return os.path.dirname(os.path.abspath(str(edit.get("path"))))


def _preflight(fd: int, name: str, path: str) -> Optional[os.stat_result]:
    """Refused unless ``name`` in directory ``fd`` can be replaced atomically; its status."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.access(folder, os.W_OK):
        raise Refused("directory %s is read-only for this user" % folder)
    return check_target(fd, name, path)


def plan(edits: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Each edit with its current and new hash and its diff; nothing is written."""
    planned: List[Dict[str, Any]] = []
    for edit in edits:
        path = os.path.abspath(str(edit.get("path")))
        try:
            with directory(path, _within(edit)) as (fd, name):
                _preflight(fd, name, path)
                old = read_at(fd, name, path)
            new = new_bytes(edit, old)
        except (Refused, OSError) as exc:
            planned.append({"path": path, "kind": edit.get("kind"), "error": str(exc)})
            continue
        planned.append(
            {
                "path": path,
                "kind": edit.get("kind"),
                "exists": old is not None,
                "sha256_before": None if old is None else sha256(old),
                "sha256_after": sha256(new),
                "changes": old != new,
                "diff": diff(path, old, new, context_of(edit.get("kind"))),
                "error": None,
            }
        )
    return planned


def _apply_one(journal: Journal, edit: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    path = os.path.abspath(str(edit.get("path")))
    within = _within(edit)
    with directory(path, within) as (fd, name):
        found = _preflight(fd, name, path)
        old = read_at(fd, name, path)
        new = new_bytes(edit, old)
        if old == new:
            return None
        record: Dict[str, Any] = {
            "id": "%d-%d-%d" % (time.time() * 1000, os.getpid(), len(journal.records)),
            "path": path,
            "kind": edit.get("kind"),
            "before": None if old is None else sha256(old),
            "after": sha256(new),
            "within": within,
            "mode": None if found is None else found.st_mode & PERMISSIONS,
            "uid": None if found is None else found.st_uid,
            "gid": None if found is None else found.st_gid,
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "state": "pending",
        }
        if old is not None:
            atomic_write(journal.backup(record, "orig"), old, 0o600)
        atomic_write(journal.backup(record, "new"), new, 0o600)
        journal.steps.done()
        journal.records.append(record)
        journal.save()
        owner = None if found is None else (found.st_uid, found.st_gid)
        check_target(fd, name, path)
        replace_at(fd, name, new, record["mode"], owner, journal.steps)
    journal.steps.done()
    record["state"] = "applied"
    journal.save()
    return {"path": path, "sha256_before": record["before"], "sha256_after": record["after"]}


def apply(journal: Journal, edits: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    for edit in edits:  # every check first: nothing is written unless every edit can be
        path = os.path.abspath(str(edit.get("path")))
        with directory(path, _within(edit)) as (fd, name):
            _preflight(fd, name, path)
            old = read_at(fd, name, path)
        now = None if old is None else sha256(old)
        if "planned_sha256" in edit and now != edit["planned_sha256"]:
            raise Refused(
                "%s changed since the plan (sha256 %s, planned from %s); nothing was changed"
                % (path, now, edit["planned_sha256"])
            )
        new_bytes(edit, old)
    done = []
    for edit in edits:
        result = _apply_one(journal, edit)
        if result is not None:
            done.append(result)
    return done


def upgrade(argv: Any, timeout: Any) -> Dict[str, Any]:
    """Run the upgrade command (``PYTHON -m pip install SPEC``): not journaled, since pip
    replaces whole packages; its exit status and the tail of its output are returned."""
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise Refused("the upgrade command must be a list of strings")
    limit = float(timeout) if isinstance(timeout, (int, float)) else 600.0
    # The probe's one command runner: a timeout also reaches pip's setsid'd descendants.
    done = System(timeout=limit).run(argv, timeout=limit)
    if done.returncode is None:
        return {"argv": argv, "returncode": None, "output": done.error or "did not run"}
    output = (done.stdout + done.stderr).strip().splitlines()[-20:]
    return {"argv": argv, "returncode": done.returncode, "output": "\n".join(output)}


# --- the entry point ---------------------------------------------------------------------------


def _lock(folder: str) -> int:
    import fcntl

    path = os.path.join(folder, LOCK)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Refused(
                "%s is a symbolic link; archgap's state is never reached through one" % path
            ) from None
        raise
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            raise Refused(
                "another archgap fix is running on this target (lock %s)" % folder
            ) from None
        raise
    return fd


def _run(request: Dict[str, Any]) -> Dict[str, Any]:
    op = request.get("op")
    edits = [e for e in request.get("edits") or [] if isinstance(e, dict)]
    if op == "plan":
        return {"planned": plan(edits)}
    folder = os.path.abspath(state_dir(request.get("state_dir")))
    os.makedirs(folder, mode=0o700, exist_ok=True)
    check_state_dir(folder)  # before the lock file is made in it
    fd = _lock(folder)
    try:
        journal = Journal(folder, Steps())
        journal.load()
        out: Dict[str, Any] = {"state_dir": folder, "recovered": recover(journal)}
        if op == "apply":
            out["applied"] = apply(journal, edits)
        elif op == "upgrade":
            out["upgrade"] = upgrade(request.get("argv"), request.get("timeout"))
        elif op == "undo":
            only = selection(request.get("only"))
            out["restored"], out["refused"] = undo(journal, bool(request.get("force")), only)
            out["kept"] = sorted(set(journal.kept))
        elif op != "status":
            raise Refused("unknown operation %r" % op)
        out["journal"] = [
            {k: r.get(k) for k in ("path", "kind", "before", "after", "when", "state")}
            for r in journal.records
        ]
        return out
    finally:
        os.close(fd)


def run(request: Any) -> Dict[str, Any]:
    """One fix operation; never raises: a refusal or an OS error is ``{"error": reason}``."""
    if not isinstance(request, dict):
        return {"fixer": {"error": "the fix request must be an object"}}
    try:
        result = _run(request)
    except Refused as exc:
        return {"fixer": {"error": str(exc)}}
    except OSError as exc:
        where = " (%s)" % exc.filename if exc.filename else ""
        return {
            "fixer": {
                "error": "%s%s; the journal records what was done" % (exc.strerror or exc, where)
            }
        }
    result["error"] = None
    return {"fixer": result}
