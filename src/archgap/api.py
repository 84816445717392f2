"""The Python API: what the CLI commands do, as functions returning frozen dataclasses.

>>> from archgap.api import scan
>>> report = scan(gpus=["RTX PRO 6000"])
>>> [(p.package, p.verdict) for p in report.packages]

``report_from_facts`` judges probe facts collected anywhere (``archgap probe --json``).
"""

from __future__ import annotations

from collections.abc import Sequence

from archgap.analysis.compat import resolve_gpu
from archgap.analysis.scan import ScanReport, report_from_facts
from archgap.request import DEFAULT_SECTIONS, probe_request
from archgap.transport.run import TransportError, run_probe
from archgap.transport.target import DEFAULT_TIMEOUT, LOCAL, Target

__all__ = ["ProbeError", "ScanReport", "report_from_facts", "scan"]


class ProbeError(Exception):
    """The facts could not be collected: an unreachable host, an unreadable --env-from."""


def scan(
    python: str | None = None,
    gpus: Sequence[str] = (),
    target: Target = LOCAL,
    env_from: str | None = None,
    root: str = "/",
    timeout: float = DEFAULT_TIMEOUT,
) -> ScanReport:
    """Scan an environment's native libraries and toolchains; judge each package on each GPU.

    ``target`` says where (this machine, an ssh host, a container...); ``env_from`` names the
    service's environment there (a PID or an env file). Raises ``ProbeError`` when no facts
    could be collected and ``UnknownGpu`` for an unknown GPU name.
    """
    for name in gpus:
        resolve_gpu(name)  # a bad name fails before anything is probed
    facts = run_probe(target, probe_request(DEFAULT_SECTIONS, python), timeout, root, env_from)
    if isinstance(facts, TransportError):
        raise ProbeError(str(facts) + (f"\n{facts.stderr}" if facts.stderr else ""))
    env_problem = (facts.get("errors") or {}).get("env_from")
    if env_problem:
        raise ProbeError(f"--env-from {env_from}: {env_problem}")
    return report_from_facts(facts, gpus)
