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

RULES = (
    "minimum",
    "toolkit-minimum",
    "no-code-below",
    "family",
    "built-for",
    "driver-minimum",
    "toolkit-version",
    "ptx-minimum",
    "build-list-minimum",
    "release-predates",
)
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
class Build:
    """One of the libraries a release ships, the architectures it carries (read from its device
    code) and the switch that loads it."""

    libraries: str
    archs: str  # "60 70 75 80 86 89 90"
    switch: str


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
    accepts: tuple[str, ...] = ()  # family: the capabilities it runs on ("9.x", "10.0")
    instead: str = ""  # what the framework itself says to do instead ("--dtype=half")
    project: str = ""  # the top-level project whose source prints it (see project_of)
    builds: tuple[Build, ...] = ()  # built-for without a list: the libraries the release ships

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
            accepts=tuple(entry.get("accepts", ())),
            instead=entry.get("instead", ""),
            project=project_of(entry),
            builds=tuple(
                Build(b["libraries"], b["archs"], b["switch"]) for b in entry.get("builds", ())
            ),
        )
    except (KeyError, TypeError, ValueError, re.error) as exc:
        raise GateError(f"bad gate entry {entry.get('id', '?')}: {exc}") from exc
    if gate.rule not in RULES:
        raise GateError(f"{gate.id}: unknown rule {gate.rule!r}")
    if not gate.source.startswith("https://"):
        raise GateError(f"{gate.id}: source must be an https:// address")
    return gate


def project_of(entry: dict[str, Any]) -> str:
    """The top-level project whose released source prints the message: the entry's 'project'
    where the framework names a part or a wrapper ("NVRTC (numba-cuda)" is numba-cuda's
    message), else the framework without its parenthesis ("vLLM (vllm_flash_attn)" is vLLM's);
    "" for a wording of the facts that no one project owns."""
    if entry.get("project"):
        return str(entry["project"])
    if entry.get("framework") == "any":
        return ""
    return str(entry["framework"]).split(" (")[0].strip()


@dataclass(frozen=True)
class Known:
    """A mined message that a signature of ``signatures.json`` (or another gate) already
    recognises: kept for the table of mined messages, its recognition tested."""

    framework: str
    release: str
    file: str
    line: int
    message: str  # as printed, facts as {placeholders}
    signature: str  # the signature id that recognises it ("gate:<id>" for a gate)
    source: str
    project: str = ""  # the top-level project whose source prints it (see project_of)


def _known(entry: dict[str, Any]) -> Known:
    try:
        return Known(
            framework=entry["framework"],
            release=entry["release"],
            file=entry["file"],
            line=int(entry["line"]),
            message=entry["message"],
            signature=entry["signature"],
            source=entry["source"],
            project=project_of(entry),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise GateError(f"bad known message {entry.get('message', '?')!r}: {exc}") from exc


def parse_known(data: Any) -> tuple[Known, ...]:
    if not isinstance(data, dict) or not isinstance(data.get("known", []), list):
        raise GateError("expected an object whose 'known' is a list")
    return tuple(_known(e) for e in data.get("known", []))


@cache
def load_known() -> tuple[Known, ...]:
    """The mined messages that other signatures already recognise (the table's other rows)."""
    return parse_known(load_json("gates.json"))


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
