"""A probe result (``api.probe``) as the probe document (``archgap probe``): the target, its
transport, and its facts or the failure, with the required GPUs missing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from archgap.results import ProbeResult


def body(result: ProbeResult) -> dict[str, Any]:
    """The body of the probe document (schema/probe.schema.json)."""
    from archgap.codec import encode

    head: dict[str, Any] = {"target": result.target, "transport": result.transport}
    if result.failure is not None:
        failure = result.failure
        error = {"kind": failure.kind, "message": failure.message, "stderr": failure.stderr}
        return {**head, "error": error}
    return {
        **head,
        "facts": encode(result.facts),
        "required": list(result.required),
        "missing": list(result.missing),
    }


def document(result: ProbeResult) -> dict[str, Any]:
    """The probe document (``archgap probe``)."""
    from archgap.report.jsondoc import document as envelope

    return envelope("probe", body(result))
