"""``archgap explain``: from an error log (file, stdin or a message) to the root cause and the fix.

Exit codes (``ExplainResult.exit_code``): 0 = no error in the input; 1 = an architecture-gap error
was recognised and explained; 2 = usage or probe error (no input, unreadable file, bad --gpu,
unreadable --env-from, an unreachable host or a missing interpreter there); 3 = an error archgap
cannot explain, printed as "unknown" with what it recognised (a gap in a wording archgap does not
know would otherwise exit 0 like a healthy log); 4 = a known error that is not an architecture
gap, such as CUDA out of memory or an NCCL failure, named with no architecture cause.

Without --python (or a target) the environment examined is the one the log's traceback names,
where it exists on this machine and nobody but the caller or root can have put it there, else
the active VIRTUAL_ENV or CONDA_PREFIX (not archgap's own), else the log alone; the first line
says which and why. Every fact of the examined environment comes from the probe, on this machine
or on the target (--host/--container/--pod/--via): the Python environment, toolchains, GPUs and
the raise sites the log points at in one request, then the trace of the state the raising
condition reads.
"""

from __future__ import annotations

import argparse

from archgap.cli import options as opt
from archgap.cli.common import Output, target_from_args

HELP = "explain a crash log: the chain of causes and the fixes"
DESCRIPTION = (
    "Read an error log (file, '-' for stdin, or --message) and explain the architecture-gap error "
    "in it, confirmed on an environment when one is given."
)
OPTIONS = (
    opt.option("logfile", nargs="?", help="log file, or - for stdin"),
    opt.option("--message", metavar="TEXT", help="a bare error message instead of a log"),
    opt.gpu_option("the GPU of the crashed host"),
    opt.env_from_option(
        "the service's environment on the examined host: a process id (/proc/PID/environ), an env "
        "file (KEY=VALUE lines) or `docker inspect` JSON"
    ),
    opt.flag("--log-only", "do not examine any environment; the log alone"),
    opt.option(
        "--driver",
        metavar="VERSION",
        help="the NVIDIA driver of the crashed host (570.124.06, or a branch: 570): a toolkit "
        "switch it cannot run (CUDA 13 needs >= 580) says so and is not first",
    ),
    opt.ENVIRONMENT,
    opt.output(),
    opt.TARGET,
)


def run(args: argparse.Namespace, out: Output) -> int:
    from archgap.api import Where, explain
    from archgap.logread import read_input
    from archgap.report import explain as rendering

    text, origin = read_input(args.logfile, args.message)
    target = target_from_args(args)
    with out.status("reading the log" if args.log_only else f"examining {target.name}"):
        where = Where(args.python, target, args.env_from, args.root, args.timeout)
        result = explain(
            text, gpus=args.gpu, where=None if args.log_only else where, origin=origin,
            driver=args.driver,
        )  # fmt: skip
    if out.json_mode:
        out.emit("explain", rendering.body(result))
    else:
        out.print_lines(rendering.text(result, out.verbosity > 0))
    return result.exit_code
