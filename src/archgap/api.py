"""The Python API: what the CLI commands do, as functions returning frozen dataclasses.

>>> from archgap.api import scan
>>> report = scan(gpus=["RTX PRO 6000"])
>>> [(p.package, p.verdict) for p in report.packages]

``report_from_facts`` judges probe facts collected anywhere (the "facts" of ``archgap probe
--json``, or a ``ProbeResponse``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from archgap.errors import ProbeError, UsageError
from archgap.probe.facts import ProbeResponse
from archgap.report.jsondoc import document
from archgap.request import (
    DEFAULT_SECTIONS,
    binaries_request,
    explain_request,
    gates_request,
    load_request,
    probe_request,
    trace_request,
    verify_request,
)
from archgap.transport.run import TransportFailure, run_probe
from archgap.transport.target import DEFAULT_PYTHON, DEFAULT_TIMEOUT, LOCAL, Target

if TYPE_CHECKING:
    from archgap.analysis.explain.chain import Examined
    from archgap.analysis.explain.diagnosis import Diagnosis
    from archgap.analysis.explain.logparse import ParsedLog
    from archgap.analysis.fixplan import Action, Plan
    from archgap.analysis.fleet import FleetReport
    from archgap.analysis.jit.caches import SharedCache
    from archgap.analysis.recipe.recipe import Recipe
    from archgap.analysis.scan import ScanReport
    from archgap.analysis.verdicts.compat import GpuTarget
    from archgap.analysis.verify import VerifyReport
    from archgap.analysis.versions import VersionsReport, VersionVerdict
    from archgap.index.deps import Chosen
    from archgap.index.fetch import Fetched
    from archgap.index.options import IndexOptions
    from archgap.index.resolve import Candidate
    from archgap.kb.gpus import GpuProduct
    from archgap.kb.signatures import Signature
    from archgap.probe.binary.fatbin import Progress
    from archgap.probe.facts import BinaryFacts
    from archgap.results import FixResult, GatesResult, KernelsResult, ProbeResult, TraceResult
    from archgap.transport.fleet import FleetOptions, FleetSource, HostInput, Tell

__all__ = [
    "FixResult",
    "FleetOptions",
    "FleetRun",
    "FleetSource",
    "GatesResult",
    "KernelsResult",
    "ProbeError",
    "ProbeResponse",
    "ProbeResult",
    "ScanReport",
    "TraceResult",
    "UsageError",
    "VerifyReport",
    "Where",
    "diagnose",
    "explain",
    "fix",
    "fleet",
    "fleet_run",
    "gates",
    "gpus",
    "k8s_manifest",
    "kernel_files",
    "kernels",
    "probe",
    "probe_script",
    "recipe",
    "report_from_facts",
    "scan",
    "scan_archives",
    "trace",
    "verify",
    "versions",
]


T = TypeVar("T")
# Public names of modules only some commands need: imported when first asked for (PEP 562), so
# that `scan` does not load the fleet and verify code.
_LATER = {
    "ScanReport": "archgap.analysis.scan",
    "FleetOptions": "archgap.transport.fleet",
    "FleetSource": "archgap.transport.fleet",
    "VerifyReport": "archgap.analysis.verify",
    "FixResult": "archgap.results",
    "GatesResult": "archgap.results",
    "KernelsResult": "archgap.results",
    "ProbeResult": "archgap.results",
    "TraceResult": "archgap.results",
}


def __getattr__(name: str) -> Any:
    if name not in _LATER:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_LATER[name]), name)


def scan(
    python: str | None = None,
    *,
    gpus: Sequence[str] = (),
    target: Target = LOCAL,
    env_from: str | None = None,
    root: str = "/",
    timeout: float = DEFAULT_TIMEOUT,
    progress: Progress | None = None,
    driver: str | None = None,
    strict: bool = False,
) -> ScanReport:
    """Scan an environment's native libraries and toolchains; judge each package on each GPU.

    ``target`` says where (this machine, an ssh host, a container...); ``env_from`` names the
    service's environment there (a PID or an env file). Raises ``ProbeError`` when no facts
    could be collected and ``UnknownGpu`` for an unknown GPU name. ``progress(done, total, path)``
    is told as native files are read (on this machine; a remote probe cannot tell).
    """
    _resolve(gpus)  # a bad name fails before anything is probed
    _check_driver(driver)
    from archgap.analysis.deep_plan import deep_search_plan
    from archgap.transport.local import interpreter_asked_ahead

    # A local probe of the shell's environment: the interpreter answers while the request is
    # built, and judging is prepared while a forked child collects the facts.
    local = target.is_local and not env_from
    with interpreter_asked_ahead(python, root, timeout) if local else nullcontext():
        request = probe_request(DEFAULT_SECTIONS, python, deep_plan=deep_search_plan(gpus))
    facts = _run(target, request, timeout, root, env_from, progress, _prepare_judging)
    env_problem = facts.errors.get("env_from")
    if env_problem:
        raise ProbeError(f"--env-from {env_from}: {env_problem}")
    report = _judge(facts, gpus, driver=driver, strict=strict)
    return report if target.is_local else replace(report, target=target.name)


def scan_archives(
    targets: Sequence[str],
    *,
    gpus: Sequence[str] = (),
    driver: str | None = None,
    strict: bool = False,
    options: IndexOptions | None = None,
) -> ScanReport:
    """Judge wheels and images before they are installed or deployed: wheel files, directories
    of them, URLs, requirements resolved from the user's indexes (``options``), container images
    (``oci:DIR[:TAG]``, ``docker-archive:FILE``, ``rootfs:DIR``; ``options.platform`` picks one
    of a multi-platform image). The same analysis as ``scan`` over the distributions and native
    members read from them. A target that cannot be read is
    a problem in the report; ``ProbeError`` when none could be read at all."""
    from archgap.archives.wheel import archive_facts
    from archgap.image.read import image_facts
    from archgap.index.options import IndexOptions
    from archgap.targets import mark_unverified, read_targets

    _resolve(gpus)
    _check_driver(driver)
    contents, fetched = read_targets(list(targets), options or IndexOptions())
    mark_unverified(contents, fetched)
    if not any(c.distributions for c in contents):
        problems = [f"{p.subject}: {p.reason}" for c in contents for p in c.problems]
        raise ProbeError("; ".join(problems) or "no wheel")
    facts = archive_facts(contents, "")
    facts = replace(facts, sections={**facts.sections, "images": image_facts(contents)})
    return _judge(facts, gpus, driver=driver, strict=strict)


def report_from_facts(
    facts: Mapping[str, Any] | ProbeResponse,
    *,
    gpus: Sequence[str] = (),
    matrix: bool = True,
    driver: str | None = None,
    strict: bool = False,
) -> ScanReport:
    """Judge probe facts from any host: the JSON the probe printed (decoded here, once) or a
    ``ProbeResponse``. Raises ``archgap.codec.DecodeError`` for JSON without the probe's shape and
    ``UnknownGpu`` for a GPU name no table knows."""
    from archgap.codec import decode

    response = facts if isinstance(facts, ProbeResponse) else decode(ProbeResponse, facts)
    return _judge(response, gpus, matrix, driver, strict)


def versions(
    package: str,
    *,
    gpus: Sequence[str],
    options: IndexOptions | None = None,
    first: bool = False,
    driver: str | None = None,
    strict: bool = False,
    progress: Callable[[int, int, str], None] | None = None,
    each: Callable[[VersionVerdict], None] | None = None,
) -> VersionsReport:
    """The released versions and variants of ``package`` (a name, or a requirement that narrows
    the versions) on the user's indexes (``options``; pip's settings apply), newest first, each
    judged on ``gpus`` from its wheel like ``scan WHEEL --gpu``; with ``first`` only down to the
    newest that covers them (older wheels are never fetched). ``winner`` and ``install`` (the
    pip command) name that one. Raises ``UsageError`` for an unknown GPU name or driver, or a
    PACKAGE that is not a requirement; an index or a wheel that fails is a problem in the
    report. ``progress(done, total, variant)`` is told before each wheel is read, ``each(verdict)``
    each variant's verdict as it is decided. A wheel read before (by its index's sha256) is not
    read again (index.versions.read_variant)."""
    from archgap.analysis.versions import VersionsReport
    from archgap.index import net
    from archgap.index.options import IndexOptions
    from archgap.index.resolve import ResolveError, candidates, indexes, parse_requirement
    from archgap.index.versions import install_line, variants

    chosen = options or IndexOptions()
    urls = indexes(chosen.index_url, list(chosen.extra_index_urls))
    targets = _resolve(gpus)
    _check_driver(driver)
    try:
        requirement = parse_requirement(package)
    except ResolveError as exc:
        raise UsageError(str(exc)) from None
    base = (requirement.name, targets, tuple(urls), chosen.python_version, chosen.platform)
    skipped: list[str] = []
    with net.limits(chosen.timeout, chosen.max_download):  # the wheels' deadline, cap
        try:
            found = candidates(requirement, urls, chosen.python_version, chosen.platform, skipped)
        except ResolveError as exc:
            return VersionsReport(*base, strict, (), 0, None, None, str(exc))
        listed = variants(found, urls)
        judged: list[VersionVerdict] = []
        fetched: list[Fetched] = []
        winner = None
        for done, candidate in enumerate(listed):
            if progress:
                progress(done, len(listed), f"{requirement.name} {candidate.version}")
            result = _judge_variant(candidate, targets, driver, strict, fetched)
            judged.append(result)
            if each:
                each(result)
            if result.covers and winner is None:
                winner = (result, candidate)
                if first:
                    break
        install = install_line(requirement.name, winner[1], listed, urls) if winner else None
        return VersionsReport(
            *base, strict, tuple(judged), len(listed), winner[0] if winner else None, install,
            bytes_fetched=sum(f.bytes_fetched for f in fetched), index_problems=tuple(skipped),
        )  # fmt: skip


def _judge_variant(
    candidate: Candidate,
    gpus: Sequence[GpuTarget],
    driver: str | None,
    strict: bool,
    fetched: list[Fetched],
) -> VersionVerdict:
    """One variant's wheel read (ranges where the server allows) and judged on every GPU."""
    from archgap.analysis.verdicts.verdicts import NO_KERNELS
    from archgap.analysis.versions import GpuVerdict, VersionVerdict, covers, variant_verdict
    from archgap.archives.wheel import archive_facts
    from archgap.index.versions import read_variant

    contents = read_variant(candidate.file, fetched)
    base = (str(candidate.version), candidate.index, candidate.file.filename, candidate.file.url)
    if not contents.distributions:
        why = "; ".join(p.reason for p in contents.problems) or "not a wheel"
        return VersionVerdict(*base, (), False, why)
    labels = [g.label for g in gpus]
    report = _judge(
        archive_facts([contents], ""), labels, matrix=False, driver=driver, strict=strict
    )
    found: list[GpuVerdict] = []
    for gpu in report.gpus:
        rows = [p for p in report.packages if p.gpu == gpu.label]
        # the wheel's distribution decides; a member no RECORD lists only when it is alone
        row = next((p for p in rows if p.version), rows[0] if rows else None)
        verdict, reason = (
            (row.verdict, row.reason) if row else (NO_KERNELS, "no native file with device code")
        )
        name, version = contents.distributions[0].name, str(candidate.version)
        verdict, reason = variant_verdict(name, version, gpu, verdict, reason)
        found.append(GpuVerdict(gpu.label, str(gpu.compute_capability), verdict, reason))
    return VersionVerdict(*base, tuple(found), all(covers(v.verdict, strict) for v in found))


@dataclass(frozen=True)
class _Fixing:
    """Where a fix runs: the target, the journal's directory there (None: its user's), and the
    time each step may take."""

    target: Target
    state_dir: str | None
    timeout: float

    def fixer(self, request: dict[str, Any]) -> dict[str, Any]:
        """The fix program's answer on the target; a transport failure raises ``ProbeError``."""
        from archgap.transport.run import run_fixer

        answer = run_fixer(self.target, {**request, "state_dir": self.state_dir}, self.timeout)
        if isinstance(answer, TransportFailure):
            raise ProbeError(f"fix program: {describe(answer)}")
        result = answer.get("fixer")
        if not isinstance(result, dict):
            raise ProbeError("fix program: no answer from the target")
        return result


def fix(
    python: str | None = None,
    *,
    gpus: Sequence[str] = (),
    target: Target = LOCAL,
    env_from: str | None = None,
    env_file: str | None = None,
    systemd: str | None = None,
    systemd_dir: str = "/etc/systemd/system",
    state_dir: str | None = None,
    apply: bool = False,
    only: str | None = None,
    undo: bool = False,
    force: bool = False,
    root: str = "/",
    timeout: float = DEFAULT_TIMEOUT,
) -> FixResult:
    """The fixes for the JIT gaps ``scan`` finds in the environment of ``python`` on ``target``
    (``env_from``: the service's environment), as exact changes of ``env_file``, a drop-in of
    the ``systemd`` unit, or export lines; with ``apply`` made (by default the variables of the
    kind the fix engine ranks first; ``only`` one kind) and checked by a new scan; ``undo``
    reverts archgap's changes newest first (``force``: over files edited since). Nothing is
    written without a backup; a file changed since the plan is refused. ``UsageError`` for
    options that do not go together, ``ProbeError`` when the target cannot be probed."""
    from archgap.analysis.fixplan import Destination, plan, selected
    from archgap.results import FixResult

    if undo and (apply or only):
        raise UsageError("--undo reverts everything archgap changed; it takes no --apply/--only")
    if only and not apply:
        raise UsageError("--only chooses what --apply changes; add --apply")
    where = _Fixing(target, state_dir, timeout)
    if undo:
        named = _undo_targets(python, env_file, systemd, systemd_dir, target, root, timeout)
        answer = where.fixer({"op": "undo", "force": force, **named})
        undone = {k: answer.get(k) or [] for k in ("restored", "refused", "recovered", "kept")}
        return FixResult(undo={**undone, "error": answer.get("error"), "forced": force})

    def judged(environment: str | None) -> ScanReport:
        return scan(
            python, gpus=gpus, target=target, env_from=environment, root=root, timeout=timeout
        )

    report = judged(env_from)
    fix_plan = plan(report, Destination(env_file, systemd, systemd_dir))
    edits = [a.edit for a in fix_plan.actions if a.edit is not None]
    planned = where.fixer({"op": "plan", "edits": edits})["planned"] if edits else []
    for edit, answer in zip(edits, planned, strict=False):  # apply refuses if a file changes
        if not answer.get("error"):
            edit["planned_sha256"] = answer["sha256_before"]
    result = FixResult(
        report.environment.executable, report.has_gap, _planned_actions(fix_plan, planned),
        fix_plan.exports, fix_plan.reload, fix_plan.notes,
    )  # fmt: skip
    chosen = selected(fix_plan, only) if apply else []
    if any(a.env and a.edit is None for a in chosen):  # said by the dry run too (report/fix)
        raise UsageError(
            "fix --apply: nowhere to write the variables; add --write-env-file FILE (the "
            "service's EnvironmentFile= or docker --env-file) or --systemd UNIT, or choose "
            "--only patch/upgrade; nothing was changed"
        )
    if not chosen:  # a dry run, or nothing to change: the plan, and whether a gap remains
        return result
    applied = _apply_fixes(where, chosen)
    if applied["error"]:
        return replace(result, applied=applied)
    after = judged(env_file or env_from)  # the new env file as the service's environment
    unconfirmed = None
    if fix_plan.exports and any(a.env for a in chosen):
        unconfirmed = (
            "the variables were printed, not written: set them where the service reads them"
        )
    elif systemd and any(a.env for a in chosen):
        unconfirmed = (
            f"the drop-in takes effect after `{fix_plan.reload}`; then scan --env-from PID"
        )
    return replace(result, applied=applied, verified=_verified(after, chosen, unconfirmed))


def _undo_targets(
    python: str | None,
    env_file: str | None,
    systemd: str | None,
    systemd_dir: str,
    target: Target,
    root: str,
    timeout: float,
) -> dict[str, Any]:
    """What ``fix --undo`` takes back: the changes inside the site-packages of ``python``, of
    ``env_file`` and of the drop-in of ``systemd``; with none of them named, every change."""
    from archgap.analysis.fixplan import Destination
    from archgap.probe.facts import PythonEnvironment
    from archgap.request import probe_request

    if python is None and env_file is None and systemd is None:
        return {}
    roots: list[str] = []
    if python is not None:
        request = probe_request(("python",), python)
        roots += _decoded(PythonEnvironment, target, request, timeout, root).site_packages
    dropin = Destination(None, systemd, systemd_dir).dropin
    return {"only": {"roots": roots, "paths": [p for p in (env_file, dropin) if p]}}


def _planned_actions(fix_plan: Plan, planned: list[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    """Each action of the plan with the change the fix program planned for it, in order."""
    answers = iter(planned)  # one answer per edit, in order
    actions = []
    for a in fix_plan.actions:
        change = next(answers, None) if a.edit else None
        actions.append(
            {
                "kind": a.kind,
                "action": a.action,
                "removes": list(a.removes),
                "env": [list(p) for p in a.env],
                "path": change["path"] if change else None,
                "diff": change.get("diff") if change else None,
                "error": change.get("error") if change else None,
                "command": list(a.command) or None,
                "needs_only": a.needs_only,
                "note": a.note or None,
                "numbers": list(a.numbers),
            }
        )
    return tuple(actions)


def _apply_fixes(where: _Fixing, chosen: list[Action]) -> dict[str, Any]:
    """The chosen edits made by the fix program (backed up, journaled), then the upgrades."""
    edits = [a.edit for a in chosen if a.edit is not None]
    result: dict[str, Any] = {"changed": [], "upgrades": [], "recovered": [], "error": None}
    if edits:
        answer = where.fixer({"op": "apply", "edits": edits})
        result["error"] = answer.get("error")
        result["changed"] = answer.get("applied") or []
        result["recovered"] = answer.get("recovered") or []
        result["state_dir"] = answer.get("state_dir")
    for action in chosen:
        if action.command and not result["error"]:
            request = {"op": "upgrade", "argv": list(action.command), "timeout": where.timeout}
            answer = where.fixer(request)
            result["error"] = answer.get("error")
            result["upgrades"].append(answer.get("upgrade"))
    return result


def _verified(
    after: ScanReport, chosen: list[Action], unconfirmed: str | None
) -> tuple[dict[str, str], ...]:
    """For each finding an applied action was to remove, what the new scan says of it."""
    from archgap.analysis.fixplan import finding_key

    still = {finding_key(f): f.status for f in after.jit}
    return tuple(
        _verdict(removes, still.get(removes.split(": ", 1)[0]), unconfirmed if a.env else None)
        for a in chosen
        for removes in a.removes
    )


def _verdict(finding: str, status: str | None, unconfirmed: str | None) -> dict[str, str]:
    """gone / remains / not-confirmed for one finding, from the new scan's JIT status."""
    if unconfirmed:
        return {"finding": finding, "status": "not-confirmed", "why": unconfirmed}
    if status in (None, "ok"):
        why = "a new scan finds no failure" + (" (JIT: ok)" if status else "")
        return {"finding": finding, "status": "gone", "why": why}
    if status == "fails":
        return {"finding": finding, "status": "remains", "why": "a new scan still predicts it"}
    why = (
        f"a new scan no longer predicts the failure but cannot confirm it (finding now {status}:"
        " the installed source differs from the release the rules were read off): applied but"
        " not confirmed"
    )
    return {"finding": finding, "status": "not-confirmed", "why": why}


def probe(
    python: str | None = None,
    *,
    sections: Sequence[str] = DEFAULT_SECTIONS,
    target: Target = LOCAL,
    env_from: str | None = None,
    require: Sequence[str] = (),
    root: str = "/",
    timeout: float = DEFAULT_TIMEOUT,
) -> ProbeResult:
    """The raw facts of ``target`` (``sections`` of the environment of ``python``; None: the
    probe's own here, python3 there), or the transport's failure as a value; with ``require``
    the GPUs (by compute capability) the facts do not show. ``UsageError`` for an unknown
    section, ``root`` with a remote target or an unreadable ``env_from``; ``UnknownGpu``."""
    from archgap.analysis.verdicts.compat import ComputeCapability
    from archgap.results import ProbeResult

    wanted = _resolve(require)  # a bad name fails before anything is probed
    request = probe_request(sections, python if (python or target.is_local) else target.python)
    if root != "/" and not target.is_local:
        raise UsageError("--root works only on this machine")
    facts = run_probe(target, request, timeout, root, env_from)
    if isinstance(facts, TransportFailure):
        return ProbeResult(target.name, target.kind, None, facts, tuple(require))
    problem = facts.errors.get("env_from")
    if problem:
        raise UsageError(f"--env-from {env_from}: {problem}")
    gpu = facts.section("gpu") or {}
    present = {
        str(cc)
        for entry in gpu.get("gpus") or []
        if (cc := ComputeCapability.parse(str(entry.get("compute_capability", "")))) is not None
    }
    missing = tuple(
        f"{name} (compute capability {gpu_target.compute_capability})"
        for name, gpu_target in zip(require, wanted, strict=True)
        if str(gpu_target.compute_capability) not in present
    )
    return ProbeResult(target.name, target.kind, facts, None, tuple(require), missing)


def probe_script(
    python: str | None = None,
    *,
    sections: Sequence[str] = DEFAULT_SECTIONS,
    env_from: str | None = None,
) -> str:
    """A standalone, standard-library-only Python (>= 3.8) file that prints what ``probe`` would
    (``sections`` of the environment of ``python``; None: the interpreter that runs it), for
    engines that copy a file and run it. ``UsageError`` for an unknown section."""
    from archgap.transport.bootstrap import probe_input, standalone_script

    return standalone_script(probe_input(probe_request(sections, python), "/", env_from))


def k8s_manifest(
    mode: str = "probe",
    *,
    namespace: str = "archgap",
    image: str | None = None,
    python: str | None = None,
    node_selector: str | None = None,
    runtime_class: str | None = None,
    interval: int = 3600,
) -> list[dict[str, Any]]:
    """The Kubernetes objects that run archgap on every GPU node ``node_selector`` picks
    (default: GPU Feature Discovery's label). ``probe``: the standalone probe of ``python`` in
    ``image`` (default python:3.12-slim), once per node; ``nfd``: ``scan --nfd`` every
    ``interval`` seconds in ``image``, which must have archgap installed. ``UsageError`` for a
    name Kubernetes would refuse."""
    from archgap.report import k8s

    if mode not in ("probe", "nfd"):
        raise UsageError(f"mode {mode!r}: choose probe or nfd")
    if mode == "nfd" and image is None:
        raise UsageError(
            "--mode nfd needs --image: an image with archgap installed in the Python "
            "environment to judge (your serving image plus `pip install archgap`)"
        )
    if interval < 60:
        raise UsageError("--interval must be at least 60 seconds")
    image = image or k8s.PROBE_IMAGE
    selector = node_selector or k8s.GPU_NODE_SELECTOR
    placement = k8s.checked(namespace, image, selector, runtime_class)
    interpreter = python or DEFAULT_PYTHON
    if mode == "nfd":
        return k8s.nfd_manifest(namespace, image, interpreter, interval, placement)
    # The probe inspects the same interpreter that runs it in the container.
    script = probe_script(interpreter)
    return k8s.probe_manifest(namespace, image, interpreter, script, placement)


def recipe(
    gpus: Sequence[str] = (),
    *,
    from_paths: Sequence[str] = (),
    toolkit: str | None = None,
    arch_specific: bool = False,
    ptx: bool = True,
) -> Recipe:
    """The fewest build targets that give every GPU native code: the GPUs named and those of
    the fleet documents ``from_paths`` (as ``fleet --from`` reads them), built with CUDA
    ``toolkit`` (default: the newest known that builds native code for every GPU).
    ``UsageError`` for no GPU, an unreadable document or an unknown toolkit; ``UnknownGpu``."""
    from archgap.analysis.recipe.recipe import gpus_of_fleet
    from archgap.analysis.recipe.recipe import recipe as build_recipe
    from archgap.kb.toolchain import major_minor, targets_of

    named = list(_resolve(gpus))
    if from_paths:
        from archgap.transport.fleet import read_documents

        facts = [h.facts for h in read_documents(list(from_paths)) if h.facts is not None]
        named += gpus_of_fleet(facts)
    if not named:
        raise UsageError("no GPU: name one with --gpu, or give fleet documents with --from")
    seen: dict[tuple[str, str], GpuTarget] = {}
    for gpu in named:
        seen.setdefault((gpu.label, str(gpu.compute_capability)), gpu)
    targets = sorted(seen.values(), key=lambda g: (g.compute_capability, g.label))
    version = major_minor(toolkit) if toolkit is not None else None
    if toolkit is not None and (version is None or targets_of(toolkit) is None):
        raise UsageError(
            f"--toolkit {toolkit!r}: give a CUDA version such as 12.8 or 13.0 (>= 11.0)"
        )
    cuda = f"{version[0]}.{version[1]}" if version else None
    return build_recipe(targets, cuda, arch_specific, ptx)


def gpus(names: Sequence[str] = ()) -> tuple[GpuProduct, ...]:
    """The GPU products archgap knows (kb/gpus.json), or those ``names`` denote: product names
    resolved as --gpu resolves them ("H100 PCIe" is the H100) and compute capabilities (every
    product with it). ``UnknownGpu`` for a name that denotes none."""
    from archgap.analysis.verdicts.compat import ComputeCapability, UnknownGpu, products_named
    from archgap.kb.gpus import products

    if not names:
        return products()
    chosen: dict[str, GpuProduct] = {}
    for name in names:
        cc = ComputeCapability.parse(name)
        found = (
            [p for p in products() if p.compute_capability == str(cc)]
            if cc
            else list(products_named(name))
        )
        if not found and cc:
            raise UnknownGpu(f"no known GPU has compute capability {cc}")
        if not found:
            _resolve([name])  # says why: the closest names, or that the name is ambiguous
        chosen.update((p.name, p) for p in found)
    return tuple(chosen.values())


def _check_driver(driver: str | None) -> None:
    if driver is not None and not re.fullmatch(r"\d{3,4}(\.\d{1,3}){0,2}", driver.strip()):
        raise UsageError(f"--driver {driver!r}: give an NVIDIA driver version like 580.65.06")


def _resolve(gpus: Sequence[str]) -> tuple[GpuTarget, ...]:
    """The named GPUs (``UnknownGpu`` for a bad name); the GPU knowledge is loaded only here,
    so that a command naming none (kernels FILE) does not load it."""
    from archgap.analysis.verdicts.compat import resolve_gpu

    return tuple(resolve_gpu(name) for name in gpus)


def _judge(*args: Any, **kwargs: Any) -> ScanReport:
    """``analysis.scan.report_from_facts``, imported when first needed (``_prepare_judging``)."""
    from archgap.analysis.scan import report_from_facts

    return report_from_facts(*args, **kwargs)


def _prepare_judging() -> None:
    """What judging facts needs, imported and prepared while a local probe runs (30 ms of a
    0.5 s scan of a torch environment)."""
    from archgap.analysis.scan import prepare_judging

    prepare_judging()


def _run(
    target: Target,
    request: dict[str, Any],
    timeout: float,
    root: str,
    env_from: str | None = None,
    progress: Progress | None = None,
    meanwhile: Callable[[], object] | None = None,
) -> ProbeResponse:
    """The probe's facts; a transport failure raises ``ProbeError``."""
    facts = run_probe(target, request, timeout, root, env_from, progress, meanwhile)
    if isinstance(facts, TransportFailure):
        raise ProbeError(describe(facts))
    return facts


# The log lines of tools built on Go's klog (kubectl): "E1201 19:20:30.067279   2787 file.go:265]
# ...". Internal retries of what the tool's own last line says; never the message.
_KLOG_LINE = re.compile(r"[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ \S+:\d+\] ")


def describe(error: TransportFailure) -> str:
    """A transport failure as text: its kind and message, then the lines of the tool's stderr
    that say more than the message already does (ssh's one line is usually the message itself;
    kubectl's log lines are left out)."""
    lines = (line.strip() for line in (error.stderr or "").splitlines())
    extra = [x for x in lines if x and not _KLOG_LINE.match(x) and x not in error.message]
    return str(error) + "".join(f"\n{line}" for line in extra)


def _facts(target: Target, request: dict[str, Any], timeout: float, root: str) -> ProbeResponse:
    """The probe's facts; a failed section also raises ``ProbeError``."""
    facts = _run(target, request, timeout, root)
    for section in request:
        error = facts.errors.get(section)
        if error:
            raise ProbeError(f"probe failed: {section}: {error}")
    return facts


def verify(
    paths: Sequence[str] = (),
    *,
    python: str | None = None,
    gpu_indices: Sequence[int] = (),
    target: Target = LOCAL,
    gpu_timeout: float = 300.0,
    root: str = "/",
    timeout: float = 3600.0,
) -> VerifyReport:
    """Load each library's device code through the CUDA driver on the GPUs and compare with the
    scan's verdicts. ``paths`` (files or directories) or else the environment of ``python``;
    ``gpu_indices`` (default: one GPU of each model). Raises ``ProbeError`` when the facts could
    not be collected and ``UsageError`` for a path missing here; no GPU or driver is a report
    with ``error`` set."""
    from archgap.analysis.verify import compare, load_plan
    from archgap.codec import decode
    from archgap.probe.facts import BinaryFacts, GpuFacts, PythonEnvironment

    _check_paths(target, paths)
    if target.is_local:  # the report names the files to whoever reads it
        paths = [os.path.abspath(p) for p in paths]
    facts = _facts(target, verify_request(paths, python), timeout, root)
    binaries = [decode(BinaryFacts, b) for b in facts.section("binaries") or ()]
    python_data = facts.section("python")
    env = decode(PythonEnvironment, python_data) if python_data else None
    gpu_data = facts.section("gpu")
    driver = decode(GpuFacts, gpu_data).driver_version if gpu_data else None
    plan, skipped = load_plan(binaries)
    loaded = _facts(target, load_request(plan, gpu_indices, gpu_timeout), timeout, root)
    section = loaded.section("verify") or {}
    empty = PythonEnvironment("", "", (), (), ())
    return compare(section, binaries, env or empty, skipped, driver)


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
        facts = _run(self.target, request, self.timeout, self.root, self.env_from)
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

    named = _resolve(gpus)
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


def trace(
    name: str,
    *,
    paths: Sequence[str] = (),
    dists: Sequence[str] = (),
    python: str | None = None,
    target: Target = LOCAL,
    show_all: bool = False,
    root: str = "/",
    timeout: float = DEFAULT_TIMEOUT,
) -> TraceResult:
    """Where ``name`` is written and read in ``paths``, else in the distributions ``dists``,
    else in all of the site-packages of ``python``; vendored, example and test trees counted
    aside unless ``show_all``. ``UsageError`` for a name that cannot be traced or a path missing
    here, ``ProbeError`` when the source could not be searched."""
    from archgap.probe.facts import TraceFacts
    from archgap.probe.source.trace import valid_name
    from archgap.report import trace as shown
    from archgap.results import TraceResult

    if not valid_name(name):
        raise UsageError(
            f"cannot trace {name!r}: give an identifier, a dotted name or a string key "
            "(letters, digits, _ . - / :), without spaces or shell characters"
        )
    _check_paths(target, paths)
    request = trace_request(name, list(paths), list(dists), python)
    facts = _decoded(TraceFacts, target, request, timeout, root)
    if facts.error:
        raise ProbeError(facts.error)
    return TraceResult(*shown.select(facts, show_all))


def gates(
    dists: Sequence[str] = (),
    *,
    paths: Sequence[str] = (),
    python: str | None = None,
    kinds: Sequence[str] = (),
    target: Target = LOCAL,
    show_all: bool = False,
    root: str = "/",
    timeout: float = DEFAULT_TIMEOUT,
) -> GatesResult:
    """Where packages detect or gate GPU architectures, in ``paths``, else in ``dists``, else
    in all of site-packages; only ``kinds`` (all by default). ``UsageError`` for an unknown
    kind or a path missing here, ``ProbeError`` when the source could not be searched."""
    from archgap.probe.facts import GatesFacts
    from archgap.report import gates as shown
    from archgap.results import GatesResult

    unknown = [k for k in kinds if k not in shown.KINDS]
    if unknown:
        raise UsageError(f"--kind {', '.join(unknown)}: choose from {', '.join(shown.KINDS)}")
    _check_paths(target, paths)
    request = gates_request(list(dists), list(paths), python)
    facts = _decoded(GatesFacts, target, request, timeout, root)
    if facts.error:
        raise ProbeError(facts.error)
    return GatesResult(*shown.select(facts, tuple(kinds), show_all))


def _check_paths(target: Target, paths: Sequence[str]) -> None:
    """Paths on this machine must exist (a remote target's are checked there)."""
    missing = [p for p in paths if target.is_local and not os.path.exists(p)]
    if missing:
        raise UsageError(f"no such file or directory: {', '.join(missing)}")


def _decoded(cls: type[T], target: Target, request: dict[str, Any], timeout: float, root: str) -> T:
    """The one section ``request`` asks for, decoded as ``cls``."""
    from archgap.codec import decode

    (section,) = request
    return decode(cls, _facts(target, request, timeout, root).sections[section])


@dataclass(frozen=True)
class FleetRun:
    """A fleet's report, the JIT caches hosts with different GPUs share, how long it took, and
    how many documents were read (None when the hosts were probed)."""

    report: FleetReport
    shared_caches: tuple[SharedCache, ...]
    elapsed: float
    documents: int | None


def fleet_run(
    source: FleetSource,
    *,
    gpus: Sequence[str] = (),
    options: FleetOptions | None = None,
    tell: Tell | None = None,
) -> FleetRun:
    """Probe (or read) every host of ``source`` and compare them; every host also judged
    against ``gpus``. ``UsageError`` (before anything is probed) for a bad GPU name or
    section and ``FleetInputError``, a ``UsageError``, for hosts that cannot be probed as
    given. ``options``: how the hosts are probed (sections, interpreter, hosts at a time,
    time limits); ``tell(done, total, host)`` is told as ssh hosts answer."""
    import contextlib
    import time

    from archgap.analysis.fleet import fleet_report
    from archgap.analysis.jit.caches import cache_shares, shared_caches
    from archgap.transport import fleet as transport_fleet

    _resolve(gpus)
    if options is not None and options.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    started = time.monotonic()
    inputs = [0]  # hosts read, counted as the report takes them one by one
    shares: list[Any] = []  # each host's network-filesystem caches (small), for shared_caches

    def counted() -> Iterator[HostInput]:
        for host in transport_fleet.collect_hosts(
            source, options or transport_fleet.FleetOptions(), tell
        ):
            inputs[0] += 1
            # A malformed document is an unreadable host in the report, never a failed report.
            if host.facts is not None:
                with contextlib.suppress(TypeError, AttributeError, ValueError, KeyError):
                    shares.extend(cache_shares(host.name, host.facts))
            yield host

    report = fleet_report(counted(), gpus)
    documents = inputs[0] if source.documents else None
    return FleetRun(report, shared_caches(shares), time.monotonic() - started, documents)


def fleet(
    source: FleetSource, *, gpus: Sequence[str] = (), options: FleetOptions | None = None
) -> dict[str, Any]:
    """The fleet document (what ``archgap fleet --json`` prints) for the hosts of ``source``:
    ``FleetSource(documents=("probes/",))``, ``FleetSource(hosts=(("gpu01", None),))``..."""
    from archgap.report.fleet import body

    run = fleet_run(source, gpus=gpus, options=options)
    return document("fleet", body(run.report, run.elapsed, run.documents, run.shared_caches))


def kernel_files(
    paths: Sequence[str],
    *,
    deep: bool = False,
    detail: bool = True,
    target: Target = LOCAL,
    options: IndexOptions | None = None,
    root: str = "/",
    timeout: float = DEFAULT_TIMEOUT,
    resolved: list[Chosen] | None = None,
    progress: Progress | None = None,
    unverified: list[str] | None = None,
) -> list[BinaryFacts]:
    """The device code of ``paths`` on ``target``, read by the probe there (every entry with
    ``detail``, else one row per kind of entry); here, ``binaries.local_binaries`` (files,
    directories, wheels and their URLs, requirements resolved from ``options``' indexes, with
    their dependency sets when ``options.deps``, container images: ``options.platform`` picks
    from a multi-platform index, ``options.tls_verify`` whether a docker:// registry's
    certificate must verify); ``resolved`` is told the wheel each requirement resolved to,
    ``progress(done, total, path)`` as files are read here, ``unverified`` the archives read
    through range requests (the index's sha256 not checked); a path missing here is an
    unreadable row. ``UsageError`` for URLs and requirements with a remote target,
    ``ProbeError`` when a remote probe fails."""
    from archgap.binaries import local_binaries
    from archgap.codec import decode
    from archgap.probe.facts import BinaryFacts

    if target.is_local:
        return local_binaries(paths, deep, options, progress, resolved, detail, unverified)
    from archgap.index.options import URL_SCHEMES

    if (options is not None and options.deps) or any(p.startswith(URL_SCHEMES) for p in paths):
        raise UsageError("URLs and requirements are read here: not with a remote target")
    facts = _facts(target, binaries_request(paths, deep, detail), timeout, root)
    return [decode(BinaryFacts, item) for item in facts.sections["binaries"]]


def kernels(
    paths: Sequence[str],
    *,
    deep: bool = False,
    require: Sequence[str] = (),
    strict: bool = False,
    target: Target = LOCAL,
    options: IndexOptions | None = None,
    root: str = "/",
    timeout: float = DEFAULT_TIMEOUT,
    detail: bool = True,
    progress: Progress | None = None,
    claims_from: str | None = None,
    config: bool = True,
) -> KernelsResult:
    """Every file's device code (see ``kernel_files``) and, with ``require`` (GPUs), the build
    gate (``strict``: only SASS counts; PTX alone fails too). ``UnknownGpu`` for a bad GPU name,
    ``UsageError`` for ``strict`` without ``require``. ``require=["claimed"]``: the gate checks
    what the build claims (archgap.claims: ``claims_from``, else found; ``config``: [tool.archgap]
    may say)."""
    import time

    from archgap.claims import requested
    from archgap.results import KernelsResult

    claims = requested(require, claims_from, config)  # --require claimed: the build's claims
    if claims is not None:
        from archgap.analysis.recipe.claimed import judged_names

        require = judged_names(claims)
    # each GPU once (a name given twice); the GPU knowledge is loaded only when some are named
    required = list({g.label: g for g in _resolve(require)}.values()) if require else []
    if strict and not required:
        raise UsageError("--strict needs --require GPU")
    started = time.perf_counter()
    resolved: list[Chosen] = []
    unverified: list[str] = []
    files = kernel_files(
        paths, deep=deep, detail=detail, target=target, options=options, root=root,
        timeout=timeout, resolved=resolved, progress=progress, unverified=unverified,
    )  # fmt: skip
    gate = None
    if required:  # the build gate's rules are imported only when asked (~0.1 s of start-up)
        from archgap.analysis.recipe.gate import check_build

        judged = files
        if not deep and target.is_local:  # as a scan: deep where hidden entries may decide
            from archgap.analysis.deep_plan import deep_search_plan
            from archgap.probe.binary.deep_plan import deepened, judged_native_sets

            native_sets = judged_native_sets(deep_search_plan(require), None)
            judged = deepened(files, native_sets) if native_sets is not None else files
        if claims is None:
            gate = check_build(judged, required, strict)
        else:
            from archgap.analysis.recipe.claimed import check_claims

            gate = check_claims(judged, claims, strict)
    seconds = time.perf_counter() - started
    missing = tuple(p for p in _missing(paths) if target.is_local)
    return KernelsResult(
        tuple(paths), tuple(files), deep, seconds, gate, tuple(resolved), missing,
        tuple(unverified),
    )  # fmt: skip


def _missing(paths: Sequence[str]) -> list[str]:
    """The paths that name no file here (not an image, a URL or a requirement either)."""
    from archgap.binaries import is_index_target
    from archgap.image.targets import is_image

    return [
        p
        for p in paths
        if not (os.path.lexists(p) or is_image(p, rootfs=False) or is_index_target(p))
    ]
