"""A log line's prefixes peeled: ANSI colours, carriage returns, timestamps, rank and worker
prefixes (``[2026-11-28 10:00:01 TP3]``, ``(EngineCore_0 pid=9492)``), vLLM's and glog's
headers, quote marks and Python logging's level, the worker and the level they name kept.

Pure. Every prefix pattern is anchored at the line's start, and a line whose first character
starts none of them (``_PREFIX_FIRST``) is not tried.
"""

from __future__ import annotations

import re

from archgap.analysis.explain.logrecords import clip_line

_ANSI = re.compile(r"\x1b\[[0-9;?]{0,32}[ -/]{0,4}[@-~]|\x1b\][^\x07\x1b]{0,512}(?:\x07|\x1b\\)")

# Prefixes peeled off the start of a line, repeatedly; each yields an optional worker id.
_SGLANG_PREFIX = re.compile(
    r"\[(?:\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,6})?)"
    r"(?P<rank>(?: (?:TP|DP|PP|EP|CP|MOE|RANK)[0-9]{1,4}){1,4})?\] ?"
)
_RANK_PREFIX = re.compile(
    r"\[(?P<rank>(?:TP|DP|PP|EP|RANK|rank|Rank) ?[0-9]{1,4}"
    r"(?:[ ,/](?:TP|DP|PP|EP)[0-9]{1,4}){0,3})\] ?"
)
_WORKER_PREFIX = re.compile(
    r"\((?P<rank>[A-Za-z_][\w-]{0,40}(?: [\w-]{1,20}=[\w.-]{1,20}){0,3})\) ?"
)
_VLLM_PREFIX = re.compile(
    r"(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) {1,3}"
    r"\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{1,6})? "
    r"\[[^\]\s]{1,100}\] ?"
)
_GLOG_PREFIX = re.compile(
    r"(?P<level>[IWEF])\d{4} \d{2}:\d{2}:\d{2}\.\d{1,6} {1,8}(?P<pid>\d{1,8}) [^\]\s]{1,300}\] ?"
)
_TIMESTAMP = re.compile(
    r"\[?\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?"
    r"(?:Z|[+-]\d{2}:?\d{2})?\]?(?: ?[-|] ?| )"
)
_PY_LOGGING = re.compile(r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?:- |: )")
_QUOTE = re.compile(r"> ?")
_PREFIX_FIRST = frozenset("[(>DIWECF0123456789")  # the characters the prefixes above start with


def strip_line(raw: str) -> tuple[str, str, str]:
    """(worker, level, text) of one raw line: ANSI colours, timestamps and prefixes removed."""
    text = clip_line(raw)
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "\r" in text:
        text = text.replace("\r", "")
    worker, level, text = _peel_prefixes(text.rstrip())
    match = _PY_LOGGING.match(text)
    if match:
        level = level or match.group("level")
        text = text[match.end() :]
    return worker, level, text


_NAMING_PREFIXES = (_SGLANG_PREFIX, _RANK_PREFIX, _VLLM_PREFIX, _GLOG_PREFIX, _WORKER_PREFIX)


def _peel_prefixes(text: str) -> tuple[str, str, str]:
    """(worker, level, rest) of a line whose prefixes stack, peeled from its start: those that
    may name a worker or a level, timestamps and quote marks."""
    worker, level = "", ""
    for _ in range(6):  # prefixes stack: "(EngineCore_0 pid=9) ERROR 09-06 23:28:45 [core.py:714] "
        if text[:1] not in _PREFIX_FIRST:
            break
        for pattern in _NAMING_PREFIXES:
            match = pattern.match(text)
            if match:
                worker, level = _named(match, worker, level)
                text = text[match.end() :]
                break
        else:
            match = _TIMESTAMP.match(text) or _QUOTE.match(text)
            if not match:
                break
            text = text[match.end() :]
    return worker, level, text


def _named(match: re.Match[str], worker: str, level: str) -> tuple[str, str]:
    """The worker and the level after a prefix ``match``: a rank it names, else a process id
    where no worker is known yet; a level word it holds."""
    groups = match.groupdict()
    if groups.get("rank"):
        worker = " ".join(groups["rank"].split())
    elif groups.get("pid") and not worker:
        worker = "pid " + groups["pid"]
    if groups.get("level"):
        level = groups["level"]
    return worker, level
