"""archgap probe: the raw facts of this machine (or of --host/--container/--pod/--via) as JSON.

What a fleet collects, so any engine can run it; with ``--require GPU`` also a health check
(a Slurm prolog, a readiness probe): exit 1 when a required GPU is not present.
``--script`` prints a standalone, standard-library-only Python file that prints the same facts,
for engines that copy a file and run it (Ansible ``script``, clush, a Kubernetes Job).
``--out DIR`` writes the document to ``DIR/HOST.json`` instead, atomically, so that every node can
push its own (a Slurm Epilog, a systemd timer) and one ``fleet --from DIR`` reads them all.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from archgap.cli import options as opt
from archgap.cli.common import (
    EXIT_OK,
    Output,
    UsageError,
    target_from_args,
)
from archgap.report.visible import one_line
from archgap.request import DEFAULT_SECTIONS

HELP = "raw facts of this machine (or a remote one) as JSON; a health check with --require"
DESCRIPTION = (
    "Print the facts archgap collects on a machine (GPUs, driver, toolkits, the Python "
    "environment and its kernels) as one JSON document. Exit 0; 1 when a --require'd GPU is "
    "missing; 2 when the facts could not be collected."
)
OPTIONS = (
    opt.ENVIRONMENT,
    opt.TARGET,
    opt.sections_option(DEFAULT_SECTIONS, "the sections to collect, comma-separated"),
    opt.env_from_option("read the service's environment (on the target) instead of the shell's"),
    opt.require_option(
        "exit 1 unless a GPU of this compute capability is present (12.0, sm_120, a name); "
        "repeatable, comma-separated"
    ),
    opt.flag(
        "--script",
        "print a standalone Python (>= 3.8, stdlib only) probe script instead of running it",
    ),
    opt.option(
        "--out",
        metavar="DIR",
        help="write the document to DIR/HOST.json (atomically: a dot file renamed into place) "
        "instead of stdout, for `archgap fleet --from DIR`",
    ),
    opt.output(("json",)),
    # Always one JSON document on stdout (a failure too): what engines and `fleet --from` read.
    opt.Defaults({"format": "json"}),
)


def emit(args: argparse.Namespace, out: Output, body: dict[str, Any], host: str) -> None:
    """The probe document on stdout, or with ``--out`` in the directory under the host's name."""
    if not args.out:
        out.emit("probe", body)
        return
    from archgap.cli.engines import write_atomic
    from archgap.report.jsondoc import document, dumps
    from archgap.report.probe import document_path

    write_atomic(document_path(args.out, host), dumps(document("probe", body)) + "\n", "--out")


def run(args: argparse.Namespace, out: Output) -> int:
    from archgap.api import describe, probe, probe_script
    from archgap.report.probe import body

    target = target_from_args(args)
    if args.script:
        python = args.python if (args.python or target.is_local) else target.python
        sys.stdout.write(probe_script(python, sections=args.sections, env_from=args.env_from))
        return EXIT_OK
    if args.out and not os.path.isdir(args.out):
        raise UsageError(f"--out {args.out}: not a directory")
    result = probe(
        args.python, sections=args.sections, target=target, env_from=args.env_from,
        require=args.require, root=args.root, timeout=args.timeout,
    )  # fmt: skip
    here = os.uname().nodename if target.is_local else target.name
    emit(args, out, body(result), (result.facts.host if result.facts else "") or here)
    if result.failure is not None:
        # one line; the document on stdout carries the tool's whole stderr
        sys.stderr.write(f"archgap: {one_line(describe(result.failure))}\n")
    elif result.missing:
        sys.stderr.write(f"archgap: required GPU not present: {', '.join(result.missing)}\n")
    return result.exit_code
