"""A scan or a fleet report in the Prometheus text format, for node_exporter's textfile collector.

The same verdicts as the text and JSON reports, as metrics:

  archgap_package_verdict{package,version,gpu,verdict}  1 per package x GPU (gpu: "12.0")
  archgap_jit_finding{package,version,gpu,status}        1 per JIT finding (fails / unknown)
  archgap_gaps                                           gaps on a present or named GPU
  archgap_scan_success                                   1 when the facts were collected
  archgap_scan_timestamp_seconds                         when the scan ran (Unix time)
  archgap_scan_duration_seconds                          how long it took

Every series has an ``environment`` label: the interpreter judged (a scan's; in a fleet each
host's, and ``fleet`` on the run's own series), or what ``--prometheus-label environment=NAME``
says; ``--prometheus-label`` adds other labels to every series. So two archgap textfiles on one
node (two serving venvs, a node file beside a fleet file) have no series in common: node_exporter
keeps both instead of dropping one as a duplicate.

A fleet adds a ``host`` label to the per-host metrics and ``archgap_host_up{host}`` (0: not
probed, with its ``kind``); a scan has no host label (node_exporter adds ``instance``). A host
name that several documents claim has one sample per label set, the worst of theirs, and
``archgap_host_documents{host}`` says how many claimed it. A host's facts read from a document:
``archgap_document_age_seconds{host}`` (when the document says when it was collected) and
``archgap_host_stale{host}`` (1: older than --stale-after, or no collection time: its other
series are the last known, not live). Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from archgap.report.visible import literal

if TYPE_CHECKING:
    from archgap.analysis.fleet import FleetReport
    from archgap.analysis.scan import ScanReport

Labels = tuple[tuple[str, str], ...]
ENVIRONMENT = "environment"
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# Labels archgap's own series carry and those Prometheus sets itself: not --prometheus-label's.
RESERVED = frozenset(
    ("host", "package", "version", "gpu", "verdict", "status", "kind", "instance", "job")
)


def parse_labels(pairs: Sequence[str]) -> Labels:
    """``K=V`` pairs as labels; ValueError (the reason) for a pair that is not one, a name
    Prometheus does not take, one archgap sets itself, or a name given twice."""
    labels: dict[str, str] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq:
            raise ValueError(f"{pair!r}: expected K=V")
        if not _LABEL_NAME.fullmatch(key) or key.startswith("__"):
            raise ValueError(f"{key!r} is not a Prometheus label name")
        if key in RESERVED:
            raise ValueError(f"{key!r} is a label archgap or Prometheus sets itself")
        if key in labels:
            raise ValueError(f"{key!r} is given twice")
        labels[key] = value
    return tuple(labels.items())


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


def render(families: Iterable[Family], environment: str = "", extra: Labels = ()) -> str:
    """The text exposition format (0.0.4): HELP, TYPE gauge, one line per sample; every sample
    labelled with ``environment`` (unless it has its own) and ``extra`` (over its own)."""
    lines: list[str] = []
    for family in families:
        help_text = family.help.replace("\\", "\\\\").replace("\n", "\\n")
        lines += [f"# HELP {family.name} {help_text}", f"# TYPE {family.name} gauge"]
        for own, value in family.samples.items():
            merged = dict(own)
            merged.setdefault(ENVIRONMENT, environment)
            merged.update(extra)
            labels = tuple(merged.items())
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


def scan_metrics(
    report: ScanReport | None, now: float, seconds: float, extra: Labels = (), python: str = ""
) -> str:
    """A scan's metrics; ``report`` None: the scan failed (success 0, no verdicts). Labelled
    with the interpreter judged (else ``python``, the one asked for) and ``extra``."""
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
    executable = report.environment.executable if report is not None else None
    return render(fams.values(), executable or python or "python3", extra)


def fleet_metrics(report: FleetReport, now: float, seconds: float, extra: Labels = ()) -> str:
    """A fleet's metrics: every host's verdicts with a ``host`` label and its interpreter as the
    environment, which hosts answered, how old each host's facts are; ``extra`` on every series."""
    from archgap.analysis.fleet import collected_time

    fams = _families()
    up = Family("archgap_host_up", "1 when the host was probed, 0 when not (kind: why).")
    claimed = Family(
        "archgap_host_documents",
        "Documents that claim one host name, for names claimed more than once (its samples "
        "are then the worst of theirs).",
    )
    age = Family(
        "archgap_document_age_seconds",
        "How long before this run the host's facts were collected (documents that say when).",
    )
    stale = Family(
        "archgap_host_stale",
        "1 when the host's facts are not live: its document is older than --stale-after or does "
        "not say when it was collected (its other series are the last known).",
    )
    for host in report.hosts:
        h = (("host", host.name), (ENVIRONMENT, _interpreter(host.python)))
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
        stale.worst(h, 1 if host.stale else 0)
        when = collected_time(host.collected_at)
        if when is not None:
            age.worst(h, round(max(now - when, 0.0), 3))
    for u in report.unreachable:
        up.worst((("host", u.name), (ENVIRONMENT, ""), ("kind", u.kind)), 0)
    duplicates = set(report.duplicate_hosts)
    for name in [h.name for h in report.hosts] + [u.name for u in report.unreachable]:
        if name in duplicates:
            claimed.add((("host", name),), 1)
    _run_metrics(fams, now, seconds, True)
    return render([*fams.values(), up, stale, age, claimed], "fleet", extra)


def _interpreter(python: str) -> str:
    """The interpreter's path of a host summary's ``python`` ("3.11.7 /opt/venv/bin/python")."""
    version, _, path = python.partition(" ")
    return path or version
