"""The plan of ``archgap fix``: which of the fix engine's fixes (analysis/fixes/engine.py, the ones
``scan`` prints) become which concrete change on the target. Pure: no I/O.

Per failing JIT finding, least invasive first: the first fix that sets variables (toolkit or
env), the upgrade, and the patch where kb/patches.json has one for that exact released file;
each action keeps the number its fixes have in scan and explain (``engine.numbering``).
Variables go to the destination the user names: an env file (KEY=VALUE lines), a systemd
drop-in, or ``export`` lines to paste.

What a service reads gets only the variables a fix needs, as values: neither systemd's
``EnvironmentFile=``/``Environment=`` (systemd.exec(5): no variable expansion in assignments)
nor ``docker run --env-file`` (values taken literally) expands ``$PATH``, so a value that
refers to another variable is never written there (expanding it here would freeze this shell's
or the service's whole PATH into the file); it is left out with a note. The toolkit fix needs
no PATH: FlashInfer and torch's cpp_extension run ``$CUDA_HOME/bin/nvcc``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from archgap.analysis.fixes.engine import ENV, PATCH, TOOLKIT, UPGRADE, Fix, numbering, ranked
from archgap.analysis.jit.findings import JitFinding
from archgap.analysis.scan import ScanReport
from archgap.kb import load_json
from archgap.probe.environment.envvars import REDACTED

KINDS = (ENV, TOOLKIT, UPGRADE, PATCH)
DROPIN_NAME = "50-archgap.conf"
_JOINED = {"FLASHINFER_CUDA_ARCH_LIST": " "}  # several GPUs: one list, FlashInfer's separator


@dataclass(frozen=True)
class Action:
    kind: str  # env, toolkit, upgrade, patch
    action: str  # the fix engine's line
    removes: tuple[str, ...]  # "flashinfer-python 0.6.8 on RTX PRO 6000 (12.0): <error>"
    env: tuple[tuple[str, str], ...] = ()
    edit: dict[str, Any] | None = None  # for the fix program (probe/fixer.py)
    command: tuple[str, ...] = ()  # upgrade: the argv run on the target
    needs_only: bool = False  # applied only when --only names this kind
    note: str = ""
    numbers: tuple[int, ...] = ()  # the numbers of its fixes in scan and explain


@dataclass(frozen=True)
class Destination:
    env_file: str | None = None
    systemd_unit: str | None = None
    systemd_dir: str = "/etc/systemd/system"

    @property
    def dropin(self) -> str | None:
        if not self.systemd_unit:
            return None
        unit = self.systemd_unit if "." in self.systemd_unit else self.systemd_unit + ".service"
        return f"{self.systemd_dir.rstrip('/')}/{unit}.d/{DROPIN_NAME}"


@dataclass(frozen=True)
class Plan:
    actions: tuple[Action, ...]
    exports: tuple[str, ...] = ()  # no destination: lines to paste
    reload: str | None = None  # the command to run after a drop-in (shown, not run)
    notes: tuple[str, ...] = field(default=())


def finding_key(f: JitFinding) -> str:
    """ "flashinfer-python 0.6.8 on RTX PRO 6000 (12.0)": how verification finds it again."""
    where = f" on {f.gpu} ({f.compute_capability})" if f.gpu else ""
    return f"{f.package} {f.version}{where}"


def _finding_label(f: JitFinding) -> str:
    return f"{finding_key(f)}: {f.error or f.cause}"


def _first(fixes: Sequence[Fix], kinds: tuple[str, ...]) -> Fix | None:
    return next(
        (f for f in fixes if f.kind in kinds and (f.env or f.command or f.kind == PATCH)), None
    )


def _resolve(
    pairs: Sequence[tuple[str, str]], shell: bool
) -> tuple[list[tuple[str, str]], list[str]]:
    """The variables a destination gets: for an env file or a drop-in never a value that
    refers to another variable (neither expands ``$NAME``: it would be written literally, and
    expanding it here would freeze one environment's value into the service's file)."""
    out: list[tuple[str, str]] = []
    notes: list[str] = []
    for name, value in pairs:
        if "$" in value and not shell:
            notes.append(
                f"{name}={value} left out: an env file or a systemd drop-in does not expand "
                f"${name} (systemd.exec(5), docker run --env-file), and archgap never writes "
                f"a copy of some environment's {name}; set it where the service's {name} is set"
            )
            continue
        if REDACTED in value:
            notes.append(f"{name} left out: its value holds {REDACTED}; set it by hand")
            continue
        out.append((name, value))
    return out, notes


def _merge(env: list[tuple[str, str]]) -> list[tuple[str, str]]:
    merged: dict[str, str] = {}
    for name, value in env:
        if name in merged and name in _JOINED and value not in merged[name].split(_JOINED[name]):
            merged[name] = merged[name] + _JOINED[name] + value
        else:
            merged.setdefault(name, value)
    return list(merged.items())


def _patch_edit(report: ScanReport, finding: JitFinding) -> tuple[dict[str, Any], str] | None:
    """The kb patch for the exact installed release of the finding's package, and its note."""
    pkgs = report.toolchains.packages if report.toolchains else ()
    pkg = next((p for p in pkgs if p.name == finding.package), None)
    if pkg is None:
        return None
    for entry in load_json("patches.json")["patches"]:
        if (entry["package"], entry["version"]) != (pkg.name, pkg.version):
            continue
        if finding.compute_capability not in entry["compute_capabilities"]:
            continue
        site = pkg.dist_info.rstrip("/").rsplit("/", 1)[0]
        # within: the patched file must stay in this site-packages (no link out of it)
        edit = {"kind": "patch", "path": f"{site}/{entry['file']}", "within": site}
        edit.update({k: entry[k] for k in ("sha256", "sha256_after", "old", "new")})
        return edit, f"{entry['id']}: {entry['removes']} ({entry['source']})"
    return None


def _actions_for(
    report: ScanReport, finding: JitFinding, numbers: dict[tuple[str, str], int]
) -> list[Action]:
    label = (_finding_label(finding),)
    actions: list[Action] = []

    def number(fix: Fix) -> tuple[int, ...]:
        found = numbers.get((fix.kind, fix.action))
        return () if found is None else (found,)

    for kind in (TOOLKIT, ENV):
        variables = _first(finding.fixes, (kind,))
        if variables is not None:
            actions.append(
                Action(kind, variables.action, label, variables.env, numbers=number(variables))
            )
    upgrade = _first(finding.fixes, (UPGRADE,))
    if upgrade is not None and upgrade.command:
        spec = upgrade.command.split("install", 1)[1].strip().strip("'\"")
        argv = (report.environment.executable, "-m", "pip", "install", spec)
        actions.append(
            Action(
                UPGRADE, upgrade.action, label, command=argv, needs_only=True,
                numbers=number(upgrade),
            )
        )  # fmt: skip
    patch = _first(finding.fixes, (PATCH,))
    found = _patch_edit(report, finding) if patch is not None else None
    if patch is not None:
        edit, note = found or (
            None,
            "no patch in kb/patches.json for this exact release and GPU: not offered",
        )
        actions.append(
            Action(
                PATCH, patch.action, label, edit=edit, needs_only=True, note=note,
                numbers=number(patch),
            )
        )  # fmt: skip
    return actions


def plan(report: ScanReport, dest: Destination) -> Plan:
    """The actions for every failing JIT finding of ``report``, with the variables merged into
    one edit of ``dest`` (one env change for eight GPUs' findings, not eight)."""
    actions = _merged_actions(report)
    engine = ranked(fix for g in report.jit_gaps for fix in g.fixes)
    variables = [f.kind for f in engine if f.kind in (ENV, TOOLKIT)]
    shell = dest.env_file is None and dest.systemd_unit is None
    joined: list[Action] = []
    exports: list[str] = []
    reload: str | None = None
    notes: list[str] = []
    for kind in dict.fromkeys(variables):  # the engine's order: the first kind is the default
        group = [a for a in actions if a.kind == kind]
        action, lines, reload, dropped = _joined(kind, group, dest, shell, bool(joined))
        notes += dropped
        exports += [] if joined else lines
        joined.append(action)
    rest = [a for a in actions if a.kind not in (ENV, TOOLKIT)]
    ordered = sorted((*joined, *rest), key=lambda a: min(a.numbers, default=1 << 30))
    return Plan(tuple(ordered), tuple(exports), reload, tuple(dict.fromkeys(notes)))


def _merged_actions(report: ScanReport) -> list[Action]:
    """The actions of every failing JIT finding, one per (kind, action) with the removals of
    each finding that asks for it."""
    actions: list[Action] = []
    numbers = numbering(fix for g in report.jit_gaps for fix in g.fixes)
    for finding in report.jit_gaps:
        for action in _actions_for(report, finding, numbers):
            same = next(
                (a for a in actions if (a.kind, a.action) == (action.kind, action.action)), None
            )
            if same is None:
                actions.append(action)
            else:
                actions[actions.index(same)] = _with_removes(same, action.removes)
    return actions


def _joined(
    kind: str, group: list[Action], dest: Destination, shell: bool, needs_only: bool
) -> tuple[Action, list[str], str | None, list[str]]:
    """The one action that sets the variables of every action in ``group`` (of ``kind``) in
    ``dest``: (it, its export lines, the reload command, what was dropped and why)."""
    pairs, dropped = _resolve([p for a in group for p in a.env], shell)
    pairs = _merge(pairs)
    edit, lines, reload = _env_edit(dest, pairs)
    removes = tuple(dict.fromkeys(r for a in group for r in a.removes))
    text = "; ".join(a.action for a in group)
    numbered = tuple(sorted({n for a in group for n in a.numbers}))
    note = _toolkit_note(pairs) if kind == TOOLKIT and not shell else ""
    action = Action(
        kind, text, removes, tuple(pairs), edit, needs_only=needs_only, note=note,
        numbers=numbered,
    )  # fmt: skip
    return action, lines, reload, dropped


def _toolkit_note(pairs: Sequence[tuple[str, str]]) -> str:
    """Why a toolkit fix written for a service has no PATH line."""
    home = dict(pairs).get("CUDA_HOME")
    if home is None:
        return ""
    return (
        f"no PATH line: FlashInfer and torch's cpp_extension run $CUDA_HOME/bin/nvcc; an env "
        f"file or drop-in cannot prepend to PATH (no $PATH expansion), so a PATH line would "
        f"replace the service's whole PATH. To run that nvcc by hand, put {home}/bin first "
        f"where the service's PATH is set."
    )


def _with_removes(action: Action, more: tuple[str, ...]) -> Action:
    from dataclasses import replace

    return replace(action, removes=tuple(dict.fromkeys((*action.removes, *more))))


def _env_edit(
    dest: Destination, pairs: list[tuple[str, str]]
) -> tuple[dict[str, Any] | None, list[str], str | None]:
    if dest.env_file:
        edit = {"kind": "env-file", "path": dest.env_file, "set": [list(p) for p in pairs]}
        return edit, [], None
    dropin = dest.dropin
    if dropin:
        lines = ["[Service]", *(f'Environment="{_unit_quoted(f"{n}={v}")}"' for n, v in pairs)]
        content = "\n".join(lines) + "\n"
        # within: the drop-in stays in the systemd directory (UNIT.d is no link out of it)
        edit = {"kind": "file", "path": dropin, "content": content, "within": dest.systemd_dir}
        unit = dropin.rsplit("/", 2)[1].removesuffix(".d")
        return edit, [], f"systemctl daemon-reload && systemctl restart {unit}"
    return None, [f'export {n}="{_shell_quoted(v)}"' for n, v in pairs], None


def _unit_quoted(text: str) -> str:
    """``text`` inside a unit file's double quotes: C-style escapes for ``\\`` and ``"``, and
    ``%%`` for a literal ``%`` (systemd.unit: specifiers are expanded in Environment=)."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")


def _shell_quoted(value: str) -> str:
    """``value`` inside a shell's double quotes; a ``$NAME`` the fix engine wrote (``$PATH``)
    is kept for the shell to expand."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`")


def selected(plan: Plan, only: str | None) -> list[Action]:
    """What ``--apply [--only KIND]`` changes: by default the variables of the kind the fix
    engine ranks first (toolkit or env); the other kind, upgrade and patch only when named."""
    if only is None:
        return [a for a in plan.actions if not a.needs_only]
    return [a for a in plan.actions if a.kind == only]
