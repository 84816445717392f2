"""archgap trace NAME: where a value is decided (written), not just where it is read."""

from __future__ import annotations

import argparse

from archgap.cli import options as opt
from archgap.cli.common import EXIT_OK, Output, inspected_python, target_from_args

HELP = "every place a name is written and read, with the env vars that feed it"
DESCRIPTION = (
    "Every place NAME occurs as code in the environment's site-packages (or the given "
    "distributions or paths): writes first, defining module first, each with its branch; the "
    "environment variables that feed each write (through calls, with the call path); and broad "
    "excepts around a write that swallow what their try can raise."
)
OPTIONS = (
    opt.option(
        "name",
        metavar="NAME",
        help="an identifier (TARGET_CUDA_ARCHS), a dotted name (torch.cuda.get_device_capability) "
        "or a string key (FLASHINFER_CUDA_ARCH_LIST)",
    ),
    # A default: argparse would otherwise call PATH required when NAME is missing.
    opt.option(
        "paths", nargs="*", default=[], metavar="PATH", help="files or directories to search"
    ),
    opt.repeated("--dist", "DIST", "search only this installed distribution's files (repeatable)"),
    opt.gpu_option("evaluate each write's branch for this GPU's compute capability (repeatable)"),
    opt.env_from_option(
        "the service's environment on the target: a process id (/proc/PID/environ), an env file "
        "(KEY=VALUE lines) or `docker inspect` JSON: whether each variable feeding a write is set"
    ),
    opt.ALL_TREES,
    opt.ENVIRONMENT,
    opt.output(opt.TABLE_FORMATS),
    opt.TARGET,
)


def run(args: argparse.Namespace, out: Output) -> int:
    from archgap.api import trace
    from archgap.report.formats import View, show

    target = target_from_args(args)
    with out.step(f"probing {target.name}"):
        result = trace(
            args.name, paths=args.paths, dists=args.dist, python=args.python, gpus=args.gpu,
            env_from=args.env_from, target=target,
            show_all=bool(args.show_all), root=args.root, timeout=args.timeout,
        )  # fmt: skip
    show(out, "trace", result, View(python=inspected_python(args)))
    return EXIT_OK
