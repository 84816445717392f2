"""archgap gpus [GPU...]: the GPUs archgap knows, with compute capability, architecture, the
family-specific targets that run on each, and the source of each entry (kb/gpus.json)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from archgap.cli import options as opt
from archgap.cli.common import EXIT_OK, Output, UsageError

if TYPE_CHECKING:
    from archgap.kb.gpus import GpuProduct


HELP = "the GPUs archgap knows: compute capability, architecture, family targets, source"
DESCRIPTION = (
    "List the GPU products archgap resolves names with (kb/gpus.json), newest compute capability "
    "first; like nvidia-smi -L for GPUs you do not have."
)
OPTIONS = (
    opt.option(
        "names",
        nargs="*",
        metavar="GPU",
        help="only these: a product name (H100, RTX PRO 6000) or a compute capability (12.0)",
    ),
    opt.output(opt.TABLE_FORMATS),
)


def select(names: list[str]) -> list[GpuProduct] | None:
    """The products the names denote (None: all); a name that denotes none is a usage error."""
    from archgap.analysis.compat import ComputeCapability, UnknownGpu, products_named, resolve_gpu
    from archgap.kb.gpus import products

    if not names:
        return None
    chosen: dict[str, GpuProduct] = {}
    for name in names:
        cc = ComputeCapability.parse(name)
        found = (
            [p for p in products() if p.compute_capability == str(cc)]
            if cc
            else list(products_named(name))
        )
        if not found:
            if cc:
                raise UsageError(f"no known GPU has compute capability {cc}")
            try:
                resolve_gpu(name)
            except UnknownGpu as exc:
                raise UsageError(str(exc)) from None
        chosen.update((p.name, p) for p in found)
    return list(chosen.values())


def run(args: argparse.Namespace, out: Output) -> int:
    from archgap.report import gpus

    items = gpus.rows(select(list(args.names)))
    if out.json_mode:
        out.emit("gpus", {"gpus": items})
    elif out.format in ("markdown", "csv"):
        sys.stdout.write(gpus.markdown(items) if out.format == "markdown" else gpus.csv(items))
    else:
        from archgap.report.table import text_lines

        lines = text_lines(gpus.table(items, True), out.width, out.terminal)
        out.lines([*lines, "", *gpus.sources(items)])
    return EXIT_OK
