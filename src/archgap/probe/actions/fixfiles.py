"""How the fix program touches a file (stdlib only, Python 3.8): every file is reached through
its directory opened once, read only when it is a regular file of a sane size, and replaced
atomically through a new, uniquely named temp file beside it.

Links: a link swapped in later cannot redirect a write (the directory is opened once); a target
that is a symbolic link, or a file reached through a link out of the directory it must stay in
(``within``), is refused; temp files get unique names and are created with
``O_EXCL|O_NOFOLLOW``, so nothing planted beside a file is ever followed or chmod'ed. A mode
written is only ever its permission bits (``& 0o777``): no setuid, setgid or sticky bit.
"""

from __future__ import annotations

import binascii
import contextlib
import errno
import hashlib
import os
import re
import signal
import stat
from typing import Iterator, Optional, Tuple

from ..environment.system import read_regular

CRASH_HOOK = "ARCHGAP_FIX_CRASH_AT"  # tests: SIGKILL this process at the Nth durable step
TMP_SUFFIX = ".archgap-tmp"
MAX_FILE_BYTES = 64 << 20  # an env file, a source file or a backup larger than this is refused
PERMISSIONS = 0o777  # the only mode bits archgap ever writes


class Refused(Exception):
    """A clear reason why nothing (more) was changed."""


class Steps:
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


def inside(path: str, root: str) -> bool:
    """Whether the absolute ``path`` names ``root`` or something below it (by name)."""
    path, root = os.path.abspath(path), os.path.abspath(root)
    return os.path.commonpath([path, root]) == root


@contextlib.contextmanager
def directory(path: str, within: Optional[str] = None) -> Iterator[Tuple[int, str]]:
    """(an fd of ``path``'s directory, the file's name there): every step acts in that one
    directory. Refused when it does not exist, or lies outside ``within`` (by name or through
    a link)."""
    parent, name = os.path.split(os.path.abspath(path))
    if within is not None and not inside(parent, within):
        raise Refused(
            "%s is outside %s, the directory it must stay in; not changed" % (path, within)
        )
    try:
        fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise Refused(
            "directory %s does not exist (not created: name an existing one)" % parent
        ) from None
    except NotADirectoryError:
        raise Refused("%s is not a directory" % parent) from None
    try:
        if within is not None:
            real, root = os.path.realpath(parent), os.path.realpath(within)
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


def read_at(fd: int, name: str, path: str) -> Optional[bytes]:
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


def read(path: str, within: Optional[str] = None) -> Optional[bytes]:
    with directory(path, within) as (fd, name):
        return read_at(fd, name, path)


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


def replace_at(
    folder: int,
    name: str,
    data: bytes,
    mode: Optional[int],
    owner: Optional[Tuple[int, int]],
    steps: Optional[Steps],
) -> None:
    """``name`` in directory ``folder`` replaced by ``data``: permission bits ``mode`` (0o644
    when None; never a setuid, setgid or sticky bit), owned by ``owner`` when this user may
    give it (root), else by this user."""
    tmp, fd = _temp_file(folder, name)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if owner is not None and owner != (os.geteuid(), os.getegid()):
            with contextlib.suppress(PermissionError):  # not root: the file becomes ours
                os.fchown(fd, owner[0], owner[1])
        os.fchmod(fd, 0o644 if mode is None else mode & PERMISSIONS)  # only our own new file
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp, dir_fd=folder)
        raise
    os.close(fd)
    if steps is not None:
        steps.done()  # a kill here leaves only the temp file, removed by the next run
    os.rename(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
    os.fsync(folder)


def check_target(fd: int, name: str, path: str) -> Optional[os.stat_result]:
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


def atomic_write(
    path: str,
    data: bytes,
    mode: Optional[int] = None,
    owner: Optional[Tuple[int, int]] = None,
    steps: Optional[Steps] = None,
    within: Optional[str] = None,
) -> None:
    """Replace ``path`` by ``data`` atomically with that mode and owner (0o644, ours: a new
    file); Refused when ``path`` is a link (``rename`` would replace the link, not its file)."""
    with directory(path, within) as (fd, name):
        check_target(fd, name, path)
        replace_at(fd, name, data, mode, owner, steps)


def unlink_in(path: str, within: Optional[str] = None) -> None:
    """Remove the entry ``path`` (never what a link there names), inside ``within``."""
    with directory(path, within) as (fd, name):
        try:
            os.unlink(name, dir_fd=fd)
        except FileNotFoundError:
            return
        os.fsync(fd)


def remove_tmp(path: str, within: Optional[str]) -> None:
    """The temp files a killed run left beside ``path`` (removing a planted link is harmless)."""
    ours = re.compile(
        r"^\.%s\.([0-9a-f]{12})?%s$" % (re.escape(os.path.basename(path)), re.escape(TMP_SUFFIX))
    )
    with contextlib.suppress(Refused), directory(path, within) as (fd, _):
        for found in os.listdir(fd):
            if ours.match(found):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(found, dir_fd=fd)
