"""Which known errors a crash log shows, and what to ask the probe about them.

Pure: a parsed log and the signatures in; the signatures it matches (``match_signatures``), the
error it ends with and the match that explains it (``Focus``): the cause its signature names, or
a build that failed earlier in the same package (a compiler's error, ``BUILD_TOOLS``: the JIT
build of FlashInfer that nvcc refused, and the run-time error it left); and the error the log
ends with after that build when no signature knows it (``Later``). And the two requests for the
probe:
``code_request`` (the raise sites to read) and ``names_to_trace`` (the state the raising condition
depends on). ``raise_site`` maps the log's raise onto the installed code the probe read.
"""

from __future__ import annotations

import re
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


# Signatures' projects that are compilers: their errors are a build that failed (at install or
# in a JIT), and an error of the same package later in the log is what that build left.
BUILD_TOOLS = frozenset(("nvcc", "ptxas", "nvrtc"))
# A package a path names: its site-packages directory, or its cache (FlashInfer's JIT builds in
# ~/.cache/flashinfer, torch's extensions in ~/.cache/torch_extensions).
_PACKAGE_PATH = re.compile(
    r"(?:site-packages|dist-packages|\.cache)[/\\](?P<name>[A-Za-z_][\w-]{0,60})[/\\]"
)
_NOT_PACKAGES = frozenset(("torch_extensions", "pip", "huggingface", "__pycache__"))
_BUILD_BLOCK = 30  # lines before a compiler's error that belong to its build (the command run)


@dataclass(frozen=True)
class Later:
    """The error the log ends with, raised after the build failure the diagnosis is about, that
    no signature knows; ``connected``: it is of the package whose build failed."""

    text: str
    line: int
    connected: bool
    package: str  # the package both name ("" when not connected)


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
    later: Later | None = None  # the unknown error the log ends with, after the build failure
    built: str = ""  # the package an earlier build failure and the error share (explaining)


def focus_of(log: ParsedLog, signatures: Sequence[Signature]) -> Focus | None:
    matches = match_signatures(log, signatures)
    if not matches:
        return None
    by_id = {s.id: s for s in signatures}
    primary = _primary(matches, by_id, log)
    explaining = _explaining(primary, matches, by_id)
    built = ""
    if explaining is None:
        explaining, built = _failed_build(log, primary, matches, by_id)
    root = by_id[(explaining or primary).signature]
    frames = _error_frames(log, primary)
    later = _later_error(log, explaining or primary, by_id)
    return Focus(
        matches, primary, by_id[primary.signature], explaining, root, frames, by_id, later, built
    )


def _is_build(match: SignatureMatch, by_id: Mapping[str, Signature]) -> bool:
    signature = by_id[match.signature]
    return signature.project in BUILD_TOOLS and signature.architecture


def packages_at(log: ParsedLog, match_line: int, text: str) -> frozenset[str]:
    """The packages an error at ``match_line`` belongs to: those its traceback's frames run in
    and the paths of its message name; for an error on a line of its own (a build's output),
    the paths of the lines of its build before it (the command that failed) and of the
    traceback just before it (``RuntimeError: Ninja build failed. Ninja output:``)."""
    texts = [text]
    tracebacks = [tb for tb in log.tracebacks if tb.first_line == match_line]
    if not tracebacks:  # a build's output: its command, and the traceback that printed it
        texts += _lines_before(log, match_line)
        near = [tb for tb in log.tracebacks if match_line - _BUILD_BLOCK <= tb.first_line]
        tracebacks = [tb for tb in near if tb.first_line < match_line][-1:]
    for tb in tracebacks:
        texts += [tb.message, *(f.file for f in tb.frames)]
    names = [m.group("name") for chunk in texts for m in _PACKAGE_PATH.finditer(chunk)]
    return frozenset(n for n in names if n not in _NOT_PACKAGES)


def _lines_before(log: ParsedLog, match_line: int) -> list[str]:
    """The lines of the build block before ``match_line``: its messages, and frames pasted
    without a traceback's header (site_file evidence)."""
    lines = [t for n, t in log.messages if match_line - _BUILD_BLOCK <= n <= match_line]
    pasted = log.evidence_of("site_file")
    return lines + [e.text for e in pasted if match_line - _BUILD_BLOCK <= e.line <= match_line]


def _failed_build(
    log: ParsedLog,
    primary: SignatureMatch,
    matches: tuple[SignatureMatch, ...],
    by_id: Mapping[str, Signature],
) -> tuple[SignatureMatch | None, str]:
    """A compiler's error earlier in the log, in the package the run-time error the log ends
    with is raised in: the build that failed, and the package (the later error is what it
    left, not a second cause)."""
    if _is_build(primary, by_id) or not primary.in_traceback:
        return None, ""
    own = packages_at(log, primary.line, primary.text)
    if not own:
        return None, ""
    for match in sorted(matches, key=lambda m: -m.line):
        if match.line < primary.line and _is_build(match, by_id):
            shared = own & packages_at(log, match.line, match.text)
            if shared:
                return match, sorted(shared)[0]
    return None, ""


def _later_error(
    log: ParsedLog, cause: SignatureMatch, by_id: Mapping[str, Signature]
) -> Later | None:
    """The last traceback, begun after a build failure (``cause``), whose exception no
    signature matched: the error the log ends with, connected to the build when both name
    the same package."""
    if not _is_build(cause, by_id) or not log.tracebacks:
        return None
    last = log.tracebacks[-1]
    if last.first_line <= cause.line:
        return None
    text = " ".join(f"{last.exception_type}: {last.message}".split())
    if any(s.search(text) for s in by_id.values()):
        return None  # a known error of its own: the matches hold it
    shared = sorted(
        packages_at(log, last.first_line, text) & packages_at(log, cause.line, cause.text)
    )
    return Later(text, last.first_line, bool(shared), shared[0] if shared else "")


def _primary(
    matches: tuple[SignatureMatch, ...], by_id: Mapping[str, Signature], log: ParsedLog
) -> SignatureMatch:
    """The error the log ends with: the last traceback's match, else the last non-secondary
    architecture match, else the last non-secondary one (a warning about NCCL after a ptxas
    failure does not hide the failure). Two signatures on the same line: the one whose project
    the error's frames or paths name (bitsandbytes' own message over the generic 'no kernel
    image' in it), else the first known."""
    in_tb = [m for m in matches if m.in_traceback]
    primary = [m for m in matches if not by_id[m.signature].secondary]
    arch = [m for m in primary if by_id[m.signature].architecture]
    pool = in_tb or arch or primary or list(matches)
    last = max(m.line for m in pool)
    return _named_first([m for m in pool if m.line == last], by_id, log)


def _named_first(
    tied: list[SignatureMatch], by_id: Mapping[str, Signature], log: ParsedLog
) -> SignatureMatch:
    """Of matches on one line, the one whose project the line's frames or paths name."""
    if len(tied) > 1:
        named = packages_at(log, tied[0].line, tied[0].text)
        for match in tied:
            if by_id[match.signature].project.lower() in named:
                return match
    return tied[0]


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
        found = _frame_site(last, relative, code)
        if found is not None:
            return found
    return _known_site(focus.signature, code), None


def _frame_site(
    last: TracebackFrame, relative: str, code: CodeFacts
) -> tuple[CodeSite | None, str | None] | None:
    """The site the probe read at the log's last frame (``relative`` to its site-packages) and
    a note where the installed version reads otherwise; None where it is not installed here
    (then the known sites stand)."""
    for site in code.sites:
        if (site.requested_path, site.requested_line) != (relative, last.line):
            continue
        if not site.distribution:
            return None  # not installed here: fall back to the known sites
        if site.line != last.line or site.error:
            note = (
                f"{relative}:{last.line} here does not read `{last.code.strip()}` as in the "
                f"log: the installed {site.distribution} {site.version} differs from the one "
                "that crashed"
            )
            return (site if not site.error else None), note
        return site, None
    return None


def _known_site(signature: Signature, code: CodeFacts) -> CodeSite | None:
    """The signature's known raise site, found by its code in the installed version it
    covers."""
    for known in signature.raise_sites:
        for site in code.sites:
            if (
                not site.requested_line
                and site.line
                and (site.requested_path, site.requested_code) == (known.file, known.code)
                and known.covers(site.version)
            ):
                return site
    return None


def site_relative(path: str) -> str | None:
    """A frame's path relative to its site-packages (paths in logs come from other machines)."""
    path = path.replace("\\", "/")
    for marker in _SITE_DIRS:
        index = path.rfind(marker)
        if index >= 0:
            return path[index + len(marker) :]
    return None
