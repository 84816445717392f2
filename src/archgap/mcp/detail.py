"""How much of a report a tool returns (the ``detail`` argument): ``summary`` (the default: what
fails and why, a few KB), ``gaps`` (every finding with its evidence, nothing that passes) or
``full`` (the command's whole document, as ``--json`` prints it).

A smaller document is the same document with entries left out or emptied, never another shape:
it still follows the command's schema (the tool's output schema), so a client reads every
detail the same way. A command with nothing to leave out returns its whole document."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

LEVELS = ("summary", "gaps", "full")
DEFAULT = "summary"
DESCRIPTION = (
    "how much to return: summary (default: what fails and why, a few KB), gaps (also each "
    "finding's evidence and the libraries that decide it), full (the whole report, as --json)"
)


def _scan(doc: Mapping[str, Any], level: str) -> dict[str, Any]:
    """Packages that are not native (their libraries: with gaps the ones that are not native,
    with summary none; the summary also leaves out packages with no kernels to run), JIT
    findings that do not work and load findings (their chains of facts only with gaps); the
    summary leaves out the toolchain and cache details too."""
    out = dict(doc)
    out["packages"] = _packages(doc.get("packages") or [], level)
    jit = [f for f in doc.get("jit") or [] if f.get("status") != "ok"]
    out["jit"] = jit if level == "gaps" else [{**f, "chain": []} for f in jit]
    if level == "summary":
        out["toolchains"] = None
        out["caches"] = None
        out["load"] = [{**f, "libraries": [], "chain": []} for f in doc.get("load") or []]
    return out


def _packages(packages: list[dict[str, Any]], level: str) -> list[dict[str, Any]]:
    """The package verdicts that are not passing, without notes (native; at summary also
    no-kernels), each with its libraries that are not native (at summary none)."""
    passing = ("native",) if level == "gaps" else ("native", "no-kernels")
    kept = []
    for p in packages:
        if p.get("verdict") in passing and not p.get("notes"):
            continue
        libraries = [lib for lib in p.get("libraries") or [] if lib.get("verdict") != "native"]
        kept.append({**p, "libraries": libraries if level == "gaps" else []})
    return kept


def _explain(doc: Mapping[str, Any], level: str) -> dict[str, Any]:
    """The summary leaves out the log's own lines quoted under each step (the steps, the root
    cause and the fixes stay)."""
    if level != "summary":
        return dict(doc)
    found = dict(doc.get("explain") or {})
    found["steps"] = [{**s, "fact": ""} if "fact" in s else s for s in found.get("steps") or []]
    return {**doc, "explain": found}


REDUCERS: dict[str, Callable[[Mapping[str, Any], str], dict[str, Any]]] = {
    "scan": _scan,
    "explain": _explain,
}


def offered(command: str) -> bool:
    """Whether the command's tool takes ``detail`` (its report has something to leave out)."""
    return command in REDUCERS


def reduced(command: str, doc: Mapping[str, Any], level: str) -> dict[str, Any]:
    """``doc`` at ``level`` (``full``: unchanged)."""
    reducer = REDUCERS.get(command)
    if level == "full" or reducer is None:
        return dict(doc)
    return reducer(doc, level)
