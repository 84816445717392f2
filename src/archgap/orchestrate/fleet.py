"""``fleet``: every host of a source probed (or read) and compared."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from archgap.errors import UsageError
from archgap.orchestrate.shared import resolve

if TYPE_CHECKING:
    from archgap.analysis.fleet import FleetReport
    from archgap.analysis.jit.caches import SharedCache
    from archgap.transport.fleet import FleetOptions, FleetSource, HostInput, Tell


def __getattr__(name: str) -> Any:
    # The types of fleet_run's parameters, imported when first asked for (PEP 562) as
    # archgap.api does: the MCP server reads them off the signature; scan loads no fleet code.
    if name not in ("FleetOptions", "FleetSource"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module("archgap.transport.fleet"), name)


@dataclass(frozen=True)
class FleetRun:
    """A fleet's report, the JIT caches hosts with different GPUs share, how long it took, and
    how many documents were read (None when the hosts were probed)."""

    report: FleetReport
    shared_caches: tuple[SharedCache, ...]
    elapsed: float
    documents: int | None

    def document(self) -> dict[str, Any]:
        """The fleet document, what ``archgap fleet --json`` prints (``report.fleet.document``)."""
        from archgap.report.fleet import document as fleet_document

        return fleet_document(self)


def fleet_run(
    source: FleetSource,
    *,
    gpus: Sequence[str] = (),
    options: FleetOptions | None = None,
    tell: Tell | None = None,
) -> FleetRun:
    """Probe (or read) every host of ``source`` and compare them; every host also judged
    against ``gpus``. ``UsageError`` (before anything is probed) for a bad GPU name or
    section and ``FleetInputError``, a ``UsageError``, for hosts that cannot be probed as
    given. ``options``: how the hosts are probed (sections, interpreter, hosts at a time,
    time limits); ``tell(done, total, host)`` is told as ssh hosts answer."""
    import contextlib
    import time

    from archgap.analysis.fleet import fleet_report
    from archgap.analysis.jit.caches import cache_shares, shared_caches
    from archgap.transport import fleet as transport_fleet

    resolve(gpus)
    if options is not None and options.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    started = time.monotonic()
    inputs = [0]  # hosts read, counted as the report takes them one by one
    shares: list[Any] = []  # each host's network-filesystem caches (small), for shared_caches

    def counted() -> Iterator[HostInput]:
        for host in transport_fleet.collect_hosts(
            source, options or transport_fleet.FleetOptions(), tell
        ):
            inputs[0] += 1
            # A malformed document is an unreadable host in the report, never a failed report.
            if host.facts is not None:
                with contextlib.suppress(TypeError, AttributeError, ValueError, KeyError):
                    shares.extend(cache_shares(host.name, host.facts))
            yield host

    # Facts read from documents may be old; hosts probed now are live.
    stale_after = (options or transport_fleet.FleetOptions()).stale_after
    report = fleet_report(counted(), gpus, stale_after if source.documents else None)
    documents = inputs[0] if source.documents else None
    return FleetRun(report, shared_caches(shares), time.monotonic() - started, documents)


def fleet(
    source: FleetSource, *, gpus: Sequence[str] = (), options: FleetOptions | None = None
) -> FleetRun:
    """The hosts of ``source`` probed (or read) and compared, as ``fleet_run`` without a progress
    display: ``FleetSource(documents=("probes/",))``, ``FleetSource(hosts=(("gpu01", None),))``...
    Its ``document()`` is what ``archgap fleet --json`` prints."""
    return fleet_run(source, gpus=gpus, options=options)
