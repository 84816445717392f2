"""archgap kernels: the device code (SASS, PTX, LTO-IR) inside binaries, read from headers.

Exit codes: 0 every file was read (and, with --require, every library with device code runs
natively on every required GPU); 1 with --require: a library has nothing that runs on a required
GPU (with --strict: only PTX); 2 a path was missing or a file could not be read completely
(unreadable, truncated, corrupt, a symlink loop or a dangling link). Every file that could be read
is listed either way.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from archgap.cli import options as opt
from archgap.cli.common import (
    EXIT_ERROR,
    EXIT_GAP,
    EXIT_OK,
    Output,
    UsageError,
    emit_text,
    escape,
    is_remote,
    probe_facts,
    probe_section,
)

if TYPE_CHECKING:
    from archgap.analysis.build_gate import GateResult
    from archgap.analysis.compat import GpuTarget
    from archgap.index.deps import Chosen
    from archgap.probe.facts import BinaryFacts

from archgap.report.kernels import RIGHT_ALIGNED, file_rows, size

HELP = "list the fatbin entries (SASS, PTX, LTO-IR) in binaries"
DESCRIPTION = (
    "List the device code in shared libraries, executables, static archives, cubins and fatbins, "
    "from their headers only. Directories are walked. By default: what `cuobjdump "
    "--list-elf/--list-ptx` lists, with the 'f' variant kept, one row per target."
)
OPTIONS = (
    opt.option(
        "paths",
        nargs="+",
        metavar="PATH",
        help="files or directories; wheels (.whl) and conda packages (.conda, .tar.bz2), "
        "directories holding them and their URLs, requirements (sgl-kernel==0.3.21: as pip, a "
        "name that is no file here and has no /) resolved like pip from your indexes, and "
        "container images (oci:DIR[:TAG], docker-archive:FILE, docker://REF, rootfs:DIR) are "
        "read without installing or extracting them",
    ),
    opt.flag(
        "--deep",
        "also search data sections for containers and cubins cuobjdump does not list "
        "(cuBLASLt/cuDNN .cask_resource, cuFFT .ldata, .rodata, .data, __nv_relfatbin)",
    ),
    opt.show_all_option("files without device code, and one row per entry (not per target)"),
    opt.require_option(
        "CI gate for a build: exit 1 when a library with device code has nothing that runs on "
        "this GPU (12.0, sm_120, H100, GB10); repeatable, comma-separated"
    ),
    opt.STRICT,
    opt.RESOLVING,
    opt.REGISTRY,
    opt.output(opt.TABLE_FORMATS),
    opt.TARGET,
    opt.option("--python", help="the interpreter that runs the probe on a remote target"),
)


def _files(args: Any, out: Output, resolved: list[Chosen]) -> list[BinaryFacts]:
    """The files' device code: read here (files, wheels, requirements and images, whatever the
    target), or by the probe on the target (paths are that machine's); ``resolved`` is told the
    wheels requirements resolved to."""
    detail = bool(args.show_all) or out.json_mode  # else one row per kind of entry is enough
    if is_remote(args):
        from archgap.codec import decode
        from archgap.index.options import URL_SCHEMES
        from archgap.probe.facts import BinaryFacts
        from archgap.request import binaries_request

        if args.deps or any(p.startswith(URL_SCHEMES) for p in args.paths):
            raise UsageError("URLs and requirements are read here: not with a remote target")
        request = binaries_request(args.paths, bool(args.deep), detail)
        items = probe_section(probe_facts(args, out, request), "binaries")
        return [decode(BinaryFacts, item) for item in items]
    from archgap.binaries import local_binaries

    options = opt.index_options(args)
    with out.counter("Reading binaries") as tell:
        return local_binaries(args.paths, bool(args.deep), options, tell, resolved, detail)


def _required(names: Sequence[str]) -> list[GpuTarget]:
    """The --require GPUs (the GPU knowledge is loaded only when some are named)."""
    if not names:
        return []
    from archgap.analysis.compat import UnknownGpu
    from archgap.binaries import required_gpus

    try:
        return required_gpus(names)
    except UnknownGpu as exc:
        raise UsageError(str(exc)) from exc


def run(args: Any, out: Output) -> int:
    from archgap.report.kernels import body, summary

    required = _required(args.require)
    if args.strict and not required:
        raise UsageError("--strict needs --require GPU")
    started = time.perf_counter()
    resolved: list[Chosen] = []
    files = _files(args, out, resolved)
    counts = summary(files, bool(args.deep), time.perf_counter() - started)
    gate = None
    if required:  # the build gate's rules are imported only when asked (~0.1 s of start-up)
        from archgap.analysis.build_gate import check_build

        gate = check_build(files, required, bool(args.strict))
    if out.json_mode:
        out.emit("kernels", body(files, counts, gate, resolved))
    elif out.format in ("markdown", "csv"):
        from archgap.report import kernels as rendering

        render = rendering.markdown if out.format == "markdown" else rendering.csv
        sys.stdout.write(render(files, bool(args.show_all), counts, resolved))
        if gate is not None and out.format == "markdown":
            _print_gate(out, gate)
    else:
        if resolved:
            from archgap.report.kernels import resolved_lines

            emit_text([escape(line) for line in resolved_lines(resolved)] + [""], out)
        _print_text(out, files, set(args.paths), bool(args.show_all), counts)
        if gate is not None:
            _print_gate(out, gate)
    if counts["unreadable"]:
        return EXIT_ERROR
    return EXIT_GAP if gate is not None and not gate.passed else EXIT_OK


def _print_gate(out: Output, gate: GateResult) -> None:
    from archgap.cli.common import escape

    mode = " (strict: PTX only fails)" if gate.strict else ""
    gpus = ", ".join(gate.gpus)
    if gate.passed:
        emit_text(
            [
                f"[green]require {escape(gpus)}{mode}: pass[/] — every one of "
                f"{gate.libraries} libraries with device code runs natively"
                + ("" if gate.strict else " or through PTX")
                + " on each"
            ],
            out,
        )
        return
    lines = [f"[red]require {escape(gpus)}{mode}: FAIL[/] ({len(gate.failures)} gap(s))"]
    for f in gate.failures:
        where = escape(f.path) if f.path else "(build output)"
        expected = " or ".join(f.expected) or "nothing the recipe can build"
        lines.append(f"  {where} on {escape(f.gpu)} ({f.compute_capability}): {f.verdict}")
        lines.append(f"    {escape(f.reason)}")
        lines.append(f"    expected from the recipe: {expected}")
    lines.append(f'  recipe: TORCH_CUDA_ARCH_LIST="{gate.recipe}"')
    lines.append(f"          nvcc {gate.recipe_nvcc}")
    emit_text(lines, out)


def _columns(
    header: Sequence[str], rows: Sequence[tuple[list[str], bool]], colour: bool
) -> list[str]:
    """Rows aligned under a header (numbers right-aligned); rows that cuobjdump skips in cyan,
    or marked with a * where there is no colour."""
    from archgap.report.table import Cell, Column, Table, text_lines

    columns = tuple(Column(h, align="right" if h in RIGHT_ALIGNED else "left") for h in header)
    table_rows = []
    for texts, listed in rows:
        if not listed and not colour:
            texts = [texts[0] + " *", *texts[1:]]
        table_rows.append(tuple(Cell(t, "" if listed else "cyan") for t in texts))
    return text_lines(Table(columns, tuple(table_rows), keys=0, indent="  "), None, styled=True)


def _print_text(
    out: Output,
    files: Sequence[BinaryFacts],
    named: set[str],
    show_all: bool,
    summary: dict[str, Any],
) -> None:
    lines: list[str] = []
    quiet = 0
    for facts in files:
        title = f"[bold]{escape(facts.path)}[/]  [dim]{facts.format}, {size(facts.size)}[/]"
        if facts.error:
            title += f"  [red]{escape(facts.error)}[/]"
        if not facts.entries:
            if facts.error or show_all or facts.path in named:
                lines.append(title + ("" if facts.error else "  [dim]no device code[/]"))
            else:
                quiet += 1
            continue
        lines.append(title)
        columns, rows = file_rows(facts, show_all)
        lines.extend(_columns(columns, rows, out.colour))
        lines.append("")
    line = (
        f"{summary['files']} files, {summary['files_with_device_code']} with device code, "
        f"{summary['entries']} entries"
    )
    if summary["deep"]:
        hidden = summary["entries"] - summary["listed_entries"]
        marked = "in cyan" if out.colour else "marked *"
        line += f" ({hidden} not listed by cuobjdump, {marked})"
    if quiet:
        line += f", {quiet} without device code not shown (--all shows them)"
    if summary["unreadable"]:
        line += f", [red]{summary['unreadable']} not fully readable[/]"
    line += f" — {summary['seconds']:.2f} s"
    lines.append(line)
    emit_text(lines, out)
