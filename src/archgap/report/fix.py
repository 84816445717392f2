"""``archgap fix`` as text: the plan (each action, its exact change, what it removes), what was
applied, the verification, and undo's result. Lines carry rich markup; text is escaped."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

from archgap.report.visible import literal

if TYPE_CHECKING:
    from archgap.results import FixResult


def _e(text: str) -> str:
    """A value shown literally, on one line (control and bidi characters made visible)."""
    return literal(text).replace("[", "\\[")


def _diff_lines(diff: str) -> list[str]:
    out = []
    for line in diff.splitlines():
        style = "green" if line.startswith("+") else "red" if line.startswith("-") else "dim"
        out.append(f"      [{style}]{_e(line)}[/]")
    return out


def _action_lines(i: int, a: dict[str, Any]) -> list[str]:
    gate = (
        " [dim](applied only with --apply --only " + a["kind"] + ")[/]" if a["needs_only"] else ""
    )
    number = ", ".join(str(n) for n in a.get("numbers") or [i])  # scan's and explain's numbers
    lines = [f"[bold]{number}. {a['kind']}[/]: {_e(a['action'])}{gate}"]
    lines += [f"    removes: {_e(r)}" for r in a["removes"]]
    if a["command"]:
        lines.append("    runs on the target: $ " + _e(shlex.join(a["command"])))
    if a["error"]:
        lines.append(f"    [magenta]refused:[/] {_e(a['error'])}")
    elif a["path"] and a["diff"]:
        lines.append(f"    change of {_e(a['path'])}:")
        lines += _diff_lines(a["diff"])
    elif a["path"]:
        lines.append(f"    {_e(a['path'])} already has it: no change")
    if a["note"]:
        lines.append(f"    [dim]{_e(a['note'])}[/]")
    return lines


def plan_lines(body: dict[str, Any]) -> list[str]:
    lines = [f"[bold]Python[/] {_e(body['python'])}"]
    if not body["actions"]:
        state = "a gap that no fix archgap can make removes" if body["gap"] else "no JIT gap"
        lines.append(f"Nothing to fix: {state}.")
    for i, action in enumerate(body["actions"], 1):
        lines += _action_lines(i, action)
    if body["exports"]:
        lines.append(
            "  no --write-env-file or --systemd: set these where the service reads its environment:"
        )
        lines += [f"      {_e(x)}" for x in body["exports"]]
    if body["reload"]:
        lines.append(f"  then (not run by archgap): {_e(body['reload'])}")
    lines += [f"  [dim]note: {_e(n)}[/]" for n in body["notes"]]
    applied = body["applied"]
    if applied is None:
        if body["actions"]:
            lines.append(f"\nDry run: nothing was changed. {apply_says(body)}")
        return lines
    return lines + _applied_lines(applied, body["verified"] or [])


def _applied_lines(applied: dict[str, Any], verified: list[dict[str, Any]]) -> list[str]:
    """What applying the plan did: the files changed, the upgrades run, the journal, and each
    finding checked again."""
    lines = [f"[dim]{_e(r)}[/]" for r in applied["recovered"]]
    if applied["error"]:
        lines.append(f"\n[bold magenta]refused:[/] {_e(applied['error'])}")
        return lines
    lines.append("")
    lines += [f"[green]changed[/] {_e(c['path'])}" for c in applied["changed"]]
    for u in applied["upgrades"]:
        lines.append(f"ran {_e(' '.join(u['argv']))}: exit {u['returncode']}")
        lines += [f"    [dim]{_e(x)}[/]" for x in (u["output"] or "").splitlines()[-5:]]
    if applied["changed"]:
        lines.append(
            f"[dim]journal: {_e(applied.get('state_dir') or '')} (archgap fix --undo reverts)[/]"
        )
    for v in verified:
        style = {"gone": "green", "remains": "bold red"}.get(v["status"], "magenta")
        lines.append(f"[{style}]{v['status']}[/]: {_e(v['finding'])} [dim]({_e(v['why'])})[/]")
    return lines


def apply_says(body: dict[str, Any]) -> str:
    """What a plain ``--apply`` would do with this plan, said before it is run: the files it
    writes, or that it has nowhere to write the variables (then it refuses, exit 2)."""
    default = [a for a in body["actions"] if not a["needs_only"]]
    if any(a["env"] and not a["path"] for a in default):
        return (
            "--apply has nowhere to write the variables: add --write-env-file FILE (the "
            "service's EnvironmentFile= or docker --env-file) or --systemd UNIT; "
            "--apply --only patch or upgrade needs neither."
        )
    paths = [a["path"] for a in default if a["path"] and a["diff"] and not a["error"]]
    if not paths:
        return "--apply alone changes nothing here; --apply --only KIND makes one of the others."
    return "--apply writes " + ", ".join(_e(p) for p in dict.fromkeys(paths)) + "."


def undo_lines(undo: dict[str, Any]) -> list[str]:
    lines = [f"[dim]{_e(r)}[/]" for r in undo["recovered"]]
    kept = undo.get("kept") or []
    if kept and not undo["error"]:
        lines.append(
            "[dim]kept (not of the --python, --write-env-file or --systemd named; name it, or "
            "run --undo with none): " + ", ".join(_e(k) for k in kept) + "[/]"
        )
    if undo["error"]:
        return [*lines, f"[bold magenta]refused:[/] {_e(undo['error'])}"]
    if undo["refused"] and not undo["forced"]:
        lines.append(
            "[bold magenta]refused:[/] edited since archgap changed them "
            "(nothing restored; --force overrides):"
        )
        for r in undo["refused"]:
            lines.append(f"  {_e(r['path'])}:")
            lines += _diff_lines(r["diff"])
        return lines
    if not undo["restored"]:
        nothing = "of the target named" if kept else "here"
        return [*lines, f"Nothing to undo: archgap has changed nothing {nothing}."]
    return [*lines, *(f"[green]restored[/] {_e(r['path'])}" for r in undo["restored"])]


def body(result: FixResult) -> dict[str, Any]:
    """The body of the fix document (schema/fix.schema.json) of ``api.fix``'s result."""
    if result.undo is not None:
        return {"undo": result.undo}
    return {
        "python": result.python,
        "gap": result.gap,
        "actions": list(result.actions),
        "exports": list(result.exports),
        "reload": result.reload,
        "notes": list(result.notes),
        "applied": result.applied,
        "verified": None if result.verified is None else list(result.verified),
    }
