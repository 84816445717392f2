"""archgap gates [DIST ...]: the code in each package that detects or gates GPU architectures."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from archgap.cli import options as opt
from archgap.cli.common import EXIT_ERROR, EXIT_OK, Output, UsageError, probe_facts

if TYPE_CHECKING:
    from archgap.probe.facts import GatesFacts


HELP = "where packages detect or gate GPU architectures, grouped by function"
DESCRIPTION = (
    "Capability queries (get_device_capability, get_arch_list, cudaGetDeviceProperties, NVML), "
    "comparisons on major/minor/capability/sm numbers, *ARCH* environment reads, and "
    "raises/asserts/warnings whose message names an SM, a compute capability, an architecture or "
    "a CUDA version: each with its branch conditions."
)
OPTIONS = (
    opt.option(
        "dists",
        nargs="*",
        metavar="DIST",
        help="installed distributions to map (default: all of site-packages)",
    ),
    opt.repeated("--path", "PATH", "a file or directory to map instead (repeatable)"),
    opt.listed(
        "--kind",
        "KIND",
        "only these kinds (repeatable, comma-separated): capability-call, arch-list-call, "
        "device-properties-call, nvml-call, comparison, arch-env, raise, assert, warning",
    ),
    opt.ALL_TREES,
    opt.ENVIRONMENT,
    opt.output(opt.TABLE_FORMATS),
    opt.TARGET,
)


def run(args: argparse.Namespace, out: Output) -> int:
    from archgap.cli.common import check_local_paths, emit_shown, probe_section
    from archgap.codec import decode
    from archgap.probe.facts import GatesFacts
    from archgap.request import gates_request

    check_local_paths(args, args.path)
    from archgap.report import gates as shown

    kinds = tuple(args.kind)
    unknown = [k for k in kinds if k not in shown.KINDS]
    if unknown:
        raise UsageError(f"--kind {', '.join(unknown)}: choose from {', '.join(shown.KINDS)}")
    request = gates_request(args.dists, args.path, args.python)
    facts = decode(GatesFacts, probe_section(probe_facts(args, out, request), "gates"))
    if facts.error:
        out.error(facts.error)
        return EXIT_ERROR
    facts, left = shown.select(facts, kinds, bool(args.show_all))
    emit_shown(out, args, shown, facts, left, render)
    return EXIT_OK


def render(facts: GatesFacts, lines: list[str]) -> None:
    from archgap.cli.common import escape, short_path

    for target in facts.targets:
        count = sum(len(f.gates) for f in target.functions)
        lines.append(
            f"[bold]{escape(target.label)}[/]: {count} gates in {len(target.functions)} functions "
            f"[dim]({target.files_scanned} .py files, {target.candidate_files} read closely)[/]"
        )
        path = None
        for function in target.functions:
            if function.path != path:
                path = function.path
                lines.append(f"  [cyan]{escape(short_path(function.path, function.module))}[/]")
            lines.append(f"    [bold]{escape(function.function)}[/] [dim](line {function.line})[/]")
            for gate in function.gates:
                detail = gate.message or gate.detail
                lines.append(
                    f"      {gate.line:>5}  [magenta]{gate.kind}[/]  {escape(detail)}"
                    + (f"  [dim]when {escape(gate.condition)}[/]" if gate.condition else "")
                )
    for problem in facts.problems:
        lines.append(f"[yellow]skipped[/] {escape(problem.subject)}: {escape(problem.reason)}")
