"""archgap kernels: the device code (SASS, PTX, LTO-IR) inside binaries, read from headers.

Exit codes: 0 every file was read (and, with --require, every library with device code runs
natively on every required GPU); 1 with --require: a library has nothing that runs on a required
GPU (with --strict: only PTX; with --require claimed: it lacks a claimed architecture); 2 a path
was missing or a file could not be read completely (unreadable, truncated, corrupt, a symlink
loop or a dangling link). Every file that could be read is listed either way.
"""

from __future__ import annotations

from typing import Any

from archgap.cli import options as opt
from archgap.cli.common import (
    Output,
    target_from_args,
)

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
        "this GPU (12.0, sm_120, H100, GB10); repeatable, comma-separated. 'claimed': each "
        "architecture the build claims (TORCH_CUDA_ARCH_LIST, CMAKE_CUDA_ARCHITECTURES, "
        "CMakeCache.txt, compile_commands.json, [tool.archgap] require: the first found), and "
        "what each PEP 817 variant wheel's variant.json declares (nvidia :: sm_arch) for itself"
    ),
    opt.option(
        "--claims-from",
        metavar="FILE|ENV",
        help="with --require claimed: where the claims are (a CMakeCache.txt, a "
        "compile_commands.json, a pyproject.toml; TORCH_CUDA_ARCH_LIST, CMAKE_CUDA_ARCHITECTURES "
        "or CUDAARCHS, from the environment or as NAME=VALUE)",
    ),
    opt.STRICT,
    opt.RESOLVING,
    opt.REGISTRY,
    # sarif (code scanning) and github (workflow commands: annotations) for a CI gate
    opt.output((*opt.TABLE_FORMATS, "sarif", "github")),
    opt.TARGET,
    opt.option("--python", help="the interpreter that runs the probe on a remote target"),
)


def run(args: Any, out: Output) -> int:
    from archgap.api import kernels
    from archgap.report.formats import View, show

    target = target_from_args(args)
    show_all = bool(args.show_all)
    settings = {
        "deep": bool(args.deep), "require": args.require, "strict": bool(args.strict),
        "target": target, "root": getattr(args, "root", "/"), "timeout": args.timeout,
        "detail": show_all or out.json_mode,  # else one row per kind of entry is enough
        "strings": out.json_mode,  # a library's strings (dlopen names...): the document's only
        "options": opt.index_options(args),
        "claims_from": args.claims_from, "config": not getattr(args, "no_config", False),
    }  # fmt: skip
    if target.is_local:
        with out.counter("Reading binaries") as tell:
            result = kernels(args.paths, progress=tell, **settings)
    else:
        with out.step(f"probing {target.name}"):
            result = kernels(args.paths, **settings)
    if result.missing and not out.json_mode:  # the document lists them as unreadable rows
        out.error(f"no such file or directory: {', '.join(result.missing)}")
    show(out, "kernels", result, View(detail=show_all))
    return result.exit_code
