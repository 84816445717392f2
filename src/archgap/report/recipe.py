"""A build recipe (``api.recipe``) as text and as its JSON document's body."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from archgap.report.markup import escape

if TYPE_CHECKING:
    from archgap.analysis.recipe.recipe import Recipe


def document(result: Recipe) -> dict[str, Any]:
    """The recipe document (``archgap recipe --json``)."""
    from archgap.report.jsondoc import document as envelope

    return envelope("recipe", body(result))


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
    lines += _proof_lines(result)
    lines += ["", "[bold]a / f / plain[/]"]
    lines += [f"  {escape(n)}" for n in result.notes]
    other = "plain" if result.arch_specific else "--arch-specific"
    lines.append(f"  with {other}: {' '.join(result.alternative)}")
    require = " ".join(f"--require {_quoted(p)}" for p in result.gpus)
    lines += ["", f"check the build: archgap kernels BUILD_OUTPUT {escape(require)}"]
    return lines


def _proof_lines(result: Recipe) -> list[str]:
    """Each GPU's verdict on the recipe's build, and why the toolkit could not do better."""
    lines = []
    for p in result.gpus:
        style = "green" if p.verdict == "native" else "red"
        gpu = f"{escape(p.gpu)} ({p.compute_capability})"
        lines.append(f"  {gpu}  [{style}]{p.verdict}[/]  {escape(p.reason)}")
        if p.note:
            lines.append(f"    [red]{escape(p.note)}[/]")
    return lines


def _quoted(proof: Any) -> str:
    """The GPU as --require takes it: its name when that resolves to it, else its capability."""
    from archgap.analysis.verdicts.compat import UnknownGpu, resolve_gpu

    label = str(proof.gpu)
    try:
        same = str(resolve_gpu(label).compute_capability) == proof.compute_capability
    except UnknownGpu:
        same = False
    if not same:
        return str(proof.compute_capability)
    return f"'{label}'" if " " in label else label
