"""archgap fleet: probe many machines (ssh, Slurm, or JSON from any engine) and compare them.

Groups hosts with identical fingerprints (GPUs, driver, toolkits, Python, packages, kernel
coverage, JIT outcome), shows the drift between groups, every host's gaps and the hosts that did
not answer. Exit codes: 0 every host answered and none has a gap; 1 a host has a gap; 2 a host
could not be probed (or a usage error).
"""

from __future__ import annotations

import argparse
import contextlib
import time
from typing import TYPE_CHECKING

from archgap.cli import options as opt
from archgap.cli.common import Output, UsageError
from archgap.cli.engines import PROMETHEUS, PROMETHEUS_LABEL, prometheus_labels
from archgap.request import DEFAULT_SECTIONS
from archgap.transport.target import DEFAULT_PYTHON

if TYPE_CHECKING:
    from archgap.api import FleetRun

HELP = "probe many hosts (ssh, Slurm, or probe JSON from any engine) and compare them"
DESCRIPTION = (
    "Probe hosts and group identical ones; show drift, gaps and unreachable hosts. Exit 0: all "
    "answered, no gap; 1: a host has a gap; 2: a host could not be probed."
)
# Where the hosts' facts come from: exactly one.
SOURCES = opt.one_of(
    opt.listed("--hosts", "H1,H2", "[user@]host[:port] list (ssh); repeatable, comma-separated"),
    opt.option("--hostfile", metavar="FILE", help="one host per line: [user@]host[:port] [PYTHON]"),
    opt.flag("--slurm", "one probe per node with srun --ntasks-per-node=1; srun options after --"),
    opt.from_option(
        "ingest probe JSON written by any engine (archgap probe, the --script, pdsh/clush)"
    ),
    opt.option(
        "--ray",
        nargs="?",
        const="auto",
        metavar="ADDRESS",
        help="one probe per alive node of a Ray cluster (ADDRESS as ray.init takes it; default: "
        "RAY_ADDRESS or the local cluster); needs pip install 'archgap[ray]'; without --python "
        "each node inspects its Ray worker's interpreter",
    ),
    required=True,
)
OPTIONS = (
    SOURCES,
    opt.option(
        "--runtime-env",
        metavar="JSON|@FILE",
        default=None,
        help="with --ray: the job's runtime_env (env_vars, pip/uv/conda, py_executable), which "
        "the probe runs in on every node instead of the raylet's environment",
    ),
    opt.option(
        "--python",
        metavar="PATH",
        default=None,
        help=f"the interpreter to inspect on every host (default {DEFAULT_PYTHON})",
    ),
    opt.env_from_option(
        "judge on every host the environment its jobs get, read there: an env file (a systemd "
        "EnvironmentFile, `docker inspect` JSON) or /proc/PID/environ; a host where it cannot "
        "be read fails (never its shell's environment judged instead)"
    ),
    opt.gpu_option("also judge every host against this GPU (12.0, sm_120, a name); repeatable"),
    opt.option("--jobs", type=int, default=32, metavar="N", help="hosts at a time"),
    opt.timeouts(),
    opt.sections_option(DEFAULT_SECTIONS, "the sections every host collects, comma-separated"),
    opt.option(
        "--stale-after",
        metavar="DURATION",
        default="2h",
        help="with --from: a document collected longer ago than this (90m, 2h, 1d, or seconds) "
        "is stale: its host's verdicts are shown as the last known, not live, and the exit code "
        "is at least 2 (default 2h: two runs of an hourly timer missed)",
    ),
    opt.option("--html", metavar="FILE", help="also write a self-contained HTML page"),
    PROMETHEUS,
    PROMETHEUS_LABEL,
    opt.option("srun_args", nargs="*", metavar="-- SRUN_ARGS", help=argparse.SUPPRESS),
    opt.output(opt.SUMMARY_FORMATS),
)


def _fleet_run(args: argparse.Namespace, out: Output, named: list[str]) -> FleetRun:
    """Every host probed (a progress bar as ssh hosts answer) or read, and compared."""
    from archgap.api import fleet_run
    from archgap.transport.fleet import FleetOptions, FleetSource

    hosts = tuple((h, None) for h in args.hosts or ())
    source = FleetSource(
        hosts, bool(args.slurm), tuple(args.srun_args), args.ray, tuple(args.from_paths or ()),
        args.hostfile, args.runtime_env,
    )  # fmt: skip
    sections = tuple(args.sections)
    options = FleetOptions(
        sections, args.python, args.jobs, args.timeout, args.connect_timeout,
        parse_duration(args.stale_after, "--stale-after"), args.env_from,
    )  # fmt: skip
    ray = f"probing the Ray cluster {args.ray}"
    waiting = out.status(ray) if source.ray else contextlib.nullcontext()
    progress = out.counter("probing hosts") if source.by_ssh else contextlib.nullcontext(None)
    with waiting, progress as tell:
        return fleet_run(source, gpus=named, options=options, tell=tell)


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str, option: str) -> float:
    """``90m``, ``2h``, ``1d``, ``45s`` or plain seconds, as seconds; a usage error otherwise."""
    import re

    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text or "")
    if match is None or float(match.group(1)) <= 0:
        raise UsageError(f"{option} {text!r}: expected a duration such as 90m, 2h, 1d or 3600")
    return float(match.group(1)) * _UNITS[match.group(2) or "s"]


def run(args: argparse.Namespace, out: Output) -> int:
    from archgap.report.fleet import headline
    from archgap.report.formats import View, show

    labels = prometheus_labels(args)  # a bad --prometheus-label before anything is probed
    fleet = _fleet_run(args, out, args.gpu)
    report, elapsed = fleet.report, fleet.elapsed
    title = headline(report, elapsed, fleet.documents)
    if args.html:
        from archgap.cli.engines import write_atomic
        from archgap.report.html import fleet_html

        write_atomic(args.html, fleet_html(report, title), "--html")  # never over a non-file
    if args.prometheus:
        from archgap.cli.engines import write_atomic
        from archgap.report.prometheus import fleet_metrics

        text = fleet_metrics(report, time.time(), elapsed, labels)
        write_atomic(args.prometheus, text, "--prometheus")
    show(out, "fleet", fleet, View(html=args.html or ""))
    return report.exit_code
