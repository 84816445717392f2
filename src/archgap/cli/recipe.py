"""archgap recipe: the build targets for a set of GPUs, in each build system's spelling.

Exit codes: 0 the recipe gives every GPU native code; 1 a GPU gets only PTX or nothing with the
toolkit (a dropped or not yet known target); 2 usage error (unknown GPU or toolkit, unreadable
--from, no GPU given or found).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from archgap.cli import options as opt
from archgap.cli.common import EXIT_GAP, EXIT_OK, Output, UsageError, emit_text, escape

if TYPE_CHECKING:
    from archgap.analysis.compat import GpuTarget
    from archgap.analysis.recipe import Recipe


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


def _gpus(args: argparse.Namespace) -> list[GpuTarget]:
    from archgap.analysis.compat import UnknownGpu, resolve_gpu
    from archgap.analysis.recipe import gpus_of_fleet

    try:
        gpus = [resolve_gpu(name) for name in args.gpu]
    except UnknownGpu as exc:
        raise UsageError(str(exc)) from exc
    if args.from_paths:
        from archgap.transport.fleet import FleetInputError, read_documents

        try:
            facts = [h.facts for h in read_documents(args.from_paths) if h.facts is not None]
        except FleetInputError as exc:
            raise UsageError(str(exc)) from exc
        gpus += gpus_of_fleet(facts)
    if not gpus:
        raise UsageError("no GPU: name one with --gpu, or give fleet documents with --from")
    seen: dict[tuple[str, str], GpuTarget] = {}
    for gpu in gpus:
        seen.setdefault((gpu.label, str(gpu.compute_capability)), gpu)
    return sorted(seen.values(), key=lambda g: (g.compute_capability, g.label))


def _toolkit(text: str | None) -> str | None:
    from archgap.kb.toolchain import major_minor, targets_of

    if text is None:
        return None
    parsed = major_minor(text)
    if parsed is None or targets_of(text) is None:
        raise UsageError(f"--toolkit {text!r}: give a CUDA version such as 12.8 or 13.0 (>= 11.0)")
    return f"{parsed[0]}.{parsed[1]}"


def run(args: argparse.Namespace, out: Output) -> int:
    from archgap.analysis.recipe import recipe

    gpus = _gpus(args)
    result = recipe(gpus, _toolkit(args.toolkit), bool(args.arch_specific), bool(args.ptx))
    if out.json_mode:
        out.emit("recipe", body(result))
    else:
        emit_text(text_lines(result), out)
    return EXIT_OK if result.complete else EXIT_GAP


def body(result: Recipe) -> dict[str, Any]:
    oldest, newest = result.builds_with
    return {
        "gpus": result.gpus,
        "toolkit": result.toolkit,
        "toolkit_given": result.toolkit_given,
        "arch_specific": result.arch_specific,
        "ptx": result.ptx,
        "targets": [{"name": t.name, **_fields(t)} for t in result.targets],
        "builds_with": {"oldest": oldest, "newest": newest},
        "spellings": result.spellings,
        "notes": list(result.notes),
        "alternative": list(result.alternative),
        "complete": result.complete,
    }


def _fields(target: Any) -> dict[str, Any]:
    from archgap.codec import encode

    data: dict[str, Any] = encode(target)
    return data


def _toolkit_line(result: Recipe) -> str:
    oldest, newest = result.builds_with
    how = "given" if result.toolkit_given else "the newest known that builds for every GPU"
    span = f"CUDA {oldest or '?'} to {newest}" if newest else f"CUDA {oldest or '?'} or newer"
    return f"toolkit CUDA {result.toolkit} ({how}); these targets build with {span}"


def text_lines(result: Recipe) -> list[str]:
    names = ", ".join(f"{p.gpu} ({p.compute_capability})" for p in result.gpus)
    kind = "arch-specific" if result.arch_specific else "plain"
    lines = [f"[bold]Recipe[/] ({kind}) for {escape(names)}", _toolkit_line(result), ""]
    width = max((len(t.name) for t in result.targets), default=4)
    lines.append("[bold]targets[/]")
    for t in result.targets:
        need = f"CUDA >= {t.min_toolkit}" if t.min_toolkit else "no known toolkit"
        kind_text = "PTX " if t.kind == "ptx" else "SASS"
        lines.append(f"  {t.name.ljust(width)}  {kind_text}  {need:<14} {escape(t.why)}")
    lines += ["", "[bold]build systems[/]"]
    for key, value in result.spellings.items():
        shown = f'{key}="{value}"' if key != "nvcc" else f"nvcc {value}"
        lines.append(f"  {escape(shown)}" if value else f"  [dim]{key}: nothing to build[/]")
    lines.append("  [dim](FLASHINFER_CUDA_ARCH_LIST: FlashInfer's kernels take the a/f targets)[/]")
    lines += ["", "[bold]proof[/] the verdict of a library built from exactly these targets"]
    for p in result.gpus:
        style = "green" if p.verdict == "native" else "red"
        gpu = f"{escape(p.gpu)} ({p.compute_capability})"
        lines.append(f"  {gpu}  [{style}]{p.verdict}[/]  {escape(p.reason)}")
        if p.note:
            lines.append(f"    [red]{escape(p.note)}[/]")
    lines += ["", "[bold]a / f / plain[/]"]
    lines += [f"  {escape(n)}" for n in result.notes]
    other = "plain" if result.arch_specific else "--arch-specific"
    lines.append(f"  with {other}: {' '.join(result.alternative)}")
    require = " ".join(f"--require {_quoted(p)}" for p in result.gpus)
    lines += ["", f"check the build: archgap kernels BUILD_OUTPUT {escape(require)}"]
    return lines


def _quoted(proof: Any) -> str:
    """The GPU as --require takes it: its name when that resolves to it, else its capability."""
    from archgap.analysis.compat import UnknownGpu, resolve_gpu

    label = str(proof.gpu)
    try:
        same = str(resolve_gpu(label).compute_capability) == proof.compute_capability
    except UnknownGpu:
        same = False
    if not same:
        return str(proof.compute_capability)
    return f"'{label}'" if " " in label else label
