"""Capability gates in frameworks' own words (``gates.json``), loaded into frozen dataclasses.

Each gate is a message a framework prints when it rejects a GPU by its compute capability, read
from the framework's released source (file and line of a named release), with the facts its
pattern captures and the rule that decides it (``analysis.explain.gates``). Every gate is also a
``Signature`` (id ``gate:<id>``), so ``explain`` recognises it like any other known error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from archgap.kb import load_json

RULES = ("minimum", "toolkit-minimum", "no-code-below")
PREFIX = "gate:"


class GateError(ValueError):
    """gates.json does not have the expected shape."""


@dataclass(frozen=True)
class Older:
    """The last release of the framework that still served older GPUs."""

    serves_from: str  # the lowest capability it served: "6.0"
    release: str
    source: str


@dataclass(frozen=True)
class Gate:
    id: str
    framework: str  # "any": a wording of the facts, not of one framework
    release: str
    file: str
    line: int
    message: str  # the message as the framework prints it, facts as {placeholders}
    keywords: tuple[str, ...]
    pattern: re.Pattern[str]
    rule: str
    need: str | None  # the minimum, where the message does not state it
    older: Older | None
    source: str

    @property
    def signature_id(self) -> str:
        return PREFIX + self.id


def _gate(entry: dict[str, Any]) -> Gate:
    try:
        older = entry.get("older") or None
        gate = Gate(
            id=entry["id"],
            framework=entry["framework"],
            release=entry["release"],
            file=entry["file"],
            line=int(entry["line"]),
            message=entry["message"],
            keywords=tuple(k.lower() for k in entry["keywords"]),
            pattern=re.compile(entry["pattern"]),
            rule=entry["rule"],
            need=entry.get("need"),
            older=Older(older["serves_from"], older["release"], older["source"]) if older else None,
            source=entry["source"],
        )
    except (KeyError, TypeError, ValueError, re.error) as exc:
        raise GateError(f"bad gate entry {entry.get('id', '?')}: {exc}") from exc
    if gate.rule not in RULES:
        raise GateError(f"{gate.id}: unknown rule {gate.rule!r}")
    return gate


def parse_gates(data: Any) -> tuple[Gate, ...]:
    if not isinstance(data, dict) or not isinstance(data.get("gates"), list):
        raise GateError("expected an object with a 'gates' list")
    gates = tuple(_gate(e) for e in data["gates"])
    if len({g.id for g in gates}) != len(gates):
        raise GateError("duplicate gate ids")
    return gates


@cache
def load_gates() -> tuple[Gate, ...]:
    """The gates shipped with archgap."""
    return parse_gates(load_json("gates.json"))


def gate_of(signature_id: str) -> Gate | None:
    """The gate a ``gate:<id>`` signature stands for (None: another signature)."""
    if not signature_id.startswith(PREFIX):
        return None
    return next((g for g in load_gates() if g.signature_id == signature_id), None)
