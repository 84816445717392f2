"""The versioned JSON contract shared by every command."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from archgap import __version__
from archgap.codec import encode

# Bump on any incompatible change to a command's document; each command has a schema file
# archgap/schema/<command>.schema.json that the test suite validates every output against.
SCHEMA_VERSION = "1.0"


def document(command: str, body: dict[str, Any]) -> dict[str, Any]:
    """The JSON document of one command: a fixed envelope around the command's body."""
    return {
        "schema_version": SCHEMA_VERSION,
        "archgap_version": __version__,
        "command": command,
        **encode(body),
    }


def shown_body(name: str, shown: Any, left_out: Any) -> dict[str, Any]:
    """The body of the trace and gates documents: what is shown, under ``name``, and what was
    left out (the vendored, example and test trees, counted)."""
    return {name: shown, "left_out": left_out}


def dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, sort_keys=False)


def schema(command: str) -> dict[str, Any]:
    """The JSON Schema that a command's document follows."""
    text = resources.files("archgap.schema").joinpath(f"{command}.schema.json").read_text()
    loaded: dict[str, Any] = json.loads(text)
    return loaded
