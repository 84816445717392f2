"""archgap scan: can every package of this Python environment run on these GPUs?"""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from archgap.cli import options as opt
from archgap.cli.common import (
    Output,
    UsageError,
    target_from_args,
)
from archgap.cli.engines import CLUSTER_ENGINES

if TYPE_CHECKING:
    from archgap.api import ScanReport


HELP = "verdict per package x GPU from the kernels in every native library"
DESCRIPTION = "For every installed package that carries CUDA code: can it run on each GPU?"
OPTIONS = (
    opt.option(
        "archives",
        nargs="*",
        metavar="WHEEL",
        help="judge wheels and conda packages before installing them: .whl, .conda and .tar.bz2 "
        "files, directories of them, their URLs, or requirements (sgl-kernel==0.3.21) resolved "
        "like pip from your indexes; or container images before deploying them: oci:DIR[:TAG], "
        "docker-archive:FILE, docker://REF, rootfs:DIR (default: the environment of --python)",
    ),
    opt.RESOLVING,
    opt.REGISTRY,
    opt.ENVIRONMENT,
    opt.gpu_option(
        "judge against this GPU: a compute capability (12.0, sm_120) or a name (RTX PRO 6000, "
        "H100, B200, GB10); repeatable, comma-separated"
    ),
    opt.require_option("like --gpu, for CI gates: exit 1 if any package cannot run on it"),
    opt.flag("--libs", "show the per-library view"),
    opt.option(
        "--driver",
        metavar="VERSION",
        help="judge against this NVIDIA driver (580.65.06, or a branch: 580) instead of the "
        "detected one: the PTX ISA it can JIT and the CUDA runtimes (cudart/nvrtc wheels, torch) "
        "it can run",
    ),
    opt.STRICT,
    opt.env_from_option(
        "resolve toolkits and JIT settings with a service's environment: a process id "
        "(/proc/PID/environ), an env file (KEY=VALUE lines) or `docker inspect` JSON"
    ),
    opt.output(opt.SUMMARY_FORMATS),
    opt.TARGET,
    CLUSTER_ENGINES,
)


def run(args: argparse.Namespace, out: Output) -> int:
    if not args.health:
        return _run(args, out)
    from archgap.cli.engines import failed_health

    try:
        return _run(args, out)
    except UsageError as exc:
        return failed_health(args, exc)


def _run(args: argparse.Namespace, out: Output) -> int:
    from archgap.api import ProbeError, scan
    from archgap.cli.engines import check_scan_options, node_health, write_scan_files

    check_scan_options(args)
    named = [*args.gpu, *args.require]
    target = target_from_args(args)
    out.note(f"scanning {target.name}")
    started = time.monotonic()
    try:
        options = {"driver": args.driver, "strict": args.strict}
        if args.archives:
            report = _scan_archives(args, named, target.is_local)
        elif target.is_local:  # n/N as the native files are read
            with out.counter("reading native files") as tell:
                report = scan(
                    args.python, gpus=named, target=target, env_from=args.env_from,
                    root=args.root, timeout=args.timeout, progress=tell, **options,
                )  # fmt: skip
        else:  # a remote probe tells nothing until it is done
            with out.status(f"scanning {target.name}"):
                report = scan(
                    args.python, gpus=named, target=target, env_from=args.env_from,
                    root=args.root, timeout=args.timeout, **options,
                )  # fmt: skip
    except ProbeError as exc:
        write_scan_files(args, None, time.monotonic() - started, node_health(args, None))
        raise UsageError(f"probe: {exc}") from exc
    elapsed = time.monotonic() - started
    health = node_health(args, report)
    write_scan_files(args, report, elapsed, health)
    if args.health and health is not None:
        from archgap.cli.engines import finish_health

        return finish_health(args, health)
    if report.unread:  # errors first: one line, not a report of an empty environment
        raise UsageError(report.unread)
    from archgap.report.formats import View, show

    show(out, "scan", report, View(detail=args.libs, elapsed=elapsed))
    return report.exit_code


def _scan_archives(args: argparse.Namespace, named: list[str], local: bool) -> ScanReport:
    from archgap.api import scan_archives

    if not local or args.python:
        raise UsageError("wheels and images are read here: not with --python or a remote target")
    return scan_archives(
        args.archives, gpus=named, driver=args.driver, strict=args.strict,
        options=opt.index_options(args), env_from=args.env_from, root=args.root,
    )  # fmt: skip
