"""archgap gpus [GPU...]: the GPUs archgap knows, with compute capability, architecture, the
family-specific targets that run on each, and the source of each entry (kb/gpus.json)."""

from __future__ import annotations

import argparse

from archgap.cli import options as opt
from archgap.cli.common import EXIT_OK, Output

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


def run(args: argparse.Namespace, out: Output) -> int:
    from archgap.api import gpus
    from archgap.report import gpus as rendering
    from archgap.report.formats import show

    show(out, "gpus", rendering.rows(gpus(args.names)))
    return EXIT_OK
