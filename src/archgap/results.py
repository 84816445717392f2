"""What the API's commands return: typed, frozen results that ``archgap.report`` renders (text,
JSON with the command's schema, markdown, CSV). ``archgap.api`` re-exports them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from archgap.errors import EXIT_ERROR, EXIT_GAP, EXIT_OK

if TYPE_CHECKING:
    from archgap.analysis.recipe.gate import GateResult
    from archgap.analysis.verdicts.compat import GpuTarget
    from archgap.index.deps import Chosen
    from archgap.probe.facts import BinaryFacts, EnvVar, GatesFacts, ProbeResponse, TraceFacts
    from archgap.report.gates import LeftOut as GatesLeftOut
    from archgap.report.gates import Rejection as GatesRejection
    from archgap.report.trace import LeftOut as TraceLeftOut
    from archgap.transport.run import TransportFailure

__all__ = ["FixResult", "GatesResult", "KernelsResult", "ProbeResult", "TraceResult"]


@dataclass(frozen=True)
class KernelsResult:
    """The device code of the files ``paths`` named (every entry, or with ``detail`` off one row
    per kind of entry), read in ``seconds``; with --require the build ``gate``; the wheel each
    requirement ``resolved`` to; the ``missing`` paths, which name nothing here (each also an
    unreadable row of ``files``); the archives read through range requests, whose index sha256
    was not checked (``unverified``)."""

    paths: tuple[str, ...]
    files: tuple[BinaryFacts, ...]
    deep: bool
    seconds: float
    gate: GateResult | None = None
    resolved: tuple[Chosen, ...] = ()
    missing: tuple[str, ...] = ()
    unverified: tuple[str, ...] = ()

    @property
    def unreadable(self) -> int:
        """Files that could not be read completely (the run exits 2)."""
        return sum(1 for f in self.files if f.error or f.format == "unreadable")


@dataclass(frozen=True)
class GatesResult:
    """Where packages detect or gate GPU architectures (only the kinds asked for), and what was
    left out: the gates in vendored, example and test trees."""

    facts: GatesFacts
    left: GatesLeftOut
    gpus: tuple[str, ...] = ()  # --gpu: only the gates that reject these ("H100 (9.0)")
    rejections: tuple[GatesRejection, ...] = ()  # which gate rejects which GPU, and when


@dataclass(frozen=True)
class TraceResult:
    """Where a name is written and read, and what was left out: the occurrences in vendored,
    example and test trees."""

    facts: TraceFacts
    left: TraceLeftOut
    gpus: tuple[GpuTarget, ...] = ()  # --gpu: each write's branch evaluated for these
    env: tuple[EnvVar, ...] | None = None  # --env-from: the service's (allowlisted) variables
    env_source: str = ""  # where they were read ("/etc/sglang.env", "/proc/1234/environ")


@dataclass(frozen=True)
class ProbeResult:
    """A target's facts as the probe collected them, or why there are none (``failure``); the
    GPUs ``required`` and those of them ``missing`` (by compute capability)."""

    target: str  # what reports call it: "root@gpu1:2222", "local"
    transport: str  # "local", "ssh", "container", "pod", "via"
    facts: ProbeResponse | None
    failure: TransportFailure | None = None
    required: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        """``archgap probe``'s: 2 no facts (``failure``), 1 a required GPU is missing, else 0."""
        if self.failure is not None:
            return EXIT_ERROR
        return EXIT_GAP if self.missing else EXIT_OK


@dataclass(frozen=True)
class FixResult:
    """The fixes for the JIT gaps of the environment of ``python`` (``gap``: whether it has
    any): each action with the exact change (its diff, or the command it runs), the export
    lines where no file is named, the reload a drop-in needs, notes; after --apply what changed
    (``applied``) and, per finding the fix was to remove, what a new scan says (``verified``).
    An undo is only ``undo``: what was restored, refused and recovered."""

    python: str = ""
    gap: bool = False
    actions: tuple[dict[str, Any], ...] = ()
    exports: tuple[str, ...] = ()
    reload: str | None = None
    notes: tuple[str, ...] = ()
    applied: dict[str, Any] | None = None
    verified: tuple[dict[str, str], ...] | None = None
    undo: dict[str, Any] | None = None

    @property
    def exit_code(self) -> int:
        """``archgap fix``'s: 0 no gap (a dry run), every applied fix confirmed by a new scan,
        or undone; 1 a gap planned for, or one that remains after --apply; 3 refused, nothing
        changed (a changed file, a hand-edited one to undo, a corrupt journal)."""
        if self.undo is not None:
            refused = self.undo["refused"] and not self.undo["forced"]
            return 3 if self.undo["error"] or refused else 0
        if self.applied is None:  # a dry run, or nothing to change: whether a gap remains
            return 1 if self.gap else 0
        if self.applied["error"]:
            return 3
        verified = self.verified or ()
        return 0 if verified and all(v["status"] == "gone" for v in verified) else 1
