"""A scan or a fleet report in the Prometheus text format, for node_exporter's textfile collector.

The same verdicts as the text and JSON reports, as metrics:

  archgap_package_verdict{package,version,gpu,verdict}  1 per package x GPU (gpu: "12.0")
  archgap_jit_finding{package,version,gpu,status}        1 per JIT finding (fails / unknown)
  archgap_gaps                                           gaps on a present or named GPU
  archgap_scan_success                                   1 when the facts were collected
  archgap_scan_timestamp_seconds                         when the scan ran (Unix time)
  archgap_scan_duration_seconds                          how long it took

A fleet adds a ``host`` label to the per-host metrics and ``archgap_host_up{host}`` (0: not
probed, with its ``kind``); a scan has no host label (node_exporter adds ``instance``). A host
name that several documents claim has one sample per label set, the worst of theirs, and
``archgap_host_documents{host}`` says how many claimed it. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from archgap.report.visible import literal

if TYPE_CHECKING:
    from archgap.analysis.fleet import FleetReport
    from archgap.analysis.scan import ScanReport

Labels = tuple[tuple[str, str], ...]


@dataclass
class Family:
    name: str
    help: str
    samples: dict[Labels, float] = field(default_factory=dict)

    def add(self, labels: Labels, value: float = 1) -> None:
        """One sample; the same labels twice add up (two findings of one kind count 2)."""
        self.samples[labels] = self.samples.get(labels, 0) + value

    def worst(self, labels: Labels, value: float) -> None:
        """One sample; the same labels again keep the larger value (two documents that claim
        one host name: one sample, the worse of theirs, never their sum)."""
        self.samples[labels] = max(self.samples.get(labels, value), value)


def _escape_label(value: str) -> str:
    """The exposition format escapes only backslash, quote and newline; any other control (a CR
    ends the line for readers that split universally) or bidi character is made visible first."""
    value = "\n".join(literal(line) for line in value.split("\n"))
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 2**53 else repr(value)


def render(families: Iterable[Family]) -> str:
    """The text exposition format (0.0.4): HELP, TYPE gauge, one line per sample."""
    lines: list[str] = []
    for family in families:
        help_text = family.help.replace("\\", "\\\\").replace("\n", "\\n")
        lines += [f"# HELP {family.name} {help_text}", f"# TYPE {family.name} gauge"]
        for labels, value in family.samples.items():
            inner = ",".join(f'{k}="{_escape_label(v)}"' for k, v in labels)
            lines.append(f"{family.name}{{{inner}}} {_number(value)}" if inner else
                         f"{family.name} {_number(value)}")  # fmt: skip
    return "\n".join(lines) + "\n"


def _families() -> dict[str, Family]:
    return {
        f.name: f
        for f in (
            Family(
                "archgap_package_verdict",
                "1 per package and GPU; the verdict is a label "
                "(native, jit, partial, none, blocked, unknown).",
            ),
            Family(
                "archgap_jit_finding",
                "1 per JIT compiler finding that is not ok (status fails or unknown).",
            ),
            Family("archgap_gaps", "Gaps (kernels or JIT) on a GPU that is present or named."),
            Family(
                "archgap_scan_success",
                "1 when the facts were collected and judged (0: the probe failed, or the "
                "interpreter has no site-packages).",
            ),
            Family("archgap_scan_timestamp_seconds", "When the scan ran, in Unix time."),
            Family("archgap_scan_duration_seconds", "How long the scan took."),
        )
    }


def _run_metrics(fams: dict[str, Family], now: float, seconds: float, success: bool) -> None:
    fams["archgap_scan_success"].add((), 1 if success else 0)
    fams["archgap_scan_timestamp_seconds"].add((), round(now, 3))
    fams["archgap_scan_duration_seconds"].add((), round(seconds, 3))


def scan_metrics(report: ScanReport | None, now: float, seconds: float) -> str:
    """A scan's metrics; ``report`` None: the scan failed (success 0, no verdicts)."""
    fams = _families()
    if report is not None:
        cc = {g.label: str(g.compute_capability) for g in report.gpus}
        for p in report.packages:
            labels = (("package", p.package), ("version", p.version), ("gpu", cc[p.gpu]))
            fams["archgap_package_verdict"].add((*labels, ("verdict", p.verdict)), 1)
        for f in report.jit:
            gpu = cc.get(f.gpu or "", f.compute_capability or "any")
            labels = (("package", f.package), ("version", f.version), ("gpu", gpu))
            fams["archgap_jit_finding"].add((*labels, ("status", f.status)), 1)
        fams["archgap_gaps"].add((), len(report.gaps) + len(report.jit_gaps))
    judged = report is not None and bool(report.environment.site_packages)
    _run_metrics(fams, now, seconds, judged)
    return render(fams.values())


def fleet_metrics(report: FleetReport, now: float, seconds: float) -> str:
    """A fleet's metrics: every host's verdicts with a ``host`` label, and which hosts answered."""
    fams = _families()
    up = Family("archgap_host_up", "1 when the host was probed, 0 when not (kind: why).")
    claimed = Family(
        "archgap_host_documents",
        "Documents that claim one host name, for names claimed more than once (its samples "
        "are then the worst of theirs).",
    )
    for host in report.hosts:
        h = (("host", host.name),)
        mine = _families()  # this document's samples, counted; merged by the worst below
        for c in host.coverage:
            labels = (*h, ("package", c.package), ("version", c.version), ("gpu", c.gpu))
            mine["archgap_package_verdict"].add((*labels, ("verdict", c.verdict)), 1)
        for j in host.jit_findings:
            labels = (*h, ("package", j.package), ("version", j.version), ("gpu", j.gpu))
            mine["archgap_jit_finding"].add((*labels, ("status", j.status)), 1)
        mine["archgap_gaps"].add(h, len(host.gaps))
        for name, family in mine.items():
            for sample, value in family.samples.items():
                fams[name].worst(sample, value)
        up.worst((*h, ("kind", "")), 1)
    for u in report.unreachable:
        up.worst((("host", u.name), ("kind", u.kind)), 0)
    duplicates = set(report.duplicate_hosts)
    for name in [h.name for h in report.hosts] + [u.name for u in report.unreachable]:
        if name in duplicates:
            claimed.add((("host", name),), 1)
    _run_metrics(fams, now, seconds, True)
    return render([*fams.values(), up, claimed])
