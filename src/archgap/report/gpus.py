"""The known GPUs (kb/gpus.json) as a table: name, compute capability, architecture, the
family-specific targets that run on it, segment and source."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from archgap.kb.gpus import GpuProduct, family_members, products
from archgap.report.table import Cell, Column, Table, csv_text, markdown_lines


@dataclass(frozen=True)
class GpuRow:
    name: str
    compute_capability: str
    architecture: str
    family_targets: tuple[str, ...]  # e.g. ("100f",) for 10.0: sm_100f code runs on it
    sm: str  # sm_120
    source: str


def _key(cc: str) -> tuple[int, int]:
    major, _, minor = cc.partition(".")
    return int(major), int(minor or 0)


def rows(selected: Sequence[GpuProduct] | None = None) -> list[GpuRow]:
    """One row per product, newest compute capability first."""
    families = family_members()
    chosen = products() if selected is None else selected
    out = [
        GpuRow(
            p.name,
            p.compute_capability,
            p.architecture,
            tuple(t for t, members in families.items() if p.compute_capability in members),
            "sm_" + p.compute_capability.replace(".", ""),
            p.source,
        )
        for p in chosen
    ]
    return sorted(out, key=lambda r: (tuple(-x for x in _key(r.compute_capability)), r.name))


def table(items: Sequence[GpuRow], numbered_sources: bool) -> Table:
    """The table; with ``numbered_sources`` the source column holds [n] (see ``sources``)."""
    numbers = {s: i for i, s in enumerate(dict.fromkeys(r.source for r in items), 1)}
    columns = (
        Column("GPU"),
        Column("CC", align="right"),
        Column("target"),
        Column("architecture"),
        Column("family targets"),
        Column("source"),
    )
    body = tuple(
        (
            Cell(r.name, "bold"),
            Cell(r.compute_capability, "green"),
            Cell(r.sm),
            Cell(r.architecture),
            Cell(", ".join(r.family_targets), "cyan"),
            Cell(f"[{numbers[r.source]}]" if numbered_sources else r.source, "dim"),
        )
        for r in items
    )
    return Table(columns, body, keys=1)


def sources(items: Sequence[GpuRow]) -> list[str]:
    """The numbered sources the text table refers to."""
    unique = dict.fromkeys(r.source for r in items)
    return [f"[{i}] {s}" for i, s in enumerate(unique, 1)]


def markdown(items: Sequence[GpuRow]) -> str:
    return "\n".join(["### archgap gpus", "", *markdown_lines(table(items, False))]) + "\n"


def csv(items: Sequence[GpuRow]) -> str:
    return csv_text(table(items, False))


def document(products: Sequence[GpuProduct]) -> dict[str, Any]:
    """The gpus document (``archgap gpus --json``) of the products ``api.gpus`` returned."""
    from archgap.report.jsondoc import document as envelope

    return envelope("gpus", {"gpus": rows(products)})
