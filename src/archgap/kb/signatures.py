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
from archgap.kb.gates import load_gates
from archgap.kb.toolchain import version_tuple

# Fix kinds, least invasive first: this order ranks every list of fixes archgap prints.
FIX_KINDS = ("env", "toolkit", "upgrade", "patch")


# What a cause's ``when`` may test: a version range of a package or tool the log may name, or of
# the GPU's compute capability ("cc", dotted: ">=12.0,<13.0").
CONDITION_KINDS = (
    "cc",
    "flashinfer",
    "torch",
    "triton",
    "nvcc",
    "driver_cuda",
    "vllm",
    "sglang",
    "flash_attn",
)


@dataclass(frozen=True)
class Cause:
    text: str
    source: str
    # Version ranges under which this cause applies, by kind (CONDITION_KINDS); {} = any.
    when: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class VersionMark:
    """Evidence that pins a package's version range: a message wording that changed between
    releases, or a frame (file, function, line) of a released file."""

    kind: str  # a CONDITION_KINDS entry: "flashinfer"
    versions: str  # ">=0.6.3,<0.6.16"
    source: str
    wording: str = ""  # text found in a matched error message
    file: str = ""  # frame: path relative to site-packages
    function: str = ""
    line: int = 0


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
    when: tuple[tuple[str, str], ...] = ()  # version ranges it applies under, as a Cause's

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
    architecture: bool = True  # False: a known error that is not an architecture gap (OOM ...)
    arch_is_gpu: bool = False  # the pattern's ``arch`` group names the GPU's own architecture

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


Bound = tuple[tuple[int, ...], bool]  # (version, inclusive)


def _bounds(spec: str) -> tuple[Bound | None, Bound | None]:
    """(lower, upper) of a range spec, each (version, inclusive) or None (open)."""
    low: Bound | None = None
    high: Bound | None = None
    for clause in filter(None, (c.strip() for c in spec.split(","))):
        match = re.fullmatch(r"(>=|<=|==|<|>)\s*(\S+)", clause)
        if not match:
            raise SignatureError(f"bad version clause {clause!r}")
        op, bound = match.group(1), version_tuple(match.group(2)) or ()
        if op in (">=", ">", "==") and (low is None or bound > low[0]):
            low = (bound, op != ">")
        if op in ("<=", "<", "==") and (high is None or bound < high[0]):
            high = (bound, op != "<")
    return low, high


def _pad(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    width = max(len(a), len(b))
    return a + (0,) * (width - len(a)), b + (0,) * (width - len(b))


def ranges_overlap(first: str, second: str) -> bool:
    """Whether some version satisfies both range specs ("" = any)."""
    low_a, high_a = _bounds(first)
    low_b, high_b = _bounds(second)
    for low, high in ((low_a, high_b), (low_b, high_a)):
        if low is None or high is None:
            continue
        lo, hi = _pad(low[0], high[0])
        if lo > hi or (lo == hi and not (low[1] and high[1])):
            return False
    return True


def _le(a: Bound | None, b: Bound | None, lower: bool) -> bool:
    """Whether bound ``a`` is at least as tight as ``b`` (lower: a >= b; upper: a <= b)."""
    if b is None:
        return True
    if a is None:
        return False
    x, y = _pad(a[0], b[0])
    if x == y:
        return b[1] or not a[1]
    return x > y if lower else x < y


def range_within(inner: str, outer: str) -> bool:
    """Whether every version satisfying ``inner`` satisfies ``outer``."""
    low_in, high_in = _bounds(inner)
    low_out, high_out = _bounds(outer)
    return _le(low_in, low_out, True) and _le(high_in, high_out, False)


def _when(entry: dict[str, Any], owner: str) -> tuple[tuple[str, str], ...]:
    when = entry.get("when") or {}
    for kind, spec in when.items():
        if kind not in CONDITION_KINDS:
            raise SignatureError(f"{owner}: unknown condition {kind!r}")
        _bounds(spec)  # a bad clause fails at load
    return tuple(sorted(when.items()))


def _signature(entry: dict[str, Any]) -> Signature:
    try:
        fixes = tuple(
            Fix(
                f["kind"],
                f["text"],
                f["source"],
                f.get("applies_to_cc_major"),
                _when(f, entry["id"]),
            )
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
            causes=tuple(
                Cause(c["text"], c["source"], _when(c, entry["id"])) for c in entry["causes"]
            ),
            raise_sites=tuple(
                RaiseSite(r["distribution"], r["versions"], r["file"], r["function"], r["code"])
                for r in entry["raise_sites"]
            ),
            fixes=tuple(sorted(fixes, key=lambda f: f.rank)),
            source=entry["source"],
            secondary=bool(entry.get("secondary", False)),
            explained_by=tuple(entry.get("explained_by", ())),
            architecture=bool(entry.get("architecture", True)),
            arch_is_gpu=bool(entry.get("arch_is_gpu", False)),
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


def parse_marks(data: Any) -> tuple[VersionMark, ...]:
    marks = []
    for entry in data.get("version_marks", []) if isinstance(data, dict) else []:
        try:
            mark = VersionMark(
                entry["kind"],
                entry["versions"],
                entry["source"],
                entry.get("wording", ""),
                entry.get("file", ""),
                entry.get("function", ""),
                int(entry.get("line", 0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise SignatureError(f"bad version mark {entry!r}: {exc}") from exc
        if mark.kind not in CONDITION_KINDS or not (mark.wording or (mark.file and mark.line)):
            raise SignatureError(f"bad version mark {entry!r}: needs a kind and a wording or frame")
        _bounds(mark.versions)
        marks.append(mark)
    return tuple(marks)


@cache
def load_signatures() -> tuple[Signature, ...]:
    """The signatures shipped with archgap: ``signatures.json``, then each capability gate of
    ``gates.json`` in its framework's own words (id ``gate:<id>``)."""
    return parse_signatures(load_json("signatures.json")) + gate_signatures()


def gate_signatures() -> tuple[Signature, ...]:
    """Each gate of ``gates.json`` as a signature: its wording recognised like any known error,
    decided by the gate rule (``analysis.explain.gates``)."""
    return tuple(
        Signature(
            id=gate.signature_id,
            project=gate.framework,
            keywords=gate.keywords,
            patterns=(gate.pattern,),
            meaning=f"{_owner(gate.framework)}'s check on {_checked(gate.rule)} ({gate.rule})",
            causes=(Cause(f"{_outside(gate.rule)} is outside what it serves", gate.source),),
            raise_sites=(),
            fixes=(),
            source=gate.source,
        )
        for gate in load_gates()
    )


def _owner(framework: str) -> str:
    """Whose check a gate is: its framework, or for a wording of the facts ("any") the program's."""
    return "the program" if framework == "any" else framework


def _checked(rule: str) -> str:
    """What a gate of ``rule`` checks: the GPU, or (build-list-minimum) the build's arch list."""
    return (
        "its build's arch list" if rule == "build-list-minimum" else "the GPU's compute capability"
    )


def _outside(rule: str) -> str:
    return (
        "a target of the build's arch list"
        if rule == "build-list-minimum"
        else "the GPU's compute capability"
    )


@cache
def load_version_marks() -> tuple[VersionMark, ...]:
    """Wordings and frames that pin a package's version range (signatures.json)."""
    return parse_marks(load_json("signatures.json"))
