"""The versioned JSON contract shared by every command."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

from archgap import __version__
from archgap.codec import encode

# The major on any incompatible change to a command's document, the minor on additions (1.1:
# scan's "load" findings, a library's "load" and its "not loaded" role; 2.0: the verdict
# "blocked", for what 1.x called "none" when a library has kernels for the GPU but cannot load
# there, and a library's own "partial": a reader that took "none" for every gap would pass
# those); each command has a schema file archgap/schema/<command>.schema.json that the test
# suite validates every output against.
SCHEMA_VERSION = "2.0"


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


INDENT = "  "
_PLAIN = frozenset((str, int, float, bool, type(None)))


def dumps(doc: dict[str, Any]) -> str:
    """``json.dumps(doc, indent=2)``, byte for byte, in a fraction of its time: with an indent,
    the json module writes every value from Python (1.3 s for the 48,000 entries of a torch
    environment's ``kernels --deep --json``); here each object or array whose members are all
    plain values is written in one call of its C encoder, one item separator per level."""
    out: list[str] = []
    _write(doc, 0, out)
    return "".join(out)


def write(doc: dict[str, Any], stream: Any) -> None:
    """``dumps(doc)`` and a newline written to ``stream`` (a text file) a part at a time: the
    document is never held as text, nor its parts all at once (a fleet of 50,000 hosts is
    100 MB of JSON in 2.8 million parts: 330 MB held as one list, then 100 MB joined)."""

    def flush() -> None:
        stream.write("".join(out))
        out.clear()

    out: list[str] = []
    _write(doc, 0, out, flush)
    out.append("\n")
    flush()


# Parts gathered before write() hands them on: about 300 KB of a fleet document's text.
_CHUNK = 8192


@functools.cache
def _flat_encoder(level: int) -> json.JSONEncoder:
    """Writes an object or array of plain values with its members on the lines of ``level``."""
    return json.JSONEncoder(separators=(",\n" + INDENT * (level + 1), ": "))


def _write(value: Any, level: int, out: list[str], flush: Callable[[], None] | None = None) -> None:
    inner = "\n" + INDENT * (level + 1)
    if isinstance(value, dict) and value and all(type(k) is str for k in value):
        members: Any = value.values()
        opening, closing = "{", "}"
    elif isinstance(value, (list, tuple)) and value:
        members, opening, closing = value, "[", "]"
    else:  # a plain value, an empty container, or keys json would have to convert
        out.append(json.dumps(value, indent=INDENT).replace("\n", "\n" + INDENT * level))
        return
    if all(type(m) in _PLAIN for m in members):
        flat = _flat_encoder(level).encode(value)
        out.append(opening + inner + flat[1:-1] + "\n" + INDENT * level + closing)
        return
    out.append(opening)
    separator = inner
    if opening == "{":
        for key, member in value.items():
            out.append(separator + json.dumps(key) + ": ")
            _write(member, level + 1, out, flush)
            separator = "," + inner
    else:
        for member in value:
            out.append(separator)
            _write(member, level + 1, out, flush)
            separator = "," + inner
            if flush is not None and len(out) > _CHUNK:
                flush()
    out.append("\n" + INDENT * level + closing)


def schema(command: str) -> dict[str, Any]:
    """The JSON Schema that a command's document follows."""
    from importlib import resources  # not at import: a scan imports this module before its probe

    text = resources.files("archgap.schema").joinpath(f"{command}.schema.json").read_text()
    loaded: dict[str, Any] = json.loads(text)
    return loaded
