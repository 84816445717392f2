"""archgap gates [DIST ...]: the code in each package that detects or gates GPU architectures."""

from __future__ import annotations

import argparse

from archgap.cli import options as opt
from archgap.cli.common import EXIT_OK, Output, inspected_python, target_from_args

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
    opt.gpu_option(
        "only the raises and asserts that reject this GPU: each gate's branch evaluated for its "
        "compute capability (repeatable; not with --kind)"
    ),
    opt.ALL_TREES,
    opt.ENVIRONMENT,
    opt.output(opt.TABLE_FORMATS),
    opt.TARGET,
)


def run(args: argparse.Namespace, out: Output) -> int:
    from archgap.api import gates
    from archgap.report.formats import View, show

    target = target_from_args(args)
    with out.step(f"probing {target.name}"):
        result = gates(
            args.dists, paths=args.path, python=args.python, kinds=args.kind, gpus=args.gpu,
            target=target, show_all=bool(args.show_all), root=args.root, timeout=args.timeout,
        )  # fmt: skip
    show(out, "gates", result, View(python=inspected_python(args)))
    return EXIT_OK
