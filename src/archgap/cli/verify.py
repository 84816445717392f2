"""archgap verify: load every kernel library on the GPU through the CUDA driver, and compare.

Exit codes: 0 every settled prediction agrees with the driver; 1 a disagreement (a bug in
archgap's rules), or a library named on the command line did not load (or only partly, or the
driver hung); 2 no GPU or no driver (libcuda.so.1 missing, cuInit failing), or a usage error.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from archgap.cli import options as opt
from archgap.cli.common import (
    EXIT_ERROR,
    EXIT_GAP,
    EXIT_OK,
    VERDICT_STYLE,
    Output,
    UsageError,
    check_local_paths,
    emit_text,
    escape,
    is_remote,
    target_from_args,
)
from archgap.probe.verify import DEFAULT_GPU_TIMEOUT

if TYPE_CHECKING:
    from archgap.analysis.verify import Check, VerifyReport

# A whole verify (every GPU model, each killed at --gpu-timeout) may take long on a big stack.
TOTAL_TIMEOUT = 3600.0


HELP = "load every kernel library through the CUDA driver and compare with the scan"
DESCRIPTION = (
    "Ground truth on the GPU: load each library's device code as the CUDA runtime picks it (SASS, "
    "else PTX through the driver's JIT) with cuModuleLoadDataEx, in a child process per GPU, and "
    "compare with the scan's prediction. Never imports a package, never launches a kernel; each "
    "module is unloaded before the next."
)
OPTIONS = (
    opt.option("paths", nargs="*", metavar="PATH", help="libraries or directories"),
    opt.option(
        "--python",
        metavar="PATH",
        help="verify the native libraries of this interpreter's environment (default: archgap's "
        "own); with PATHs, only the interpreter that runs the probe on a remote target",
    ),
    opt.repeated(
        "--gpu-index",
        "N",
        "load on this GPU (CUDA index in PCI bus order, as nvidia-smi numbers them, among those "
        "CUDA_VISIBLE_DEVICES leaves); repeatable. Default: one GPU of each model",
        type=int,
    ),
    opt.option(
        "--gpu-timeout",
        type=float,
        default=DEFAULT_GPU_TIMEOUT,
        metavar="S",
        help="kill the loader of one GPU after this many seconds (default %(default)g)",
    ),
    opt.output(),
    opt.target(timeout_default=TOTAL_TIMEOUT),
    opt.hidden("--root", default="/"),
)


def run(args: argparse.Namespace, out: Output) -> int:
    from archgap.api import ProbeError, verify

    paths: list[str] = []
    if args.paths:
        check_local_paths(args, args.paths)
        # Absolute paths on this machine: the report names the files to whoever reads it.
        paths = args.paths if is_remote(args) else [os.path.abspath(p) for p in args.paths]
    target = target_from_args(args)
    try:
        with out.status(f"loading device code on {target.name}"):
            report = verify(
                paths, args.python, args.gpu_index, target, args.gpu_timeout, args.root,
                args.timeout,
            )  # fmt: skip
    except ProbeError as exc:
        raise UsageError(str(exc)) from exc
    if out.json_mode:
        out.emit("verify", _body(report))
    else:
        emit_text(_text(report), out)
    return _exit_code(report, named=bool(args.paths))


def _exit_code(report: VerifyReport, named: bool) -> int:
    if report.error or not report.gpus:
        return EXIT_ERROR
    failed = [c for c in report.checks if c.load_failure] if named else []
    failed += [c for c in report.checks if c.failures]  # part of the chosen code did not load
    hung = any(g.status != "ok" for g in report.gpus)
    return EXIT_GAP if report.disagreements or failed or hung else EXIT_OK


def _body(report: VerifyReport) -> dict[str, Any]:
    return {
        "driver": {
            "library": report.driver_library,
            "cuda_version": report.driver_cuda,
            "driver_version": report.driver_version,
            "ptx_isa": report.driver_ptx_isa,
            "error": report.error,
        },
        "gpus": report.gpus,
        "checks": [dict(_check_json(c)) for c in report.checks],
        "agreements": report.agreements,
        "settled": len(report.settled),
        "disagreements": report.disagreements,
        "load_failures": sum(1 for c in report.checks if c.load_failure),
        "skipped": [{"path": p, "reason": r} for p, r in report.skipped],
        "problems": [{"subject": s, "reason": r} for s, r in report.problems],
    }


def _check_json(check: Check) -> dict[str, Any]:
    from archgap.codec import encode

    data: dict[str, Any] = encode(check)
    data.update(agrees=check.agrees if check.settled else None, load_failure=check.load_failure)
    return data


def _observed(check: Check) -> str:
    empty = f", {check.empty} with nothing for this GPU" if check.empty else ""
    counted = f"{check.loaded}/{check.images} containers{empty}"
    if check.observed == "native":
        functions = "" if check.functions is None else f", {check.functions} functions"
        return f"{check.target} loaded ({counted}{functions})"
    if check.observed == "jit":
        jit = f"driver JIT {check.jit_ms:.1f} ms, " if check.jit_ms is not None else ""
        return f"{check.target} JIT-compiled ({counted}; {jit}{check.seconds * 1000:.1f} ms wall)"
    return check.observation


def _check_line(check: Check) -> str:
    name = escape(check.path.rsplit("/", 1)[-1])
    style = VERDICT_STYLE.get(check.observed, "")
    if not check.settled:
        mark = "[magenta]unsettled[/]"
    elif check.agrees:
        mark = "[green]agree[/]   "
    else:
        mark = "[bold red]DISAGREE[/]"
    predicted = "" if check.agrees else f" (scan: {check.predicted})"
    line = f"  {mark} [{style}]{check.observed}[/]{predicted} {name} — {escape(_observed(check))}"
    for failure in check.failures:
        why = failure.error or failure.error_log or "not loaded"
        line += f"\n      [bold red]not loaded:[/] {escape(failure.image)}: {escape(why)}"
    return line


def _text(report: VerifyReport) -> list[str]:
    driver = f"CUDA {report.driver_cuda}" if report.driver_cuda else "CUDA ?"
    if report.driver_version:
        driver += f", driver {report.driver_version}"
    lines = [f"[bold]Driver[/] {escape(report.driver_library)} ({escape(driver)})"]
    if report.error:
        lines.append(f"[bold red]no GPU to verify on:[/] {escape(report.error)}")
    for subject, reason in report.problems:
        lines.append(f"[magenta]![/] {escape(subject)}: {escape(reason)}")
    for gpu in report.gpus:
        checks = [c for c in report.checks if c.gpu_index == gpu.index]
        lines.append(
            f"\n[bold]GPU {gpu.index}[/] {escape(gpu.name)} ({gpu.compute_capability}) — "
            f"{len(checks)} libraries in {gpu.seconds:.2f} s"
        )
        if gpu.error:
            lines.append(f"  [bold red]{escape(gpu.status)}:[/] {escape(gpu.error)}")
        lines += [_check_line(c) for c in checks]
    for path, reason in report.skipped:
        lines.append(f"[dim]skipped {escape(path)}: {escape(reason)}[/]")
    for bug in report.disagreements:
        lines += ["", "[bold red]A bug in archgap's rules[/] (ready to file):"]
        lines += [escape(line) for line in bug.report.splitlines()]
    settled = len(report.settled)
    failures = sum(1 for c in report.checks if c.load_failure)
    lines.append(
        f"\n[bold]{report.agreements} of {settled}[/] predictions agree with the driver"
        f" · {len(report.disagreements)} disagreements · {failures} load failures"
    )
    return lines
