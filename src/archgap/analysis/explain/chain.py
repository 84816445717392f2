"""The chain of steps from the raising line to its cause, read off the examined environment.

Pure: the probe's facts of the examined environment (``Examined``) and the log in; steps appended
to a ``Chain``. ``walk_code`` follows the installed raise site: its condition, every write of the
state it reads with its branch, the knob that decides the branch, the broad ``except`` that
swallows a failing write and the raise it hides, whose GPU and CUDA-version conditions are joined
with the GPU and the nvcc the package resolves (``analysis.jit``). ``knowledge_steps`` is the chain
from the log and the signatures' knowledge when the code is not installed or not examined.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from archgap.analysis.explain import causes as causes_
from archgap.analysis.explain.logparse import ParsedLog
from archgap.analysis.explain.match import Focus, raise_site, site_relative, state_of
from archgap.analysis.jit.findings import resolve_nvcc
from archgap.analysis.verdicts.compat import GpuTarget
from archgap.kb import toolchain as toolchain_kb
from archgap.probe.facts import (
    CodeFacts,
    CodeSite,
    Guard,
    Occurrence,
    Raiser,
    Swallow,
    ToolchainFacts,
    Toolkit,
    TraceFacts,
)

# How a step is known.
CONFIRMED = "confirmed"  # read on the examined environment (installed source, env, nvcc, --gpu)
FROM_LOG = "from-log"  # stated by the log
KNOWLEDGE = "knowledge"  # archgap's signature knowledge base (not checked here)
UNCONFIRMED = "unconfirmed"  # from the log, contradicted by the examined environment

_VERSION_CALL = re.compile(r"cuda_version", re.IGNORECASE)
_EMPTY_VALUE = re.compile(r"=\s*(?:(?:set|list|dict|tuple)\(\)|\[\]|\{\}|\(\))\s*$")
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
    driver: str | None = None  # the NVIDIA driver named (--driver): fixes it cannot run go last


@dataclass(frozen=True)
class Step:
    text: str
    location: str  # "flashinfer/compilation_context.py:62", or "" for a fact
    fact: str  # the code line or the machine fact
    source: str  # where it was read: a file, a command, the log, a signature
    status: str  # CONFIRMED, FROM_LOG, KNOWLEDGE, UNCONFIRMED


@dataclass
class Chain:
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


def _where(path: str, line: int) -> str:
    return f"{site_relative(path) or path}:{line}"


def _condition(guard: Guard) -> str:
    return f"not ({guard.condition})" if guard.kind == "else" else guard.condition


def _guard_code(guard: Guard) -> str:
    return f"if {guard.condition}:" if guard.kind == "if" else f"else of `if {guard.condition}:`"


def _short(function: str) -> str:
    return function.rsplit(".", 1)[-1]


def walk_code(chain: Chain, log: ParsedLog, focus: Focus, examined: Examined) -> bool:
    """The chain read off the installed code; False when the raise site is not installed."""
    site, note = raise_site(focus, examined.code)
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
    for name, _ in state_of(site):
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
    chain: Chain, log: ParsedLog, facts: TraceFacts, examined: Examined, source: str
) -> None:
    """The steps of each write of the traced state: where it starts empty, then each branch that
    writes it (the if before its else), in the order of the source."""
    groups = _write_groups(chain, facts, source)
    for (_, kind), group in sorted(groups.items(), key=lambda i: (i[0][0], i[0][1] != "if")):
        _follow_branch(chain, log, facts.name, kind, group, examined, source)


def _write_groups(
    chain: Chain, facts: TraceFacts, source: str
) -> dict[tuple[int, str], list[Occurrence]]:
    """The writes that compute a value for the state, grouped by their branch (its line and
    kind, (0, "") for none); a write of an empty value is a step of its own ("starts empty")."""
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
    return groups


def _follow_branch(
    chain: Chain,
    log: ParsedLog,
    name: str,
    kind: str,
    group: Sequence[Occurrence],
    examined: Examined,
    source: str,
) -> None:
    """The steps of one branch's writes of ``name``: the knob that decides it, the writes an
    ``except`` swallows, or where else it is written."""
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
    chain: Chain,
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


def _holding_raise(swallow: Swallow, examined: Examined) -> tuple[Raiser, Chain] | None:
    """A hidden raise whose conditions all hold on this environment, with the steps saying so."""
    for raiser in swallow.raisers:
        site = _site_of(examined.code, raiser)
        scratch = Chain()
        if site is not None and _raise_conditions(scratch, site, examined) == (True, True):
            return raiser, scratch
    return None


def _swallowed_write(
    chain: Chain,
    log: ParsedLog,
    write: Occurrence,
    swallow: Swallow,
    examined: Examined,
    source: str,
    knob: str | None,
) -> None:
    """The steps of a write a broad ``except`` swallows: the raise that fired (the log shows its
    message, or its conditions hold on this environment) and why, else that it can fail."""
    branch = f" in the else branch of `{knob}`" if knob else ""
    where = _where(write.path, write.line)
    fired, seen_text = _fired(log, swallow.raisers)
    # No message in the log: a raise whose conditions hold on this environment fires here.
    held = _holding_raise(swallow, examined) if fired is None else None
    raiser = fired or (held[0] if held else None)
    if raiser is None:
        _may_fail_silently(chain, write, swallow, branch, source)
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
        _knob_contradicted(chain, knob, write, examined)
    text = f"The swallowed exception, as the handler logged it{_logged_by(chain, log, seen_text)}"
    chain.add(f"{text}: {seen_text}", location, code, "log", FROM_LOG)
    if site is not None:
        _raise_conditions(chain, site, examined)


def _may_fail_silently(
    chain: Chain, write: Occurrence, swallow: Swallow, branch: str, source: str
) -> None:
    """No raise is known to fire: the write can fail silently, and what each hidden raise
    raises."""
    chain.add(
        f"The write at :{write.line}{branch} can fail silently: the `except` at "
        f":{swallow.except_line} swallows any exception ({swallow.action})",
        _where(write.path, write.line),
        write.text,
        source,
        CONFIRMED,
    )
    for hidden in swallow.raisers:
        what = hidden.message or hidden.exception
        location = _where(hidden.path, hidden.line)
        chain.add(f"{_short(hidden.function)}() can raise {what}", location, "", source, CONFIRMED)


def _knob_contradicted(chain: Chain, knob: str, write: Occurrence, examined: Examined) -> None:
    """The log shows the else branch of ``knob`` ran, but the knob is set here: the service ran
    in another environment."""
    chain.contradicted = True
    chain.add(
        f"The log shows this branch ran, so {knob} was not set where the service ran; here "
        f"it is set ({examined.env_source}): this environment would not run it",
        _where(write.path, write.line),
        write.text,
        f"environment ({examined.env_source})",
        UNCONFIRMED,
    )


def _logged_by(chain: Chain, log: ParsedLog, seen_text: str) -> str:
    """How often and from whom the handler logged the swallowed exception (" (4x from w0, w1)"),
    or "" where the "Earlier in the log" step already says it (counted once)."""
    warning = next((w for w in log.warnings if w.text == seen_text), None)
    if warning is None or any(s.text.startswith("Earlier in the log") for s in chain.steps):
        return ""
    workers = [w for w in warning.workers if w]
    return f" ({warning.count}x" + (f" from {', '.join(workers[:8])}" if workers else "") + ")"


def _raise_conditions(chain: Chain, site: CodeSite, examined: Examined) -> tuple[bool, bool]:
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
    chain: Chain, guard: Guard, required: str, location: str, examined: Examined
) -> bool | None:
    """Whether a CUDA-version condition is as the raise needs it, with the nvcc the package
    resolves (FlashInfer's lookup, ``analysis.jit``); None when no nvcc version is known."""
    toolchains = examined.toolchains
    resolved = (
        resolve_nvcc(toolchains, toolchain_kb.jit_rules().flashinfer.nvcc_lookup)
        if toolchains
        else None
    )
    toolkit = resolved.toolkit if resolved else None
    if resolved is None or toolkit is None or toolkit.status != "ok" or toolkit.version is None:
        _version_unknown(chain, guard, location, toolchains, toolkit)
        return None
    how = _resolution([f.what for f in resolved.chain])
    below = _older(toolkit.version, required)
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


def _older(version: str, required: str) -> bool:
    """Whether a CUDA version is older than the ``required`` one (an unreadable one as none)."""
    version_tuple = toolchain_kb.version_tuple
    return (version_tuple(version) or ()) < (version_tuple(required) or ())


def _version_unknown(
    chain: Chain,
    guard: Guard,
    location: str,
    toolchains: ToolchainFacts | None,
    toolkit: Toolkit | None,
) -> None:
    """The version condition depends on an nvcc whose version is not known here, and why."""
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


def _resolution(steps: Sequence[str]) -> str:
    """How the nvcc was found, each source named once: "CUDA_HOME and CUDA_PATH unset; nvcc on
    PATH: /usr/bin/nvcc"."""
    unset = [s.removesuffix(" is not set") for s in steps if s.endswith(" is not set")]
    rest = [s for s in steps if not s.endswith(" is not set")]
    head = [f"{' and '.join(unset)} unset"] if unset else []
    return "; ".join(head + rest)


def knowledge_steps(
    chain: Chain,
    log: ParsedLog,
    focus: Focus,
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
