"""Error signatures of architecture gaps: ``signatures.json`` loaded into frozen dataclasses.

Each signature names the project its text comes from, the regular expressions that recognise it,
its known causes, the code that raises it per package version (file and code text: line numbers
are looked up in the installed source at run time, never stored) and ranked fixes, with sources.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from archgap.kb import load_json
from archgap.kb.toolchain import version_tuple

# Fix kinds, least invasive first: this order ranks every list of fixes archgap prints.
FIX_KINDS = ("env", "toolkit", "upgrade", "patch")


@dataclass(frozen=True)
class Cause:
    text: str
    source: str


@dataclass(frozen=True)
class RaiseSite:
    distribution: str  # "flashinfer-python"
    versions: str  # ">=0.6.7,<0.7.1" ("" = any)
    file: str  # path relative to site-packages: "flashinfer/jit/core.py"
    function: str
    code: str  # text found on the raising line (or in the raised message)

    def covers(self, version: str) -> bool:
        return version_in(version, self.versions)


@dataclass(frozen=True)
class Fix:
    kind: str  # one of FIX_KINDS
    text: str
    source: str
    applies_to_cc_major: int | None = None  # only for GPUs of this major (None: any)

    @property
    def rank(self) -> int:
        return FIX_KINDS.index(self.kind)


@dataclass(frozen=True)
class Signature:
    id: str
    project: str
    keywords: tuple[str, ...]  # lowercase literals; a text must contain one before regexes run
    patterns: tuple[re.Pattern[str], ...]
    meaning: str
    causes: tuple[Cause, ...]
    raise_sites: tuple[RaiseSite, ...]
    fixes: tuple[Fix, ...]
    source: str
    secondary: bool = False  # a symptom whose cause is usually another signature
    explained_by: tuple[str, ...] = ()

    def search(self, text: str) -> re.Match[str] | None:
        lowered = text.lower()
        if not any(k in lowered for k in self.keywords):
            return None
        for pattern in self.patterns:
            found = pattern.search(text)
            if found:
                return found
        return None


class SignatureError(ValueError):
    """signatures.json does not have the expected shape."""


def version_in(version: str, spec: str) -> bool:
    """Whether ``version`` satisfies comma-separated >=, <=, <, >, == clauses ("" = any)."""
    have = version_tuple(version) or ()
    if not have:
        return not spec.strip()
    for clause in filter(None, (c.strip() for c in spec.split(","))):
        match = re.fullmatch(r"(>=|<=|==|<|>)\s*(\S+)", clause)
        if not match:
            raise SignatureError(f"bad version clause {clause!r}")
        op, bound = match.group(1), version_tuple(match.group(2)) or ()
        width = max(len(have), len(bound))
        a, b = have + (0,) * (width - len(have)), bound + (0,) * (width - len(bound))
        ok = {">=": a >= b, "<=": a <= b, "==": a == b, "<": a < b, ">": a > b}[op]
        if not ok:
            return False
    return True


def _signature(entry: dict[str, Any]) -> Signature:
    try:
        fixes = tuple(
            Fix(f["kind"], f["text"], f["source"], f.get("applies_to_cc_major"))
            for f in entry["fixes"]
        )
        for fix in fixes:
            if fix.kind not in FIX_KINDS:
                raise SignatureError(f"{entry['id']}: unknown fix kind {fix.kind!r}")
        return Signature(
            id=entry["id"],
            project=entry["project"],
            keywords=tuple(k.lower() for k in entry["keywords"]),
            patterns=tuple(re.compile(p) for p in entry["patterns"]),
            meaning=entry["meaning"],
            causes=tuple(Cause(c["text"], c["source"]) for c in entry["causes"]),
            raise_sites=tuple(
                RaiseSite(r["distribution"], r["versions"], r["file"], r["function"], r["code"])
                for r in entry["raise_sites"]
            ),
            fixes=tuple(sorted(fixes, key=lambda f: f.rank)),
            source=entry["source"],
            secondary=bool(entry.get("secondary", False)),
            explained_by=tuple(entry.get("explained_by", ())),
        )
    except (KeyError, TypeError, re.error) as exc:
        raise SignatureError(f"bad signature entry {entry.get('id', '?')}: {exc}") from exc


def parse_signatures(data: Any) -> tuple[Signature, ...]:
    if not isinstance(data, dict) or not isinstance(data.get("signatures"), list):
        raise SignatureError("expected an object with a 'signatures' list")
    signatures = tuple(_signature(e) for e in data["signatures"])
    ids = [s.id for s in signatures]
    if len(ids) != len(set(ids)):
        raise SignatureError("duplicate signature ids")
    return signatures


@cache
def load_signatures() -> tuple[Signature, ...]:
    """The signatures shipped with archgap."""
    return parse_signatures(load_json("signatures.json"))
