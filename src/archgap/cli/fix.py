"""archgap fix: show, apply, verify and undo the fixes ``scan`` proposes, on the target.

Exit codes: 0 no gap (dry run) or every applied fix confirmed by a new scan, or undo done;
1 a gap is planned for (dry run) or remains / is not confirmed after --apply; 2 usage or probe
error; 3 refused (a file changed since the plan, a read-only directory, a corrupt journal,
another fix running, undo over a hand-edited file), nothing changed.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from archgap.cli import options as opt
from archgap.cli.common import (
    EXIT_GAP,
    EXIT_OK,
    Output,
    UsageError,
    emit_text,
    target_from_args,
)

if TYPE_CHECKING:
    from archgap.analysis.fixplan import Action, Plan
    from archgap.analysis.scan import ScanReport
    from archgap.transport.target import Target

EXIT_REFUSED = 3


HELP = "show the fixes scan proposes as exact changes; --apply makes them, --undo reverts"
DESCRIPTION = (
    "Plan (default), apply (--apply), verify and undo (--undo) the fixes for the JIT gaps scan "
    "finds, on the target. Exit: 0 no gap / confirmed / undone, 1 gap planned or not confirmed, "
    "2 usage or probe error, 3 refused (nothing changed)."
)
OPTIONS = (
    opt.ENVIRONMENT,
    opt.gpu_option("as in scan"),
    opt.env_from_option("the service's environment"),
    opt.flag("--apply", "make the changes (default: show)"),
    opt.option(
        "--only",
        choices=("env", "toolkit", "upgrade", "patch"),
        help="apply only this kind; upgrade and patch are applied only when named here",
    ),
    opt.one_of(
        opt.option("--env-file", metavar="FILE", help="write variables to this env file"),
        opt.option("--systemd", metavar="UNIT", help="write variables to a drop-in of UNIT"),
    ),
    opt.hidden("--systemd-dir", default="/etc/systemd/system"),
    opt.flag("--undo", "revert archgap's changes, newest first"),
    opt.flag("--force", "--undo over files edited since"),
    opt.hidden("--state-dir"),  # default: the target user's
    opt.output(),
    opt.TARGET,
)


def _fixer(target: Target, args: argparse.Namespace, request: dict[str, Any]) -> dict[str, Any]:
    from archgap.api import describe
    from archgap.transport.run import TransportFailure, run_fixer

    request = {**request, "state_dir": args.state_dir}
    answer = run_fixer(target, request, args.timeout)
    if isinstance(answer, TransportFailure):
        raise UsageError(f"fix program: {describe(answer)}")
    result = answer.get("fixer")
    if not isinstance(result, dict):
        raise UsageError("fix program: no answer from the target")
    return result


def run(args: argparse.Namespace, out: Output) -> int:
    if args.undo and (args.apply or args.only):
        raise UsageError("--undo reverts everything archgap changed; it takes no --apply/--only")
    if args.only and not args.apply:
        raise UsageError("--only chooses what --apply changes; add --apply")
    target = target_from_args(args)
    if args.undo:
        return _undo(target, args, out)
    report = _scan(target, args, args.env_from)
    from archgap.analysis.fixplan import Destination, plan, selected

    dest = Destination(args.env_file, args.systemd, args.systemd_dir)
    fix_plan = plan(report, dest)
    edits = [a.edit for a in fix_plan.actions if a.edit is not None]
    planned = _fixer(target, args, {"op": "plan", "edits": edits})["planned"] if edits else []
    for edit, answer in zip(edits, planned, strict=False):  # apply refuses if a file changes
        if not answer.get("error"):
            edit["planned_sha256"] = answer["sha256_before"]
    body = _plan_body(report, fix_plan, planned)
    chosen = selected(fix_plan, args.only) if args.apply else []
    if not chosen:  # a dry run, or nothing to change: the plan, and whether a gap remains
        _show(out, body)
        return EXIT_GAP if report.has_gap else EXIT_OK
    body["applied"] = _apply(target, args, chosen)
    if body["applied"]["error"]:
        _show(out, body)
        return EXIT_REFUSED
    body["verified"] = _verify(target, args, chosen, fix_plan)
    _show(out, body)
    done = body["verified"] and all(v["status"] == "gone" for v in body["verified"])
    return EXIT_OK if done else EXIT_GAP


def _scan(target: Target, args: argparse.Namespace, env_from: str | None) -> ScanReport:
    from archgap.analysis.compat import UnknownGpu
    from archgap.api import ProbeError, scan

    try:
        return scan(
            args.python, gpus=args.gpu, target=target, env_from=env_from, root=args.root,
            timeout=args.timeout,
        )  # fmt: skip
    except UnknownGpu as exc:
        raise UsageError(str(exc)) from exc
    except ProbeError as exc:
        raise UsageError(f"probe: {exc}") from exc


def _plan_body(report: ScanReport, fix_plan: Plan, planned: list[dict[str, Any]]) -> dict[str, Any]:
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
            }
        )
    return {
        "python": report.environment.executable,
        "gap": report.has_gap,
        "actions": actions,
        "exports": list(fix_plan.exports),
        "reload": fix_plan.reload,
        "notes": list(fix_plan.notes),
        "applied": None,
        "verified": None,
    }


def _apply(target: Target, args: argparse.Namespace, chosen: list[Action]) -> dict[str, Any]:
    edits = [a.edit for a in chosen if a.edit is not None]
    result: dict[str, Any] = {"changed": [], "upgrades": [], "recovered": [], "error": None}
    if edits:
        answer = _fixer(target, args, {"op": "apply", "edits": edits})
        result["error"] = answer.get("error")
        result["changed"] = answer.get("applied") or []
        result["recovered"] = answer.get("recovered") or []
        result["state_dir"] = answer.get("state_dir")
    for action in chosen:
        if action.command and not result["error"]:
            request = {"op": "upgrade", "argv": list(action.command), "timeout": args.timeout}
            answer = _fixer(target, args, request)
            result["error"] = answer.get("error")
            result["upgrades"].append(answer.get("upgrade"))
    return result


def _verify(
    target: Target, args: argparse.Namespace, chosen: list[Action], fix_plan: Plan
) -> list[dict[str, Any]]:
    """Scan again (with the new env file as the service's environment when there is one) and
    tell, for each finding an applied action was to remove, whether it is gone."""
    if not chosen:
        return []
    env_from = args.env_file or args.env_from
    after = _scan(target, args, env_from)
    unconfirmed = None
    if fix_plan.exports and any(a.env for a in chosen):
        unconfirmed = (
            "the variables were printed, not written: set them where the service reads them"
        )
    elif args.systemd and any(a.env for a in chosen):
        unconfirmed = (
            f"the drop-in takes effect after `{fix_plan.reload}`; then scan --env-from PID"
        )
    from archgap.analysis.fixplan import finding_key

    still = {finding_key(f): f.status for f in after.jit}
    return [
        _verdict(removes, still.get(removes.split(": ", 1)[0]), unconfirmed if a.env else None)
        for a in chosen
        for removes in a.removes
    ]


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


def _undo(target: Target, args: argparse.Namespace, out: Output) -> int:
    result = _fixer(target, args, {"op": "undo", "force": args.force})
    body = {
        "undo": {
            "restored": result.get("restored") or [],
            "refused": result.get("refused") or [],
            "recovered": result.get("recovered") or [],
            "error": result.get("error"),
            "forced": args.force,
        }
    }
    if out.json_mode:
        out.emit("fix", body)
    else:
        from archgap.report.fix import undo_lines

        emit_text(undo_lines(body["undo"]), out)
    if body["undo"]["error"] or (body["undo"]["refused"] and not args.force):
        return EXIT_REFUSED
    return EXIT_OK


def _show(out: Output, body: dict[str, Any]) -> None:
    if out.json_mode:
        out.emit("fix", body)
        return
    from archgap.report.fix import plan_lines

    emit_text(plan_lines(body), out)
