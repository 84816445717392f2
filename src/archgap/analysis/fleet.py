"""A fleet from its hosts' probe facts: fingerprints, groups of identical hosts, drift, gaps.

Pure: JSON facts in (as ``python -m archgap.probe`` or the transport returns them), frozen
dataclasses out. Each host is judged with the same rules as ``archgap scan``: the kernels of
each package against the GPUs the host has (or the GPUs named), the JIT toolchain against them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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
class HostInput:
    """One host as a fleet engine returned it: facts, or why there are none."""

    name: str
    facts: Mapping[str, Any] | None
    error_kind: str | None = None
    error: str | None = None
    stderr: str = ""


@dataclass(frozen=True)
class Coverage:
    package: str
    version: str
    gpu: str  # compute capability, "12.0"
    verdict: str  # native / jit / partial / none / unknown (as archgap scan)
    reason: str


@dataclass(frozen=True)
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
    """A fingerprint field that differs between groups: what each group has that others lack."""

    field: str
    values: tuple[tuple[str, tuple[str, ...]], ...]  # (group fingerprint, values only it has)


@dataclass(frozen=True)
class FleetReport:
    hosts: tuple[HostSummary, ...]
    groups: tuple[HostGroup, ...]
    drift: tuple[Drift, ...]
    unreachable: tuple[Unreachable, ...]

    @property
    def gap_hosts(self) -> tuple[str, ...]:
        return tuple(h.name for h in self.hosts if h.gaps)

    @property
    def group_letters(self) -> dict[str, str]:
        """What reports call each group, by fingerprint: A to Z (biggest first), then 26, 27..."""
        return {
            g.fingerprint: chr(ord("A") + i) if i < 26 else str(i)
            for i, g in enumerate(self.groups)
        }


def summarise_host(
    name: str, facts: Mapping[str, Any], named_gpus: Sequence[str] = ()
) -> HostSummary:
    """A host's facts as the comparable summary a fleet report groups by.

    The host is judged exactly as ``archgap scan`` judges it (``report_from_facts``), against the
    GPUs it has and the GPUs named; a fleet never falls back to the default matrix.
    """
    from archgap.analysis.compat import UnknownGpu
    from archgap.analysis.scan import report_from_facts
    from archgap.model import DecodeError

    problems: list[str] = []
    try:
        report = report_from_facts(facts, named_gpus, matrix=False)
    except (UnknownGpu, DecodeError) as exc:
        problems.append(str(exc))
        report = report_from_facts({"errors": facts.get("errors") or {}}, (), matrix=False)
    problems += [f"{p.subject}: {p.reason}" for p in report.problems if p.subject != "nvidia-smi"]
    gpu_facts = report.gpu_facts
    counts: dict[tuple[str, str], int] = {}
    for gpu in gpu_facts.gpus:
        key = (gpu.compute_capability, gpu.name)
        counts[key] = counts.get(key, 0) + 1
    gpus = tuple(f"{cc} {gpu_name} ×{n}" for (cc, gpu_name), n in sorted(counts.items()))
    gpus += tuple(
        f"{t.compute_capability} (named"
        + ("" if t.label == str(t.compute_capability) else f" {t.label}")
        + ")"
        for t in report.gpus
        if t.role != "present"
    )
    env = report.environment
    by_label = {t.label: t for t in report.gpus}
    coverage = tuple(
        Coverage(v.package, v.version, str(by_label[v.gpu].compute_capability), v.verdict, v.reason)
        for v in report.packages
    )
    gaps = [
        f"{v.package} {v.version} cannot run on {by_label[v.gpu].compute_capability} "
        f"({v.gpu}): {v.reason}"
        for v in report.gaps
    ]
    jit = tuple(
        sorted(
            {
                f"{f.package} {f.version} on {f.compute_capability or 'any GPU'}: {f.cause}"
                for f in report.jit
                if f.status == "fails"
            }
        )
    )
    gaps += [
        f"JIT: {f.package} {f.version} on {f.compute_capability or 'any GPU'}: {f.cause}"
        for f in report.jit_gaps
    ]
    toolkits: tuple[str, ...] = ()
    if report.toolchains is not None:
        toolkits = tuple(
            f"{t.version or '?'} {t.home} ({t.found_by})"
            for t in report.toolchains.toolkits
            if t.tool in ("nvcc", "") and t.status in ("ok", "wheel")
        )
    environ = facts.get("env") if isinstance(facts.get("env"), dict) else {}
    assert isinstance(environ, dict)
    summary = HostSummary(
        name=name,
        hostname=str(facts.get("host") or name),
        gpus=gpus,
        compute_capabilities=tuple(sorted({str(t.compute_capability) for t in report.gpus})),
        driver=gpu_facts.driver_version,
        toolkits=toolkits,
        python=f"{env.python_version or '?'} {env.executable}" if env.executable else "unknown",
        packages=tuple(sorted(f"{d.name}=={d.version}" for d in env.distributions)),
        coverage=coverage,
        jit=jit,
        env=tuple(f"{k}={environ[k]}" for k in FINGERPRINT_ENV if k in environ),
        gaps=tuple(gaps),
        problems=tuple(problems),
        fingerprint="",
    )
    return _with_fingerprint(summary)


def _with_fingerprint(summary: HostSummary) -> HostSummary:
    from dataclasses import replace

    comparable = {name: summary.field(name) for name in FINGERPRINT_FIELDS}
    digest = hashlib.sha256(json.dumps(comparable, sort_keys=True).encode()).hexdigest()[:10]
    return replace(summary, fingerprint=digest)


def fleet_report(hosts: Iterable[HostInput], named_gpus: Sequence[str] = ()) -> FleetReport:
    """Group hosts with identical fingerprints and show what differs between the groups."""
    summaries: list[HostSummary] = []
    unreachable: list[Unreachable] = []
    for host in hosts:
        if host.facts is None:
            unreachable.append(
                Unreachable(host.name, host.error_kind or "unknown", host.error or "", host.stderr)
            )
        else:
            summaries.append(summarise_host(host.name, host.facts, named_gpus))
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


def drift_between(groups: Sequence[HostGroup]) -> tuple[Drift, ...]:
    """Per fingerprint field, the values each group has that not every group shares."""
    if len(groups) < 2:
        return ()
    drift: list[Drift] = []
    for name in FINGERPRINT_FIELDS:
        per_group = [(g.fingerprint, set(g.summary.field(name))) for g in groups]
        common = set.intersection(*(values for _, values in per_group))
        differing = tuple((fp, tuple(sorted(values - common))) for fp, values in per_group)
        if any(values for _, values in differing):
            drift.append(Drift(name, differing))
    return tuple(drift)


def coverage_matrix(
    report: FleetReport,
) -> tuple[tuple[str, ...], tuple[tuple[str, tuple[str, ...]], ...]]:
    """(packages, rows of (host, worst verdict per package)) for the heat map; "": not there."""
    order = {"none": 0, "unknown": 1, "partial": 2, "jit": 3, "native": 4}
    packages = sorted({c.package for h in report.hosts for c in h.coverage}, key=str.lower)
    rows = []
    for host in report.hosts:
        worst: dict[str, str] = {}
        for c in host.coverage:
            if c.package not in worst or order.get(c.verdict, 1) < order.get(worst[c.package], 1):
                worst[c.package] = c.verdict
        rows.append((host.name, tuple(worst.get(p, "") for p in packages)))
    return tuple(packages), tuple(rows)
