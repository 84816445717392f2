"""Which known errors a crash log shows, and what to ask the probe about them.

Pure: a parsed log and the signatures in; the signatures it matches (``match_signatures``), the
error it ends with and the match that explains it (``Focus``), and the two requests for the probe:
``code_request`` (the raise sites to read) and ``names_to_trace`` (the state the raising condition
depends on). ``raise_site`` maps the log's raise onto the installed code the probe read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from archgap.analysis.explain.logparse import ParsedLog, TracebackFrame
from archgap.kb.signatures import Signature
from archgap.probe.facts import CodeFacts, CodeSite

_SITE_DIRS = ("site-packages/", "dist-packages/")


@dataclass(frozen=True)
class SignatureMatch:
    signature: str
    project: str
    text: str  # the matched text
    line: int
    workers: tuple[str, ...]
    count: int
    in_traceback: bool


# ---------------------------------------------------------------- signature matching
def match_signatures(log: ParsedLog, signatures: Sequence[Signature]) -> tuple[SignatureMatch, ...]:
    """Every signature found in the log, exceptions of tracebacks first, then other lines."""
    found: dict[tuple[str, str], SignatureMatch] = {}
    texts: list[tuple[str, int, tuple[str, ...], int, bool]] = []
    for tb in log.tracebacks:
        joined = " ".join(f"{tb.exception_type}: {tb.message}".split())
        texts.append((joined, tb.first_line, tb.workers, len(tb.workers), True))
    warned = {w.text: w for w in log.warnings}
    for line, text in log.messages:
        warning = warned.get(text)
        workers, count = (warning.workers, warning.count) if warning else ((), 1)
        texts.append((text, line, workers, count, False))
    for text, line, workers, count, in_tb in texts:
        for signature in signatures:
            match = signature.search(text)
            if match is None:
                continue
            key = (signature.id, match.group(0))
            if key in found:
                old = found[key]
                found[key] = SignatureMatch(
                    old.signature,
                    old.project,
                    old.text,
                    old.line,
                    tuple(dict.fromkeys((*old.workers, *workers))),
                    old.count + (count if not in_tb else 0),
                    old.in_traceback or in_tb,
                )
                continue
            found[key] = SignatureMatch(
                signature.id, signature.project, match.group(0), line, workers, count, in_tb
            )
    return tuple(sorted(found.values(), key=lambda m: (not m.in_traceback, m.line)))


@dataclass(frozen=True)
class Focus:
    """The error the log ends with, the match that explains it, and the frames that raised it."""

    matches: tuple[SignatureMatch, ...]
    primary: SignatureMatch
    signature: Signature
    explaining: SignatureMatch | None
    root_signature: Signature
    frames: tuple[TracebackFrame, ...]
    by_id: Mapping[str, Signature]


def focus_of(log: ParsedLog, signatures: Sequence[Signature]) -> Focus | None:
    matches = match_signatures(log, signatures)
    if not matches:
        return None
    by_id = {s.id: s for s in signatures}
    primary = _primary(matches, by_id)
    explaining = _explaining(primary, matches, by_id)
    root = by_id[(explaining or primary).signature]
    frames = _error_frames(log, primary)
    return Focus(matches, primary, by_id[primary.signature], explaining, root, frames, by_id)


def _primary(matches: tuple[SignatureMatch, ...], by_id: Mapping[str, Signature]) -> SignatureMatch:
    """The error the log ends with: the last traceback's match, else the last non-secondary
    architecture match, else the last non-secondary one (a warning about NCCL after a ptxas
    failure does not hide the failure)."""
    in_tb = [m for m in matches if m.in_traceback]
    if in_tb:
        return max(in_tb, key=lambda m: m.line)
    primary = [m for m in matches if not by_id[m.signature].secondary]
    arch = [m for m in primary if by_id[m.signature].architecture]
    return max(arch or primary or list(matches), key=lambda m: m.line)


def _explaining(
    primary: SignatureMatch, matches: tuple[SignatureMatch, ...], by_id: Mapping[str, Signature]
) -> SignatureMatch | None:
    """Another match in the log that the primary's signature names as its usual cause; the
    signature lists those causes deepest first."""
    for wanted_id in by_id[primary.signature].explained_by:
        for match in matches:
            if match.signature == wanted_id and match is not primary:
                return match
    return None


def _error_frames(log: ParsedLog, primary: SignatureMatch) -> tuple[TracebackFrame, ...]:
    for tb in reversed(log.tracebacks):
        if primary.text in " ".join(f"{tb.exception_type}: {tb.message}".split()):
            return tb.frames
    return ()


# ---------------------------------------------------------------- what to ask the probe
def code_request(log: ParsedLog, signatures: Sequence[Signature]) -> dict[str, Any]:
    """Parameters of the probe's "code" section: the error's last frame (site-packages-relative,
    as the log may come from another machine) and the known raise sites of its signature and of
    the signatures that explain it (the raise a swallowing handler may hide)."""
    focus = focus_of(log, signatures)
    if focus is None:
        return {"frames": [], "raise_sites": []}
    frames = []
    relative = site_relative(focus.frames[-1].file) if focus.frames else None
    if relative is not None:
        last = focus.frames[-1]
        frames.append({"path": relative, "line": last.line, "code": last.code})
    related = [focus.signature, focus.root_signature]
    related += [focus.by_id[i] for i in focus.signature.explained_by if i in focus.by_id]
    sites = {
        (r.distribution, r.file, r.code): {
            "distribution": r.distribution,
            "file": r.file,
            "code": r.code,
        }
        for signature in related
        for r in signature.raise_sites
    }
    return {"frames": frames, "raise_sites": list(sites.values())}


def names_to_trace(
    log: ParsedLog, signatures: Sequence[Signature], code: CodeFacts
) -> tuple[tuple[str, str], ...]:
    """(name, distribution) of the state the raising condition depends on, for the probe's
    "trace" section: upper-case names (module or instance state) the condition reads directly or
    through the assignments of the names it reads (a flag set in a loop over the state)."""
    focus = focus_of(log, signatures)
    site = raise_site(focus, code)[0] if focus is not None else None
    return state_of(site) if site is not None and site.distribution else ()


def state_of(site: CodeSite) -> tuple[tuple[str, str], ...]:
    names = [n for b in site.bindings for n in b.reads] + list(site.reads)
    state = [n for n in dict.fromkeys(names) if n.isupper()]
    return tuple((name, site.distribution) for name in state[:1])


def raise_site(focus: Focus, code: CodeFacts) -> tuple[CodeSite | None, str | None]:
    """The installed raise site: the log's last frame mapped onto this environment, else the
    signature's known site in the installed version; and a note when the two versions differ."""
    last = focus.frames[-1] if focus.frames else None
    relative = site_relative(last.file) if last else None
    if last is not None and relative is not None:
        for site in code.sites:
            if (site.requested_path, site.requested_line) != (relative, last.line):
                continue
            if not site.distribution:
                break  # not installed here: fall back to the known sites
            if site.line != last.line or site.error:
                note = (
                    f"{relative}:{last.line} here does not read `{last.code.strip()}` as in the "
                    f"log: the installed {site.distribution} {site.version} differs from the one "
                    "that crashed"
                )
                return (site if not site.error else None), note
            return site, None
    for raise_site in focus.signature.raise_sites:
        for site in code.sites:
            if (
                not site.requested_line
                and site.line
                and (site.requested_path, site.requested_code) == (raise_site.file, raise_site.code)
                and raise_site.covers(site.version)
            ):
                return site, None
    return None, None


def site_relative(path: str) -> str | None:
    """A frame's path relative to its site-packages (paths in logs come from other machines)."""
    path = path.replace("\\", "/")
    for marker in _SITE_DIRS:
        index = path.rfind(marker)
        if index >= 0:
            return path[index + len(marker) :]
    return None
