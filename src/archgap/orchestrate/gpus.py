"""``gpus``: the GPU products archgap knows, or those names denote."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from archgap.orchestrate.shared import resolve

if TYPE_CHECKING:
    from archgap.kb.gpus import GpuProduct


def gpus(names: Sequence[str] = ()) -> tuple[GpuProduct, ...]:
    """The GPU products archgap knows (kb/gpus.json), or those ``names`` denote: product names
    resolved as --gpu resolves them ("H100 PCIe" is the H100) and compute capabilities (every
    product with it). ``UnknownGpu`` for a name that denotes none."""
    from archgap.analysis.verdicts.compat import ComputeCapability, UnknownGpu, products_named
    from archgap.kb.gpus import products

    if not names:
        return products()
    chosen: dict[str, GpuProduct] = {}
    for name in names:
        cc = ComputeCapability.parse(name)
        found = (
            [p for p in products() if p.compute_capability == str(cc)]
            if cc
            else list(products_named(name))
        )
        if not found and cc:
            raise UnknownGpu(f"no known GPU has compute capability {cc}")
        if not found:
            resolve([name])  # says why: the closest names, or that the name is ambiguous
        chosen.update((p.name, p) for p in found)
    return tuple(chosen.values())
