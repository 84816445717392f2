"""From a crash log to the root cause: signature match, chain of steps, root cause, ranked fixes.

Pure: a parsed log, the signatures and, optionally, the probe's facts of the examined environment
(this machine or a remote one) in; a ``Diagnosis`` out. The facts are asked for in two steps:
``code_request`` names the raise sites to read (the log's last frame, the signatures' known raise
sites); ``names_to_trace`` names the state the raising condition depends on (for the probe's
``trace``). With those facts the chain is: the raising line and its condition, every write of that
state with its branch, the knob that decides the branch, the broad ``except`` that swallows a
failing write and the raise it hides, whose GPU and CUDA-version conditions are joined with the GPU
and the nvcc the package resolves (``analysis.jit``). Line numbers come from the installed source,
none is stored. Without an environment the answer is built from what the log states and the
signatures' knowledge, marked as such; an error no signature knows is reported as unknown.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from archgap.analysis import causes as causes_
from archgap.analysis.compat import ComputeCapability, GpuTarget
from archgap.analysis.fixes import AVOID, Fix, FlashinferCase, flashinfer_fixes
from archgap.analysis.jit import flashinfer_findings, resolve_nvcc
from archgap.analysis.logparse import Frame, ParsedLog
from archgap.kb import toolchain as toolchain_kb
from archgap.kb.gpus import known_capabilities, products
from archgap.kb.signatures import FIX_KINDS, Signature, load_version_marks
from archgap.probe.source import Guard, Occurrence, TraceFacts
from archgap.probe.source_flow import Raiser, Swallow
from archgap.probe.source_sites import CodeFacts, CodeSite
from archgap.probe.toolkit import ToolchainFacts

# How a step is known.
CONFIRMED = "confirmed"  # read on the examined environment (installed source, env, nvcc, --gpu)
FROM_LOG = "from-log"  # stated by the log
KNOWLEDGE = "knowledge"  # archgap's signature knowledge base (not checked here)
UNCONFIRMED = "unconfirmed"  # from the log, contradicted by the examined environment

_SITE_DIRS = ("site-packages/", "dist-packages/")
_VERSION_CALL = re.compile(r"cuda_version", re.IGNORECASE)
_EMPTY_VALUE = re.compile(r"=\s*(?:(?:set|list|dict|tuple)\(\)|\[\]|\{\}|\(\))\s*$")
# Evidence of the log reported as versions.
_VERSION_KINDS: tuple[str, ...] = ("torch", "torch_cuda", "flashinfer", "nvcc", "driver", "vllm")
_VERSION_KINDS += ("driver_cuda", "sglang", "triton", "flashinfer_cuda_version")
# ... and as paths.
_PATH_KINDS = ("cuda_home", "cuda_path", "flashinfer_cuda_arch_list", "torch_cuda_arch_list")
# Writes that bind a name without computing a value for it.
_NOT_VALUE_WRITES = ("parameter", "import", "global", "except-as", "del", "def", "class")


# ---------------------------------------------------------------- input: the examined environment
@dataclass(frozen=True)
class Examined:
    """What the probe saw in the examined environment (here, or on a remote host)."""

    description: str  # "/venv/bin/python (Python 3.11.2) on alpha"
    env: Mapping[str, str]  # the allowlisted environment (the service's, with --env-from)
    env_source: str  # "shell", "/proc/123/environ", an env file
    code: CodeFacts
    traces: tuple[TraceFacts, ...] = ()
    toolchains: ToolchainFacts | None = None
    gpus: tuple[GpuTarget, ...] = ()
    problems: tuple[str, ...] = ()  # probe sections that failed


# ---------------------------------------------------------------- outputs
@dataclass(frozen=True)
class SignatureMatch:
    signature: str
    project: str
    text: str  # the matched text
    line: int
    workers: tuple[str, ...]
    count: int
    in_traceback: bool


@dataclass(frozen=True)
class Step:
    text: str
    location: str  # "flashinfer/compilation_context.py:62", or "" for a fact
    fact: str  # the code line or the machine fact
    source: str  # where it was read: a file, a command, the log, a signature
    status: str  # CONFIRMED, FROM_LOG, KNOWLEDGE, UNCONFIRMED


@dataclass(frozen=True)
class FixSuggestion:
    kind: str  # env < toolkit < upgrade < patch
    text: str
    source: str


@dataclass(frozen=True)
class Recognised:
    gpus: tuple[str, ...]
    compute_capabilities: tuple[str, ...]
    versions: tuple[tuple[str, str], ...]  # ("torch", "2.9.1+cu128")
    paths: tuple[tuple[str, str], ...]  # ("cuda_home", "/usr/local/cuda")
    frames: tuple[str, ...]  # "file:line in function" of the last traceback
    error: str  # the last exception, or ""
    workers: tuple[str, ...]


@dataclass(frozen=True)
class Diagnosis:
    status: str  # "diagnosed", "not-architecture", "unknown", "no-error"
    signature: str | None  # the signature of the error the log ends with
    root_signature: str | None  # the signature that explains it (may be the same)
    error: str
    steps: tuple[Step, ...]
    root_cause: str
    fixes: tuple[FixSuggestion, ...]
    matches: tuple[SignatureMatch, ...]
    recognised: Recognised
    confirmed: bool  # the chain was confirmed on the examined environment
    notes: tuple[str, ...] = ()
    environment: str = ""  # what was examined ("" = log only)
    # How the root cause is known: "confirmed" (read on the examined environment), "determined"
    # (the log's evidence pins it), "conditional", "undetermined" (analysis.causes), "" (none).
    cause_status: str = ""
    decide: tuple[str, ...] = ()  # what would decide the cause, when it is not determined


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
class _Focus:
    """The error the log ends with, the match that explains it, and the frames that raised it."""

    matches: tuple[SignatureMatch, ...]
    primary: SignatureMatch
    signature: Signature
    explaining: SignatureMatch | None
    root_signature: Signature
    frames: tuple[Frame, ...]
    by_id: Mapping[str, Signature]


def _focus(log: ParsedLog, signatures: Sequence[Signature]) -> _Focus | None:
    matches = match_signatures(log, signatures)
    if not matches:
        return None
    by_id = {s.id: s for s in signatures}
    primary = _primary(matches, by_id)
    explaining = _explaining(primary, matches, by_id)
    root = by_id[(explaining or primary).signature]
    frames = _error_frames(log, primary)
    return _Focus(matches, primary, by_id[primary.signature], explaining, root, frames, by_id)


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


def _error_frames(log: ParsedLog, primary: SignatureMatch) -> tuple[Frame, ...]:
    for tb in reversed(log.tracebacks):
        if primary.text in " ".join(f"{tb.exception_type}: {tb.message}".split()):
            return tb.frames
    return ()


# ---------------------------------------------------------------- what to ask the probe
def code_request(log: ParsedLog, signatures: Sequence[Signature]) -> dict[str, Any]:
    """Parameters of the probe's "code" section: the error's last frame (site-packages-relative,
    as the log may come from another machine) and the known raise sites of its signature and of
    the signatures that explain it (the raise a swallowing handler may hide)."""
    focus = _focus(log, signatures)
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
    focus = _focus(log, signatures)
    site = _raise_site(focus, code)[0] if focus is not None else None
    return _state_of(site) if site is not None and site.distribution else ()


def _state_of(site: CodeSite) -> tuple[tuple[str, str], ...]:
    names = [n for b in site.bindings for n in b.reads] + list(site.reads)
    state = [n for n in dict.fromkeys(names) if n.isupper()]
    return tuple((name, site.distribution) for name in state[:1])


def _raise_site(focus: _Focus, code: CodeFacts) -> tuple[CodeSite | None, str | None]:
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


# ---------------------------------------------------------------- helpers
def site_relative(path: str) -> str | None:
    """A frame's path relative to its site-packages (paths in logs come from other machines)."""
    path = path.replace("\\", "/")
    for marker in _SITE_DIRS:
        index = path.rfind(marker)
        if index >= 0:
            return path[index + len(marker) :]
    return None


def _where(path: str, line: int) -> str:
    return f"{site_relative(path) or path}:{line}"


def _condition(guard: Guard) -> str:
    return f"not ({guard.condition})" if guard.kind == "else" else guard.condition


def _guard_code(guard: Guard) -> str:
    return f"if {guard.condition}:" if guard.kind == "if" else f"else of `if {guard.condition}:`"


def _short(function: str) -> str:
    return function.rsplit(".", 1)[-1]


def recognise(log: ParsedLog) -> Recognised:
    last = log.tracebacks[-1] if log.tracebacks else None
    return Recognised(
        gpus=tuple(e.value for e in log.evidence_of("gpu")),
        # The GPU's own capability, not every sm_XX the log mentions (a build's arch list).
        compute_capabilities=causes_.gpu_capabilities(log),
        versions=tuple((e.kind, e.value) for e in log.evidence if e.kind in _VERSION_KINDS),
        paths=tuple((e.kind, e.value) for e in log.evidence if e.kind in _PATH_KINDS),
        frames=tuple(f"{f.file}:{f.line} in {f.function}" for f in last.frames) if last else (),
        error=f"{last.exception_type}: {last.message.splitlines()[0] if last.message else ''}"
        if last
        else "",
        workers=log.workers,
    )


# ---------------------------------------------------------------- the diagnosis
@dataclass
class _Chain:
    steps: list[Step] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    confirmed: bool = False
    contradicted: bool = False
    required_cuda: str | None = None
    knobs_unset: list[str] = field(default_factory=list)
    knobs_set: list[str] = field(default_factory=list)
    nvcc_line: str = ""

    def add(self, text: str, location: str, fact: str, source: str, status: str) -> None:
        self.steps.append(Step(text, location, fact, source, status))


def explain(
    log: ParsedLog, signatures: Sequence[Signature], examined: Examined | None = None
) -> Diagnosis:
    """The diagnosis of a log, confirmed on the ``examined`` environment's facts where given."""
    recognised = recognise(log)
    where = examined.description if examined else ""
    focus = _focus(log, signatures)
    if focus is None:
        looks_like_error = any("error" in text.lower() for _, text in log.messages)
        return Diagnosis(
            status="unknown" if log.tracebacks or looks_like_error else "no-error",
            signature=None,
            root_signature=None,
            error=recognised.error,
            steps=(),
            root_cause="",
            fixes=(),
            matches=(),
            recognised=recognised,
            confirmed=False,
            notes=("no known architecture-gap signature in this input",),
            environment=where,
        )
    if not focus.signature.architecture:
        return _not_architecture(focus, recognised, where)
    chain = _Chain()
    primary, explaining = focus.primary, focus.explaining
    chain.add(
        f"The error: {primary.text}",
        f"{site_relative(focus.frames[-1].file) or focus.frames[-1].file}:{focus.frames[-1].line}"
        if focus.frames
        else "",
        focus.frames[-1].code if focus.frames else "",
        f"log line {primary.line}" + _workers_note(primary),
        FROM_LOG,
    )
    if explaining is not None:
        chain.add(
            f"Earlier in the log: {explaining.text}",
            "",
            "",
            f"log line {explaining.line}" + _workers_note(explaining),
            FROM_LOG,
        )
    walked = examined is not None and _walk_code(chain, log, focus, examined)
    gpus = examined.gpus if examined is not None else ()
    facts = causes_.version_facts(log, _texts(log), load_version_marks(), gpus)
    judgement = causes_.judge(focus.root_signature.causes, facts)
    if not walked:
        _knowledge_steps(chain, log, focus, examined, facts)
    if chain.contradicted:
        chain.notes.append(
            "unconfirmed: the log contradicts the examined environment; the service's environment "
            "differs (examine the service's own environment with --env-from PID or an env file)"
        )
    if examined is not None:
        chain.notes.extend(examined.problems)
    root_cause, cause_status = _root_cause(chain, focus, walked, judgement)
    decide = judgement.decide if cause_status in (causes_.CONDITIONAL, causes_.UNDETERMINED) else ()
    if decide and examined is None:
        decide += (
            "or run `archgap explain` on the machine that crashed (or with --host), so the "
            "installed code and toolchain are read",
        )
    return Diagnosis(
        status="diagnosed",
        signature=focus.signature.id,
        root_signature=focus.root_signature.id,
        error=primary.text,
        steps=tuple(chain.steps),
        root_cause=root_cause,
        fixes=_fixes(focus, log, examined, facts),
        matches=focus.matches,
        recognised=recognised,
        confirmed=chain.confirmed and not chain.contradicted,
        notes=tuple(chain.notes),
        environment=where,
        cause_status=cause_status,
        decide=decide,
    )


def _texts(log: ParsedLog) -> list[str]:
    """The error texts whose wording may pin a release: exception messages and message lines."""
    return [f"{tb.exception_type}: {tb.message}" for tb in log.tracebacks] + [
        text for _, text in log.messages
    ]


def _not_architecture(focus: _Focus, recognised: Recognised, where: str) -> Diagnosis:
    """A known error that is not an architecture gap: named, with no architecture cause."""
    signature = focus.signature
    return Diagnosis(
        status="not-architecture",
        signature=signature.id,
        root_signature=None,
        error=focus.primary.text,
        steps=(),
        root_cause="",
        fixes=(),
        matches=focus.matches,
        recognised=recognised,
        confirmed=False,
        notes=(
            f"recognised: {signature.meaning}; archgap gives no architecture cause for it "
            f"({signature.source})",
        ),
        environment=where,
    )


def _workers_note(match: SignatureMatch) -> str:
    workers = [w for w in match.workers if w]
    times = f"{match.count}x" if match.count > 1 else ""
    if not workers:
        return f" ({times})" if times else ""
    shown = ", ".join(workers[:8]) + (", ..." if len(workers) > 8 else "")
    return f", {times + ' ' if times else ''}from {shown}"


def _walk_code(chain: _Chain, log: ParsedLog, focus: _Focus, examined: Examined) -> bool:
    """The chain read off the installed code; False when the raise site is not installed."""
    site, note = _raise_site(focus, examined.code)
    if note:
        chain.notes.append(note)
    if site is None:
        return False
    source = f"{site.distribution} {site.version} installed ({examined.description})"
    chain.add(
        f"Raised in {site.function}()",
        f"{site.requested_path}:{site.line}",
        site.text,
        source,
        CONFIRMED,
    )
    chain.confirmed = True
    condition = next((g for g in reversed(site.guards) if g.kind in ("if", "else")), None)
    if condition is not None:
        chain.add(
            f"It raises when `{_condition(condition)}`",
            f"{site.requested_path}:{condition.line}",
            _guard_code(condition),
            source,
            CONFIRMED,
        )
    for name, _ in _state_of(site):
        facts = next((t for t in examined.traces if t.name == name), None)
        if facts is not None:
            _follow_state(chain, log, facts, examined, source)
    return True


def _branch(write: Occurrence) -> tuple[Guard | None, tuple[str, ...]]:
    """The if/else a write belongs to (the one a knob decides, else the innermost) and its knobs."""
    branches = [g for g in write.branch if g.kind in ("if", "else")]
    for guard in branches:
        knobs = [k.variable for k in write.knobs if k.path == write.path and k.line == guard.line]
        if knobs:
            return guard, tuple(dict.fromkeys(knobs))
    return (branches[-1] if branches else None), ()


def _follow_state(
    chain: _Chain, log: ParsedLog, facts: TraceFacts, examined: Examined, source: str
) -> None:
    name = facts.name
    writes = [o for o in facts.occurrences if o.kind == "write" and o.form not in _NOT_VALUE_WRITES]
    groups: dict[tuple[int, str], list[Occurrence]] = {}
    for write in writes:
        if write.form == "assign" and _EMPTY_VALUE.search(write.text):
            where = _where(write.path, write.line)
            chain.add(f"{name} starts empty", where, write.text, source, CONFIRMED)
            continue
        guard, _ = _branch(write)
        groups.setdefault((guard.line, guard.kind) if guard else (0, ""), []).append(write)
    for (_, kind), group in sorted(groups.items(), key=lambda i: (i[0][0], i[0][1] != "if")):
        guard, knobs = _branch(group[0])
        lines = "/".join(f":{w.line}" for w in group)
        swallowing = [(w, s) for w in group for s in w.swallowed]
        if knobs and kind == "if" and not swallowing:
            _knob_branch(chain, name, group[0], guard, knobs[0], lines, examined)
        elif swallowing:
            for write, swallow in swallowing:
                knob = knobs[0] if kind == "else" and knobs else None
                _swallowed_write(chain, log, write, swallow, examined, source, knob)
        else:
            under = f" (under `{guard.condition}`)" if guard else ""
            first = group[0]
            where = _where(first.path, first.line)
            chain.add(f"{name} is also written here{under}", where, first.text, source, CONFIRMED)


def _knob_branch(
    chain: _Chain,
    name: str,
    write: Occurrence,
    guard: Guard | None,
    knob: str,
    lines: str,
    examined: Examined,
) -> None:
    value = examined.env.get(knob)
    location = _where(write.path, guard.line if guard else write.line)
    fact = _guard_code(guard) if guard else write.text
    whose = f"environment ({examined.env_source})"
    if value is None:
        chain.knobs_unset.append(knob)
        text = (
            f"The {knob} branch (writes at {lines}) is not taken: {knob} is not set in the "
            f"examined environment ({examined.env_source})"
        )
    else:
        chain.knobs_set.append(knob)
        text = (
            f"{knob}={value!r} is set ({examined.env_source}): {name} is taken from it "
            f"(writes at {lines})"
        )
    chain.add(text, location, fact, whose, CONFIRMED)


def _fired(log: ParsedLog, raisers: Sequence[Raiser]) -> tuple[Raiser | None, str]:
    """The raise whose message the log shows (the handler logged it), and that log text."""
    texts = [w.text for w in log.warnings] + [t for _, t in log.messages]
    for raiser in raisers:
        if raiser.message:
            for text in texts:
                if raiser.message in text:
                    return raiser, text
    return None, ""


def _site_of(code: CodeFacts, raiser: Raiser) -> CodeSite | None:
    """The code facts (guards) of a raise, when the probe read that site."""
    relative = site_relative(raiser.path) or raiser.path
    return next(
        (s for s in code.sites if s.requested_path == relative and s.line == raiser.line), None
    )


def _holding_raise(swallow: Swallow, examined: Examined) -> tuple[Raiser, _Chain] | None:
    """A hidden raise whose conditions all hold on this environment, with the steps saying so."""
    for raiser in swallow.raisers:
        site = _site_of(examined.code, raiser)
        scratch = _Chain()
        if site is not None and _raise_conditions(scratch, site, examined) == (True, True):
            return raiser, scratch
    return None


def _swallowed_write(
    chain: _Chain,
    log: ParsedLog,
    write: Occurrence,
    swallow: Swallow,
    examined: Examined,
    source: str,
    knob: str | None,
) -> None:
    branch = f" in the else branch of `{knob}`" if knob else ""
    where = _where(write.path, write.line)
    fired, seen_text = _fired(log, swallow.raisers)
    # No message in the log: a raise whose conditions hold on this environment fires here.
    held = _holding_raise(swallow, examined) if fired is None else None
    raiser = fired or (held[0] if held else None)
    if raiser is None:
        chain.add(
            f"The write at :{write.line}{branch} can fail silently: the `except` at "
            f":{swallow.except_line} swallows any exception ({swallow.action})",
            where,
            write.text,
            source,
            CONFIRMED,
        )
        for hidden in swallow.raisers:
            what = hidden.message or hidden.exception
            location = _where(hidden.path, hidden.line)
            chain.add(
                f"{_short(hidden.function)}() can raise {what}", location, "", source, CONFIRMED
            )
        return
    chain.add(
        f"The write at :{write.line}{branch} never completes: {_short(raiser.function)}() raises "
        f"at :{raiser.line}{'' if fired else ' on this environment'} and the `except` at "
        f":{swallow.except_line} swallows it",
        where,
        write.text,
        source,
        CONFIRMED,
    )
    site = _site_of(examined.code, raiser)
    location, code = _where(raiser.path, raiser.line), site.text if site else ""
    if held is not None:
        chain.add(f"The swallowed exception: {raiser.message}", location, code, source, CONFIRMED)
        chain.steps.extend(held[1].steps)
        chain.required_cuda, chain.nvcc_line = held[1].required_cuda, held[1].nvcc_line
        return
    if knob and knob in chain.knobs_set:
        chain.contradicted = True
        chain.add(
            f"The log shows this branch ran, so {knob} was not set where the service ran; here "
            f"it is set ({examined.env_source}): this environment would not run it",
            where,
            write.text,
            f"environment ({examined.env_source})",
            UNCONFIRMED,
        )
    warning = next((w for w in log.warnings if w.text == seen_text), None)
    who = ""
    # Counted once: the "Earlier in the log" step already says how often and from whom.
    if warning is not None and not any(
        s.text.startswith("Earlier in the log") for s in chain.steps
    ):
        workers = [w for w in warning.workers if w]
        who = f" ({warning.count}x" + (f" from {', '.join(workers[:8])}" if workers else "") + ")"
    text = f"The swallowed exception, as the handler logged it{who}: {seen_text}"
    chain.add(text, location, code, "log", FROM_LOG)
    if site is not None:
        _raise_conditions(chain, site, examined)


def _raise_conditions(chain: _Chain, site: CodeSite, examined: Examined) -> tuple[bool, bool]:
    """Join the raise's conditions (GPU major, CUDA version) with the machine's facts.

    Returns (whether any condition was evaluated, whether all evaluated ones hold)."""
    evaluated, holds_all = False, True
    for guard in site.guards:  # outermost first: the GPU test, then the version
        location = f"{site.requested_path}:{guard.line}"
        major = re.fullmatch(r"major\s*==\s*(\d+)", guard.condition)
        required = re.search(r"['\"](\d+\.\d+)['\"]", guard.condition)
        if major and guard.kind == "if":
            gpus = [g for g in examined.gpus if g.compute_capability.major == int(major[1])]
            evaluated = True
            holds_all = holds_all and bool(gpus)
            for gpu in gpus[:1]:
                chain.add(
                    f"`{guard.condition}` holds: the GPU is {gpu.label} (compute capability "
                    f"{gpu.compute_capability})",
                    location,
                    _guard_code(guard),
                    gpu.source,
                    CONFIRMED,
                )
        elif guard.kind in ("if", "else") and _VERSION_CALL.search(guard.condition) and required:
            chain.required_cuda = required[1]
            holds = _version_condition(chain, guard, required[1], location, examined)
            if holds is not None:
                evaluated = True
                holds_all = holds_all and holds
    return evaluated, holds_all


def _version_condition(
    chain: _Chain, guard: Guard, required: str, location: str, examined: Examined
) -> bool | None:
    """Whether a CUDA-version condition is as the raise needs it, with the nvcc the package
    resolves (FlashInfer's lookup, ``analysis.jit``); None when no nvcc version is known."""
    toolchains = examined.toolchains
    resolved = (
        resolve_nvcc(toolchains, toolchain_kb.jit_rules()["flashinfer"]["nvcc_lookup"])
        if toolchains
        else None
    )
    toolkit = resolved.toolkit if resolved else None
    if resolved is None or toolkit is None or toolkit.status != "ok" or toolkit.version is None:
        why = "no toolchain facts" if toolchains is None else "no working nvcc found"
        if toolkit is not None and toolkit.reason:
            why = toolkit.reason
        chain.add(
            f"`{guard.condition}` depends on the CUDA version of the nvcc the package finds: "
            f"here {why}",
            location,
            _guard_code(guard),
            "toolchains",
            CONFIRMED,
        )
        return None
    how = _resolution([f.what for f in resolved.chain])
    version_tuple = toolchain_kb.version_tuple
    below = (version_tuple(toolkit.version) or ()) < (version_tuple(required) or ())
    holds = below == (guard.kind == "else")
    chain.nvcc_line = f"nvcc {toolkit.version} at {toolkit.tool_path}"
    chain.add(
        f"The nvcc it resolves is {toolkit.version} {'<' if below else '>='} {required}, so "
        f"`{guard.condition}` is {'false' if below else 'true'}"
        + ("" if holds else ": this environment would NOT raise here"),
        "",
        f"{toolkit.version_from}: {toolkit.banner}; resolved from {how}",
        f"nvcc --version ({examined.env_source} environment)",
        CONFIRMED if holds else UNCONFIRMED,
    )
    chain.contradicted = chain.contradicted or not holds
    return holds


def _arch_of(focus: _Focus) -> tuple[str, ...]:
    """The GPU's capability from the error itself ("Value 'sm_121a' is not defined" -> 12.1), for
    signatures whose ``arch`` names the GPU; () otherwise."""
    if not focus.signature.arch_is_gpu:
        return ()
    found = focus.signature.search(focus.primary.text)
    arch = found.groupdict().get("arch") if found else None
    cc = causes_.dotted(arch) if arch else None
    return (cc,) if cc else ()


def _resolution(steps: Sequence[str]) -> str:
    """How the nvcc was found, each source named once: "CUDA_HOME and CUDA_PATH unset; nvcc on
    PATH: /usr/bin/nvcc"."""
    unset = [s.removesuffix(" is not set") for s in steps if s.endswith(" is not set")]
    rest = [s for s in steps if not s.endswith(" is not set")]
    head = [f"{' and '.join(unset)} unset"] if unset else []
    return "; ".join(head + rest)


def _knowledge_steps(
    chain: _Chain,
    log: ParsedLog,
    focus: _Focus,
    examined: Examined | None,
    facts: Mapping[str, causes_.Known],
) -> None:
    signature, root = focus.signature, focus.root_signature
    if examined is not None:
        chain.notes.append(
            f"the code that raises this is not installed in the examined environment "
            f"({examined.description}); the chain below comes from the log and archgap's "
            "knowledge base"
        )
    else:
        chain.notes.append(
            "no environment examined: the chain below comes from the log and archgap's "
            "knowledge base"
        )
    chain.add(root.meaning, "", "", f"signature {root.id} ({root.source})", KNOWLEDGE)
    if root is not signature:
        chain.add(signature.meaning, "", "", f"signature {signature.id}", KNOWLEDGE)
    # Only what bears on the GPU and the versions this signature's causes depend on.
    relevant = {kind for cause in root.causes for kind, _ in cause.when} | {"cc"}
    for kind, label in (
        ("gpu", "GPU"),
        ("gpu_cc", "GPU compute capability"),
        ("nvcc", "nvcc release"),
        ("flashinfer_cuda_version", "FlashInfer's CUDA version"),
        ("cuda_home", "CUDA_HOME"),
        ("flashinfer", "flashinfer"),
        ("torch", "torch"),
        ("triton", "triton"),
        ("driver_cuda", "driver CUDA version"),
    ):
        wanted = {"gpu": "cc", "gpu_cc": "cc", "flashinfer_cuda_version": "nvcc"}.get(kind, kind)
        if wanted not in relevant and not (kind == "cuda_home" and "nvcc" in relevant):
            continue
        values = log.evidence_of(kind)
        if values:
            chain.add(
                f"The log states {label}: {', '.join(dict.fromkeys(e.value for e in values[:4]))}",
                "",
                values[0].text,
                f"log line {values[0].line}",
                FROM_LOG,
            )


def _root_cause(
    chain: _Chain, focus: _Focus, walked: bool, judgement: causes_.Judgement
) -> tuple[str, str]:
    """The root cause and how it is known (``Diagnosis.cause_status``)."""
    if walked and chain.required_cuda and chain.nvcc_line and not chain.contradicted:
        knob = f", {chain.knobs_unset[0]} is not set" if chain.knobs_unset else ""
        return (
            f"The nvcc the package resolves ({chain.nvcc_line}) is older than the "
            f"{chain.required_cuda} it requires for this GPU{knob}: the arch detection raises, a "
            f"bare `except` swallows it, and the empty arch set makes it reject the GPU "
            f"({focus.signature.id})."
        ), "confirmed"
    if chain.contradicted:
        here = f" ({chain.nvcc_line})" if chain.nvcc_line else ""
        knob = (
            f"; here {chain.knobs_set[0]} is set, so the detection would not even run"
            if chain.knobs_set
            else ""
        )
        older = f"a CUDA toolkit older than {chain.required_cuda}" if chain.required_cuda else ""
        return (
            f"In the service's environment the package found {older or 'other settings'} (the "
            f"log shows its detection failing), unlike the examined environment{here}{knob}; its "
            f"arch detection failed silently and the GPU was rejected."
        ), judgement.status
    return _judged_cause(focus.root_signature, judgement), judgement.status


def _judged_cause(root: Signature, judgement: causes_.Judgement) -> str:
    evidence = "; ".join(judgement.evidence) or "none"
    if judgement.status == causes_.DETERMINED and judgement.cause is not None:
        if not judgement.cause.when:  # the only known cause, whatever the versions
            return f"{judgement.cause.text} (from the log and the knowledge base: {root.id})."
        return (
            f"{judgement.cause.text} (from the log and the knowledge base: {root.id}; the log's "
            f"evidence: {evidence})."
        )
    if judgement.status == causes_.CONDITIONAL:
        branches = [
            f"if {causes_.condition_text(c)}: {c.text}" if c.when else f"otherwise: {c.text}"
            for c in judgement.candidates
        ]
        return (
            f"Recognised ({root.id}); the log does not pin down which known cause applies "
            f"(evidence: {evidence}). " + "; ".join(branches) + "."
        )
    known = "; ".join(causes_.condition_text(c) for c in root.causes if c.when)
    return (
        f"Recognised ({root.id}), cause not determined for this version: the log's evidence "
        f"({evidence}) fits none of the known causes (they apply when {known or 'never'})."
    )


def _exact_gpus(
    log: ParsedLog, examined: Examined | None, focus: _Focus
) -> tuple[ComputeCapability, ...]:
    """The exact compute capabilities of the GPU in question: the examined GPUs, else the GPU the
    log states or names (not a build's arch list), else the target the error itself names."""
    gpus = examined.gpus if examined is not None else ()
    dotted = causes_.gpu_capabilities(log, gpus) or _arch_of(focus)
    found = (ComputeCapability.parse(cc) for cc in dotted)
    return tuple(dict.fromkeys(cc for cc in found if cc is not None))


def _major_only(log: ParsedLog) -> tuple[ComputeCapability, ...]:
    """When the log names only the major ("SM 12.x requires CUDA >= 12.9"): each compute
    capability of that major a product has (12.0, 12.1), so each gets its own fix."""
    if not any("SM 12" in text for _, text in log.messages):
        return ()
    known = (ComputeCapability.parse(cc) for cc in known_capabilities())
    return tuple(sorted(cc for cc in known if cc is not None and cc.major == 12))


def _engine_fixes(
    focus: _Focus, log: ParsedLog, examined: Examined | None, facts: Mapping[str, causes_.Known]
) -> tuple[FixSuggestion, ...] | None:
    """The shared fix engine's FlashInfer fixes for each exact GPU (the ones scan prints), or
    None when the error is not FlashInfer's, no exact GPU is known, or the log's evidence puts
    FlashInfer before 0.3.1 (no compilation context: the engine's rules do not apply)."""
    ids = (focus.signature.id, focus.root_signature.id)
    ccs = _exact_gpus(log, examined, focus)
    per_gpu = not ccs  # the log names no exact GPU: a fix per compute capability of the major
    ccs = ccs or _major_only(log)
    if not any(i.startswith("flashinfer") for i in ids) or not ccs:
        return None
    if causes_.holds("flashinfer", ">=0.3.1", facts) is False:
        return None
    fixes: list[Fix] = []
    if examined is not None and examined.toolchains is not None and examined.gpus:
        findings = flashinfer_findings(examined.toolchains, examined.gpus)
        failing = [f for f in findings if f.status == "fails"]
        if not failing:
            return None  # the examined environment does not fail: the signature's fixes stand
        fixes = [fix for f in failing for fix in f.fixes]
    else:
        version = next((e.value for e in log.evidence_of("flashinfer")), None)
        if (version and toolchain_kb.flashinfer_range(version) is None) or _older_wording(log):
            return None  # older than the modelled releases: the signature's knowledge stands
        cuda = next(
            (e.value for k in ("nvcc", "flashinfer_cuda_version") for e in log.evidence_of(k)),
            None,
        )
        each = {cc: flashinfer_fixes(FlashinferCase(version, cc, cuda)) for cc in ccs}
        for cc, found in each.items():
            # a fix that holds for only some of the GPUs the log may mean says for which
            common = [all(f in other for other in each.values()) for f in found]
            fixes.extend(
                f if shared or not per_gpu else _for_gpu(f, cc)
                for f, shared in zip(found, common, strict=True)
            )
    # Avoiding FlashInfer is the answer only when nothing else is (a GPU it does not support).
    fixes = [f for f in fixes if f.kind != AVOID] or fixes
    out: dict[str, FixSuggestion] = {}
    for fix in fixes:
        kind = "env" if fix.kind in (AVOID, "") else fix.kind
        text = fix.action + (f": {fix.command}" if fix.command else "")
        where = ", ".join(str(cc) for cc in ccs)
        source = f"{fix.tradeoff} (archgap's fix engine for compute capability {where})"
        out.setdefault(f"{kind}:{text}", FixSuggestion(kind, text, source))
    return tuple(sorted(out.values(), key=lambda f: FIX_KINDS.index(f.kind)))


def _older_wording(log: ParsedLog) -> bool:
    """The log's FlashInfer gate is worded as no modelled release words it ("requires sm75+",
    0.2.x): the fix engine's rules (0.3.1 on) do not apply."""
    known = {r.check_message.split(".")[0] for r in toolchain_kb.flashinfer_ranges()}
    gates = [t for _, t in log.messages if "FlashInfer requires" in t]
    return bool(gates) and not any(k in t for t in gates for k in known)


def _for_gpu(fix: Fix, cc: ComputeCapability) -> Fix:
    """A fix that holds for one compute capability only, said so ("on 12.1 (NVIDIA GB10 ...)")."""
    name = next((p.name for p in products() if p.compute_capability == str(cc)), "")
    return replace(fix, action=f"on a {cc} GPU (e.g. {name}): {fix.action}")


def _fixes(
    focus: _Focus,
    log: ParsedLog,
    examined: Examined | None,
    facts: Mapping[str, causes_.Known],
) -> tuple[FixSuggestion, ...]:
    # FlashInfer's fixes come from the fix engine scan uses (per exact GPU, version and nvcc);
    # the signatures' own fixes serve the other errors and a FlashInfer log with no GPU known.
    engine = _engine_fixes(focus, log, examined, facts)
    if engine is not None:
        return engine
    signature, root = focus.signature, focus.root_signature
    ccs = facts["cc"].exact if "cc" in facts else _arch_of(focus)
    majors = {int(cc.split(".")[0]) for cc in ccs}
    if not majors and any("SM 12" in t for _, t in log.messages):
        majors.add(12)
    # The explaining signature's fixes; the error's own only for kinds the first lacks.
    candidates = list(root.fixes)
    kinds = {f.kind for f in candidates}
    candidates += [f for f in signature.fixes if root is not signature and f.kind not in kinds]
    fixes: dict[str, FixSuggestion] = {}
    for fix in candidates:
        if fix.applies_to_cc_major is not None and majors and fix.applies_to_cc_major not in majors:
            continue
        if not causes_.fix_applies(fix, ccs, facts):
            continue
        text, source = causes_.for_gpu(fix.text, ccs), fix.source
        fixes.setdefault(f"{fix.kind}:{text}", FixSuggestion(fix.kind, text, source))
    return tuple(sorted(fixes.values(), key=lambda f: FIX_KINDS.index(f.kind)))
