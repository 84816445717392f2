"""archgap recipe: the build targets for a set of GPUs, in each build system's spelling.

Exit codes: 0 the recipe gives every GPU native code; 1 a GPU gets only PTX or nothing with the
toolkit (a dropped or not yet known target); 2 usage error (unknown GPU or toolkit, unreadable
--from, no GPU given or found).
"""

from __future__ import annotations

import argparse

from archgap.cli import options as opt
from archgap.cli.common import Output

HELP = "the build targets for a set of GPUs (TORCH_CUDA_ARCH_LIST, CMake, nvcc ...)"
DESCRIPTION = (
    "The fewest build targets whose code runs natively on every given GPU, chosen with the same "
    "rules as the verdicts and proven by the verdict of a library built from them; spelled for "
    "TORCH_CUDA_ARCH_LIST, FLASHINFER_CUDA_ARCH_LIST, CMAKE_CUDA_ARCHITECTURES and nvcc -gencode."
)
OPTIONS = (
    opt.gpu_option(
        "a GPU to build for: compute capability (12.0, sm_120) or name (H100, GB10); "
        "repeatable, comma-separated"
    ),
    opt.from_option(
        "the GPUs of a fleet: archgap probe documents (as `archgap fleet --from` reads)", default=[]
    ),
    opt.option(
        "--toolkit",
        metavar="VERSION",
        help="the CUDA toolkit that builds (12.8, 13.0); default: the newest known that can "
        "build native code for every GPU",
    ),
    opt.flag(
        "--arch-specific",
        "kernels use arch-specific instructions (wgmma, tcgen05): 'a'/'f' targets",
    ),
    opt.option(
        "--no-ptx", dest="ptx", action="store_false", help="no PTX for forward compatibility"
    ),
    opt.output(),
)


def run(args: argparse.Namespace, out: Output) -> int:
    from archgap.api import recipe
    from archgap.report.formats import show

    result = recipe(
        args.gpu, from_paths=args.from_paths, toolkit=args.toolkit,
        arch_specific=bool(args.arch_specific), ptx=bool(args.ptx),
    )  # fmt: skip
    show(out, "recipe", result)
    return result.exit_code
