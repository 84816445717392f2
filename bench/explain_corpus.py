"""Benchmark: `archgap explain` on the public corpus of real error reports.

Input: tests/fixtures/explain_corpus/index.json (each case: a real error text from a public issue,
its link, the signature archgap must name, or null when it must not name an architecture cause;
'negative' cases are real errors that are not architecture gaps).

Prints: the accuracy (a positive case is right when its signature is named and diagnosed; a null
case is right when no architecture cause is given; a negative case must also be recognised as
not an architecture gap), the count of invented causes (an architecture root cause given for a
null or negative case), how the positive causes are known (determined / conditional /
undetermined), per-project accuracy, every miss, and the time per case.
Targets: accuracy >= 90 %, 0 invented causes.

Usage: .venv/bin/python bench/explain_corpus.py [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from archgap.analysis.explain.diagnosis import Diagnosis, explain
from archgap.analysis.explain.logparse import parse_log
from archgap.kb.signatures import load_signatures

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "explain_corpus"


def verdict(case: dict[str, Any], diagnosis: Diagnosis) -> tuple[bool, bool]:
    """(right, invented) for one case."""
    expected = case["expected_signature"]
    if expected is not None:
        return diagnosis.status == "diagnosed" and diagnosis.signature == expected, False
    invented = diagnosis.status == "diagnosed" or bool(diagnosis.root_cause)
    right = not invented and (not case.get("negative") or diagnosis.status == "not-architecture")
    return right, invented


def run() -> dict[str, Any]:
    cases = json.loads((CORPUS / "index.json").read_text())["cases"]
    signatures = load_signatures()
    projects = {s.id: s.project for s in signatures}
    right = invented = 0
    misses: list[str] = []
    how: Counter[str] = Counter()
    per_project: dict[str, list[int]] = {}
    start = time.perf_counter()
    for case in cases:
        diagnosis = explain(parse_log((CORPUS / case["file"]).read_text()), signatures)
        ok, made_up = verdict(case, diagnosis)
        right += ok
        invented += made_up
        expected = case["expected_signature"]
        project = projects.get(expected, "?") if expected else "negative/none"
        tally = per_project.setdefault(project, [0, 0])
        tally[0] += ok
        tally[1] += 1
        if expected is not None and ok:
            how[diagnosis.cause_status] += 1
        if not ok:
            misses.append(
                f"{case['file']}: expected {expected}, got {diagnosis.status} {diagnosis.signature}"
            )
    elapsed = time.perf_counter() - start
    positives = sum(1 for c in cases if c["expected_signature"] is not None)
    return {
        "cases": len(cases),
        "positives": positives,
        "negatives": sum(1 for c in cases if c.get("negative")),
        "right": right,
        "accuracy": right / len(cases),
        "invented_causes": invented,
        "cause_status": dict(how),
        "per_project": {k: f"{v[0]}/{v[1]}" for k, v in sorted(per_project.items())},
        "misses": misses,
        "ms_per_case": 1000 * elapsed / len(cases),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    figures = run()
    if args.json:
        print(json.dumps(figures, indent=1))
        return 0
    print(
        f"corpus: {figures['cases']} real reports ({figures['positives']} architecture gaps, "
        f"{figures['negatives']} negative cases, "
        f"{figures['cases'] - figures['positives'] - figures['negatives']} other)"
    )
    print(f"accuracy: {figures['right']}/{figures['cases']} = {100 * figures['accuracy']:.1f} %")
    print(
        f"invented causes (architecture cause on a negative/none case): "
        f"{figures['invented_causes']}"
    )
    print("positive causes: " + ", ".join(f"{k} {v}" for k, v in figures["cause_status"].items()))
    print("per project: " + ", ".join(f"{k} {v}" for k, v in figures["per_project"].items()))
    for miss in figures["misses"]:
        print(f"  miss: {miss}")
    print(f"time: {figures['ms_per_case']:.2f} ms per case")
    # Each frozen blind set on its own line, apart from the in-sample figure, so the gap between
    # them stays in view (docs/explain.md records each set's first-time figure and which sets have
    # been tuned on since).
    sys.path.insert(0, str(Path(__file__).parent))
    from explain_blind import run as blind

    print("frozen blind sets (first-time figures and tuning history: docs/explain.md):")
    for name, f in blind().items():
        print(
            f"blind {name}: {f['right']}/{f['cases']} right "
            f"({f['architecture_right']}/{f['architecture_cases']} architecture gaps), "
            f"{f['invented']} invented"
        )
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # `| head`: the reader left, which is not an error
        sys.exit(0)
