"""Access to the target system: one root prefix for its files, and commands with timeouts.

Every system path (``/proc``, ``/usr/local/cuda*``, ``/dev``) is read through ``System.path`` so a
test can hand the probe a recorded tree; every command goes through ``System.run``, which never
hangs longer than its timeout (``nvidia-smi`` blocks when a GPU falls off the bus).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from dataclasses import dataclass, field
from typing import Dict, Optional, Sequence, Tuple

DEFAULT_TIMEOUT = 10.0
KILL_GRACE = 2.0  # seconds to reap a killed command before abandoning it

# Only these variables are ever read from an environment or reported: names that steer CUDA
# toolchains and GPU stacks. Anything that looks like a credential is refused even if it matches.
ENV_ALLOWED_NAMES = frozenset(
    (
        "CUDA_HOME",
        "CUDA_PATH",
        "CUDA_ROOT",
        "CUDA_VISIBLE_DEVICES",
        "CUDA_FORCE_PTX_JIT",
        "CUDA_DISABLE_PTX_JIT",
        "CUDA_MODULE_LOADING",
        "NVIDIA_VISIBLE_DEVICES",
        "NVIDIA_DRIVER_CAPABILITIES",
        "PATH",
        "LD_LIBRARY_PATH",
        "CONDA_PREFIX",
        "VIRTUAL_ENV",
        "PYTHONPATH",
        "HOME",
        "XDG_CACHE_HOME",
    )
)
ENV_ALLOWED_PREFIXES = ("FLASHINFER_", "TORCH_", "TRITON_", "VLLM_", "SGLANG_", "SGL_", "DG_")
ENV_SECRET_MARKERS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "CREDENTIAL", "AUTH")


def stop_process_group(proc: subprocess.Popen[bytes]) -> Tuple[bytes, bytes]:
    """Kill the process group ``proc`` leads (it was started with start_new_session=True).

    Returns what it printed if it goes within KILL_GRACE; a process that cannot die (stuck in the
    GPU driver) or that left the group (setsid, a daemon) and still holds the pipes is abandoned.
    """
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    try:
        return proc.communicate(timeout=KILL_GRACE)
    except subprocess.TimeoutExpired:
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        return b"", b""


def env_allowed(name: str) -> bool:
    """Whether a variable may be read and reported (never tokens or secrets)."""
    upper = name.upper()
    if any(marker in upper for marker in ENV_SECRET_MARKERS):
        return False
    return name in ENV_ALLOWED_NAMES or name.startswith(ENV_ALLOWED_PREFIXES)


def allowlisted(environ: Dict[str, str]) -> Dict[str, str]:
    return {k: v for k, v in environ.items() if env_allowed(k)}


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

    def run(self, argv: Sequence[str], timeout: float = DEFAULT_TIMEOUT) -> CommandResult:
        """Run a command (an argument vector, never a shell string) with a hard timeout.

        On timeout the command's whole process group is killed; a process that cannot die (stuck
        in the GPU driver) is abandoned after a short grace period instead of waited for.
        """
        args = tuple(argv)
        try:
            proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self._child_env(),
                start_new_session=True,
            )
        except FileNotFoundError:
            return CommandResult(args, None, "", "", "not found")
        except PermissionError:
            return CommandResult(args, None, "", "", "permission denied")
        except OSError as exc:
            return CommandResult(args, None, "", "", "cannot run: %s" % (exc.strerror or exc))
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop_process_group(proc)
            return CommandResult(args, None, "", "", "timed out after %g s" % timeout)
        out = stdout.decode("utf-8", "replace")
        err = stderr.decode("utf-8", "replace")
        error = None if proc.returncode == 0 else "exited with status %d" % proc.returncode
        if proc.returncode < 0:
            error = "killed by signal %d" % -proc.returncode
        return CommandResult(args, proc.returncode, out, err, error)

    def _child_env(self) -> Dict[str, str]:
        # Tools see the target environment's variables; LANG=C keeps their output parseable.
        env = dict(os.environ) if self.env_source == "shell" else {}
        env.update(self.environ)
        env["LC_ALL"] = "C"
        return env
