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

from archgap.model import BinaryFacts, DecodeError, GpuFacts, PythonEnvironment, decode

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


def _section(facts: Mapping[str, Any], name: str) -> Any:
    sections = facts.get("sections")
    return sections.get(name) if isinstance(sections, dict) else None


def _gpu_facts(facts: Mapping[str, Any]) -> GpuFacts:
    data = _section(facts, "gpu")
    try:
        return decode(GpuFacts, data) if data is not None else GpuFacts((), None, None, "none")
    except DecodeError:
        return GpuFacts((), None, None, "none")


def _environment(facts: Mapping[str, Any]) -> PythonEnvironment | None:
    data = _section(facts, "python")
    try:
        return decode(PythonEnvironment, data) if data is not None else None
    except DecodeError:
        return None


def _binaries(facts: Mapping[str, Any]) -> tuple[BinaryFacts, ...]:
    data = _section(facts, "binaries")
    if not isinstance(data, list):
        return ()
    found = []
    for item in data:
        try:
            found.append(decode(BinaryFacts, item))
        except DecodeError:
            continue
    return tuple(found)


def summarise_host(
    name: str, facts: Mapping[str, Any], named_gpus: Sequence[str] = ()
) -> HostSummary:
    """A host's facts as the comparable summary a fleet report groups by."""
    from archgap.analysis.compat import UnknownGpu
    from archgap.analysis.verdicts import NONE, group_by_package, verdicts_for
    from archgap.api import choose_targets

    problems: list[str] = [f"{k}: {v}" for k, v in (facts.get("errors") or {}).items()]
    gpu_facts = _gpu_facts(facts)
    problems += [
        f"{p.subject}: {p.reason}" for p in gpu_facts.problems if p.subject != "nvidia-smi"
    ]
    try:
        targets = choose_targets(gpu_facts, named_gpus) if (gpu_facts.gpus or named_gpus) else ()
    except UnknownGpu as exc:
        problems.append(str(exc))
        targets = ()
    counts: dict[tuple[str, str], int] = {}
    for gpu in gpu_facts.gpus:
        counts[(gpu.compute_capability, gpu.name)] = (
            counts.get((gpu.compute_capability, gpu.name), 0) + 1
        )
    gpus = tuple(f"{cc} {gpu_name} ×{n}" for (cc, gpu_name), n in sorted(counts.items()))
    gpus += tuple(
        f"{t.compute_capability} (named"
        + ("" if t.label == str(t.compute_capability) else f" {t.label}")
        + ")"
        for t in targets
        if t.role != "present"
    )

    env = _environment(facts)
    packages: tuple[str, ...] = ()
    python = "unknown"
    coverage: list[Coverage] = []
    gaps: list[str] = []
    if env is not None:
        python = f"{env.python_version or '?'} {env.executable}"
        packages = tuple(sorted(f"{d.name}=={d.version}" for d in env.distributions))
        problems += [f"{p.subject}: {p.reason}" for p in env.problems]
        binaries = _binaries(facts)
        if binaries and targets:
            for verdict in verdicts_for(group_by_package(env, binaries), targets):
                target = next(t for t in targets if t.label == verdict.gpu)
                coverage.append(
                    Coverage(
                        verdict.package,
                        verdict.version,
                        str(target.compute_capability),
                        verdict.verdict,
                        verdict.reason,
                    )
                )
                if verdict.verdict == NONE and target.gates_exit_code:
                    gaps.append(
                        f"{verdict.package} {verdict.version} cannot run on "
                        f"{target.compute_capability} ({target.label}): {verdict.reason}"
                    )
    toolkits, jit = _toolchains(facts, targets, gpu_facts, gaps, problems)
    environ = facts.get("env") if isinstance(facts.get("env"), dict) else {}
    assert isinstance(environ, dict)
    env_lines = tuple(f"{k}={environ[k]}" for k in FINGERPRINT_ENV if k in environ)
    summary = HostSummary(
        name=name,
        hostname=str(facts.get("host") or name),
        gpus=gpus,
        compute_capabilities=tuple(sorted({str(t.compute_capability) for t in targets})),
        driver=gpu_facts.driver_version,
        toolkits=toolkits,
        python=python,
        packages=packages,
        coverage=tuple(coverage),
        jit=jit,
        env=env_lines,
        gaps=tuple(gaps),
        problems=tuple(problems),
        fingerprint="",
    )
    return _with_fingerprint(summary)


def _toolchains(
    facts: Mapping[str, Any],
    targets: Sequence[Any],
    gpu_facts: GpuFacts,
    gaps: list[str],
    problems: list[str],
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    data = _section(facts, "toolchains")
    if data is None:
        return (), ()
    from archgap.analysis.jit import jit_findings
    from archgap.probe.toolkit import ToolchainFacts

    try:
        toolchains = decode(ToolchainFacts, data)
    except DecodeError as exc:
        problems.append(f"toolchains: {exc}")
        return (), ()
    toolkits = tuple(
        f"{t.version or '?'} {t.home} ({t.found_by})"
        for t in toolchains.toolkits
        if t.tool in ("nvcc", "") and t.status in ("ok", "wheel")
    )
    lines: list[str] = []
    if targets:
        for finding in jit_findings(
            toolchains, targets, gpu_facts.driver_version, gpu_facts.source
        ):
            if finding.status != "fails":
                continue
            gpu = finding.compute_capability or "any GPU"
            line = f"{finding.package} {finding.version} on {gpu}: {finding.cause}"
            lines.append(line)
            if finding.gates_exit_code:
                gaps.append(f"JIT: {line}")
    return toolkits, tuple(sorted(set(lines)))


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
