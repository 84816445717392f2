"""What the commands share: probing a target (a transport failure raised as ``ProbeError``),
GPU names and driver versions checked before anything is probed, and judging facts."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from archgap.errors import ProbeError, UsageError
from archgap.probe.facts import ProbeResponse
from archgap.transport.run import TransportFailure, run_probe
from archgap.transport.target import Target

if TYPE_CHECKING:
    from archgap.analysis.scan import ScanReport
    from archgap.analysis.verdicts.compat import GpuTarget
    from archgap.probe.binary.fatbin import Progress

T = TypeVar("T")


def check_driver(driver: str | None) -> None:
    if driver is not None and not re.fullmatch(r"\d{3,4}(\.\d{1,3}){0,2}", driver.strip()):
        raise UsageError(f"--driver {driver!r}: give an NVIDIA driver version like 580.65.06")


def resolve(gpus: Sequence[str]) -> tuple[GpuTarget, ...]:
    """The named GPUs (``UnknownGpu`` for a bad name); the GPU knowledge is loaded only here,
    so that a command naming none (kernels FILE) does not load it."""
    from archgap.analysis.verdicts.compat import resolve_gpu

    return tuple(resolve_gpu(name) for name in gpus)


def judge(*args: Any, **kwargs: Any) -> ScanReport:
    """``analysis.scan.report_from_facts``, imported when first needed (``prepare_judging``)."""
    from archgap.analysis.scan import report_from_facts

    return report_from_facts(*args, **kwargs)


def prepare_judging() -> None:
    """What judging facts needs, imported and prepared while a local probe runs (30 ms of a
    0.5 s scan of a torch environment)."""
    from archgap.analysis.scan import prepare_judging as prepare

    prepare()


def probe_facts(
    target: Target,
    request: dict[str, Any],
    timeout: float,
    root: str,
    env_from: str | None = None,
    progress: Progress | None = None,
    meanwhile: Callable[[], object] | None = None,
) -> ProbeResponse:
    """The probe's facts; a transport failure raises ``ProbeError``."""
    facts = run_probe(target, request, timeout, root, env_from, progress, meanwhile)
    if isinstance(facts, TransportFailure):
        raise ProbeError(describe(facts))
    return facts


# The log lines of tools built on Go's klog (kubectl): "E1201 19:20:30.067279   2787 file.go:265]
# ...". Internal retries of what the tool's own last line says; never the message.
_KLOG_LINE = re.compile(r"[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ \S+:\d+\] ")


def describe(error: TransportFailure) -> str:
    """A transport failure as text: its kind and message, then the lines of the tool's stderr
    that say more than the message already does (ssh's one line is usually the message itself;
    kubectl's log lines are left out)."""
    lines = (line.strip() for line in (error.stderr or "").splitlines())
    extra = [x for x in lines if x and not _KLOG_LINE.match(x) and x not in error.message]
    return str(error) + "".join(f"\n{line}" for line in extra)


def checked_facts(
    target: Target, request: dict[str, Any], timeout: float, root: str
) -> ProbeResponse:
    """The probe's facts; a failed section also raises ``ProbeError``."""
    facts = probe_facts(target, request, timeout, root)
    for section in request:
        error = facts.errors.get(section)
        if error:
            raise ProbeError(f"probe failed: {section}: {error}")
    return facts


def check_paths(target: Target, paths: Sequence[str]) -> None:
    """Paths on this machine must exist (a remote target's are checked there)."""
    missing = [p for p in paths if target.is_local and not os.path.exists(p)]
    if missing:
        raise UsageError(f"no such file or directory: {', '.join(missing)}")


def decoded(cls: type[T], target: Target, request: dict[str, Any], timeout: float, root: str) -> T:
    """The one section ``request`` asks for, decoded as ``cls``."""
    from archgap.codec import decode

    (section,) = request
    return decode(cls, checked_facts(target, request, timeout, root).sections[section])
