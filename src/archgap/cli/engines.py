"""Outputs for the engines that run cluster nodes, shared by scan and fleet: a Slurm/NHC health
line (``--health``, ``--drain``), node_exporter textfile metrics (``--prometheus``) and a Node
Feature Discovery feature file (``--nfd``). Each renders the same report; none judges anything.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import TYPE_CHECKING

from archgap.cli import options as opt
from archgap.cli.common import UsageError

if TYPE_CHECKING:
    from archgap.api import NodeHealth, ScanReport


PROMETHEUS = opt.option(
    "--prometheus",
    metavar="FILE",
    help="also write metrics in node_exporter's textfile format, atomically "
    "(e.g. /var/lib/node_exporter/textfile/archgap.prom)",
)
PROMETHEUS_LABEL = opt.option(
    "--prometheus-label",
    action="append",
    default=[],
    metavar="K=V",
    help="with --prometheus: a label on every series (repeatable); environment=NAME replaces "
    "the judged interpreter's path, so several archgap files on one node never collide",
)


def prometheus_labels(args: argparse.Namespace) -> tuple[tuple[str, str], ...]:
    """The --prometheus-label pairs, checked (a usage error, before anything is probed)."""
    from archgap.report.prometheus import parse_labels

    try:
        return parse_labels(args.prometheus_label)
    except ValueError as exc:
        raise UsageError(f"--prometheus-label: {exc}") from None


# scan's options for the engines that run cluster nodes.
CLUSTER_ENGINES = opt.Group(
    (
        opt.flag(
            "--health",
            "print one line, OK or 'archgap: CODE: PACKAGE VERSION on GPU: WHY' (Slurm "
            "HealthCheckProgram, Prolog, NHC); exit 0 OK, 1 a gap, 2 could not judge",
        ),
        opt.flag(
            "--drain",
            "with --health under Slurm: drain this node (SLURMD_NODENAME) with that line as the "
            "reason on a gap; resume it when OK and archgap drained it",
        ),
        PROMETHEUS,
        PROMETHEUS_LABEL,
        opt.option(
            "--nfd",
            metavar="FILE",
            help="also write a Node Feature Discovery feature file (key=value labels), e.g. "
            "/etc/kubernetes/node-feature-discovery/features.d/archgap",
        ),
        opt.option(
            "--nfd-expiry",
            type=float,
            default=7200.0,
            metavar="SECONDS",
            help="with --nfd: nfd-worker drops the labels this long after the scan unless a later "
            "scan rewrote the file (default %(default)g; make it a few scan intervals)",
        ),
    ),
    title="cluster engines",
)


def check_scan_options(args: argparse.Namespace) -> None:
    """Option combinations that cannot work, before anything is probed."""
    if args.drain and not args.health:
        raise UsageError("--drain needs --health (the drain reason is the health line)")
    if args.health and getattr(args, "format", "text") != "text":
        raise UsageError("--health prints one line: it does not combine with --json/--format")
    prometheus_labels(args)
    if args.drain and not os.environ.get("SLURMD_NODENAME"):
        raise UsageError("--drain: SLURMD_NODENAME is not set (run it from Slurm: a Prolog, the "
                         "HealthCheckProgram, a job step)")  # fmt: skip


def write_atomic(path: str, text: str, option: str) -> None:
    """``report.console.write_atomic``; a file that cannot be written is ``option``'s error."""
    from archgap.report.console import write_atomic as write

    try:
        write(path, text)
    except OSError as exc:
        raise UsageError(f"{option} {path}: {exc.strerror or exc}") from None


def node_health(args: argparse.Namespace, report: ScanReport | None) -> NodeHealth | None:
    """The node's health as the API judges it, when --health or --nfd asks for it (``report``
    None: the facts could not be collected)."""
    if not (args.health or args.nfd):
        return None
    from archgap.api import NodeHealth, node_health

    if report is None:
        return NodeHealth("probe-failed", why="the facts could not be collected")
    return node_health(report, require=args.require)


def write_scan_files(
    args: argparse.Namespace, report: ScanReport | None, seconds: float, health: NodeHealth | None
) -> None:
    """``--prometheus`` and ``--nfd`` files of a scan (``report`` None: the scan failed)."""
    if args.prometheus:
        from archgap.report.prometheus import scan_metrics

        labels, python = prometheus_labels(args), getattr(args, "python", None) or ""
        text = scan_metrics(report, time.time(), seconds, labels, python)
        write_atomic(args.prometheus, text, "--prometheus")
    if args.nfd and health is not None:
        from archgap.report.nfd import feature_file

        text = feature_file(health, time.time(), args.nfd_expiry)
        write_atomic(args.nfd, text, "--nfd")


def finish_health(args: argparse.Namespace, result: NodeHealth) -> int:
    """Print the health line; with --drain, drain the node on a gap (or resume our drain)."""
    from archgap.report.health import PREFIX, line

    text = line(result)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
    if not args.drain or not result.judged:  # could not judge: no reason to drain or resume
        return result.exit_code
    from archgap.transport.slurm import sync_drain

    node = os.environ["SLURMD_NODENAME"]
    problem = sync_drain(node, text if result.drains else None, PREFIX, os.environ)
    if problem:  # the exit code still says what was found: a Prolog that fails drains the node
        sys.stderr.write(f"archgap: could not drain or resume {node}: {problem}\n")
    return result.exit_code


def failed_health(args: argparse.Namespace, exc: UsageError) -> int:
    """A scan that ended in an error, as the health check's one line (on stdout, for the
    scheduler's log): ``probe-failed`` when the facts could not be collected, else ``usage``."""
    from archgap.api import NodeHealth

    code = "probe-failed" if str(exc).startswith("probe:") else "usage"
    return finish_health(args, NodeHealth(code, why=str(exc).removeprefix("probe: ")))
