"""Transports: run the probe where the GPUs are (ssh, a container, a pod, any command prefix).

For a command that should work remotely::

    from archgap.transport import add_target_options, target_from_args, run_probe, TransportError

    def register(subparsers):
        parser = subparsers.add_parser(...)
        add_target_options(parser)           # --host/--container/--pod/--via, --timeout ...
    def run(args, out):
        target = target_from_args(args)      # LOCAL when none is given; raises UsageError
        facts = run_probe(target, {"python": {"python": args.python}}, args.timeout)
        if isinstance(facts, TransportError):
            out.error(str(facts)); return EXIT_ERROR

``--python`` is then the interpreter on the target (default ``python3`` remotely). Locally the
probe runs in-process; remotely the same ``collect`` runs under the target's interpreter.
"""

from __future__ import annotations

import argparse

from archgap.transport.run import (
    DEFAULT_TIMEOUT,
    ERROR_KINDS,
    TransportError,
    run_many,
    run_probe,
)
from archgap.transport.target import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_PYTHON,
    LOCAL,
    Target,
    TargetError,
    container_target,
    parse_host,
    pod_target,
    ssh_target,
    via_target,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "ERROR_KINDS",
    "LOCAL",
    "Target",
    "TargetError",
    "TransportError",
    "add_target_options",
    "container_target",
    "parse_host",
    "pod_target",
    "run_many",
    "run_probe",
    "ssh_target",
    "target_from_args",
    "via_target",
]


def add_target_options(
    parser: argparse.ArgumentParser, *, timeout_default: float = DEFAULT_TIMEOUT
) -> None:
    """``--host/--container/--pod/--via`` (one at most), ``--connect-timeout`` and ``--timeout``."""
    group = parser.add_argument_group("where to look (default: this machine)")
    where = group.add_mutually_exclusive_group()
    where.add_argument(
        "--host",
        metavar="[USER@]HOST[:PORT]",
        help="probe over ssh (your ~/.ssh/config, agent and known_hosts apply; BatchMode)",
    )
    where.add_argument(
        "--container", metavar="NAME", help="probe inside a container (docker/podman exec -i)"
    )
    where.add_argument(
        "--pod",
        metavar="[NS/]POD[:CONTAINER]",
        help="probe inside a Kubernetes pod (kubectl exec -i)",
    )
    where.add_argument(
        "--via",
        metavar="'CMD ...'",
        help="probe through any command prefix that starts a program there with stdin/stdout",
    )
    group.add_argument("--container-engine", choices=("docker", "podman"), help=argparse.SUPPRESS)
    group.add_argument(
        "--connect-timeout",
        type=float,
        default=DEFAULT_CONNECT_TIMEOUT,
        metavar="S",
        help="ssh connect timeout in seconds (default %(default)g)",
    )
    group.add_argument(
        "--timeout",
        type=float,
        default=timeout_default,
        metavar="S",
        help="total time limit per target in seconds (default %(default)g)",
    )


def target_from_args(args: argparse.Namespace) -> Target:
    """The target the options name (``LOCAL`` if none); a bad name raises ``UsageError``."""
    from archgap.cli.common import UsageError

    python = getattr(args, "python", None) or DEFAULT_PYTHON
    try:
        if getattr(args, "host", None):
            return ssh_target(
                args.host, python, getattr(args, "connect_timeout", DEFAULT_CONNECT_TIMEOUT)
            )
        if getattr(args, "container", None):
            return container_target(args.container, python, getattr(args, "container_engine", None))
        if getattr(args, "pod", None):
            return pod_target(args.pod, python)
        if getattr(args, "via", None):
            return via_target(args.via, python)
    except TargetError as exc:
        raise UsageError(str(exc)) from None
    return LOCAL
