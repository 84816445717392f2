"""A fleet from its hosts' probe facts: fingerprints, groups of identical hosts, drift, gaps.

Pure: JSON facts in (as ``python -m archgap.probe`` or the transport returns them), frozen
dataclasses out. Each host is judged with the same rules as ``archgap scan``: the kernels of
each package against the GPUs the host has (or the GPUs named), the JIT toolchain against them.
"""

from __future__ import annotations

import hashlib
import json
import marshal
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from archgap.analysis.verdicts.verdicts import RANK, UNKNOWN
from archgap.transport.fleet import UNREADABLE, HostInput

if TYPE_CHECKING:
    from archgap.analysis.jit.findings import JitFinding
    from archgap.analysis.scan import ScanReport
    from archgap.probe.facts import ProbeResponse

# What makes two hosts "the same" for a fleet report, in the order drift is shown.
FINGERPRINT_FIELDS = (
    "gpus",
    "driver",
    "toolkits",
    "python",
    "packages",
    "coverage",
    "jit",
    "env",
)
# Variables whose values change what JIT compilers do: part of a host's fingerprint.
FINGERPRINT_ENV = ("CUDA_HOME", "CUDA_PATH", "FLASHINFER_CUDA_ARCH_LIST", "TORCH_CUDA_ARCH_LIST")


@dataclass(frozen=True)
class Coverage:
    package: str
    version: str
    gpu: str  # compute capability, "12.0"
    verdict: str  # native / jit / partial / none / unknown (as archgap scan)
    reason: str


@dataclass(frozen=True)
class JitStatus:
    """A JIT compiler finding that is not ok, for the heat map and metrics."""

    package: str
    version: str
    gpu: str  # compute capability, "12.0", or "any"
    status: str  # fails / unknown (as archgap scan)
    cause: str


@dataclass(frozen=True, slots=True)  # one per host: 50,000 of them, __dict__ is most of each
class HostSummary:
    name: str  # as addressed (host alias, user@host:port, slurm node)
    hostname: str  # what the host calls itself
    gpus: tuple[str, ...]  # "12.0 NVIDIA RTX PRO 6000 Blackwell ×8", or "12.0 (named)"
    compute_capabilities: tuple[str, ...]
    driver: str | None
    toolkits: tuple[str, ...]  # "12.8 /usr/local/cuda-12.8 (CUDA_HOME)"
    python: str  # "3.11.7 /opt/venv/bin/python"
    packages: tuple[str, ...]  # "flashinfer-python==0.6.8"
    coverage: tuple[Coverage, ...]
    jit: tuple[str, ...]  # one line per failing JIT finding
    env: tuple[str, ...]  # "CUDA_HOME=/usr/local/cuda-12.8"
    gaps: tuple[str, ...]  # one sentence per gap
    problems: tuple[str, ...]
    fingerprint: str
    jit_findings: tuple[JitStatus, ...] = ()
    collected_at: str | None = None  # when its facts were collected (UTC ISO 8601), if known
    # Why its facts are not live, "" when they are: a --from document older than --stale-after,
    # or one without a collection time. Its verdicts are then the last known, not the present.
    stale: str = ""
    # The environment its facts were collected in: "shell" (the shell's, or what the engine
    # exported), an env file or /proc/PID/environ (--env-from), a Ray runtime_env.
    environment: str = "shell"

    def field(self, name: str) -> tuple[str, ...]:
        if name == "coverage":
            return tuple(f"{c.package} {c.gpu}: {c.verdict}" for c in self.coverage)
        if name == "driver":
            return (self.driver or "none",)
        if name == "python":
            return (self.python,)
        value: tuple[str, ...] = getattr(self, name)
        return value


@dataclass(frozen=True)
class Unreachable:
    name: str
    kind: str
    message: str
    stderr: str


@dataclass(frozen=True)
class HostGroup:
    fingerprint: str
    hosts: tuple[str, ...]
    summary: HostSummary  # the first host of the group stands for all


@dataclass(frozen=True)
class Drift:
    """How one group differs from the baseline group in one fingerprint field."""

    group: str  # the group's fingerprint
    field: str
    added: tuple[str, ...]  # values the group has and the baseline lacks
    removed: tuple[str, ...]  # values the baseline has and the group lacks


@dataclass(frozen=True)
class FleetReport:
    hosts: tuple[HostSummary, ...]
    groups: tuple[HostGroup, ...]
    drift: tuple[Drift, ...]  # every other group against the baseline, field by field
    unreachable: tuple[Unreachable, ...]

    @property
    def baseline(self) -> HostGroup | None:
        """The group drift is measured against: the largest (ties: the first host's name)."""
        return self.groups[0] if self.groups else None

    @property
    def duplicate_hosts(self) -> tuple[str, ...]:
        """Names that more than one document (or answer) claims, each judged as it came: no
        such name stands for one machine, and the reports say so."""
        from collections import Counter

        names = Counter([h.name for h in self.hosts] + [u.name for u in self.unreachable])
        return tuple(sorted(name for name, count in names.items() if count > 1))

    @property
    def gap_hosts(self) -> tuple[str, ...]:
        return tuple(h.name for h in self.hosts if h.gaps)

    @property
    def stale_hosts(self) -> tuple[HostSummary, ...]:
        """Hosts whose facts are not live (``HostSummary.stale``)."""
        return tuple(h for h in self.hosts if h.stale)

    @property
    def exit_code(self) -> int:
        """1 when any host has a gap (a GPU fault included; a stale host's last known gap too),
        else 2 when any host could not be read or reached or its facts are stale, else 0: an
        unreachable host never hides the hosts with a gap, and an old document never passes for
        a healthy host."""
        return 1 if self.gap_hosts else 2 if self.unreachable or self.stale_hosts else 0

    def hosts_by(self, what: str) -> dict[str, list[str]]:
        """Each distinct gap (``what="gaps"``) or problem (``"problems"``) with its hosts."""
        by: dict[str, list[str]] = {}
        for host in self.hosts:
            for text in getattr(host, what):
                by.setdefault(text, []).append(host.name)
        return by

    @property
    def group_letters(self) -> dict[str, str]:
        """What reports call each group, by fingerprint: A to Z (biggest first), then 26, 27..."""
        return {
            g.fingerprint: chr(ord("A") + i) if i < 26 else str(i)
            for i, g in enumerate(self.groups)
        }


def summarise_host(name: str, facts: ProbeResponse, named_gpus: Sequence[str] = ()) -> HostSummary:
    """A host's facts as the comparable summary a fleet report groups by.

    The host is judged exactly as ``archgap scan`` judges it (``report_from_facts``), against the
    GPUs it has and the GPUs named; a fleet never falls back to the default matrix.
    """
    from archgap.analysis.gpu_fault import gpu_fault
    from archgap.probe.environment.gpu import NVIDIA_SMI_MISSING

    report, problems = _judged(facts, named_gpus)
    gpu_facts = report.gpu_facts
    problems += [f"{p.subject}: {p.reason}" for p in report.problems
                 if (p.subject, p.reason) != ("nvidia-smi", NVIDIA_SMI_MISSING)]  # fmt: skip
    fault = gpu_fault(gpu_facts)
    env, environ = report.environment, facts.env
    summary = HostSummary(
        name=name,
        hostname=facts.host or name,
        gpus=_gpu_lines(report),
        compute_capabilities=tuple(sorted({str(t.compute_capability) for t in report.gpus})),
        driver=gpu_facts.driver_version,
        toolkits=_toolkits(report),
        python=f"{env.python_version or '?'} {env.executable}" if env.executable else "unknown",
        packages=tuple(sorted(f"{d.name}=={d.version}" for d in env.distributions)),
        coverage=_coverage(report),
        jit=tuple(sorted({_jit_line(f) for f in report.jit if f.status == "fails"})),
        env=tuple(f"{k}={environ[k]}" for k in FINGERPRINT_ENV if k in environ),
        gaps=_gaps(report, fault),
        problems=tuple(problems),
        fingerprint="",
        jit_findings=_jit_findings(report),
        environment=facts.env_source,
    )
    return _with_fingerprint(summary)


def _judged(facts: ProbeResponse, named_gpus: Sequence[str]) -> tuple[ScanReport, list[str]]:
    """The host judged as scan judges it, and why not against the GPUs named (an unknown GPU,
    facts that do not decode: then judged on nothing but its errors)."""
    from archgap.analysis.scan import report_from_facts
    from archgap.analysis.verdicts.compat import UnknownGpu
    from archgap.codec import DecodeError
    from archgap.probe.facts import ProbeResponse

    try:
        return report_from_facts(facts, named_gpus, matrix=False), []
    except (UnknownGpu, DecodeError) as exc:
        bare = ProbeResponse(errors=facts.errors)
        return report_from_facts(bare, (), matrix=False), [str(exc)]


def _gpu_lines(report: ScanReport) -> tuple[str, ...]:
    """ "12.0 NVIDIA RTX PRO 6000 Blackwell ×8" per kind of GPU present, "12.0 (named T4)" per GPU
    named."""
    counts: dict[tuple[str, str], int] = {}
    for gpu in report.gpu_facts.gpus:
        key = (gpu.compute_capability, gpu.name)
        counts[key] = counts.get(key, 0) + 1
    present = tuple(f"{cc} {gpu_name} ×{n}" for (cc, gpu_name), n in sorted(counts.items()))
    return present + tuple(
        f"{t.compute_capability} (named"
        + ("" if t.label == str(t.compute_capability) else f" {t.label}")
        + ")"
        for t in report.gpus
        if t.role != "present"
    )


def _coverage(report: ScanReport) -> tuple[Coverage, ...]:
    """Each package's verdict on each GPU judged (by compute capability)."""
    by_label = {t.label: t for t in report.gpus}
    return tuple(
        Coverage(v.package, v.version, str(by_label[v.gpu].compute_capability), v.verdict, v.reason)
        for v in report.packages
    )


def _jit_line(finding: JitFinding) -> str:
    where = finding.compute_capability or "any GPU"
    return f"{finding.package} {finding.version} on {where}: {finding.cause}"


def _gaps(report: ScanReport, fault: str | None) -> tuple[str, ...]:
    """One sentence per gap: a GPU fault (the rule of scan --health), a package that cannot run
    on a GPU, a JIT compiler that fails."""
    by_label = {t.label: t for t in report.gpus}
    gaps = [f"GPU fault: nvidia-smi: {fault}"] if fault else []
    gaps += [
        f"{v.package} {v.version} cannot run on {by_label[v.gpu].compute_capability} "
        f"({v.gpu}): {v.reason}"
        for v in report.gaps
    ]
    gaps += [f"JIT: {_jit_line(f)}" for f in report.jit_gaps]
    return tuple(gaps)


def _jit_findings(report: ScanReport) -> tuple[JitStatus, ...]:
    """The JIT findings that are not ok, each once, for the heat map and metrics."""
    return tuple(
        sorted(
            {
                JitStatus(f.package, f.version, f.compute_capability or "any", f.status, f.cause)
                for f in report.jit
                if f.status != "ok"
            },
            key=lambda j: (j.package.lower(), j.gpu, j.status, j.cause),
        )
    )


def _toolkits(report: ScanReport) -> tuple[str, ...]:
    """ "12.8 /usr/local/cuda-12.8 (CUDA_HOME)" per nvcc toolkit found (a wheel's included)."""
    if report.toolchains is None:
        return ()
    return tuple(
        f"{t.version or '?'} {t.home} ({t.found_by})"
        for t in report.toolchains.toolkits
        if t.tool in ("nvcc", "") and t.status in ("ok", "wheel")
    )


def _with_fingerprint(summary: HostSummary) -> HostSummary:
    from dataclasses import replace

    comparable = {name: summary.field(name) for name in FINGERPRINT_FIELDS}
    digest = hashlib.sha256(json.dumps(comparable, sort_keys=True).encode()).hexdigest()[:10]
    return replace(summary, fingerprint=digest)


def fleet_report(
    hosts: Iterable[HostInput],
    named_gpus: Sequence[str] = (),
    stale_after: float | None = None,
    now: float | None = None,
) -> FleetReport:
    """Group hosts with identical fingerprints and show what differs between the groups.

    ``hosts`` is consumed one at a time and only each host's summary is kept, so a generator of
    hosts keeps the memory of a fleet of any size at about one host's facts. ``stale_after``
    (seconds; documents read, not hosts probed now): a host whose facts were collected longer
    ago than that before ``now`` (Unix time), or at a time the document does not say, is stale."""
    summaries: list[HostSummary] = []
    unreachable: list[Unreachable] = []
    judged: dict[str, HostSummary] = {}
    for host in hosts:
        if host.facts is None:
            unreachable.append(
                Unreachable(host.name, host.error_kind or "unknown", host.error or "", host.stderr)
            )
            continue
        try:
            summary = _summarise_once(host.name, host.facts, named_gpus, judged)
            summaries.append(_dated(summary, host.facts.collected_at, stale_after, now))
        except (RecursionError, ValueError, TypeError, AttributeError, KeyError) as exc:
            why = f"{type(exc).__name__}: {exc}"  # one bad document, not a failed report
            unreachable.append(Unreachable(host.name, UNREADABLE, why, ""))
    summaries.sort(key=lambda s: s.name)
    by_print: dict[str, list[HostSummary]] = {}
    for summary in summaries:
        by_print.setdefault(summary.fingerprint, []).append(summary)
    groups = tuple(
        sorted(
            (
                HostGroup(fp, tuple(s.name for s in members), members[0])
                for fp, members in by_print.items()
            ),
            key=lambda g: (-len(g.hosts), g.hosts),
        )
    )
    return FleetReport(
        tuple(summaries),
        groups,
        drift_between(groups),
        tuple(sorted(unreachable, key=lambda u: u.name)),
    )


# What identifies a host or a device rather than what it runs: left out of the judge-once key.
# The envelope's name, section timings and collection time; each GPU's UUID, serial, PCI bus id
# and minor number (the probe records the UUID; the others are named for documents from other
# collectors). Nothing the verdicts read is among them (a GPU is judged by its name and compute
# capability; tests/unit/test_fleet_judge_once.py holds this).
NOT_DECIDING = frozenset(("host", "seconds", "collected_at"))
GPU_IDENTIFIERS = frozenset(("uuid", "serial", "pci_bus_id", "bus_id", "minor_number"))


def verdict_key(facts: ProbeResponse) -> str:
    """The digest of the facts that decide a host's verdicts: two hosts with the same key get
    the same summary but for their names."""
    from dataclasses import fields

    sections = facts.sections
    gpu = sections.get("gpu")
    if isinstance(gpu, dict) and isinstance(gpu.get("gpus"), list):
        gpus = [
            {k: v for k, v in g.items() if k not in GPU_IDENTIFIERS} if isinstance(g, dict) else g
            for g in gpu["gpus"]
        ]
        sections = {**sections, "gpu": {**gpu, "gpus": gpus}}
    same = [
        sections if f.name == "sections" else getattr(facts, f.name)
        for f in fields(facts)
        if f.name not in NOT_DECIDING
    ]
    try:
        # marshal's version 2 (no shared references) writes equal JSON data as equal bytes, at
        # a third of json.dumps' cost; a value it cannot write (never in decoded JSON) falls back.
        data = marshal.dumps(same, 2)
    except ValueError:
        data = json.dumps(same, default=str).encode()
    return hashlib.sha256(data).hexdigest()


def _summarise_once(
    name: str,
    facts: ProbeResponse,
    named_gpus: Sequence[str],
    judged: dict[str, HostSummary],
) -> HostSummary:
    """``summarise_host``, once per distinct set of deciding facts (``verdict_key``): a fleet is
    mostly copies of a few machines, and hosts that differ only in their names, their GPUs'
    UUIDs and how long each section took get the same summary."""
    from dataclasses import replace

    key = verdict_key(facts)
    summary = judged.get(key)
    if summary is None:
        summary = judged[key] = summarise_host(name, facts, named_gpus)
        return summary
    return replace(summary, name=name, hostname=facts.host or name)


def _dated(
    summary: HostSummary, collected_at: str | None, stale_after: float | None, now: float | None
) -> HostSummary:
    """The summary with its collection time, and why it is stale (see ``staleness``)."""
    from dataclasses import replace

    stale = "" if stale_after is None else staleness(collected_at, stale_after, now)
    if collected_at == summary.collected_at and stale == summary.stale:
        return summary
    return replace(summary, collected_at=collected_at, stale=stale)


def staleness(collected_at: str | None, stale_after: float, now: float | None = None) -> str:
    """Why facts collected at ``collected_at`` (ISO 8601) are not live at ``now`` (Unix time;
    None: the clock), "" when they are: collected more than ``stale_after`` seconds before, or
    at a time the document does not say (an archgap before collection times) or says wrongly."""
    import time

    if not isinstance(collected_at, str) or not collected_at:
        return "collection time unknown (a document from an archgap that does not record it)"
    when = collected_time(collected_at)
    if when is None:
        return f"collection time unknown (not ISO 8601: {collected_at[:40]!r})"
    age = (time.time() if now is None else now) - when
    if age > stale_after:
        return f"collected {collected_at}, {duration(age)} ago (over {duration(stale_after)})"
    return ""


def collected_time(collected_at: str | None) -> float | None:
    """A collection time (ISO 8601; without a zone: UTC, as the probe writes it) in Unix time,
    or None when there is none or it cannot be read."""
    from datetime import datetime, timezone

    if not isinstance(collected_at, str) or not collected_at:
        return None
    try:
        when = datetime.fromisoformat(collected_at.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


def duration(seconds: float) -> str:
    """``2h``, ``3h 12m``, ``2d 4h``, ``90s``: a coarse age for a person."""
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{days}d"] if days else []
    parts += [f"{hours}h"] if hours else []
    parts += [f"{minutes}m"] if minutes and not days else []
    parts += [f"{secs}s"] if secs and not (days or hours) else []
    return " ".join(parts) or "0s"


def drift_between(groups: Sequence[HostGroup]) -> tuple[Drift, ...]:
    """Each group against the baseline (``groups[0]``, the largest): per fingerprint field, the
    values it has that the baseline lacks and those it lacks. Only real differences: a field a
    group shares with the baseline is not listed, however many other groups differ in it."""
    if len(groups) < 2:
        return ()
    base = groups[0].summary
    drift: list[Drift] = []
    for group in groups[1:]:
        for name in FINGERPRINT_FIELDS:
            mine, theirs = set(group.summary.field(name)), set(base.field(name))
            if mine != theirs:
                added, removed = tuple(sorted(mine - theirs)), tuple(sorted(theirs - mine))
                drift.append(Drift(group.fingerprint, name, added, removed))
    return tuple(drift)


VERDICT_ORDER = RANK  # worst first: none, blocked, unknown, partial, jit, native, no-kernels
JIT_ORDER = {"fails": 0, "blocked": 0, "unknown": 1}


def kernel_cells(host: HostSummary, packages: Sequence[str]) -> tuple[str, ...]:
    """The worst kernel verdict of each package on any of the host's GPUs; "": not there."""
    worst: dict[str, str] = {}
    for c in host.coverage:
        unseen = len(VERDICT_ORDER)  # ranks after every verdict: the first one seen wins
        rank = VERDICT_ORDER.get(c.verdict, VERDICT_ORDER[UNKNOWN])
        if rank < VERDICT_ORDER.get(worst.get(c.package, ""), unseen):
            worst[c.package] = c.verdict
    return tuple(worst.get(p, "") for p in packages)


def jit_packages(report: FleetReport) -> tuple[str, ...]:
    """Packages whose JIT compiler has a finding (fails / unknown) on some host."""
    return tuple(sorted({j.package for h in report.hosts for j in h.jit_findings}, key=str.lower))


def jit_cells(host: HostSummary, packages: Sequence[str]) -> tuple[str, ...]:
    """Per package, the host's worst JIT status: fails, unknown, ``ok`` (installed and no
    finding: the rules predict it builds), "" (not installed)."""
    from archgap.probe.environment.pyenv import canonical_name

    installed = {canonical_name(p.split("==", 1)[0]) for p in host.packages}
    worst: dict[str, str] = {}
    for j in host.jit_findings:
        if j.package not in worst or JIT_ORDER.get(j.status, 1) < JIT_ORDER.get(
            worst[j.package], 1
        ):
            worst[j.package] = j.status
    return tuple(worst.get(p) or ("ok" if canonical_name(p) in installed else "") for p in packages)


def coverage_matrix(
    report: FleetReport,
) -> tuple[tuple[str, ...], tuple[tuple[str, tuple[str, ...]], ...]]:
    """(packages, rows of (host, worst verdict per package)) for the heat map; "": not there."""
    packages = tuple(sorted({c.package for h in report.hosts for c in h.coverage}, key=str.lower))
    return packages, tuple((host.name, kernel_cells(host, packages)) for host in report.hosts)


def jit_matrix(
    report: FleetReport,
) -> tuple[tuple[str, ...], tuple[tuple[str, tuple[str, ...]], ...]]:
    """(packages with a JIT finding somewhere, rows of (host, status per package))."""
    packages = jit_packages(report)
    return packages, tuple((host.name, jit_cells(host, packages)) for host in report.hosts)


def compress_hosts(names: Iterable[str]) -> str:
    """Host names in Slurm's hostlist form: ``gpu[001-512,514],login1`` (numbers with the same
    prefix and zero padding become ranges; other names stay as they are)."""
    import re

    matches = [(n, re.fullmatch(r"(.*?)(\d+)", n)) for n in dict.fromkeys(names)]
    # Zero-padded widths per prefix: "gpu1000" joins gpu[0001-0999], "n10" joins n[9-11].
    padded = {(m.group(1), len(m.group(2))) for _, m in matches if m and m.group(2)[0] == "0"}
    runs: dict[tuple[str, int], list[int]] = {}
    plain: list[str] = []
    for name, match in matches:
        if match is None or "[" in name:
            plain.append(name)
            continue
        prefix, digits = match.groups()
        width = len(digits) if (prefix, len(digits)) in padded else 0
        runs.setdefault((prefix, width), []).append(int(digits))
    parts = [_run_of(prefix, width, sorted(numbers))
             for (prefix, width), numbers in sorted(runs.items())]  # fmt: skip
    return ",".join([*parts, *sorted(plain)])


def _run_of(prefix: str, width: int, numbers: list[int]) -> str:
    """``gpu[001-004,007]`` for sorted ``numbers`` of one prefix and zero padding (``gpu007``
    alone)."""
    if len(numbers) == 1:
        return f"{prefix}{numbers[0]:0{width}d}"
    ranges: list[str] = []
    start = prev = numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        ranges.append(
            f"{start:0{width}d}" if start == prev else f"{start:0{width}d}-{prev:0{width}d}"
        )
        if n is not None:
            start = prev = n
    return f"{prefix}[{','.join(ranges)}]"
