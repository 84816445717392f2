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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from archgap.analysis.explain import causes as causes_
from archgap.analysis.explain import rules
from archgap.analysis.explain.chain import (
    FROM_LOG,
    Chain,
    Examined,
    Step,
    knowledge_steps,
    walk_code,
)
from archgap.analysis.explain.flashfixes import EngineFixes, engine_fixes
from archgap.analysis.explain.gates import gate_ruling
from archgap.analysis.explain.logparse import ParsedLog
from archgap.analysis.explain.match import Focus, SignatureMatch, focus_of, site_relative
from archgap.analysis.explain.rules.arch_token import build_targets
from archgap.analysis.explain.suggestions import CaseAnswer, FixSuggestion, suggestions
from archgap.analysis.verdicts.compat import ComputeCapability, GpuTarget
from archgap.kb import toolchain as toolchain_kb
from archgap.kb.gates import gate_of
from archgap.kb.gpus import known_capabilities
from archgap.kb.signatures import FIX_KINDS, Signature, load_version_marks

# Evidence of the log reported as versions.
_VERSION_KINDS: tuple[str, ...] = ("torch", "torch_cuda", "flashinfer", "nvcc", "driver", "vllm")
_VERSION_KINDS += ("driver_cuda", "sglang", "triton", "flashinfer_cuda_version")
# ... and as paths.
_PATH_KINDS = ("cuda_home", "cuda_path", "flashinfer_cuda_arch_list", "torch_cuda_arch_list")


# ---------------------------------------------------------------- outputs

# ``Diagnosis.exit_code`` by status; "no-error" is 0.
_EXIT_CODES = {"diagnosed": 1, "unknown": 3, "not-architecture": 4}


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
    # (the log's evidence pins it), "conditional", "undetermined" (explain.causes), "" (none).
    cause_status: str = ""
    decide: tuple[str, ...] = ()  # what would decide the cause, when it is not determined
    tool: str = ""  # which tool printed the error (nvcc, NVRTC, Triton's ptxas ...), if known
    # A conditional cause, one case per value of the fact; or, where the log names only the
    # major ("SM 12.x"), the fixes of each GPU it may be, one case each.
    cases: tuple[CaseAnswer, ...] = ()
    # Why archgap chose what it examined when the caller named nothing ("" when they did).
    environment_reason: str = ""

    @property
    def exit_code(self) -> int:
        """``archgap explain``'s: 0 no error in the input; 1 an architecture gap explained;
        3 an error archgap cannot explain (a wording it does not know: a gap may be missed, so
        never the 0 of a healthy log); 4 a known error that is not an architecture gap (CUDA out
        of memory, NCCL ...). 2 (usage, unreadable input, a probe failure) comes before any."""
        return _EXIT_CODES.get(self.status, 0)


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


def explain(
    log: ParsedLog,
    signatures: Sequence[Signature],
    examined: Examined | None = None,
    named: Sequence[GpuTarget] = (),
) -> Diagnosis:
    """The diagnosis of a log, confirmed on the ``examined`` environment's facts where given;
    with the log alone, the ``named`` GPUs (``--gpu``) are the GPUs in question."""
    recognised = recognise(log)
    where = examined.description if examined else ""
    focus = focus_of(log, signatures)
    if focus is None:
        return _unrecognised(log, recognised, where)
    if not focus.signature.architecture:
        return _not_architecture(focus, recognised, where)
    gpus = examined.gpus if examined is not None else tuple(named)
    chain = Chain()
    _log_steps(chain, focus)
    walked = examined is not None and walk_code(chain, log, focus, examined)
    facts = causes_.version_facts(log, _texts(log), load_version_marks(), gpus)
    judgement = causes_.judge(focus.root_signature.causes, facts)
    if not walked:
        knowledge_steps(chain, log, focus, examined, facts)
    _environment_notes(chain, examined)
    answer = _judged(chain, focus, walked, judgement)
    answer = _fixed(answer, focus, log, examined, facts, gpus, walked)
    answer = _what_decides(answer, chain, examined)
    return Diagnosis(
        status="diagnosed",
        signature=focus.signature.id,
        root_signature=focus.root_signature.id,
        error=focus.primary.text,
        steps=tuple(chain.steps),
        root_cause=answer.root_cause,
        fixes=answer.fixes,
        matches=focus.matches,
        recognised=recognised,
        confirmed=chain.confirmed and not chain.contradicted,
        notes=tuple(chain.notes),
        environment=where,
        cause_status=answer.status,
        decide=answer.decide,
        tool=rules.log_facts(log, ()).tool,
        cases=answer.cases,
    )


def _unrecognised(log: ParsedLog, recognised: Recognised, where: str) -> Diagnosis:
    """A log no signature knows: "unknown" where it has a traceback or says "error" (a gap may be
    missed), else "no-error"."""
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


def _log_steps(chain: Chain, focus: Focus) -> None:
    """The steps the log itself states: the error, the earlier error that explains it (a failed
    build), and the error the log ends with after that build."""
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
        built = f", the build of {focus.built} failed" if focus.built else ""
        chain.add(
            f"Earlier in the log{built}: {explaining.text}"
            + (" (the cause: the error above is what that build left)" if built else ""),
            "",
            "",
            f"log line {explaining.line}" + _workers_note(explaining),
            FROM_LOG,
        )
    _add_later(chain, focus)


def _environment_notes(chain: Chain, examined: Examined | None) -> None:
    """What the reader must know of the examined environment: the log contradicts it, and the
    probe sections that failed."""
    if chain.contradicted:
        chain.notes.append(
            "unconfirmed: the log contradicts the examined environment; the service's environment "
            "differs (examine the service's own environment with --env-from PID or an env file)"
        )
    if examined is not None:
        chain.notes.extend(examined.problems)


@dataclass(frozen=True)
class _Answer:
    """The root cause, how it is known (``Diagnosis.cause_status``), what would decide it, the
    fixes and the cases of a conditional cause."""

    root_cause: str
    status: str
    decide: tuple[str, ...]
    fixes: tuple[FixSuggestion, ...]
    cases: tuple[CaseAnswer, ...]


def _judged(chain: Chain, focus: Focus, walked: bool, judgement: causes_.Judgement) -> _Answer:
    """The answer from the chain and the signature's known causes, before any fix."""
    root_cause, status = _root_cause(chain, focus, walked, judgement)
    undecided = status in (causes_.CONDITIONAL, causes_.UNDETERMINED)
    cases = _signature_cases(judgement) if status == causes_.CONDITIONAL else ()
    return _Answer(root_cause, status, judgement.decide if undecided else (), (), cases)


def _fixed(
    answer: _Answer,
    focus: Focus,
    log: ParsedLog,
    examined: Examined | None,
    facts: Mapping[str, causes_.Known],
    gpus: Sequence[GpuTarget],
    walked: bool,
) -> _Answer:
    """The answer with its fixes: a rule's ruling replaces it where one decides, else the
    fixes of the engine or of the signatures."""
    fixes, shared, gpu_cases = _fixes(focus, log, examined, facts, gpus)
    # Where the code was not walked, the rules decide from the log's facts (analysis.explain.rules)
    ruling = None if walked else _ruling(focus, log, gpus)
    if ruling is not None:
        return _ruled(ruling, focus)
    if gpu_cases and not answer.cases:
        # The log names the major only ("SM 12.x"): no fix is given as if the GPU were known;
        # those that hold on every GPU of the major stay fixes, the others are one case per GPU
        # (a cause's own cases keep the list, where each such fix says its GPU).
        which = f"the GPU's compute capability (which case's fixes apply): {causes_.HOW_CC}"
        return replace(answer, fixes=shared, cases=gpu_cases, decide=(*answer.decide, which))
    return replace(answer, fixes=fixes)


def _ruled(ruling: rules.Ruling, focus: Focus) -> _Answer:
    """The answer a rule decided from the log's facts."""
    root_cause = (
        f"{ruling.cause} (rule {ruling.rule}, from the log's facts and the knowledge base; "
        f"the error: {focus.root_signature.id})."
    )
    cases = tuple(
        CaseAnswer(c.when, c.cause, tuple(f.text for f in suggestions(c.fixes, "")))
        for c in ruling.cases
    )
    fixes = suggestions(ruling.fixes, "archgap's rule " + ruling.rule)
    return _Answer(root_cause, ruling.status, ruling.decide, fixes, cases)


def _what_decides(answer: _Answer, chain: Chain, examined: Examined | None) -> _Answer:
    """The answer with what would decide it: the GPU's capability where a fix needs it (with
    the placeholder's legend as a note), and the machine that crashed, where it is undecided
    and was not examined."""
    decide = answer.decide
    legend = causes_.placeholder_legend(f.text for f in answer.fixes)
    if legend:  # the fixes need the GPU's capability, which the log does not state
        chain.notes.append(f"in the fixes, {legend}")
        decide += (f"the GPU's compute capability (for the fixes): {causes_.HOW_CC}",)
    if decide and examined is None:
        decide += (
            "or run `archgap explain` on the machine that crashed (or with --host), so the "
            "installed code and toolchain are read",
        )
    return replace(answer, decide=decide)


def _add_later(chain: Chain, focus: Focus) -> None:
    """The error the log ends with after the build failure, that no signature knows: a step
    when it is of the package whose build failed (what the build left), else a note."""
    later = focus.later
    if later is None:
        return
    if later.connected:
        chain.add(
            f"Then, in {later.package}: {later.text} (what the failed build left: fix the "
            "build, and this error goes with it)",
            "",
            "",
            f"log line {later.line}",
            FROM_LOG,
        )
    else:
        chain.notes.append(
            f"the log ends with another error (line {later.line}: {later.text}); archgap does "
            "not know it, and the log does not tie it to the failed build"
        )


def _signature_cases(judgement: causes_.Judgement) -> tuple[CaseAnswer, ...]:
    """The known causes a signature's conditions leave open, one case each."""
    return tuple(
        CaseAnswer(f"if {causes_.condition_text(c)}" if c.when else "otherwise", c.text, ())
        for c in judgement.candidates
    )


def _ruling(focus: Focus, log: ParsedLog, gpus: Sequence[GpuTarget]) -> rules.Ruling | None:
    facts = rules.log_facts(log, causes_.gpu_capabilities(log, gpus) or _arch_of(focus, log))
    for signature in dict.fromkeys((focus.root_signature, focus.signature)):
        gate = gate_of(signature.id)
        ruling = (
            gate_ruling(gate, focus.primary.text, facts)
            if gate is not None
            else rules.decide(signature.id, focus.primary.text, facts)
        )
        if ruling is not None:
            return ruling
    return None


def _texts(log: ParsedLog) -> list[str]:
    """The error texts whose wording may pin a release: exception messages and message lines."""
    return [f"{tb.exception_type}: {tb.message}" for tb in log.tracebacks] + [
        text for _, text in log.messages
    ]


def _not_architecture(focus: Focus, recognised: Recognised, where: str) -> Diagnosis:
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


def _arch_of(focus: Focus, log: ParsedLog) -> tuple[str, ...]:
    """The GPU's capability from the error itself ("Value 'sm_121a' is not defined" -> 12.1), for
    signatures whose ``arch`` names the GPU; () otherwise, and () when a build command in the
    log names that arch with nvcc's flags (-arch sm_30: a target of the build, not the GPU)."""
    if not focus.signature.arch_is_gpu:
        return ()
    found = focus.signature.search(focus.primary.text)
    arch = found.groupdict().get("arch") if found else None
    cc = causes_.dotted(arch) if arch else None
    if cc and cc.replace(".", "") in build_targets(t for _, t in log.messages):
        return ()
    return (cc,) if cc else ()


def _root_cause(
    chain: Chain, focus: Focus, walked: bool, judgement: causes_.Judgement
) -> tuple[str, str]:
    """The root cause and how it is known (``Diagnosis.cause_status``)."""
    if walked and chain.required_cuda and chain.nvcc_line and not chain.contradicted:
        knob = f", {chain.knobs_unset[0]} is not set" if chain.knobs_unset else ""
        return (
            f"The nvcc the package resolves ({chain.nvcc_line}) is older than the "
            f"{chain.required_cuda} it requires for this GPU{knob}: the arch detection raises, a "
            f"broad `except Exception` swallows it, and the empty arch set makes it reject the GPU "
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
    if judgement.status == causes_.CONDITIONAL:  # the causes it leaves open: Diagnosis.cases
        return (
            f"Recognised ({root.id}); the log does not pin down which known cause applies "
            f"(evidence: {evidence}): one case each."
        )
    known = "; ".join(causes_.condition_text(c) for c in root.causes if c.when)
    return (
        f"Recognised ({root.id}), cause not determined for this version: the log's evidence "
        f"({evidence}) fits none of the known causes (they apply when {known or 'never'})."
    )


def _exact_gpus(
    log: ParsedLog, gpus: Sequence[GpuTarget], focus: Focus
) -> tuple[ComputeCapability, ...]:
    """The exact compute capabilities of the GPU in question: the examined or named GPUs, else
    the GPU the log states or names (not a build's arch list), else the target the error names."""
    dotted = causes_.gpu_capabilities(log, gpus) or _arch_of(focus, log)
    found = (ComputeCapability.parse(cc) for cc in dotted)
    return tuple(dict.fromkeys(cc for cc in found if cc is not None))


def _major_only(log: ParsedLog) -> tuple[ComputeCapability, ...]:
    """When the log names only the major ("SM 12.x requires CUDA >= 12.9"): each compute
    capability of that major a product has (12.0, 12.1), so each gets its own fix."""
    majors = _majors_named(log)
    if not majors:
        return ()
    known = (ComputeCapability.parse(cc) for cc in known_capabilities())
    return tuple(sorted(cc for cc in known if cc is not None and cc.major in majors))


def _majors_named(log: ParsedLog) -> set[int]:
    """The majors a log names as FlashInfer's per-major rules word them ("SM 12.x requires",
    "SM 120 requires": kb/jit.json's raises, each of one major)."""
    rules = toolchain_kb.jit_rules().flashinfer.major_raises()
    return {m for m, _ in rules if any(f"SM {m}" in text for _, text in log.messages)}


def _engine_fixes(
    focus: Focus,
    log: ParsedLog,
    examined: Examined | None,
    facts: Mapping[str, causes_.Known],
    gpus: Sequence[GpuTarget],
) -> EngineFixes | None:
    """The shared fix engine's FlashInfer fixes for each exact GPU (the ones scan prints), or
    None when the error is not FlashInfer's, no exact GPU is known, or the engine's rules do not
    apply (``flashfixes.engine_fixes``)."""
    exact = _exact_gpus(log, gpus, focus)
    ccs = exact or _major_only(log)  # no exact GPU: a fix per compute capability of the major
    ids = (focus.signature.id, focus.root_signature.id)
    if not any(i.startswith("flashinfer") for i in ids) or not ccs:
        return None
    return engine_fixes(log, examined, facts, ccs, per_gpu=not exact)


def _fixes(
    focus: Focus,
    log: ParsedLog,
    examined: Examined | None,
    facts: Mapping[str, causes_.Known],
    gpus: Sequence[GpuTarget],
) -> tuple[tuple[FixSuggestion, ...], tuple[FixSuggestion, ...], tuple[CaseAnswer, ...]]:
    """The fixes; those that hold on every GPU the log may mean; the others, one case per GPU
    (only where the log names the major alone)."""
    # FlashInfer's fixes come from the fix engine scan uses (per exact GPU, version and nvcc);
    # the signatures' own fixes serve the other errors and a FlashInfer log with no GPU known.
    engine = _engine_fixes(focus, log, examined, facts, gpus)
    if engine is not None:
        return engine.fixes, engine.shared, engine.cases
    generic = _signature_fixes(focus, log, facts)
    return generic, generic, ()


def _signature_fixes(
    focus: Focus, log: ParsedLog, facts: Mapping[str, causes_.Known]
) -> tuple[FixSuggestion, ...]:
    """The signatures' fixes: for the GPU where the log states it, else with a placeholder."""
    signature, root = focus.signature, focus.root_signature
    ccs = facts["cc"].exact if "cc" in facts else _arch_of(focus, log)
    majors = {int(cc.split(".")[0]) for cc in ccs}
    if not majors:
        majors |= _majors_named(log)
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
