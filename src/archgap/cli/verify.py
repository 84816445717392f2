"""archgap verify: load every kernel library on the GPU through the CUDA driver, and compare.

Exit codes: 0 every settled prediction agrees with the driver; 1 a disagreement (a bug in
archgap's rules), or a library named on the command line did not load (or only partly, or the
driver hung); 2 no GPU or no driver (libcuda.so.1 missing, cuInit failing), or a usage error.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from archgap.cli import options as opt
from archgap.cli.common import (
    Output,
    target_from_args,
)
from archgap.probe.actions.verify import DEFAULT_GPU_TIMEOUT

if TYPE_CHECKING:
    pass

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
    from archgap.api import verify
    from archgap.report.formats import show

    target = target_from_args(args)
    with out.status(f"loading device code on {target.name}"):
        report = verify(
            args.paths, python=args.python, gpu_indices=args.gpu_index, target=target,
            gpu_timeout=args.gpu_timeout, root=args.root, timeout=args.timeout,
        )  # fmt: skip
    show(out, "verify", report)
    return report.exit_code(named=bool(args.paths))
