"""Where a probe runs: a command prefix that starts the target's Python, connected by stdin/stdout.

Every target becomes an argument vector (never a local shell string). ssh hands its command to a
shell on the far side, so for it each remote argument is ``shlex.quote``d; a ``--via`` prefix may
or may not, so its remote command holds only shell-neutral words;
host, container and pod names are validated so that none can be read as an option or a shell word.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from dataclasses import dataclass

from archgap.errors import UsageError
from archgap.transport.bootstrap import shell_neutral

DEFAULT_PYTHON = "python3"
DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_TIMEOUT = 120.0  # total seconds per target, besides the connect timeout
# ssh asks the server for a sign of life this often, and gives up after this many silent replies.
SERVER_ALIVE_INTERVAL = 5
SERVER_ALIVE_COUNT = 3
# Tests and sites can hand archgap its own ssh client config (``ssh -F FILE``).
SSH_CONFIG_ENV = "ARCHGAP_SSH_CONFIG"

_USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
_HOSTNAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}$")
_IPV6 = re.compile(r"^\[([0-9A-Fa-f:.]+(?:%[A-Za-z0-9_.-]+)?)\]$")
_CONTAINER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,254}$")
_KUBE_NAME = re.compile(r"^[a-z0-9]([a-z0-9.-]{0,252})$")


class TargetError(UsageError):
    """A target that archgap refuses to use (bad name, unsafe characters): a usage error."""


@dataclass(frozen=True)
class Target:
    """A machine, container or pod to probe, and how to start a Python there."""

    kind: str  # "local", "ssh", "container", "pod", "via"
    name: str  # what reports call it: "root@gpu1:2222", "sglang", "local"
    prefix: tuple[str, ...]  # the argument vector that precedes the remote command
    python: str = DEFAULT_PYTHON
    remote_shell: bool = False  # the prefix hands its arguments to a shell: quote each one
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT

    @property
    def is_local(self) -> bool:
        return self.kind == "local"

    def command(self, remote_argv: list[str]) -> list[str]:
        """The full argument vector that runs ``remote_argv`` on the target."""
        if self.remote_shell:
            return [*self.prefix, " ".join(shlex.quote(arg) for arg in remote_argv)]
        return [*self.prefix, *remote_argv]


LOCAL = Target(kind="local", name="local", prefix=())


def check_python(python: str) -> str:
    """An interpreter name or path is passed as one argument; refuse what a tool reads as option."""
    if not python:
        raise TargetError("--python: empty interpreter name")
    if python.startswith("-"):
        raise TargetError(f"--python {python!r}: an interpreter may not start with '-'")
    if any(c in python for c in "\0\n\r"):
        raise TargetError(f"--python {python!r}: control characters are not allowed")
    return python


def parse_host(text: str) -> tuple[str | None, str, int | None]:
    """``[user@]host[:port]`` (IPv6: ``[addr]:port``) -> (user, host, port); refuses unsafe text."""
    if not text or text != text.strip() or any(c.isspace() for c in text):
        raise TargetError(f"host {text!r}: empty or contains whitespace")
    if text.startswith("-"):
        raise TargetError(f"host {text!r}: may not start with '-'")
    user: str | None = None
    rest = text
    if "@" in rest:
        user, rest = rest.rsplit("@", 1)
        if not _USER.match(user):
            raise TargetError(
                f"host {text!r}: user {user!r} has characters other than A-Z a-z 0-9 _ . -"
            )
    port: int | None = None
    host = rest
    if rest.startswith("["):
        host, port = _bracketed(rest, text)
    elif ":" in rest:
        host, port_text = rest.rsplit(":", 1)
        port = _port(port_text, text)
    if not _IPV6.match(f"[{host}]") and not _HOSTNAME.match(host):
        raise TargetError(
            f"host {text!r}: a host name may hold only A-Z a-z 0-9 _ . - and may not start with '-'"
        )
    return user, host, port


def _bracketed(rest: str, text: str) -> tuple[str, int | None]:
    """(address, port) of ``[addr]`` or ``[addr]:port`` (``text``: the whole host, for errors)."""
    close = rest.find("]")
    if close < 0:
        raise TargetError(f"host {text!r}: unclosed '['")
    host, tail = rest[: close + 1], rest[close + 1 :]
    port: int | None = None
    if tail:
        if not tail.startswith(":"):
            raise TargetError(f"host {text!r}: unexpected text after ']'")
        port = _port(tail[1:], text)
    if not _IPV6.match(host):
        raise TargetError(f"host {text!r}: not an IPv6 address in brackets")
    return host[1:-1], port


def _port(text: str, whole: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise TargetError(f"host {whole!r}: port {text!r} is not a number from 1 to 65535")
    return int(text)


def ssh_target(
    spec: str,
    python: str = DEFAULT_PYTHON,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    ssh_config: str | None = None,
) -> Target:
    """``ssh`` to ``[user@]host[:port]``: the user's own config, agent and known_hosts apply."""
    user, host, port = parse_host(spec)
    config = ssh_config if ssh_config is not None else os.environ.get(SSH_CONFIG_ENV)
    argv = [
        "ssh",
        "-T",  # no terminal: stdin and stdout carry the probe and its answer, byte for byte
        "-o",
        "BatchMode=yes",  # never prompt for a password or a host key: fail clearly instead
        "-o",
        f"ConnectTimeout={max(1, round(connect_timeout))}",
        "-o",
        f"ServerAliveInterval={SERVER_ALIVE_INTERVAL}",
        "-o",
        f"ServerAliveCountMax={SERVER_ALIVE_COUNT}",
        "-o",
        "LogLevel=ERROR",  # keep banners and warnings out of the error messages we classify
    ]
    if config:
        argv += ["-F", config]
    if port is not None:
        argv += ["-p", str(port)]
    if user is not None:
        argv += ["-l", user]
    argv += ["--", host]
    return Target("ssh", spec, tuple(argv), check_python(python), True, connect_timeout)


def container_target(name: str, python: str = DEFAULT_PYTHON, engine: str | None = None) -> Target:
    """``docker exec -i NAME`` (or podman, when docker is absent or asked for)."""
    if not _CONTAINER.match(name):
        raise TargetError(
            f"container {name!r}: only A-Z a-z 0-9 _ . -, starting with a letter or digit"
        )
    chosen = engine or (
        "docker" if shutil.which("docker") or not shutil.which("podman") else "podman"
    )
    if chosen not in ("docker", "podman"):
        raise TargetError(f"container engine {chosen!r}: expected docker or podman")
    return Target("container", name, (chosen, "exec", "-i", name), check_python(python))


def pod_target(spec: str, python: str = DEFAULT_PYTHON) -> Target:
    """``kubectl exec -i [-n NS] POD [-c CONTAINER] --`` from ``[NS/]POD[:CONTAINER]``."""
    namespace, _, rest = spec.rpartition("/")
    pod, _, container = rest.partition(":")
    for part, what in ((namespace, "namespace"), (pod, "pod"), (container, "container")):
        if (part or what == "pod") and not _KUBE_NAME.match(part):
            raise TargetError(f"pod {spec!r}: {what} {part!r} is not a Kubernetes name")
    argv = ["kubectl", "exec", "-i"]
    if namespace:
        argv += ["-n", namespace]
    argv.append(pod)
    if container:
        argv += ["-c", container]
    argv.append("--")
    return Target("pod", spec, tuple(argv), check_python(python))


def via_target(command: str, python: str = DEFAULT_PYTHON) -> Target:
    """Any command prefix, split like a shell would (but never run by one here).

    Whether the prefix hands the remote command to a shell (ssh, ``sh -c``, a site wrapper) is
    never guessed: the remote command's words are shell-neutral (``PYTHON -I -S -``, the program
    on stdin), and an interpreter name that a shell would read differently is refused."""
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise TargetError(f"--via {command!r}: {exc}") from None
    if not argv:
        raise TargetError("--via: empty command")
    if argv[0].startswith("-"):
        raise TargetError(f"--via {command!r}: the command may not start with '-'")
    if not shell_neutral(check_python(python)):
        raise TargetError(
            f"--python {python!r} with --via: a shell may run the command, so the interpreter may"
            " hold only A-Z a-z 0-9 and _ . / + : @ % , -"
        )
    return Target("via", command, tuple(argv), python)


# How a user names a target (the CLI's --host/--container/--pod/--via, the MCP tools' arguments).
TARGET_KINDS = ("host", "container", "pod", "via")


def named_target(
    named: dict[str, str | None],
    python: str | None = None,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    engine: str | None = None,
) -> Target:
    """The target one of ``TARGET_KINDS`` in ``named`` names (``LOCAL`` when none does), with
    ``python`` there (default python3); a bad name, or two named, is a ``TargetError``."""
    given = [kind for kind in TARGET_KINDS if named.get(kind)]
    if len(given) > 1:
        raise TargetError(f"name one target, not {' and '.join(given)}")
    if not given:
        return LOCAL
    kind, interpreter = given[0], python or DEFAULT_PYTHON
    value = str(named[kind])
    if kind == "host":
        return ssh_target(value, interpreter, connect_timeout)
    if kind == "container":
        return container_target(value, interpreter, engine)
    if kind == "pod":
        return pod_target(value, interpreter)
    return via_target(value, interpreter)
