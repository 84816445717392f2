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
import re
import sys
from typing import TYPE_CHECKING, Any

from archgap.cli import options as opt
from archgap.cli.common import (
    EXIT_ERROR,
    EXIT_GAP,
    EXIT_OK,
    Output,
    UsageError,
    request_or_usage_error,
    target_from_args,
)
from archgap.report.visible import one_line
from archgap.request import DEFAULT_SECTIONS

if TYPE_CHECKING:
    from archgap.probe.facts import ProbeResponse

HELP = "raw facts of this machine (or a remote one) as JSON; a health check with --require"
DESCRIPTION = (
    "Print the facts archgap collects on a machine (GPUs, driver, toolkits, the Python "
    "environment and its kernels) as one JSON document. Exit 0; 1 when a --require'd GPU is "
    "missing; 2 when the facts could not be collected."
)
OPTIONS = (
    opt.ENVIRONMENT,
    opt.TARGET,
    opt.sections_option(
        ",".join(DEFAULT_SECTIONS), help="comma-separated sections to collect (default %(default)s)"
    ),
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


def missing_required(facts: ProbeResponse, required: list[str]) -> list[str]:
    """The required GPUs (by compute capability) that the facts do not show."""
    from archgap.analysis.compat import ComputeCapability, UnknownGpu, resolve_gpu

    present: set[str] = set()
    gpu = facts.section("gpu") or {}
    for entry in gpu.get("gpus") or []:
        cc = ComputeCapability.parse(str(entry.get("compute_capability", "")))
        if cc is not None:
            present.add(str(cc))
    missing = []
    for text in required:
        try:
            wanted = str(resolve_gpu(text).compute_capability)
        except UnknownGpu as exc:
            raise UsageError(str(exc)) from exc
        if wanted not in present:
            missing.append(f"{text} (compute capability {wanted})")
    return missing


# What a host name may keep in a file name: no path separator, no leading dot (a reader skips
# dot files: they are documents still being written).
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def document_path(directory: str, host: str) -> str:
    """Where ``--out`` puts a host's document: its name with only safe characters kept."""
    name = _UNSAFE.sub("_", host).lstrip(".") or "unnamed"
    return os.path.join(directory, f"{name[:200]}.json")


def emit(args: argparse.Namespace, out: Output, body: dict[str, Any], host: str) -> None:
    """The probe document on stdout, or with ``--out`` in the directory under the host's name."""
    if not args.out:
        out.emit("probe", body)
        return
    from archgap.cli.engines import write_atomic
    from archgap.report.jsondoc import document, dumps

    write_atomic(document_path(args.out, host), dumps(document("probe", body)) + "\n", "--out")


def run(args: argparse.Namespace, out: Output) -> int:
    from archgap.codec import encode
    from archgap.transport.bootstrap import probe_input, standalone_script
    from archgap.transport.run import TransportFailure, run_probe

    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    required = args.require
    target = target_from_args(args)
    python = args.python if (args.python or target.is_local) else target.python
    request = request_or_usage_error(sections, python)
    if args.script:
        sys.stdout.write(standalone_script(probe_input(request, "/", args.env_from)))
        return EXIT_OK
    if args.root != "/" and not target.is_local:
        raise UsageError("--root works only on this machine")
    if args.out and not os.path.isdir(args.out):
        raise UsageError(f"--out {args.out}: not a directory")
    result = run_probe(target, request, args.timeout, args.root, args.env_from)
    if isinstance(result, TransportFailure):
        body: dict[str, Any] = {
            "target": target.name,
            "transport": target.kind,
            "error": {"kind": result.kind, "message": result.message, "stderr": result.stderr},
        }
        emit(args, out, body, target.name if not target.is_local else os.uname().nodename)
        from archgap.api import describe

        sys.stderr.write(f"archgap: {one_line(describe(result))}\n")  # the document has it all
        return EXIT_ERROR
    env_problem = result.errors.get("env_from")
    if env_problem:
        raise UsageError(f"--env-from {args.env_from}: {env_problem}")
    missing = missing_required(result, required) if required else []
    emit(
        args,
        out,
        {
            "target": target.name,
            "transport": target.kind,
            "facts": encode(result),
            "required": required,
            "missing": missing,
        },
        result.host or target.name,
    )
    if missing:
        sys.stderr.write(f"archgap: required GPU not present: {', '.join(missing)}\n")
        return EXIT_GAP
    return EXIT_OK
