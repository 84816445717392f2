"""archgap matrix PACKAGE... --gpu GPU... --out DIR: a compatibility matrix of the packages' last
releases x variants x GPUs, judged from the wheels (only the zip directory and the native members
are fetched where the index allows ranges), as a static site and a JSON document.

Exit codes: 0 the site was written and some variant was judged, 2 nothing could be judged (no
release listed, an index or every wheel that fails) or a usage error."""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace

from archgap.cli import options as opt
from archgap.cli.common import EXIT_ERROR, EXIT_OK, Output

HELP = "a compatibility matrix (releases x variants x GPUs) of packages, from their wheels"
DESCRIPTION = (
    "Judge the last releases of each PACKAGE, every variant (a local label such as +cu130, the "
    "same version on another index) on every GPU, from its wheel, and write a static site "
    "(DIR/index.html, a page per package whose cells link to their evidence) and DIR/matrix.json. "
    "A cell is computed once per wheel sha256: DIR/matrix-cache.json keeps them, and a rerun "
    "fetches only wheels it has not seen."
)
CACHE = "matrix-cache.json"
OPTIONS = (
    opt.option(
        "packages",
        metavar="PACKAGE",
        nargs="+",
        help="a project name, or a requirement that narrows the versions (torch>=2.8)",
    ),
    opt.listed(
        "--gpu",
        "GPU",
        "a GPU column: a compute capability (12.0, sm_120) or a name (H100, RTX PRO 6000); "
        "repeatable, comma-separated",
        required=True,
    ),
    opt.option(
        "--versions",
        metavar="N",
        type=int,
        default=5,
        help="the releases per package, newest first (default 5; each with all its variants)",
    ),
    opt.option("--out", metavar="DIR", required=True, help="the folder the site is written to"),
    opt.Group(
        (
            *(o for o in opt.INDEXES if "--platform" not in o.names),
            opt.listed(
                "--platform",
                "TAG",
                "choose wheels for this platform tag (manylinux_2_28_aarch64); repeatable, "
                "comma-separated: each platform's wheels are variants (default: this machine's)",
            ),
        ),
        title="where and for what (pip's index settings apply)",
    ),
    opt.output(),
)


def run(args: argparse.Namespace, out: Output) -> int:
    from archgap.api import matrix
    from archgap.cli.engines import write_atomic
    from archgap.errors import UsageError
    from archgap.report import matrix as rendering
    from archgap.report.jsondoc import dumps
    from archgap.report.visible import terminal_safe

    started = time.monotonic()
    folder = args.out
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {folder}: {exc.strerror or exc}") from None
    with out.counter("judging") as tell:
        report = matrix(
            args.packages, gpus=args.gpu, versions=args.versions,
            options=replace(opt.index_options(args), platform=None), platforms=args.platform,
            cache=os.path.join(folder, CACHE), progress=tell,
        )  # fmt: skip
    elapsed = time.monotonic() - started
    doc = rendering.body(report, elapsed)
    write_atomic(os.path.join(folder, "matrix.json"), dumps(doc) + "\n", "--out")
    write_atomic(os.path.join(folder, "index.html"), rendering.index_page(report), "--out")
    for package in report.packages:
        page = os.path.join(folder, rendering.page_name(package.package))
        write_atomic(page, rendering.package_page(report, package), "--out")
    if out.json_mode:
        out.emit("matrix", {k: v for k, v in doc.items() if k not in _ENVELOPE})
    elif not out.quiet:  # index data in it: no markup, control characters shown
        sys.stdout.write(terminal_safe(rendering.text(report, folder, elapsed)))
    judged = any(v.cells for p in report.packages for v in p.variants)
    return EXIT_OK if judged else EXIT_ERROR


_ENVELOPE = ("schema_version", "archgap_version", "command")
