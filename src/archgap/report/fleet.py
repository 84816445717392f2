"""The fleet document and the line that says what was read: what ``archgap fleet`` prints and
``api.fleet`` returns."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from archgap.analysis.fleet import coverage_matrix, jit_matrix

if TYPE_CHECKING:
    from archgap.analysis.caches import SharedCache
    from archgap.analysis.fleet import FleetReport


def headline(report: FleetReport, elapsed: float, documents: int | None) -> str:
    """What was read: hosts probed (ssh, Slurm, Ray), or documents read (--from)."""
    answered, failed = len(report.hosts), len(report.unreachable)
    groups = f"{len(report.groups)} group(s) of identical hosts"
    if documents is None:
        return f"{answered}/{answered + failed} hosts answered in {elapsed:.1f} s · {groups}"
    return (
        f"{documents} document(s) read in {elapsed:.1f} s: {answered} with facts, "
        f"{failed} without · {groups}"
    )


def body(
    report: FleetReport,
    elapsed: float,
    documents: int | None = None,
    shared: Sequence[SharedCache] = (),
) -> dict[str, Any]:
    """The body of the fleet document (schema/fleet.schema.json); ``documents``: how many were
    read (--from), None when the hosts were probed; ``shared``: the JIT caches hosts with
    different GPUs share."""
    packages, rows = coverage_matrix(report)
    jit_packages, jit_rows = jit_matrix(report)
    baseline = report.baseline
    return {
        "hosts": report.hosts,
        "groups": [
            {"fingerprint": g.fingerprint, "hosts": g.hosts, "size": len(g.hosts)}
            for g in report.groups
        ],
        "baseline": baseline.fingerprint if baseline else None,
        "drift": report.drift,
        "unreachable": report.unreachable,
        "coverage": {
            "packages": packages,
            "rows": [{"host": host, "verdicts": verdicts} for host, verdicts in rows],
        },
        "jit_coverage": {
            "packages": jit_packages,
            "rows": [{"host": host, "statuses": statuses} for host, statuses in jit_rows],
        },
        "documents": documents,
        "gap": bool(report.gap_hosts),
        "exit_code": report.exit_code,
        "seconds": round(elapsed, 3),
        "shared_caches": shared,
    }
