"""Access to the target system: one root prefix for its files, and commands with timeouts.

Every system path (``/proc``, ``/usr/local/cuda*``, ``/dev``) is read through ``System.path`` so a
test can hand the probe a recorded tree; every command goes through ``System.run``, which never
hangs longer than its timeout (``nvidia-smi`` blocks when a GPU falls off the bus).
"""

from __future__ import annotations

import contextlib
import errno
import os
import selectors
import signal
import stat
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple

from .envvars import allowlisted, env_allowed

DEFAULT_TIMEOUT = 10.0
KILL_GRACE = 2.0  # seconds to reap a killed command before abandoning it
OUTPUT_LIMIT = 16 << 20  # bytes of a command's stdout kept; past it the command is stopped
STDERR_LIMIT = 256 << 10  # bytes of its stderr kept (the rest is read and dropped)
# Every command archgap starts carries this variable (a fresh value per command): at a timeout,
# the processes that hold it are that command's descendants even when they called setsid or
# were re-parented, and are killed with it.
RUN_MARK = "ARCHGAP_RUN"


def read_regular(
    path: str, limit: int, dir_fd: Optional[int] = None, follow: bool = True
) -> Tuple[bytes, bool]:
    """(up to ``limit`` bytes of the regular file ``path``, whether there was more).

    Opened without blocking (a FIFO never waits for a writer) and checked with fstat before any
    read: a FIFO, device, socket or directory raises OSError "not a regular file". With
    ``follow`` False a symbolic link raises OSError ELOOP; ``dir_fd`` as in ``os.open``."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        flags |= os.O_NOFOLLOW
    fd = os.open(path, flags, dir_fd=dir_fd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        chunks: List[bytes] = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    return data[:limit], len(data) > limit


def descendants(root_pid: int) -> Set[int]:
    """The processes below ``root_pid`` (through /proc's parent links) that have not exited
    (zombies waiting to be reaped are left out)."""
    children: Dict[int, List[int]] = {}
    for name in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if name.isdigit():
            try:
                with open("/proc/%s/stat" % name, "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[0] not in (b"Z", b"X"):
                children.setdefault(int(fields[1]), []).append(int(name))
    found: Set[int] = set()
    todo = [root_pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def marked(mark: str) -> Set[int]:
    """The processes whose environment holds ``mark`` (``NAME=VALUE``), this one excepted."""
    needle = mark.encode()
    return {
        int(name)
        for name in (os.listdir("/proc") if os.path.isdir("/proc") and needle else ())
        if name.isdigit() and int(name) != os.getpid() and _marked(int(name), needle)
    }


def _marked(pid: int, mark: bytes) -> bool:
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            return mark in f.read(1 << 20).split(b"\0")
    except OSError:
        return False


def _stat_fields(pid: str) -> Optional[List[bytes]]:
    """The fields of /proc/PID/stat after the command name (state, ppid, pgrp, session, ...)."""
    try:
        with open("/proc/%s/stat" % pid, "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def leftovers(group: int, mark: str) -> Set[int]:
    """The live processes (zombies left out) in process group or session ``group``, or whose
    environment holds ``mark``: what a command started in a session of its own left behind.
    Called once the command's leader is reaped: Linux hands out no process id that is still a
    group's or session's, so a member left over keeps ``group`` its own."""
    found: Set[int] = set()
    needle = mark.encode()
    for name in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not name.isdigit() or int(name) == os.getpid():
            continue
        fields = _stat_fields(name)
        if fields is None or len(fields) < 4 or fields[0] in (b"Z", b"X"):
            continue
        if group in (int(fields[2]), int(fields[3])) or (needle and _marked(int(name), needle)):
            found.add(int(name))
    return found


def _gone(pid: int) -> bool:
    fields = _stat_fields(str(pid))
    return fields is None or fields[0] in (b"Z", b"X")


def reap_leftovers(group: int, mark: str, grace: float = KILL_GRACE) -> int:
    """Kill what ``leftovers`` finds (again while it finds new ones: a dying process may have
    just forked) and wait up to ``grace`` seconds for each to be gone (dead, or a zombie for its
    new parent to reap): a daemon that ``nvcc --version`` started does not outlive it, in the
    command's group or setsid'd (it still carries RUN_MARK). One that also cleared its
    environment is out of reach without cgroups. A process that cannot die (stuck in a driver)
    is left after ``grace``. Returns how many were killed."""
    if group <= 1 or group == os.getpgrp():
        return 0
    killed: Set[int] = set()
    found = leftovers(group, mark)
    while found - killed:  # a second look only where the first found something
        for pid in found - killed:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            killed.add(pid)
        found = leftovers(group, mark) if len(killed) < 4096 else set()
    deadline = time.monotonic() + grace
    while any(not _gone(pid) for pid in killed) and time.monotonic() < deadline:
        time.sleep(0.005)
    return len(killed)


def sweep(root_pid: int, mark: str) -> int:
    """Kill ``root_pid``'s descendants and every process that carries ``mark`` in its
    environment (those that called setsid or were re-parented); returns how many were sent a
    signal. Two rounds catch what a dying parent started in between."""
    killed: Set[int] = set()
    for _round in range(2):
        found = descendants(root_pid) | {root_pid}
        if "=" in mark:
            found |= marked(mark)
        targets = found - killed - {os.getpid()}
        for pid in targets:  # all stopped first: none runs on after another's death (a shell
            with contextlib.suppress(OSError):  # whose `wait` returned when its child died)
                os.kill(pid, signal.SIGSTOP)
        for pid in targets:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
    return len(killed)


def new_mark() -> str:
    """``NAME=VALUE`` of the environment variable that marks one command's processes."""
    return "%s=%s" % (RUN_MARK, uuid.uuid4().hex)


def _feed(fd: int, pending: memoryview) -> memoryview:
    """Write what the pipe takes now of ``pending``; returns the rest (empty once done or once
    the command closed its stdin)."""
    try:
        return pending[os.write(fd, pending[: 1 << 16]) :]
    except BlockingIOError:
        return pending
    except OSError:  # EPIPE: the command does not read its input
        return pending[:0]


def spawn(argv: Sequence[str], env: Dict[str, str], stdin: bool = False) -> subprocess.Popen[bytes]:
    """A command in a session of its own (so that a timeout can stop its whole group), its
    stdout and stderr piped, its stdin piped with ``stdin`` (else /dev/null). Raises what
    Popen raises (OSError) when it cannot start."""
    return subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )


def communicate(
    proc: subprocess.Popen[bytes],
    stdin: bytes,
    timeout: float,
    limit: int = OUTPUT_LIMIT,
) -> Tuple[bytes, bytes, Optional[str]]:
    """(stdout, stderr, None), or what was read and why it stopped: "timeout", or "output over
    N bytes" once stdout passes ``limit`` (the command is then stopped). Stderr keeps its first
    ``STDERR_LIMIT`` bytes; the rest is read and dropped, so no output costs unbounded memory."""
    deadline = time.monotonic() + timeout
    kept: Dict[int, List[bytes]] = {}
    sizes: Dict[int, int] = {}
    pending = memoryview(stdin)
    with selectors.DefaultSelector() as selector:
        _register(selector, proc, kept, sizes)
        out_fd = proc.stdout.fileno() if proc.stdout is not None else -1
        stopped: Optional[str] = None
        while selector.get_map() and stopped is None:
            remaining = deadline - time.monotonic()
            events = selector.select(remaining) if remaining > 0 else []
            if not events and remaining <= 0:
                stopped = "timeout"
            for key, _events in events:
                if key.fileobj is proc.stdin:
                    pending = _feed(key.fd, pending)
                    chunk = b"" if not pending else b"more"
                else:
                    chunk = _read(key.fd, kept, sizes, out_fd)
                if not chunk:
                    _unregister(selector, key, proc)
                elif key.fd == out_fd and sizes[out_fd] > limit:
                    stopped = "output over %d bytes" % limit
    out = b"".join(kept.get(out_fd, []))
    err = b"".join(kept[proc.stderr.fileno()]) if proc.stderr is not None else b""
    return out, err, stopped or _wait(proc, deadline)


def _register(
    selector: selectors.BaseSelector,
    proc: subprocess.Popen[bytes],
    kept: Dict[int, List[bytes]],
    sizes: Dict[int, int],
) -> None:
    """Watch the command's stdin (made non-blocking) for writing, its stdout and stderr for
    reading (each with no bytes kept yet)."""
    if proc.stdin is not None:
        os.set_blocking(proc.stdin.fileno(), False)
        selector.register(proc.stdin, selectors.EVENT_WRITE)
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            selector.register(pipe, selectors.EVENT_READ)
            kept[pipe.fileno()], sizes[pipe.fileno()] = [], 0


def _unregister(
    selector: selectors.BaseSelector, key: selectors.SelectorKey, proc: subprocess.Popen[bytes]
) -> None:
    """Stop watching a pipe that is done: stdin all fed (then closed), or an output at EOF."""
    selector.unregister(key.fileobj)
    if key.fileobj is proc.stdin:
        proc.stdin.close()


def _read(fd: int, kept: Dict[int, List[bytes]], sizes: Dict[int, int], out_fd: int) -> bytes:
    """A chunk of what ``fd`` holds, counted and kept (stderr's only up to STDERR_LIMIT)."""
    chunk = os.read(fd, 1 << 16)
    sizes[fd] += len(chunk)
    if fd == out_fd or sizes[fd] <= STDERR_LIMIT:
        kept[fd].append(chunk)
    return chunk


def _wait(proc: subprocess.Popen[bytes], deadline: float) -> Optional[str]:
    """Wait for the command to exit until ``deadline``: None, or "timeout"."""
    try:
        proc.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return "timeout"
    return None


def stop_process_group(
    proc: subprocess.Popen[bytes], mark: Optional[str] = None
) -> Tuple[bytes, bytes]:
    """Kill the process group ``proc`` leads (it was started with start_new_session=True), its
    descendants, and with ``mark`` every process carrying that mark (setsid'd ones included).

    Returns what it printed if it goes within KILL_GRACE; a process that cannot die (stuck in the
    GPU driver) and still holds the pipes is abandoned.
    """
    with contextlib.suppress(OSError):
        sweep(proc.pid, mark or "")  # first, while the tree still hangs together
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    if proc.stdin is not None and proc.stdin.closed:
        proc.stdin = None  # communicate() closed it once fed; Popen.communicate would flush it
    try:
        return proc.communicate(timeout=KILL_GRACE)
    except subprocess.TimeoutExpired:
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        return b"", b""


MAX_LINKS = 40  # symbolic links followed resolving one path (Linux's own limit)


def untrusted(path: str) -> Optional[str]:
    """Why the program at ``path`` may not be run for this user, or None when it may.

    The path is resolved as the kernel would, one name at a time: the file and every directory
    passed through, links' directories included, must be owned by root or this process's
    effective user, and neither writable by group or others; a directory with the sticky bit
    (``/tmp``) is the exception, as nobody else may rename or remove what it holds. Anyone else
    who can write one of them can replace the program between this check and its run (git's
    ``safe.directory`` draws the same line)."""
    uid = os.geteuid()
    full = path if path.startswith("/") else os.path.join(os.getcwd(), path)
    todo = [part for part in full.split("/") if part]
    current, links = "/", 0
    problem = _unsafe("/", uid, last=False)
    while todo and problem is None:
        name = todo.pop(0)
        if name == ".":
            continue
        if name == "..":
            current = os.path.dirname(current)
            continue
        candidate = os.path.join(current, name)
        try:
            info = os.lstat(candidate)
        except OSError as exc:
            return "cannot check %s: %s" % (candidate, exc.strerror or exc)
        if stat.S_ISLNK(info.st_mode):
            links += 1
            if links > MAX_LINKS:
                return "%s: too many levels of symbolic links" % path
            target = os.readlink(candidate)
            current = "/" if target.startswith("/") else current
            todo[:0] = [part for part in target.split("/") if part]
            continue
        current = candidate
        problem = _unsafe(candidate, uid, last=not todo, info=info)
    return problem


def _unsafe(
    path: str, uid: int, last: bool, info: Optional[os.stat_result] = None
) -> Optional[str]:
    """Why ``path`` (the program when ``last``, else a directory on its way) is not safe."""
    try:
        info = info or os.lstat(path)
    except OSError as exc:
        return "cannot check %s: %s" % (path, exc.strerror or exc)
    what = path if last else "%s (a directory on its path)" % path
    if info.st_uid not in (0, uid):
        return "%s is owned by uid %d, not by root or by uid %d that archgap runs as" % (
            what,
            info.st_uid,
            uid,
        )
    sticky = stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_ISVTX
    if info.st_mode & stat.S_IWOTH and not sticky:
        return "%s is writable by others" % what
    if info.st_mode & stat.S_IWGRP and not sticky:
        return "%s is writable by its group (gid %d)" % (what, info.st_gid)
    return None


@dataclass(frozen=True)
class CommandResult:
    argv: Tuple[str, ...]
    returncode: Optional[int]  # None when the command could not run or timed out
    stdout: str
    stderr: str
    error: Optional[str] = None  # "not found", "timed out after 10 s", ...

    @property
    def ok(self) -> bool:
        return self.error is None and self.returncode == 0


@dataclass(frozen=True)
class System:
    """The machine being probed: where its files are and which environment its tools see."""

    root: str = "/"
    env: Tuple[Tuple[str, str], ...] = field(default_factory=tuple)
    env_source: str = "shell"  # "shell", "/proc/PID/environ", a file name
    timeout: float = 30.0  # the most any one command may take (the caller's --timeout)
    # In-process runs only: told (files done, files in all, path) as the binaries are read.
    progress: Optional[Callable[[int, int, str], None]] = field(
        default=None, compare=False, repr=False
    )

    @classmethod
    def local(
        cls, root: str = "/", environ: Optional[Dict[str, str]] = None, env_source: str = "shell"
    ) -> System:
        source = os.environ if environ is None else environ
        return cls(
            root=root, env=tuple(sorted(allowlisted(dict(source)).items())), env_source=env_source
        )

    @property
    def environ(self) -> Dict[str, str]:
        return dict(self.env)

    def getenv(self, name: str) -> Optional[str]:
        return self.environ.get(name) if env_allowed(name) else None

    def path(self, system_path: str) -> str:
        """A path of the target system, seen through the root prefix."""
        if self.root in ("", "/"):
            return system_path
        return os.path.join(self.root, system_path.lstrip("/"))

    def which(self, program: str) -> Optional[str]:
        """``program`` on the target's PATH (already root-prefixed), or None."""
        for directory in (self.getenv("PATH") or "").split(os.pathsep):
            if not directory:
                continue
            candidate = os.path.join(self.path(directory), program)
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
        return None

    def run(
        self,
        argv: Sequence[str],
        timeout: float = DEFAULT_TIMEOUT,
        limit: int = OUTPUT_LIMIT,
        vet: bool = False,
    ) -> CommandResult:
        """Run a command (an argument vector, never a shell string) with a hard timeout (at most
        ``self.timeout``) and at most ``limit`` bytes of output.

        With ``vet`` (a program whose path came from what is inspected: an environment, a
        listing, a package's files) it runs only if ``untrusted`` finds nothing against it;
        else the result's error is "not run: <why>" and nothing is started.

        On timeout the command's whole process group and every process it started (setsid'd
        ones too, see RUN_MARK) are killed; a process that cannot die (stuck in the GPU driver)
        is abandoned after a short grace period instead of waited for. After a normal exit,
        what it left running (a daemon it started, setsid'd or not) is killed too.
        """
        args = tuple(argv)
        timeout = min(timeout, self.timeout)
        mark = new_mark()
        env = self._child_env()
        env[RUN_MARK] = mark.partition("=")[2]
        program = args[0] if args else ""
        if vet and args:
            program = program if "/" in program else _which(program, env.get("PATH", ""))
            refused = untrusted(program) if program else None
            if refused is not None:
                return CommandResult(args, None, "", "", "not run: " + refused)
        try:
            proc = spawn((program, *args[1:]) if program else args, env)
        except FileNotFoundError:
            return CommandResult(args, None, "", "", "not found")
        except PermissionError:
            return CommandResult(args, None, "", "", "permission denied")
        except OSError as exc:
            return CommandResult(args, None, "", "", "cannot run: %s" % (exc.strerror or exc))
        stdout, stderr, stopped = communicate(proc, b"", timeout, limit)
        if stopped is not None:
            stop_process_group(proc, mark)
            reason = "timed out after %g s" % timeout if stopped == "timeout" else stopped
            return CommandResult(args, None, "", "", reason)
        with contextlib.suppress(OSError):
            reap_leftovers(proc.pid, mark)
        out = stdout.decode("utf-8", "replace")
        err = stderr.decode("utf-8", "replace")
        return CommandResult(args, proc.returncode, out, err, _exit_error(proc.returncode))

    def _child_env(self) -> Dict[str, str]:
        # Tools see the target environment's variables; LANG=C keeps their output parseable.
        env = dict(os.environ) if self.env_source == "shell" else {}
        env.update(self.environ)
        env["LC_ALL"] = "C"
        return env


def _exit_error(returncode: int) -> Optional[str]:
    """Why a command's exit is a failure (None for status 0)."""
    if returncode < 0:
        return "killed by signal %d" % -returncode
    return None if returncode == 0 else "exited with status %d" % returncode


def _which(program: str, path: str) -> str:
    """Where exec would find ``program`` on ``path`` ("" when nowhere): so that what is vetted
    is what runs."""
    for directory in path.split(os.pathsep):
        candidate = os.path.join(directory or ".", program)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return ""
