"""The program that makes (and takes back) archgap's fixes on the target: stdlib only, Python 3.8.

It travels like the probe (``run`` with ``{"fix": {...}}``). Operations:

* ``plan``: the exact change of each requested edit (a unified diff), nothing written;
* ``apply``: the edits, each journaled before it is made; ``undo``: every journaled change,
  newest first, byte for byte; ``status``: the journal.

Safety: one run at a time (``flock`` on ``STATE/lock``). A change is made in four durable steps:
the original bytes and the new bytes go to backup files, the journal records the change as
``pending`` (with both hashes), the file is replaced atomically (a temp file in the same
directory with the original's mode and owner, ``fsync``, ``rename``, ``fsync`` of the directory),
then the record becomes ``applied``. Undo marks a record ``undoing`` before it restores. Every run
first finishes what a killed run left: a ``pending`` record whose file still has its old bytes is
dropped (rolled back), one whose file has the new bytes is completed; an ``undoing`` record is
completed. A file is only ever its old bytes or its new bytes, never half of each.

Links: every file is reached through its directory opened once (a link swapped in later cannot
redirect a write); a target that is a symbolic link, or a file reached through a link out of the
directory it must stay in (``within``: a patch's site-packages, a drop-in's unit directory), is
refused; temp files get unique names and are created with ``O_EXCL|O_NOFOLLOW``, so nothing
planted beside a file is ever followed or chmod'ed.

Edits: ``{"kind": "env-file", "path", "set": [[NAME, VALUE], ...]}`` (existing lines kept, a
changed value replaced in place, new names appended), ``{"kind": "file", "path", "content",
"within"}`` (a whole file, e.g. a systemd drop-in in the unit directory ``within``) and
``{"kind": "patch", "path", "sha256", "old", "new", "sha256_after", "within"}`` (one exact
replacement in a file whose hash must be ``sha256``, inside the directory ``within``).
"""

from __future__ import annotations

import binascii
import contextlib
import difflib
import errno
import hashlib
import json
import os
import re
import signal
import stat
import time
from typing import Any, Dict, Iterator, List, Optional, Tuple

from ..environment.system import System, hide_url_password, read_regular, shown_value

JOURNAL = "journal.json"
LOCK = "lock"
CRASH_HOOK = "ARCHGAP_FIX_CRASH_AT"  # tests: SIGKILL this process at the Nth durable step
_ENV_LINE = re.compile(r"^(\s*(?:export\s+)?)([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
TMP_SUFFIX = ".archgap-tmp"
MAX_FILE_BYTES = 64 << 20  # an env file, a source file or a backup larger than this is refused


class Refused(Exception):
    """A clear reason why nothing (more) was changed."""


class _Steps:
    """Counts durable steps; kills this process at the one CRASH_HOOK names (kill -9 trials)."""

    def __init__(self) -> None:
        raw = os.environ.get(CRASH_HOOK, "")
        self.crash_at = int(raw) if raw.isdigit() else 0
        self.count = 0

    def done(self) -> None:
        self.count += 1
        if self.crash_at and self.count == self.crash_at:
            os.kill(os.getpid(), signal.SIGKILL)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def state_dir(explicit: Optional[str] = None) -> str:
    """The target user's state directory for archgap's fixes."""
    if explicit:
        return explicit
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return os.path.join(base, "archgap", "fix")


@contextlib.contextmanager
def _directory(path: str, within: Optional[str] = None) -> Iterator[Tuple[int, str]]:
    """(an fd of ``path``'s directory, the file's name there): every step acts in that one
    directory. Refused when it does not exist, or lies outside ``within`` (through a link)."""
    directory, name = os.path.split(os.path.abspath(path))
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise Refused(
            "directory %s does not exist (not created: name an existing one)" % directory
        ) from None
    except NotADirectoryError:
        raise Refused("%s is not a directory" % directory) from None
    try:
        if within is not None:
            real, root = os.path.realpath(directory), os.path.realpath(within)
            here, there = os.fstat(fd), os.stat(real)
            if os.path.commonpath([real, root]) != root or (here.st_dev, here.st_ino) != (
                there.st_dev,
                there.st_ino,
            ):
                raise Refused(
                    "%s is reached through a symbolic link out of %s (to %s); not changed"
                    % (path, within, real)
                )
        yield fd, name
    finally:
        os.close(fd)


def _read_at(fd: int, name: str, path: str) -> Optional[bytes]:
    """The bytes of the regular file ``name`` in directory ``fd`` (None: there is none); Refused
    for a link, a FIFO or another non-file, or a file too large to be one archgap edits."""
    try:
        if os.stat(name, dir_fd=fd, follow_symlinks=False).st_size > MAX_FILE_BYTES:
            more = True  # refused unread (a sparse 100 GB file costs nothing)
        else:
            data, more = read_regular(name, MAX_FILE_BYTES, dir_fd=fd, follow=False)
    except FileNotFoundError:
        return None
    except PermissionError:
        raise Refused("%s is not readable by this user; not changed" % path) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Refused("%s is a symbolic link; name the file it points to" % path) from None
        if exc.errno == errno.EINVAL:
            raise Refused("%s is not a regular file" % path) from None
        raise
    if more:
        raise Refused("%s is larger than %d MiB; not changed" % (path, MAX_FILE_BYTES >> 20))
    return data


def _read(path: str, within: Optional[str] = None) -> Optional[bytes]:
    with _directory(path, within) as (fd, name):
        return _read_at(fd, name, path)


def _temp_file(fd: int, name: str) -> Tuple[str, int]:
    """A new temp file beside ``name`` (mkstemp's way: a random name, ``O_EXCL|O_NOFOLLOW``)."""
    for _ in range(100):
        tmp = ".%s.%s%s" % (name, binascii.hexlify(os.urandom(6)).decode(), TMP_SUFFIX)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            return tmp, os.open(tmp, flags, 0o600, dir_fd=fd)
        except FileExistsError:
            continue
    raise Refused("no free temporary name beside %s" % name)


def _replace_at(
    directory: int,
    name: str,
    data: bytes,
    mode: Optional[int],
    owner: Optional[Tuple[int, int]],
    steps: Optional[_Steps],
) -> None:
    tmp, fd = _temp_file(directory, name)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if owner is not None and owner != (os.geteuid(), os.getegid()):
            with contextlib.suppress(PermissionError):  # not root: the file becomes ours
                os.fchown(fd, owner[0], owner[1])
        os.fchmod(fd, 0o644 if mode is None else mode)  # only ever our own new file
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp, dir_fd=directory)
        raise
    os.close(fd)
    if steps is not None:
        steps.done()  # a kill here leaves only the temp file, removed by the next run
    os.rename(tmp, name, src_dir_fd=directory, dst_dir_fd=directory)
    os.fsync(directory)


def atomic_write(
    path: str,
    data: bytes,
    mode: Optional[int] = None,
    owner: Optional[Tuple[int, int]] = None,
    steps: Optional[_Steps] = None,
    within: Optional[str] = None,
) -> None:
    """Replace ``path`` by ``data`` atomically with that mode and owner (0o644, ours: a new
    file); Refused when ``path`` is a link (``rename`` would replace the link, not its file)."""
    with _directory(path, within) as (fd, name):
        _check_target(fd, name, path)
        _replace_at(fd, name, data, mode, owner, steps)


def _check_target(fd: int, name: str, path: str) -> Optional[os.stat_result]:
    """The status of ``name`` in directory ``fd`` (None: it does not exist); Refused unless it
    is a regular file."""
    try:
        found = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(found.st_mode):
        raise Refused("%s is a symbolic link; name the file it points to" % path)
    if not stat.S_ISREG(found.st_mode):
        raise Refused("%s is not a regular file" % path)
    return found


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        return
    _fsync_dir(os.path.dirname(os.path.abspath(path)))


# --- edits -------------------------------------------------------------------------------------


def _quote(value: str) -> str:
    if re.match(r"^[A-Za-z0-9_./:@%+,=-]*$", value):
        return value
    return '"%s"' % value.replace("\\", "\\\\").replace('"', '\\"')


def edit_env_text(text: str, pairs: List[Tuple[str, str]]) -> str:
    """``text`` with each NAME set to VALUE: a line that sets NAME is changed in place (its
    ``export`` kept), other lines are kept, new names are appended."""
    lines = text.splitlines(True)
    wanted = dict(pairs)
    seen = set()
    for i, line in enumerate(lines):
        match = _ENV_LINE.match(line.rstrip("\r\n"))
        if match is None or match.group(2) not in wanted:
            continue
        name = match.group(2)
        ending = line[len(line.rstrip("\r\n")) :]
        lines[i] = "%s%s=%s%s" % (match.group(1), name, _quote(wanted[name]), ending)
        seen.add(name)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    for name, value in pairs:
        if name not in seen:
            lines.append("%s=%s\n" % (name, _quote(value)))
    return "".join(lines)


def _new_bytes(edit: Dict[str, Any], old: Optional[bytes]) -> bytes:
    """What the file at edit["path"] becomes; Refused when the edit does not fit the file."""
    kind = edit.get("kind")
    path = str(edit.get("path"))
    if kind == "env-file":
        text = (old or b"").decode("utf-8", "surrogateescape")
        pairs = [(str(k), str(v)) for k, v in edit.get("set") or []]
        return edit_env_text(text, pairs).encode("utf-8", "surrogateescape")
    if kind == "file":
        return str(edit.get("content", "")).encode("utf-8")
    if kind == "patch":
        if old is None:
            raise Refused("%s does not exist; the patch is for an installed file" % path)
        if sha256(old) != edit.get("sha256"):
            if sha256(old) == edit.get("sha256_after"):
                return old  # already patched
            raise Refused(
                "%s is not the released file the patch is for (sha256 %s, expected %s)"
                % (path, sha256(old), edit.get("sha256"))
            )
        new = old.replace(str(edit["old"]).encode("utf-8"), str(edit["new"]).encode("utf-8"), 1)
        if sha256(new) != edit.get("sha256_after"):
            raise Refused("the patch of %s does not give the expected file" % path)
        return new
    raise Refused("unknown edit kind %r" % kind)


def _shown(line: str) -> str:
    """One line of a file as a diff may show it: a setting's secret-looking value hidden."""
    text = line.rstrip("\r\n")
    match = _ENV_LINE.match(text)
    if match is None:
        return hide_url_password(line)
    value = shown_value(match.group(2), match.group(3))
    return "%s%s=%s%s" % (match.group(1), match.group(2), value, line[len(text) :])


def _diff(path: str, old: Optional[bytes], new: Optional[bytes]) -> str:
    """The unified diff from ``old`` to ``new``; secret-looking values are never in it."""

    def lines(data: Optional[bytes]) -> List[str]:
        return (data or b"").decode("utf-8", "replace").splitlines(True)

    before = "/dev/null" if old is None else "a" + path
    after = "/dev/null" if new is None else "b" + path
    diff = difflib.unified_diff(lines(old), lines(new), before, after)
    return "".join(d if d.startswith("@@") else d[:1] + _shown(d[1:]) for d in diff)


def _preflight(fd: int, name: str, path: str) -> Optional[os.stat_result]:
    """Refused unless ``name`` in directory ``fd`` can be replaced atomically; its status."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.access(directory, os.W_OK):
        raise Refused("directory %s is read-only for this user" % directory)
    return _check_target(fd, name, path)


def plan(edits: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Each edit with its current and new hash and its diff; nothing is written."""
    planned: List[Dict[str, Any]] = []
    for edit in edits:
        path = os.path.abspath(str(edit.get("path")))
        try:
            with _directory(path, edit.get("within")) as (fd, name):
                _preflight(fd, name, path)
                old = _read_at(fd, name, path)
            new = _new_bytes(edit, old)
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
                "diff": _diff(path, old, new),
                "error": None,
            }
        )
    return planned


# --- the journal -------------------------------------------------------------------------------


class Journal:
    def __init__(self, directory: str, steps: _Steps) -> None:
        self.directory = directory
        self.path = os.path.join(directory, JOURNAL)
        self.steps = steps
        self.records: List[Dict[str, Any]] = []

    def load(self) -> None:
        data = _read(self.path)
        if data is None:
            self.records = []
            return
        try:
            doc = json.loads(data.decode("utf-8"))
        except ValueError as exc:
            raise Refused(
                "the journal %s is corrupt (%s); nothing was changed: inspect it or move it aside"
                % (self.path, exc)
            ) from None
        records = doc.get("changes") if isinstance(doc, dict) else None
        if not isinstance(records, list) or not all(
            isinstance(r, dict) and {"id", "path", "state", "after"} <= set(r) for r in records
        ):
            raise Refused(
                "the journal %s is not archgap's (no list of changes); nothing was changed"
                % self.path
            )
        self.records = records

    def save(self) -> None:
        body = json.dumps({"version": 1, "changes": self.records}, indent=1).encode("utf-8")
        atomic_write(self.path, body, 0o600)
        self.steps.done()

    def backup(self, record: Dict[str, Any], suffix: str) -> str:
        return os.path.join(self.directory, "%s.%s" % (record["id"], suffix))


def _remove_tmp(path: str) -> None:
    """The temp files a killed run left beside ``path`` (removing a planted link is harmless)."""
    directory, name = os.path.split(path)
    ours = re.compile(r"^\.%s\.([0-9a-f]{12})?%s$" % (re.escape(name), re.escape(TMP_SUFFIX)))
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for found in os.listdir(directory):
            if ours.match(found):
                os.unlink(os.path.join(directory, found))


def _restore(journal: Journal, record: Dict[str, Any]) -> None:
    """Put the original bytes (or the absence of the file) back; the record is then dropped."""
    path = record["path"]
    if record["before"] is None:
        _unlink(path)
    else:
        original = _read(journal.backup(record, "orig"))
        if original is None or sha256(original) != record["before"]:
            raise Refused("the backup of %s is missing or damaged; not restored" % path)
        owner = (int(record["uid"]), int(record["gid"]))
        mode = int(record["mode"])
        atomic_write(path, original, mode, owner, journal.steps, record.get("within"))
    journal.steps.done()


def _drop(journal: Journal, record: Dict[str, Any]) -> None:
    journal.records = [r for r in journal.records if r["id"] != record["id"]]
    journal.save()
    for suffix in ("orig", "new"):
        _unlink(journal.backup(record, suffix))


def _orphans(journal: Journal) -> None:
    """Backups a killed run wrote before its journal named them."""
    known = {r["id"] for r in journal.records}
    for name in os.listdir(journal.directory):
        stem, dot, suffix = name.rpartition(".")
        if dot and suffix in ("orig", "new") and stem not in known:
            os.unlink(os.path.join(journal.directory, name))


def recover(journal: Journal) -> List[str]:
    """Finish what a killed run left; returns one line per record it settled."""
    _orphans(journal)
    notes = []
    for record in list(reversed(journal.records)):
        state, path = record["state"], record["path"]
        if state == "applied":
            continue
        _remove_tmp(path)
        data = _current(record)
        now = None if data is None else sha256(data)
        if state == "pending" and now == record["before"]:
            _drop(journal, record)
            notes.append("rolled back an interrupted change of %s (file unchanged)" % path)
        elif state == "pending" and now == record["after"]:
            record["state"] = "applied"
            journal.save()
            notes.append("completed an interrupted change of %s" % path)
        elif state == "undoing" and (now == record["after"] or record.get("force")):
            _restore(journal, record)
            _drop(journal, record)
            notes.append("completed an interrupted undo of %s" % path)
        elif state == "undoing" and now == record["before"]:
            _drop(journal, record)
            notes.append("completed an interrupted undo of %s" % path)
        else:
            raise Refused(
                "%s changed while an archgap change of it was interrupted; journal %s kept, "
                "nothing else changed" % (path, journal.path)
            )
    return notes


def _apply_one(journal: Journal, edit: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    path = os.path.abspath(str(edit.get("path")))
    with _directory(path, edit.get("within")) as (fd, name):
        return _apply_in(journal, edit, fd, name, path)


def _apply_in(
    journal: Journal, edit: Dict[str, Any], fd: int, name: str, path: str
) -> Optional[Dict[str, Any]]:
    found = _preflight(fd, name, path)
    old = _read_at(fd, name, path)
    new = _new_bytes(edit, old)
    if old == new:
        return None
    record: Dict[str, Any] = {
        "id": "%d-%d-%d" % (time.time() * 1000, os.getpid(), len(journal.records)),
        "path": path,
        "kind": edit.get("kind"),
        "before": None if old is None else sha256(old),
        "after": sha256(new),
        "within": edit.get("within"),
        "mode": None if found is None else found.st_mode & 0o7777,
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
    _check_target(fd, name, path)
    _replace_at(fd, name, new, record["mode"], owner, journal.steps)
    journal.steps.done()
    record["state"] = "applied"
    journal.save()
    return {"path": path, "sha256_before": record["before"], "sha256_after": record["after"]}


def apply(journal: Journal, edits: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    for edit in edits:  # every check first: nothing is written unless every edit can be
        path = os.path.abspath(str(edit.get("path")))
        with _directory(path, edit.get("within")) as (fd, name):
            _preflight(fd, name, path)
            old = _read_at(fd, name, path)
        now = None if old is None else sha256(old)
        if "planned_sha256" in edit and now != edit["planned_sha256"]:
            raise Refused(
                "%s changed since the plan (sha256 %s, planned from %s); nothing was changed"
                % (path, now, edit["planned_sha256"])
            )
        _new_bytes(edit, old)
    done = []
    for edit in edits:
        result = _apply_one(journal, edit)
        if result is not None:
            done.append(result)
    return done


def _current(record: Dict[str, Any]) -> Optional[bytes]:
    """What a journaled file holds now; a link or a non-file there reads as its own content (a
    change since archgap's), never followed."""
    try:
        return _read(record["path"], record.get("within"))
    except Refused as exc:
        return ("<%s>\n" % exc).encode("utf-8")


def undo(journal: Journal, force: bool) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """(restored, refused): refused lists files edited since archgap changed them, with the diff
    from what archgap wrote to what is there now; then nothing is restored (unless ``force``)."""
    refused = []
    for record in reversed(journal.records):
        now = _current(record)
        if (None if now is None else sha256(now)) != record["after"]:
            written = _read(journal.backup(record, "new"))
            refused.append({"path": record["path"], "diff": _diff(record["path"], written, now)})
    if refused and not force:
        return [], refused
    restored = []
    for record in list(reversed(journal.records)):
        with _directory(record["path"], record.get("within")) as (fd, name):
            _preflight(fd, name, record["path"])
        record["state"] = "undoing"
        record["force"] = force
        journal.save()
        _restore(journal, record)
        _drop(journal, record)
        restored.append({"path": record["path"], "sha256": record["before"]})
    return restored, refused


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


def _lock(directory: str) -> int:
    import fcntl

    path = os.path.join(directory, LOCK)
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
                "another archgap fix is running on this target (lock %s)" % directory
            ) from None
        raise
    return fd


def _run(request: Dict[str, Any]) -> Dict[str, Any]:
    op = request.get("op")
    edits = [e for e in request.get("edits") or [] if isinstance(e, dict)]
    if op == "plan":
        return {"planned": plan(edits)}
    directory = os.path.abspath(state_dir(request.get("state_dir")))
    os.makedirs(directory, mode=0o700, exist_ok=True)
    fd = _lock(directory)
    try:
        journal = Journal(directory, _Steps())
        journal.load()
        out: Dict[str, Any] = {"state_dir": directory, "recovered": recover(journal)}
        if op == "apply":
            out["applied"] = apply(journal, edits)
        elif op == "upgrade":
            out["upgrade"] = upgrade(request.get("argv"), request.get("timeout"))
        elif op == "undo":
            out["restored"], out["refused"] = undo(journal, bool(request.get("force")))
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
