"""Evidence: what a log itself states (the GPU, its compute capability, versions, settings).

Pure. Each (kind, gate, regex) of ``kb/evidence.json`` runs only on lines that contain the
lowercase gate literal, and then only in windows around it (``_matches_near``), so each pattern
costs a bounded number of characters per line however long or repetitive the line is.

A GPU is stated in words, never by a path: in a traceback frame's line (``File "/srv/t4/main.py",
line 3, in run_a100``) and in a path or URL anywhere (``/srv/t4/``, ``C:\\a100\\``,
``https://host/h100/``) a GPU-like word is not evidence of the GPU (``GPU_KINDS``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache

from archgap.kb.evidence import evidence_patterns
from archgap.kb.gpus import identify, may_name_product, mentioned_products

MAX_EVIDENCE = 20  # distinct values kept per kind of evidence
# Evidence patterns run in windows around their gate literal (see _matches_near).
EVIDENCE_GATES_PER_LINE = 3
EVIDENCE_BEFORE = 64  # the longest text a pattern captures before its gate: (\S.{0,60}?)
EVIDENCE_AFTER = 120  # after it (a version, a GPU name) ...
SETTING_AFTER = 320  # ... or a setting's value (CUDA_HOME=\S{1,300})


@dataclass(frozen=True)
class Evidence:
    kind: str  # "gpu", "compute_capability", "torch", "flashinfer", "nvcc", "cuda_home", ...
    value: str
    line: int  # first line stating it
    text: str  # that line, trimmed


_GPU_NOISE = ("NVIDIA Corporation", "NVIDIA CUDA", "NVIDIA Driver")
GPU_KINDS = frozenset(("gpu", "gpu_cc"))  # evidence of the GPU itself: read in prose only
_FRAME_LINE = re.compile(r'\s*File "[^"]{0,1000}", line \d')
# A path or URL: it starts after a space, a quote, a bracket, ":" or "=" (not inside a word, so
# "A100/H100" stays two names) at a root, a home, a dot, a backslash (a drive's "C:\\", a share,
# a URL's "//host"); or it is a relative path to a file ("srv/t4/main.py").
_ROOTED = r"(?<![\w.\-/\\])(?:~?/|\.{1,2}[/\\]|\\)[^\s\"'<>|`]*"
_FILE = r"\.(?:py|pyc|pyx|so|cu|cuh|c|cc|cpp|h|hpp|sh|txt|log|json|ya?ml|toml|cfg|ini)\b"
_RELATIVE = r"(?<![\w.\-/\\])[\w.-]{1,200}(?:[/\\][\w.-]{1,200})+" + _FILE
_EXTENSION = re.compile(_FILE)
_PATH = re.compile(_ROOTED)
_PATH_OR_FILE = re.compile(f"{_ROOTED}|{_RELATIVE}")


def prose_of(text: str) -> str:
    """``text`` with its paths and URLs blanked (same length: offsets hold), or "" for a
    traceback frame's line: where a GPU may be stated."""
    if _FRAME_LINE.match(text):
        return ""
    if "/" not in text and "\\" not in text:
        return text
    # the relative form (costly: it may start at any word) only where a file extension is
    pattern = _PATH_OR_FILE if _EXTENSION.search(text) else _PATH
    return pattern.sub(lambda m: " " * len(m.group()), text)


def collect_evidence(
    number: int, text: str, seen: dict[tuple[str, str], Evidence], counts: dict[str, int]
) -> None:
    """Add what line ``number`` states to ``seen`` (at most MAX_EVIDENCE values per kind)."""
    lowered = text.lower()
    gated = any_gate().search(lowered) is not None
    if not gated and not (counts.get("gpu", 0) < MAX_EVIDENCE and may_name_product(text)):
        return  # (a path only takes words away: its prose can name no more than the line)
    prose = prose_of(text)
    prose_lowered = prose.lower() if prose is not text else lowered
    if gated:
        _patterns_stated(number, (text, lowered), (prose, prose_lowered), seen, counts)
    if counts.get("gpu", 0) < MAX_EVIDENCE and may_name_product(prose):
        _products_named(number, prose, text, seen, counts)


def _patterns_stated(
    number: int,
    line: tuple[str, str],
    prose: tuple[str, str],
    seen: dict[tuple[str, str], Evidence],
    counts: dict[str, int],
) -> None:
    """What the patterns of ``kb/evidence.json`` find in a line (``line``: its text and the text
    lowercased; ``prose``: the same with paths blanked, where a GPU is read)."""
    for rule in evidence_patterns():
        kind, gate, pattern = rule.kind, rule.gate, rule.pattern
        subject, lowered_subject = prose if kind in GPU_KINDS else line
        if gate not in lowered_subject or counts.get(kind, 0) >= MAX_EVIDENCE:
            continue
        after = SETTING_AFTER if "_" in gate else EVIDENCE_AFTER  # NAME=value settings
        for match in _matches_near(pattern, subject, lowered_subject, gate, after):
            value = _value(match)
            if kind == "gpu" and _not_a_new_gpu(value, number, seen):
                continue
            key = (kind, value)
            if key not in seen:
                seen[key] = Evidence(kind, value, number, line[0].strip()[:300])
                counts[kind] = counts.get(kind, 0) + 1


def _value(match: re.Match[str]) -> str:
    """A pattern's value: trailing punctuation is not part of it, except in a name nvidia-smi
    truncated ("..."); a capability as a tuple prints it ("your GPU has capability (8, 6)")
    reads "8.6"."""
    value = match.group(1).strip()
    return (value if value.endswith("...") else value.rstrip(".,;:)")).replace(", ", ".")


def _not_a_new_gpu(value: str, number: int, seen: dict[tuple[str, str], Evidence]) -> bool:
    """A "gpu" value that is no GPU's name (the vendor's, too short), or that a name this line
    already stated contains ("RTX PRO 6000" inside "NVIDIA RTX PRO 6000 Blackwell ...": said
    once)."""
    if value in _GPU_NOISE or value == "NVIDIA" or len(value) < 4:
        return True
    return any(e.kind == "gpu" and e.line == number and value in e.value for e in seen.values())


@cache
def any_gate() -> re.Pattern[str]:
    """One search for every evidence pattern's gate literal (over a lowercased line)."""
    return re.compile(any_literal(rule.gate for rule in evidence_patterns()))


_Trie = dict[str, "_Trie"]


def any_literal(words: Iterable[str]) -> str:
    """A regex matching any of ``words``, as a trie ("ab|ac" -> "a(?:b|c)"): ``re`` tries one
    branch per character instead of every word at every position (10-40 times faster)."""
    trie: _Trie = {}
    for word in words:
        node = trie
        for c in word:
            node = node.setdefault(c, {})
        node[""] = {}
    return _branches(trie)


def _branches(node: _Trie) -> str:
    alternatives = [re.escape(c) + _branches(node[c]) for c in sorted(node) if c]
    if not alternatives:
        return ""
    body = alternatives[0] if len(alternatives) == 1 else "(?:" + "|".join(alternatives) + ")"
    return f"(?:{body})?" if "" in node else body


def _products_named(
    number: int,
    prose: str,
    text: str,
    seen: dict[tuple[str, str], Evidence],
    counts: dict[str, int],
) -> None:
    """The GPUs a line names in words the fixed patterns do not know ("gtx1650", "2080Ti",
    "Tesla K40c"), through the GPU table, each said once per line."""
    said = {identify(e.value) for e in seen.values() if e.kind == "gpu" and e.line == number}
    for product in mentioned_products(prose):
        if product in said or ("gpu", product.name) in seen:
            continue
        seen[("gpu", product.name)] = Evidence("gpu", product.name, number, text.strip()[:300])
        counts["gpu"] = counts.get("gpu", 0) + 1


def _matches_near(
    pattern: re.Pattern[str], text: str, lowered: str, gate: str, after: int
) -> Iterator[re.Match[str]]:
    """The matches of ``pattern`` in windows around the first EVIDENCE_GATES_PER_LINE places
    of ``gate`` (EVIDENCE_BEFORE characters before, EVIDENCE_AFTER after): each pattern then
    costs at most a fixed number of characters per line, however the line repeats the gate
    (a lazy ``(\\S.{0,60}?) with ...`` over a whole 4 KB line cost 30 ms)."""
    if len(lowered) != len(text):  # lower() changed the length: offsets do not carry over
        yield from pattern.finditer(text)  # (the line is at most MAX_LINE characters)
        return
    end = 0
    at = lowered.find(gate)
    for _ in range(EVIDENCE_GATES_PER_LINE):
        if at < 0:
            return
        start = max(end, at - EVIDENCE_BEFORE)
        end = min(len(text), at + len(gate) + after)
        yield from pattern.finditer(text, start, end)
        at = lowered.find(gate, end)
