"""``explain``: a log diagnosed, confirmed on the environment it came from (``Where``) by
examining it through the probe."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from archgap.errors import ProbeError
from archgap.orchestrate.shared import probe_facts, resolve
from archgap.probe.facts import ProbeResponse
from archgap.report.jsondoc import document
from archgap.request import explain_request, trace_request
from archgap.transport.target import DEFAULT_TIMEOUT, LOCAL, Target

if TYPE_CHECKING:
    from archgap.analysis.explain.chain import Examined
    from archgap.analysis.explain.diagnosis import Diagnosis
    from archgap.analysis.explain.logparse import ParsedLog
    from archgap.analysis.verdicts.compat import GpuTarget
    from archgap.kb.signatures import Signature


@dataclass(frozen=True)
class Where:
    """The environment explain examines: ``python``'s (None: python3 there, or this
    interpreter here) on ``target``, with a service's environment (``env_from``: a PID or an env
    file there) instead of the shell's."""

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
) -> tuple[Diagnosis, ParsedLog]:
    """The diagnosis of a log (``head``; of a log too long to read whole, its start and its end
    ``tail`` with ``skipped_lines`` between), confirmed on the environment ``where`` (None: the
    log alone); and the log as parsed. ``UnknownGpu`` for a bad GPU name (before anything is
    probed), ``ProbeError`` when the environment cannot be examined."""
    from archgap.analysis.explain.diagnosis import explain as diagnosis_of
    from archgap.analysis.explain.logparse import parse_log
    from archgap.kb.signatures import load_signatures

    named = resolve(gpus)
    log = parse_log(head, tail, skipped_lines)
    signatures = load_signatures()
    examined = _examine(where, log, signatures, named) if where is not None else None
    return diagnosis_of(log, signatures, examined, named), log


def explain(
    log: str, *, gpus: Sequence[str] = (), where: Where | None = Where(), origin: str = "api"
) -> dict[str, Any]:
    """The explain document (what ``archgap explain --json`` prints) for the text of a log,
    examined ``where`` (None: the log alone); ``origin`` is what the document names as where
    the log came from."""
    from archgap.report.explain import body

    diagnosis, parsed = diagnose(log, gpus=gpus, where=where)
    return document("explain", body(diagnosis, origin, parsed.lines, parsed.truncated_lines))


def _examine(
    where: Where,
    log: ParsedLog,
    signatures: Sequence[Signature],
    named: tuple[GpuTarget, ...],
) -> Examined:
    """The examined environment's facts, all from the probe (here or on the target): the python
    environment, toolchains, GPUs and the raise sites first; then the trace of the state the
    raising condition reads."""
    from archgap.analysis.explain.chain import Examined
    from archgap.analysis.explain.match import code_request, names_to_trace
    from archgap.analysis.scan import present_targets
    from archgap.codec import decode
    from archgap.probe.facts import (
        CodeFacts,
        GpuFacts,
        PythonEnvironment,
        ToolchainFacts,
        TraceFacts,
    )

    python, target = where.python, where.target
    facts, errors = where.facts(explain_request(python, code_request(log, signatures)))
    sections = facts.sections
    env = decode(PythonEnvironment, sections["python"]) if sections.get("python") else None
    if env is None or not env.site_packages:
        problems = env.problems if env is not None else ()
        why = errors.get("python") or "; ".join(p.reason for p in problems) or "none"
        raise ProbeError(f"cannot examine {python or 'this interpreter'} on {target.name}: {why}")
    empty: dict[str, list[Any]] = {"site_packages": [], "sites": [], "problems": []}
    code = decode(CodeFacts, sections.get("code") or empty)
    traces = []
    for name, dist in names_to_trace(log, signatures, code):
        more, more_errors = where.facts(trace_request(name, dists=[dist], python=python))
        errors.update(more_errors)
        if more.section("trace"):
            traces.append(decode(TraceFacts, more.section("trace")))
    toolchains = (
        decode(ToolchainFacts, sections["toolchains"]) if sections.get("toolchains") else None
    )
    present = present_targets(decode(GpuFacts, sections["gpu"])) if sections.get("gpu") else ()
    place = "" if target.is_local else f" on {target.name}"
    return Examined(
        description=f"{env.executable} (Python {env.python_version}){place}",
        env=dict(facts.env),
        env_source=facts.env_source or "shell",
        code=code,
        traces=tuple(traces),
        toolchains=toolchains,
        gpus=(*named, *present),
        problems=tuple(f"probe section {k} failed: {v}" for k, v in errors.items()),
    )
