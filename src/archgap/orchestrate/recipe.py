"""``recipe``: the fewest build targets that give every GPU native code."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from archgap.errors import UsageError
from archgap.orchestrate.shared import resolve

if TYPE_CHECKING:
    from archgap.analysis.recipe.recipe import Recipe
    from archgap.analysis.verdicts.compat import GpuTarget


def recipe(
    gpus: Sequence[str] = (),
    *,
    from_paths: Sequence[str] = (),
    toolkit: str | None = None,
    arch_specific: bool = False,
    ptx: bool = True,
) -> Recipe:
    """The fewest build targets that give every GPU native code: the GPUs named and those of
    the fleet documents ``from_paths`` (as ``fleet --from`` reads them), built with CUDA
    ``toolkit`` (default: the newest known that builds native code for every GPU).
    ``UsageError`` for no GPU, an unreadable document or an unknown toolkit; ``UnknownGpu``."""
    from archgap.analysis.recipe.recipe import gpus_of_fleet
    from archgap.analysis.recipe.recipe import recipe as build_recipe
    from archgap.kb.toolchain import major_minor, targets_of

    named = list(resolve(gpus))
    if from_paths:
        from archgap.transport.fleet import read_documents

        facts = [h.facts for h in read_documents(list(from_paths)) if h.facts is not None]
        named += gpus_of_fleet(facts)
    if not named:
        raise UsageError("no GPU: name one with --gpu, or give fleet documents with --from")
    seen: dict[tuple[str, str], GpuTarget] = {}
    for gpu in named:
        seen.setdefault((gpu.label, str(gpu.compute_capability)), gpu)
    targets = sorted(seen.values(), key=lambda g: (g.compute_capability, g.label))
    version = major_minor(toolkit) if toolkit is not None else None
    if toolkit is not None and (version is None or targets_of(toolkit) is None):
        raise UsageError(
            f"--toolkit {toolkit!r}: give a CUDA version such as 12.8 or 13.0 (>= 11.0)"
        )
    cuda = f"{version[0]}.{version[1]}" if version else None
    return build_recipe(targets, cuda, arch_specific, ptx)
