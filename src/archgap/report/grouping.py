"""Findings that say the same thing for several GPUs or packages, told once: a package's verdict
shared by N GPUs ("on all 9 GPUs: ..."), a load failure shared by N packages (the same check, the
same fix). The text report uses these without ``-v``; with ``-v`` every finding is its own line."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from archgap.analysis.scan import ScanReport
    from archgap.analysis.verdicts.loadcommon import LoadFinding
    from archgap.analysis.verdicts.verdicts import PackageVerdict

CC_WORDS = "these GPUs"  # what a grouped reason says where each GPU's reason named its own CC


def _without_cc(reason: str, cc: str) -> str:
    """The reason with the GPU's compute capability taken out where the verdict's reason names
    it ("nothing loads on 7.5: ...", "no SASS for 7.5" -> "... on these GPUs ..."), so reasons
    that differ only by it compare equal (a PTX ISA 9.0 stays as it is)."""
    return re.sub(rf"\b(on|for) {re.escape(cc)}(?![\d])", rf"\1 {CC_WORDS}", reason)


@dataclass(frozen=True)
class VerdictGroup:
    package: str
    verdict: str
    reason: str  # with the compute capability taken out when it covers several GPUs
    notes: tuple[str, ...]
    gpus: tuple[str, ...]  # labels, in the report's order

    def where(self, total: int) -> str:
        """``on H100``, ``on all 9 GPUs``, ``on 3 of 9 GPUs (A100, A10, L40S)``."""
        if len(self.gpus) == 1:
            return f"on {self.gpus[0]}"
        if len(self.gpus) == total:
            return "on both GPUs" if total == 2 else f"on all {total} GPUs"
        return f"on {len(self.gpus)} of {total} GPUs ({', '.join(self.gpus)})"


def verdict_groups(report: ScanReport, packages: list[PackageVerdict]) -> list[VerdictGroup]:
    """``packages`` (the report's non-native verdicts and verdicts with notes) grouped by
    package, verdict, reason and notes; in the order each group first appears."""
    cc = {g.label: str(g.compute_capability) for g in report.gpus}
    groups: dict[tuple[str, str, str, tuple[str, ...]], list[PackageVerdict]] = {}
    for p in packages:
        key = (p.package, p.verdict, _without_cc(p.reason, cc.get(p.gpu, "")), tuple(p.notes))
        if not cc.get(p.gpu):
            key = (p.package, p.verdict, p.reason, tuple(p.notes))
        groups.setdefault(key, []).append(p)
    out = []
    for (package, verdict, reason, notes), members in groups.items():
        alone = len(members) == 1
        out.append(
            VerdictGroup(
                package,
                verdict,
                members[0].reason if alone else reason,
                notes,
                tuple(m.gpu for m in members),
            )
        )
    return out


@dataclass(frozen=True)
class LoadGroup:
    status: str  # "fails" or "unknown"
    packages: tuple[str, ...]
    cause: str  # the first member's cause, or what all members' causes share
    fix: str
    gates: bool  # one member makes the exit code 1
    members: tuple[LoadFinding, ...]


def _prefix(texts: list[str]) -> str:
    """The characters all ``texts`` begin with."""
    first, last = min(texts), max(texts)
    at = 0
    while at < min(len(first), len(last)) and first[at] == last[at]:
        at += 1
    return first[:at]


def _common(texts: list[str]) -> str:
    """What a list of causes "X of pkg: needs driver >= 580 (evidence), and ..." says alike:
    the common start and end of what follows each subject, the differing middle (each
    package's own evidence) shown as "(...)"; "" when they share too little."""
    rests = [t.partition(": ")[2] or t for t in texts]
    if len(set(rests)) == 1:
        return rests[0]
    head = _prefix(rests)
    tail = _prefix([r[::-1] for r in rests])[::-1]
    if "(" in head and head.rfind("(") > head.rfind(")"):  # cut inside a parenthesis
        head = head[: head.rfind("(")]
    if ")" in tail and (tail.find("(") == -1 or tail.find(")") < tail.find("(")):
        tail = tail[tail.find(")") + 1 :]
    head, tail = head.rstrip(), tail.lstrip()
    if len(head) < 12:
        return ""
    return f"{head} (evidence per package: -v){tail if tail.startswith(',') else ' ' + tail}"


def load_groups(report: ScanReport) -> list[LoadGroup]:
    """The load findings grouped by what they say: the same check, status, GPU and source, and
    the same fix once each package's name is taken out of it."""
    groups: dict[tuple[str, str, str, str, str], list[LoadFinding]] = {}
    for f in report.load:
        fix = f.fix.replace(f.package, "{package}") if f.package else f.fix
        groups.setdefault((f.check, f.status, f.gpu, f.source, fix), []).append(f)
    out = []
    for (_, status, gpu, source, fix), members in groups.items():
        names = tuple(dict.fromkeys(m.package for m in members))
        where = f" on {gpu}" if gpu else ""
        if len(members) == 1 or len(names) < len(members):  # one package: each on its own
            out += [
                LoadGroup(
                    m.status,
                    (m.package,),
                    f"{m.cause}{where}",
                    f"{m.fix} ({source})",
                    m.gates_exit_code and m.status == "fails",
                    (m,),
                )
                for m in members
            ]
            continue
        shared = _common([m.cause for m in members])
        listed = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        cause = f"{len(names)} packages ({listed}): {shared or members[0].cause}{where}"
        shown_fix = f"{fix.replace('{package}', 'each package')} ({source})"
        gates = any(m.gates_exit_code and m.status == "fails" for m in members)
        out.append(LoadGroup(status, names, cause, shown_fix, gates, tuple(members)))
    return out
