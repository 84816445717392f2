"""The Python API: what the CLI commands do, as functions returning frozen dataclasses.

>>> from archgap.api import scan
>>> report = scan(gpus=["RTX PRO 6000"])
>>> [(p.package, p.verdict) for p in report.packages]

``report_from_facts`` judges probe facts collected anywhere (the "facts" of ``archgap probe
--json``, or a ``ProbeResponse``).

The facade: each command's code is in ``archgap.orchestrate`` (a module per command), and every
public name is imported from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from archgap.errors import ProbeError, UsageError
from archgap.transport.target import DEFAULT_TIMEOUT, LOCAL, Target

if TYPE_CHECKING:
    from archgap.analysis.fixplan import Action, Plan
    from archgap.analysis.scan import ScanReport
    from archgap.analysis.verify import VerifyReport
    from archgap.orchestrate.explain import Where, diagnose, explain
    from archgap.orchestrate.fleet import FleetRun, fleet, fleet_run
    from archgap.orchestrate.gpus import gpus
    from archgap.orchestrate.health import health, node_health
    from archgap.orchestrate.kernels import kernel_files, kernels
    from archgap.orchestrate.matrix import matrix
    from archgap.orchestrate.probe import k8s_manifest, probe, probe_script
    from archgap.orchestrate.recipe import recipe
    from archgap.orchestrate.scan import report_from_facts, scan, scan_archives
    from archgap.orchestrate.shared import describe
    from archgap.orchestrate.source import gates, trace
    from archgap.orchestrate.verify import verify
    from archgap.orchestrate.versions import versions
    from archgap.probe.facts import ProbeResponse
    from archgap.results import (
        ExplainResult,
        FixResult,
        GatesResult,
        KernelsResult,
        NodeHealth,
        ProbeResult,
        TraceResult,
    )
    from archgap.transport.fleet import FleetOptions, FleetSource

__all__ = [
    "ExplainResult",
    "FixResult",
    "FleetOptions",
    "FleetRun",
    "FleetSource",
    "GatesResult",
    "KernelsResult",
    "NodeHealth",
    "ProbeError",
    "ProbeResponse",
    "ProbeResult",
    "ScanReport",
    "TraceResult",
    "UsageError",
    "VerifyReport",
    "Where",
    "describe",
    "diagnose",
    "explain",
    "fix",
    "fleet",
    "fleet_run",
    "gates",
    "gpus",
    "health",
    "k8s_manifest",
    "kernel_files",
    "kernels",
    "matrix",
    "node_health",
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


# Every public name is imported when first asked for (PEP 562): a command loads its own module
# and what that needs, not every command's (`kernels` then starts ~0.1 s sooner).
_LATER = {
    **dict.fromkeys(("Where", "diagnose", "explain"), "archgap.orchestrate.explain"),
    **dict.fromkeys(("FleetRun", "fleet", "fleet_run"), "archgap.orchestrate.fleet"),
    "gpus": "archgap.orchestrate.gpus",
    **dict.fromkeys(("health", "node_health"), "archgap.orchestrate.health"),
    **dict.fromkeys(("kernel_files", "kernels"), "archgap.orchestrate.kernels"),
    "matrix": "archgap.orchestrate.matrix",
    **dict.fromkeys(("k8s_manifest", "probe", "probe_script"), "archgap.orchestrate.probe"),
    "recipe": "archgap.orchestrate.recipe",
    **dict.fromkeys(("report_from_facts", "scan", "scan_archives"), "archgap.orchestrate.scan"),
    "describe": "archgap.orchestrate.shared",
    **dict.fromkeys(("gates", "trace"), "archgap.orchestrate.source"),
    "verify": "archgap.orchestrate.verify",
    "versions": "archgap.orchestrate.versions",
    "ProbeResponse": "archgap.probe.facts",
    "ScanReport": "archgap.analysis.scan",
    "FleetOptions": "archgap.transport.fleet",
    "FleetSource": "archgap.transport.fleet",
    "VerifyReport": "archgap.analysis.verify",
    "ExplainResult": "archgap.results",
    "FixResult": "archgap.results",
    "GatesResult": "archgap.results",
    "KernelsResult": "archgap.results",
    "NodeHealth": "archgap.results",
    "ProbeResult": "archgap.results",
    "TraceResult": "archgap.results",
}


def __getattr__(name: str) -> Any:
    if name not in _LATER:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_LATER[name]), name)
    globals()[name] = value  # asked once
    return value


@dataclass(frozen=True)
class _Fixing:
    """Where a fix runs: the target, the journal's directory there (None: its user's), and the
    time each step may take."""

    target: Target
    state_dir: str | None
    timeout: float

    def fixer(self, request: dict[str, Any]) -> dict[str, Any]:
        """The fix program's answer on the target; a transport failure raises ``ProbeError``."""
        from archgap.orchestrate.shared import describe
        from archgap.transport.run import TransportFailure, run_fixer

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
    driver: str | None = None,
) -> FixResult:
    """The fixes for the JIT gaps ``scan`` finds in the environment of ``python`` on ``target``
    (``env_from``: the service's environment; ``driver``: the NVIDIA driver to judge against
    instead of the detected one), as exact changes of ``env_file``, a drop-in of
    the ``systemd`` unit, or export lines; with ``apply`` made (by default the variables of the
    kind the fix engine ranks first; ``only`` one kind) and checked by a new scan; ``undo``
    reverts archgap's changes newest first (``force``: over files edited since). Nothing is
    written without a backup; a file changed since the plan is refused. ``UsageError`` for
    options that do not go together, ``ProbeError`` when the target cannot be probed."""
    from archgap.analysis.fixplan import Destination, plan, selected
    from archgap.orchestrate.scan import scan

    _check_fix_options(apply=apply, only=only, undo=undo)
    where = _Fixing(target, state_dir, timeout)
    if undo:
        named = _undo_targets(python, env_file, systemd, systemd_dir, target, root, timeout)
        return _undone(where, named, force)

    def judged(environment: str | None) -> ScanReport:
        return scan(
            python, gpus=gpus, target=target, env_from=environment, root=root, timeout=timeout,
            driver=driver,
        )  # fmt: skip

    report = judged(env_from)
    fix_plan = plan(report, Destination(env_file, systemd, systemd_dir))
    result = _planned(where, report, fix_plan)
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
    unconfirmed = _unconfirmed(fix_plan, chosen, systemd)
    return replace(result, applied=applied, verified=_verified(after, chosen, unconfirmed))


def _check_fix_options(*, apply: bool, only: str | None, undo: bool) -> None:
    """``UsageError`` for options of ``fix`` that do not go together."""
    if undo and (apply or only):
        raise UsageError("--undo reverts everything archgap changed; it takes no --apply/--only")
    if only and not apply:
        raise UsageError("--only chooses what --apply changes; add --apply")


def _undone(where: _Fixing, named: dict[str, Any], force: bool) -> FixResult:
    """``fix --undo``: archgap's changes (those of ``named``, by default all) taken back by the
    fix program, newest first (``force``: over files edited since)."""
    from archgap.results import FixResult

    answer = where.fixer({"op": "undo", "force": force, **named})
    undone = {k: answer.get(k) or [] for k in ("restored", "refused", "recovered", "kept")}
    return FixResult(undo={**undone, "error": answer.get("error"), "forced": force})


def _planned(where: _Fixing, report: ScanReport, fix_plan: Plan) -> FixResult:
    """The plan as a dry run shows it: each edit planned by the fix program on the target (its
    diff, and the file's sha256 then, so that applying refuses a file changed since)."""
    from archgap.results import FixResult

    edits = [a.edit for a in fix_plan.actions if a.edit is not None]
    planned = where.fixer({"op": "plan", "edits": edits})["planned"] if edits else []
    for edit, answer in zip(edits, planned, strict=False):  # apply refuses if a file changes
        if not answer.get("error"):
            edit["planned_sha256"] = answer["sha256_before"]
    return FixResult(
        report.environment.executable, report.has_gap, _planned_actions(fix_plan, planned),
        fix_plan.exports, fix_plan.reload, fix_plan.notes,
    )  # fmt: skip


def _unconfirmed(fix_plan: Plan, chosen: list[Action], systemd: str | None) -> str | None:
    """Why a new scan cannot confirm the applied variables (None: it can): printed, not
    written, or in a drop-in the service reads only after a reload."""
    if not any(a.env for a in chosen):
        return None
    if fix_plan.exports:
        return "the variables were printed, not written: set them where the service reads them"
    if systemd:
        return f"the drop-in takes effect after `{fix_plan.reload}`; then scan --env-from PID"
    return None


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
    from archgap.orchestrate.shared import decoded
    from archgap.probe.facts import PythonEnvironment
    from archgap.request import probe_request

    if python is None and env_file is None and systemd is None:
        return {}
    roots: list[str] = []
    if python is not None:
        request = probe_request(("python",), python)
        roots += decoded(PythonEnvironment, target, request, timeout, root).site_packages
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
