"""A probe result (``api.probe``) as the probe document (``archgap probe``): the target, its
transport, and its facts or the failure, with the required GPUs missing."""

from __future__ import annotations

import os
import re
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


# What a host name may keep in a file name: no path separator, no leading dot (a reader skips
# dot files: they are documents still being written).
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def document_path(directory: str, host: str) -> str:
    """Where ``probe --out`` puts a host's document: its name with only safe characters kept."""
    name = _UNSAFE.sub("_", host).lstrip(".") or "unnamed"
    return os.path.join(directory, f"{name[:200]}.json")
