"""``explain``: a log diagnosed, confirmed on the environment it came from (``Where``) by
examining it through the probe. Where the caller names no interpreter on this machine, the
environment is chosen as a user expects (``explain_choice``: the one the log's traceback names,
the active one, else the log alone), and the diagnosis says which and why."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from archgap.errors import ProbeError, UsageError
from archgap.logread import LogInput
from archgap.orchestrate import explain_choice
from archgap.orchestrate.shared import check_driver, probe_facts, resolve
from archgap.probe.facts import ProbeResponse
from archgap.request import explain_request, trace_request
from archgap.transport.target import DEFAULT_TIMEOUT, LOCAL, Target

if TYPE_CHECKING:
    from archgap.analysis.explain.chain import Examined
    from archgap.analysis.explain.diagnosis import Diagnosis
    from archgap.analysis.explain.logparse import ParsedLog
    from archgap.analysis.verdicts.compat import GpuTarget
    from archgap.kb.signatures import Signature
    from archgap.probe.facts import CodeFacts, PythonEnvironment, TraceFacts
    from archgap.results import ExplainResult


@dataclass(frozen=True)
class Where:
    """The environment explain examines: ``python``'s on ``target`` (None: python3 on a remote
    target; here, the one the log names or the active one, never this interpreter: see
    ``explain_choice``), with a service's environment (``env_from``: a PID or an env file there)
    instead of the shell's."""

    python: str | None = None
    target: Target = LOCAL
    env_from: str | None = None
    root: str = "/"
    timeout: float = DEFAULT_TIMEOUT

    def facts(self, request: dict[str, Any]) -> tuple[ProbeResponse, dict[str, str]]:
        """The probe's facts and the sections that failed; an unreadable ``env_from`` raises
        ``ProbeError`` (it is not a section's problem)."""
        facts = probe_facts(self.target, request, self.timeout, self.root, self.env_from)
        problem = facts.errors.get("env_from")
        if problem:
            raise ProbeError(f"--env-from {self.env_from}: {problem}")
        return facts, {k: v for k, v in facts.errors.items() if k != "env_from"}


def diagnose(
    head: str,
    *,
    tail: str = "",
    skipped_lines: int = 0,
    gpus: Sequence[str] = (),
    where: Where | None = Where(),
    environ: Mapping[str, str] | None = None,
    driver: str | None = None,
) -> tuple[Diagnosis, ParsedLog]:
    """The diagnosis of a log (``head``; of a log too long to read whole, its start and its end
    ``tail`` with ``skipped_lines`` between), confirmed on the environment ``where`` (None: the
    log alone; no interpreter here: chosen from the log and ``environ``, the caller's
    environment variables, by default this process's); and the log as parsed. ``UnknownGpu``
    for a bad GPU name (before anything is probed), ``ProbeError`` when an environment the
    caller named cannot be examined (one archgap chose is then left for the log alone, said
    so), ``UsageError`` for ``env_from`` here with no interpreter to examine it with.
    ``driver``: the NVIDIA driver to judge the examined environment's fixes against."""
    from archgap.analysis.explain.diagnosis import explain as diagnosis_of
    from archgap.analysis.explain.logparse import parse_log
    from archgap.kb.signatures import load_signatures

    named = resolve(gpus)
    check_driver(driver)
    log = parse_log(head, tail, skipped_lines)
    signatures = load_signatures()
    chosen, why = _chosen(where, log, os.environ if environ is None else environ)
    examined: Examined | None = None
    sites: tuple[str, ...] = ()
    executable = ""
    if chosen is not None:
        try:
            # this machine's GPUs are the log's only where the caller or the log named the
            # environment; not in an active environment archgap fell back to
            own = not why or why == explain_choice.LOG_NAMES
            examined, sites, executable = _examine(chosen, log, signatures, named, own)
        except ProbeError as exc:
            if not why:  # the caller's own choice: their error
                raise
            why = f"{chosen.python} could not be examined: {exc}"
            chosen = None
    if examined is not None and driver:
        examined = replace(examined, driver=driver)
    diagnosis = diagnosis_of(log, signatures, examined, named)
    notes = diagnosis.notes
    if chosen is not None:
        envs = explain_choice.named_environments(log)
        note = explain_choice.mismatch(envs, sites, executable, here=chosen.target.is_local)
        notes += (note,) if note else ()
    return replace(diagnosis, environment_reason=why, notes=notes), log


def _chosen(
    where: Where | None, log: ParsedLog, environ: Mapping[str, str]
) -> tuple[Where | None, str]:
    """What to examine and why archgap chose it ("" where the caller chose: an interpreter, a
    target, the log alone)."""
    if where is None or where.python is not None or not where.target.is_local:
        return where, ""
    choice = explain_choice.choose(log, environ)
    if where.env_from is not None:  # the service's environment, with which interpreter?
        if choice.python is None:
            raise UsageError(
                f"--env-from {where.env_from}: no interpreter to examine it with ({choice.why}); "
                "name one with --python"
            )
        return replace(where, python=choice.python), choice.why
    if choice.python is None:
        return None, choice.why
    return replace(where, python=choice.python), choice.why


def explain(
    log: str | LogInput,
    *,
    gpus: Sequence[str] = (),
    where: Where | None = Where(),
    origin: str = "api",
    driver: str | None = None,
) -> ExplainResult:
    """The explanation of a log: its text, or a long log as ``archgap.logread.read_log`` read
    it (its start and its end); examined ``where`` (None: the log alone), with its fixes judged
    against the NVIDIA ``driver`` when one is given; ``origin`` is what the result names as
    where the log came from. ``archgap.report.explain.document(result)`` is what ``archgap
    explain --json`` prints. Raises as ``diagnose`` does."""
    from archgap.results import ExplainResult

    read = log if isinstance(log, LogInput) else LogInput(log)
    diagnosis, parsed = diagnose(
        read.head, tail=read.tail, skipped_lines=read.gap_lines, gpus=gpus, where=where,
        driver=driver,
    )  # fmt: skip
    return ExplainResult(
        diagnosis, origin, parsed.lines, parsed.truncated_lines, read.skipped_bytes,
        read.skipped_lines, read.note(parsed.lines),
    )  # fmt: skip


def _examine(
    where: Where,
    log: ParsedLog,
    signatures: Sequence[Signature],
    named: tuple[GpuTarget, ...],
    own_gpus: bool = True,
) -> tuple[Examined, tuple[str, ...], str]:
    """The examined environment's facts, all from the probe (here or on the target): the python
    environment, toolchains, GPUs and the raise sites first; then the trace of the state the
    raising condition reads. With its site-packages directories and its interpreter. The GPUs
    present there are the GPUs in question only with ``own_gpus`` (no fix for a GPU neither the
    log nor the caller named: a problem says which were left out)."""
    from archgap.analysis.explain.chain import Examined
    from archgap.analysis.explain.match import code_request
    from archgap.codec import decode
    from archgap.probe.facts import CodeFacts, ToolchainFacts

    facts, errors = where.facts(explain_request(where.python, code_request(log, signatures)))
    sections = facts.sections
    env = _environment(where, sections, errors)
    empty: dict[str, list[Any]] = {"site_packages": [], "sites": [], "problems": []}
    code = decode(CodeFacts, sections.get("code") or empty)
    traces = _traces(where, log, signatures, code, errors)
    toolchains = (
        decode(ToolchainFacts, sections["toolchains"]) if sections.get("toolchains") else None
    )
    gpus, left_out = _gpus_in_question(sections, named, own_gpus)
    place = "" if where.target.is_local else f" on {where.target.name}"
    examined = Examined(
        description=f"{env.executable} (Python {env.python_version}){place}",
        env=dict(facts.env),
        env_source=facts.env_source or "shell",
        code=code,
        traces=traces,
        toolchains=toolchains,
        gpus=gpus,
        problems=tuple(f"probe section {k} failed: {v}" for k, v in errors.items()) + left_out,
    )
    return examined, tuple(env.site_packages), env.executable


def _environment(
    where: Where, sections: Mapping[str, Any], errors: Mapping[str, str]
) -> PythonEnvironment:
    """The examined Python environment; ``ProbeError`` where there is none to examine (no
    section, or no site-packages), with the probe's reason."""
    from archgap.codec import decode
    from archgap.probe.facts import PythonEnvironment

    env = decode(PythonEnvironment, sections["python"]) if sections.get("python") else None
    if env is None or not env.site_packages:
        problems = env.problems if env is not None else ()
        why = errors.get("python") or "; ".join(p.reason for p in problems) or "none"
        examined = where.python or "this interpreter"
        raise ProbeError(f"cannot examine {examined} on {where.target.name}: {why}")
    return env


def _traces(
    where: Where,
    log: ParsedLog,
    signatures: Sequence[Signature],
    code: CodeFacts,
    errors: dict[str, str],
) -> tuple[TraceFacts, ...]:
    """The trace of each name the raising condition reads (``errors``: the sections that
    failed, added to)."""
    from archgap.analysis.explain.match import names_to_trace
    from archgap.codec import decode
    from archgap.probe.facts import TraceFacts

    traces = []
    for name, dist in names_to_trace(log, signatures, code):
        more, more_errors = where.facts(trace_request(name, dists=[dist], python=where.python))
        errors.update(more_errors)
        if more.section("trace"):
            traces.append(decode(TraceFacts, more.section("trace")))
    return tuple(traces)


def _gpus_in_question(
    sections: Mapping[str, Any], named: tuple[GpuTarget, ...], own_gpus: bool
) -> tuple[tuple[GpuTarget, ...], tuple[str, ...]]:
    """The GPUs the fixes are for: those named, and with ``own_gpus`` those present there;
    without, a problem that says which present ones were left out."""
    from archgap.analysis.scan import present_targets
    from archgap.codec import decode
    from archgap.probe.facts import GpuFacts

    present = present_targets(decode(GpuFacts, sections["gpu"])) if sections.get("gpu") else ()
    if not present or own_gpus:
        return (*named, *present), ()
    shown = ", ".join(dict.fromkeys(f"{g.label} ({g.compute_capability})" for g in present))
    left_out = (
        f"the GPUs here ({shown}) are not taken as the log's: archgap chose this "
        "environment, and neither the log nor the command names it; name the GPU with "
        "--gpu, or the environment with --python",
    )
    return named, left_out
