"""The explain document: the diagnosis of a log, and what of the log was read."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from archgap.codec import encode

if TYPE_CHECKING:
    from archgap.analysis.explain import Diagnosis


def body(
    diagnosis: Diagnosis,
    origin: str,
    lines: int,
    truncated_lines: int,
    skipped: dict[str, int] | None = None,
) -> dict[str, Any]:
    """The body of the explain document (schema/explain.schema.json): the diagnosis and its
    input (where the log came from, its lines, and the middle not read of a very long log:
    ``skipped`` bytes and lines, when there are any)."""
    data: dict[str, Any] = encode(diagnosis)
    data["input"] = {"origin": origin, "lines": lines, "truncated_lines": truncated_lines}
    if skipped and skipped.get("bytes"):
        data["input"]["skipped"] = skipped
    return {"explain": data}
