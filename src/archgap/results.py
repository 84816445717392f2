"""What the API's commands return: typed, frozen results that ``archgap.report`` renders (text,
JSON with the command's schema, markdown, CSV). ``archgap.api`` re-exports them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from archgap.errors import EXIT_ERROR, EXIT_GAP, EXIT_OK

if TYPE_CHECKING:
    from archgap.analysis.explain.diagnosis import Diagnosis
    from archgap.analysis.recipe.gate import GateResult
    from archgap.analysis.source_shown import GateRejection, GatesLeftOut, TraceLeftOut
    from archgap.analysis.verdicts.compat import GpuTarget
    from archgap.index.deps import Chosen
    from archgap.probe.facts import BinaryFacts, EnvVar, GatesFacts, ProbeResponse, TraceFacts
    from archgap.transport.run import TransportFailure

__all__ = [
    "ExplainResult",
    "FixResult",
    "GatesResult",
    "KernelsResult",
    "NodeHealth",
    "NodeVerdict",
    "ProbeResult",
    "TraceResult",
]


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

    @property
    def exit_code(self) -> int:
        """``archgap kernels``': 2 a file could not be read completely (or names nothing here),
        1 the --require gate fails, else 0."""
        if self.unreadable:
            return EXIT_ERROR
        return EXIT_GAP if self.gate is not None and not self.gate.passed else EXIT_OK


@dataclass(frozen=True)
class GatesResult:
    """Where packages detect or gate GPU architectures (only the kinds asked for), and what was
    left out: the gates in vendored, example and test trees."""

    facts: GatesFacts
    left: GatesLeftOut
    gpus: tuple[str, ...] = ()  # --gpu: only the gates that reject these ("H100 (9.0)")
    rejections: tuple[GateRejection, ...] = ()  # which gate rejects which GPU, and when


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
class ExplainResult:
    """A log explained: the ``diagnosis`` (confirmed on the environment it names, if any) and
    what was read of the log: where it came from (``origin``: a path, "--message", "stdin"), its
    ``lines`` as parsed, those cut for length (``truncated_lines``) and, of a log too long to
    read whole, its middle not read (``skipped_bytes``, ``skipped_lines``; ``note`` says so in
    words)."""

    diagnosis: Diagnosis
    origin: str
    lines: int
    truncated_lines: int = 0
    skipped_bytes: int = 0
    skipped_lines: int = 0
    note: str = ""

    @property
    def exit_code(self) -> int:
        """``archgap explain``'s: the diagnosis' (0 no error, 1 a gap explained, 3 an error
        archgap cannot explain, 4 a known error that is no architecture gap)."""
        return self.diagnosis.exit_code


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


# A node's health codes are a contract (drain policies match them): never rename one, only add.
# What each means: archgap.orchestrate.health, which decides them.
GAP_CODES = ("gpu-fault", "gpu-missing", "no-kernel", "blocked", "jit-fails")  # exit 1
ERROR_CODES = ("probe-failed", "no-python", "gpu-unknown", "no-gpu", "usage")  # exit 2


@dataclass(frozen=True)
class NodeVerdict:
    """One package on one gating GPU (by compute capability): a kernel verdict (native, jit,
    partial, none, blocked, unknown) or the worst JIT status that is not ok (fails, unknown)."""

    package: str
    compute_capability: str  # "12.0"
    value: str


@dataclass(frozen=True)
class NodeHealth:
    """Whether this node can run this stack, as a health check (Slurm, NHC, a readiness probe),
    a drain policy and Node Feature Discovery see it: ``code`` "ok", the first reason it cannot
    (one of GAP_CODES) or why archgap could not judge (ERROR_CODES); what the reason is about
    (``subject``: "torch 2.8.0 on 12.0 (NVIDIA H100)"), ``why``, how many ``more`` reasons
    there are. When judged: the ``gaps`` on present or named GPUs, each package's ``verdicts``
    and its ``jit`` statuses that are not ok, per gating GPU."""

    code: str
    subject: str = ""
    why: str = ""
    more: int = 0
    gaps: int = 0
    verdicts: tuple[NodeVerdict, ...] = ()
    jit: tuple[NodeVerdict, ...] = ()

    @property
    def exit_code(self) -> int:
        """``archgap scan --health``'s: 0 OK, 1 a gap (GAP_CODES), 2 could not judge."""
        if self.code == "ok":
            return EXIT_OK
        return EXIT_GAP if self.code in GAP_CODES else EXIT_ERROR

    @property
    def judged(self) -> bool:
        """Whether archgap could judge the node (OK or a gap)."""
        return self.exit_code != EXIT_ERROR

    @property
    def drains(self) -> bool:
        """Whether a drain policy should take the node out: a gap, never a failure to judge."""
        return self.exit_code == EXIT_GAP
