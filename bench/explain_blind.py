"""Benchmark: `archgap explain --log-only` on the frozen blind sets of public reports.

Input: tests/fixtures/explain_blind/expectations.json. Each case is a real error text from a public
issue (one file per case), frozen with its source link and what a reader of the thread and of
NVIDIA's rules expects: the cause class, the GPU's compute capability where the report names it,
and patterns the answer must (``cause_any``, ``fix_any``) and must not (``cause_none``,
``fix_none``) contain. The expectations were written before archgap was run on the case; set 1
was scored once before any tuning (the first-time figure), set 2 only after tuning (the
generalisation figure).

Scores each case:
  right       the cause names the expected mechanism and direction, and a fix that would work
              for that GPU is offered (none that cannot, no ``<CC>`` placeholder for a GPU the log
              names)
  wrong-fix   recognised, the cause is right, but no offered fix would work (or one cannot)
  wrong-cause recognised, but the cause names another mechanism or the wrong direction
  missed      no architecture cause recognised
  invented    (non-architecture errors) an architecture cause was given
Conditional cases (the log does not decide) are right when the answer says what would decide.

Usage: .venv/bin/python bench/explain_blind.py [--set N] [--json] [--verbose]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from archgap.analysis.explain.diagnosis import Diagnosis
from archgap.api import diagnose

BLIND = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "explain_blind"
CLASSES = {
    0: "not an architecture gap",
    1: "direction and tool",
    2: "driver older than the PTX",
    3: "NVRTC",
    4: "TensorRT / ONNX Runtime gates",
    5: "12.1 / Thor family traps",
    6: "GPU named in words, Jetson",
    7: "no kernel image, package named",
    8: "gate named in prose",
    9: "gate the GPU settles",
}


def _any(patterns: list[str], text: str) -> bool:
    """Whether any pattern occurs in text; every pattern is matched case-insensitively (some were
    frozen with a ``(?i)`` flag in the middle, which Python only accepts at the start)."""
    return any(re.search(p.replace("(?i)", ""), text, re.IGNORECASE) for p in patterns)


def score(case: dict[str, Any], diagnosis: Diagnosis) -> str:
    """One of right, wrong-fix, wrong-cause, missed, invented (see the module's docstring)."""
    # a conditional cause's cases are part of the answer (one bullet each, with their fixes)
    cases = [f"{c.when}: {c.cause}" for c in diagnosis.cases]
    cause = " ".join((diagnosis.root_cause, *cases, *diagnosis.decide, *diagnosis.notes))
    fixes = " | ".join(
        [f.text for f in diagnosis.fixes] + [x for c in diagnosis.cases for x in c.fixes]
    )
    recognised = diagnosis.status == "diagnosed"
    if case["expect"] == "non-arch":
        return "invented" if recognised or diagnosis.root_cause else "right"
    if case["expect"] == "benign":
        if _any(case.get("fix_none", []), fixes):
            return "wrong-fix"
        if not recognised and not diagnosis.root_cause:
            return "right"
        return "right" if _any(case.get("cause_any", []), cause) else "wrong-cause"
    if not recognised:
        return "missed"
    if not _any(case.get("cause_any", [".*"]), cause) or _any(case.get("cause_none", []), cause):
        return "wrong-cause"
    if case.get("conditional"):
        says_what_decides = diagnosis.decide or diagnosis.cause_status != "determined"
        return "right" if says_what_decides else "wrong-fix"
    fix_none = case.get("fix_none", []) + ([r"<CC>"] if case.get("gpu_cc") else [])
    if _any(fix_none, fixes):
        return "wrong-fix"
    if case.get("fix_any") and not _any(case["fix_any"], fixes):
        return "wrong-fix"
    return "right"


def run(only_set: int | None = None) -> dict[str, Any]:
    cases = json.loads((BLIND / "expectations.json").read_text())["cases"]
    figures: dict[str, Any] = {}
    for set_no in sorted({c["set"] for c in cases}):
        if only_set is not None and set_no != only_set:
            continue
        tally: Counter[str] = Counter()
        per_class: dict[str, Counter[str]] = {}
        rows = []
        for case in (c for c in cases if c["set"] == set_no):
            diagnosis, _ = diagnose((BLIND / case["file"]).read_text(), where=None)
            verdict = score(case, diagnosis)
            tally[verdict] += 1
            per_class.setdefault(CLASSES[case["class"]], Counter())[verdict] += 1
            rows.append(
                {
                    "file": case["file"],
                    "verdict": verdict,
                    "signature": diagnosis.signature,
                    "root_cause": diagnosis.root_cause,
                    "fixes": [f.text for f in diagnosis.fixes],
                }
            )
        in_set = [c for c in cases if c["set"] == set_no]
        arch = sum(1 for c in in_set if c["expect"] != "non-arch")
        arch_right = sum(
            1
            for c, r in zip(in_set, rows, strict=True)
            if c["expect"] != "non-arch" and r["verdict"] == "right"
        )
        figures[f"set {set_no}"] = {
            "cases": len(rows),
            "architecture_cases": arch,
            "right": tally["right"],
            "architecture_right": arch_right,
            "invented": tally["invented"],
            "verdicts": dict(tally),
            "per_class": {k: dict(v) for k, v in per_class.items()},
            "rows": rows,
        }
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", type=int, help="score only this set")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--verbose", action="store_true", help="print every case's answer")
    args = parser.parse_args(argv)
    figures = run(args.set)
    if args.json:
        print(json.dumps(figures, indent=1))
        return 0
    for name, f in figures.items():
        print(
            f"{name}: {f['right']}/{f['cases']} right "
            f"({f['architecture_right']}/{f['architecture_cases']} architecture gaps), "
            f"{f['invented']} invented; " + ", ".join(f"{k} {v}" for k, v in f["verdicts"].items())
        )
        for klass, tally in f["per_class"].items():
            print(f"  {klass}: " + ", ".join(f"{k} {v}" for k, v in sorted(tally.items())))
        for row in f["rows"]:
            if args.verbose or row["verdict"] != "right":
                print(f"  {row['verdict']:11} {row['file']}  [{row['signature']}]")
                if args.verbose:
                    print(f"      cause: {row['root_cause'][:300]}")
                    for fix in row["fixes"][:4]:
                        print(f"      fix: {fix[:200]}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:
        sys.exit(0)
