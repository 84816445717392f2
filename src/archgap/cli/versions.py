"""archgap versions PACKAGE --gpu GPU: which released version (or variant: a local label such as
+cu130, the same version on another index) covers the GPU, judged from the wheels before any is
installed; newest first, and the exact pip command for the newest that covers it.

Exit codes: 0 a variant covers every named GPU, 1 variants were judged and none covers them,
2 nothing could be judged (no wheel for the target, an index that fails, unreadable wheels)."""

from __future__ import annotations

import argparse
import time
from typing import Any

from archgap.cli import options as opt
from archgap.cli.common import Output

HELP = (
    "which released version or variant (+cu130, another index) of a package covers a GPU, and "
    "the pip command for it"
)
DESCRIPTION = (
    "List the versions and variants of PACKAGE on your indexes, newest first, each judged on the "
    "GPU from its wheel (as scan WHEEL --gpu judges it; only the zip directory and the native "
    "members are fetched where the index allows ranges)."
)
OPTIONS = (
    opt.option(
        "package",
        metavar="PACKAGE",
        help="a project name, or a requirement that narrows the versions (torch>=2.8)",
    ),
    opt.listed(
        "--gpu",
        "GPU",
        "the GPU to cover: a compute capability (12.0, sm_120) or a name (H100, RTX PRO "
        "6000); repeatable, comma-separated (a variant must cover them all)",
        required=True,
    ),
    opt.flag(
        "--first",
        "stop at the newest variant that covers the GPU (older wheels are not fetched)",
    ),
    opt.option(
        "--driver",
        metavar="VERSION",
        help="judge PTX against this NVIDIA driver (580.65.06, or a branch: 580): the PTX ISA it "
        "can JIT",
    ),
    opt.flag("--strict", "a 'partial' variant does not cover the GPU"),
    opt.option(
        "--constraints",
        metavar="FILE",
        help="also write a constraints file for pip and uv (pip install -c FILE, uv pip install -c "
        "FILE): "
        "NAME!=VERSION for each version read that has nothing for a GPU, with why after '#'",
    ),
    opt.Group(opt.INDEXES, title="where and for what (pip's index settings apply)"),
    opt.output(opt.TABLE_FORMATS),
)


def run(args: argparse.Namespace, out: Output) -> int:
    from archgap.api import versions
    from archgap.index.resolve import indexes
    from archgap.report import versions as rendering
    from archgap.report.formats import View, show

    started = time.monotonic()
    options = opt.index_options(args)
    each = None
    if not out.json_mode and out.format == "text" and not out.quiet:
        urls = indexes(options.index_url, list(options.extra_index_urls))

        def each(variant: Any) -> None:  # as soon as it is decided, in a pipe too
            print(rendering.decided(variant, urls), flush=True)

    with out.counter(f"judging {args.package}") as tell:
        report = versions(
            args.package, gpus=args.gpu, options=options, first=args.first,
            driver=args.driver, strict=args.strict, progress=tell, each=each,
        )  # fmt: skip
    elapsed = time.monotonic() - started
    show(out, "versions", report, View(elapsed=elapsed, first=args.first))
    if args.constraints:
        _write_constraints(args.constraints, report, args.first, out)
    return report.exit_code


def _write_constraints(path: str, report: Any, first: bool, out: Output) -> None:
    """The constraints file, only when a variant was judged: a file that excludes nothing
    because nothing could be read would look like a clean bill (fail closed)."""
    from archgap.cli.engines import write_atomic
    from archgap.errors import UsageError
    from archgap.report.versions import constraints

    if not report.judged:
        raise UsageError(f"--constraints {path}: no variant could be judged; nothing written")
    write_atomic(path, constraints(report, first), "--constraints")
    out.note(f"constraints written to {path}")
