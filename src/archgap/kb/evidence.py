"""What a log itself states, and how it is worded: ``evidence.json``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from archgap.kb import load_json


@dataclass(frozen=True)
class EvidencePattern:
    kind: str  # "gpu", "compute_capability", "torch", "nvcc", "cuda_home", ...
    gate: str  # a lowercase literal a line must contain before the regex runs
    pattern: re.Pattern[str]  # group 1 is the value
    source: str


@cache
def evidence_patterns() -> tuple[EvidencePattern, ...]:
    return tuple(
        EvidencePattern(p["kind"], p["gate"], re.compile(p["pattern"]), p["source"])
        for p in load_json("evidence.json")["patterns"]
    )
