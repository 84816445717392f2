"""The fix journal: what archgap changed, so that ``fix --undo`` (and a run after a killed one)
can take it back. Stdlib only, Python 3.8.

The journal is the user's own, and nothing else is believed. A state directory, journal, key or
backup that is not owned by the effective user, or is writable by group or others, is refused
(anyone who can write it could have forged it). The journal carries an HMAC-SHA256 over its
canonical JSON, keyed by ``STATE/key`` (32 random bytes, mode 0600, created on the first change
with ``O_EXCL|O_NOFOLLOW``): a journal copied from elsewhere, edited, or whose key is missing is
refused with the reason, and nothing of it is recovered or undone. Every record carries the
directory it was written under (``within``: an env file's directory, a drop-in's unit directory,
a patch's site-packages); undo and recovery write and unlink only inside it, a record without one
is refused. A file is restored with its permission bits only (never setuid, setgid or sticky),
and keeps the owner it has, only when that is the owner archgap recorded reading it.

Recovery: a ``pending`` record whose file still has its old bytes is dropped (rolled back), one
whose file has the new bytes is completed; an ``undoing`` record is completed.
"""

from __future__ import annotations

import binascii
import hmac
import json
import os
import re
import stat
from typing import Any, Dict, List, Optional, Tuple

from .envedit import context_of, diff
from .fixfiles import (
    PERMISSIONS,
    Refused,
    Steps,
    atomic_write,
    check_target,
    directory,
    inside,
    read,
    read_at,
    remove_tmp,
    replace_at,
    sha256,
    unlink_in,
)

JOURNAL = "journal.json"
KEY = "key"
VERSION = 2
_ID = re.compile(r"^[0-9]+-[0-9]+-[0-9]+$")
_HEX_KEY = re.compile(rb"^[0-9a-f]{64}$")
_TRUST = "archgap trusts only its own fix state; nothing was changed"


def check_owned(found: os.stat_result, path: str, what: str, private: bool = False) -> None:
    """Refused unless ``path`` (status ``found``) is the effective user's and writable by no
    one else (``private``: readable by no one else either)."""
    uid = os.geteuid()
    if found.st_uid != uid:
        raise Refused(
            "%s %s is owned by uid %d, not by this user (uid %d): %s"
            % (what, path, found.st_uid, uid, _TRUST)
        )
    mode = stat.S_IMODE(found.st_mode)
    if mode & (0o077 if private else 0o022):
        others = "group or others" if private else "its group or others"
        raise Refused(
            "%s %s is %s by %s (mode %04o): %s"
            % (what, path, "readable or writable" if private else "writable", others, mode, _TRUST)
        )


def check_state_dir(path: str) -> None:
    check_owned(os.stat(path), path, "the state directory")


def read_owned(path: str, what: str, private: bool = False) -> Optional[bytes]:
    """The bytes of ``path`` (None: it does not exist), refused unless this user's own."""
    with directory(path) as (fd, name):
        try:
            found = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(found.st_mode):
            raise Refused("%s %s is a symbolic link; %s" % (what, path, _TRUST))
        check_owned(found, path, what, private)
        return read_at(fd, name, path)


def _canonical(records: List[Dict[str, Any]]) -> bytes:
    doc = {"version": VERSION, "changes": records}
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def _checked(record: Dict[str, Any], where: str) -> None:
    """Refused unless an authenticated ``record`` is also well formed: an id, an absolute path
    inside its containment root, a mode and owner that are numbers."""
    path, within = record.get("path"), record.get("within")
    if not isinstance(within, str) or not os.path.isabs(within):
        raise Refused(
            "a change of %r in %s carries no directory it was made in (within); not undone"
            % (path, where)
        )
    if not isinstance(path, str) or not os.path.isabs(path) or not inside(path, within):
        raise Refused("a change in %s names %r, outside %s; not undone" % (where, path, within))
    if not _ID.match(str(record.get("id"))):
        raise Refused("a change of %s in %s has a malformed id; not undone" % (path, where))
    for key in ("mode", "uid", "gid"):
        if record.get(key) is not None and not isinstance(record.get(key), int):
            raise Refused(
                "a change of %s in %s has a malformed %s; not undone" % (path, where, key)
            )


class Journal:
    def __init__(self, folder: str, steps: Steps) -> None:
        self.directory = folder
        self.path = os.path.join(folder, JOURNAL)
        self.key_path = os.path.join(folder, KEY)
        self.steps = steps
        self.records: List[Dict[str, Any]] = []
        self.kept: List[str] = []  # the changes an undo left: not of the target it named
        self._key: Optional[bytes] = None

    def key(self, create: bool) -> Optional[bytes]:
        """The journal's key (None: there is none and ``create`` is False)."""
        if self._key is not None:
            return self._key
        data = read_owned(self.key_path, "the journal key", private=True)
        if data is not None and not data.strip() and create:
            os.unlink(self.key_path)  # a run killed while it wrote the key, before any change
            data = None
        if data is not None and not _HEX_KEY.match(data.strip()):
            raise Refused("the journal key %s is not archgap's; %s" % (self.key_path, _TRUST))
        if data is None and create:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(self.key_path, flags, 0o600)
            try:
                data = binascii.hexlify(os.urandom(32))
                os.write(fd, data + b"\n")
                os.fsync(fd)
            finally:
                os.close(fd)
        self._key = None if data is None else binascii.unhexlify(data.strip())
        return self._key

    def _mac(self, key: bytes) -> str:
        return hmac.new(key, _canonical(self.records), "sha256").hexdigest()

    def load(self) -> None:
        check_state_dir(self.directory)
        data = read_owned(self.path, "the journal")
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
        if records:
            self._authenticate(doc.get("mac"))
        for record in records:
            _checked(record, self.path)

    def _authenticate(self, mac: Any) -> None:
        key = self.key(create=False)
        if key is None:
            raise Refused(
                "the journal %s has changes but this state directory has no key (%s) to "
                "authenticate them (a journal copied from elsewhere?); %s"
                % (self.path, self.key_path, _TRUST)
            )
        if not isinstance(mac, str) or not hmac.compare_digest(mac, self._mac(key)):
            raise Refused(
                "the journal %s is not authenticated by this state directory's key (edited, "
                "copied from elsewhere, or written before journals were signed): none of its "
                "changes is undone or recovered; restore by hand from its backups or move it "
                "aside; nothing was changed" % self.path
            )

    def save(self) -> None:
        key = self.key(create=True)
        assert key is not None
        doc = {"version": VERSION, "changes": self.records, "mac": self._mac(key)}
        atomic_write(self.path, json.dumps(doc, indent=1).encode("utf-8"), 0o600)
        self.steps.done()

    def backup(self, record: Dict[str, Any], suffix: str) -> str:
        return os.path.join(self.directory, "%s.%s" % (record["id"], suffix))

    def read_backup(self, record: Dict[str, Any], suffix: str) -> Optional[bytes]:
        return read_owned(self.backup(record, suffix), "the backup")


def _backup_of(journal: Journal, record: Dict[str, Any]) -> bytes:
    """The original bytes of a journaled file (b"": it did not exist), from a backup that is
    this user's own and has the recorded hash."""
    if record["before"] is None:
        return b""
    original = journal.read_backup(record, "orig")
    if original is None or sha256(original) != record["before"]:
        raise Refused("the backup of %s is missing or damaged; not restored" % record["path"])
    return original


def restore(journal: Journal, record: Dict[str, Any]) -> None:
    """Put the original bytes (or the absence of the file) back, inside the record's ``within``;
    the record is then dropped."""
    path, within = record["path"], record["within"]
    if record["before"] is None:
        unlink_in(path, within)
    else:
        original = _backup_of(journal, record)
        recorded = (record.get("uid"), record.get("gid"))
        mode = record.get("mode")
        with directory(path, within) as (fd, name):
            found = check_target(fd, name, path)
            # The owner the file has, only when it is the one archgap read: never another.
            owner = None
            if found is not None and (found.st_uid, found.st_gid) == recorded:
                owner = (found.st_uid, found.st_gid)
            permissions = None if mode is None else int(mode) & PERMISSIONS
            replace_at(fd, name, original, permissions, owner, journal.steps)
    journal.steps.done()


def drop(journal: Journal, record: Dict[str, Any]) -> None:
    journal.records = [r for r in journal.records if r["id"] != record["id"]]
    journal.save()
    for suffix in ("orig", "new"):
        unlink_in(journal.backup(record, suffix), journal.directory)


def _orphans(journal: Journal) -> None:
    """Backups a killed run wrote before its journal named them."""
    known = {r["id"] for r in journal.records}
    for name in os.listdir(journal.directory):
        stem, dot, suffix = name.rpartition(".")
        if dot and suffix in ("orig", "new") and stem not in known:
            os.unlink(os.path.join(journal.directory, name))


def current(record: Dict[str, Any]) -> Optional[bytes]:
    """What a journaled file holds now; a link or a non-file there reads as its own content (a
    change since archgap's), never followed."""
    try:
        return read(record["path"], record["within"])
    except Refused as exc:
        return ("<%s>\n" % exc).encode("utf-8")


def recover(journal: Journal) -> List[str]:
    """Finish what a killed run left (the journal authenticated by ``load``); one line per
    record it settled."""
    _orphans(journal)
    notes = []
    for record in list(reversed(journal.records)):
        state, path = record["state"], record["path"]
        if state == "applied":
            continue
        remove_tmp(path, record["within"])
        data = current(record)
        now = None if data is None else sha256(data)
        if state == "pending" and now == record["before"]:
            drop(journal, record)
            notes.append("rolled back an interrupted change of %s (file unchanged)" % path)
        elif state == "pending" and now == record["after"]:
            record["state"] = "applied"
            journal.save()
            notes.append("completed an interrupted change of %s" % path)
        elif state == "undoing" and (now == record["after"] or record.get("force")):
            restore(journal, record)
            drop(journal, record)
            notes.append("completed an interrupted undo of %s" % path)
        elif state == "undoing" and now == record["before"]:
            drop(journal, record)
            notes.append("completed an interrupted undo of %s" % path)
        else:
            raise Refused(
                "%s changed while an archgap change of it was interrupted; journal %s kept, "
                "nothing else changed" % (path, journal.path)
            )
    return notes


def _writable(path: str, within: str) -> None:
    with directory(path, within) as (fd, name):
        if not os.access(os.path.dirname(os.path.abspath(path)), os.W_OK):
            raise Refused("directory %s is read-only for this user" % os.path.dirname(path))
        check_target(fd, name, path)


def _named(path: str, names: Tuple[List[str], List[str]]) -> bool:
    """Whether ``path`` is one of the named files or lies in one of the named directories
    (compared by name and by where links lead)."""
    roots, files = names
    for form in (os.path.abspath, os.path.realpath):
        here = form(path)
        if any(here == form(f) for f in files) or any(inside(here, form(r)) for r in roots):
            return True
    return False


def selection(only: Any) -> Optional[Tuple[List[str], List[str]]]:
    """The (roots, files) an undo request names (``{"roots": [...], "paths": [...]}``); None:
    every change. Anything else than lists of absolute or relative path strings is refused."""
    if only is None:
        return None
    if not isinstance(only, dict):
        raise Refused("what to undo must be an object of roots and paths")
    found = []
    for key in ("roots", "paths"):
        items = only.get(key) or []
        if not isinstance(items, list) or not all(isinstance(i, str) and i for i in items):
            raise Refused("what to undo: %s must be a list of paths" % key)
        found.append([os.path.abspath(i) for i in items])
    return found[0], found[1]


def undo(
    journal: Journal, force: bool, only: Optional[Tuple[List[str], List[str]]] = None
) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """(restored, refused): refused lists files edited since archgap changed them, with the diff
    from what archgap wrote to what is there now; then nothing is restored (unless ``force``).
    ``only`` (roots, files): only the changes of those files or inside those directories (the
    target ``fix --undo`` names); the others stay journaled."""
    chosen = [r for r in journal.records if only is None or _named(r["path"], only)]
    journal.kept = [r["path"] for r in journal.records if r not in chosen]
    refused = []
    for record in reversed(chosen):
        _backup_of(journal, record)  # every backup trusted before anything is restored
        now = current(record)
        if (None if now is None else sha256(now)) != record["after"]:
            written = journal.read_backup(record, "new")
            shown = diff(record["path"], written, now, context_of(record.get("kind")))
            refused.append({"path": record["path"], "diff": shown})
    if refused and not force:
        return [], refused
    restored = []
    for record in list(reversed(chosen)):
        _writable(record["path"], record["within"])
        record["state"] = "undoing"
        record["force"] = force
        journal.save()
        restore(journal, record)
        drop(journal, record)
        restored.append({"path": record["path"], "sha256": record["before"]})
    return restored, refused
