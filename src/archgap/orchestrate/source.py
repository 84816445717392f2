"""``trace`` and ``gates``: what Python source says, read by the probe where it is installed:
where a name is written and read, where packages detect or gate GPU architectures."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from archgap.errors import ProbeError, UsageError
from archgap.orchestrate.shared import check_paths, decoded, resolve
from archgap.request import gates_request, trace_request
from archgap.transport.target import DEFAULT_TIMEOUT, LOCAL, Target

if TYPE_CHECKING:
    from archgap.probe.facts import EnvVar
    from archgap.results import GatesResult, TraceResult


def trace(
    name: str,
    *,
    paths: Sequence[str] = (),
    dists: Sequence[str] = (),
    python: str | None = None,
    gpus: Sequence[str] = (),
    env_from: str | None = None,
    target: Target = LOCAL,
    show_all: bool = False,
    root: str = "/",
    timeout: float = DEFAULT_TIMEOUT,
) -> TraceResult:
    """Where ``name`` is written and read in ``paths``, else in the distributions ``dists``,
    else in all of the site-packages of ``python``; vendored, example and test trees counted
    aside unless ``show_all``. With ``gpus``, each write's branch is evaluated for them; with
    ``env_from`` (a process id, an env file or ``docker inspect`` JSON on the target), the
    variables feeding the writes are looked up in that environment. ``UsageError`` for a name
    that cannot be traced or a path missing here, ``UnknownGpu``, ``ProbeError`` when the source
    could not be searched or ``env_from`` read."""
    from archgap.analysis import source_shown as shown
    from archgap.probe.facts import TraceFacts
    from archgap.probe.source.trace import valid_name
    from archgap.results import TraceResult

    if not valid_name(name):
        raise UsageError(
            f"cannot trace {name!r}: give an identifier, a dotted name or a string key "
            "(letters, digits, _ . - / :), without spaces or shell characters"
        )
    targets = resolve(gpus)
    check_paths(target, paths)
    request = trace_request(name, list(paths), list(dists), python)
    facts = decoded(TraceFacts, target, request, timeout, root)
    if facts.error:
        raise ProbeError(facts.error)
    selected, left = shown.select_trace(facts, show_all)
    env, source = _service_env(env_from, target, root, timeout) if env_from else (None, "")
    return TraceResult(selected, left, targets, env, source)


def _service_env(
    env_from: str, target: Target, root: str, timeout: float
) -> tuple[tuple[EnvVar, ...], str]:
    """The allowlisted variables of the environment ``env_from`` names on the target, as the
    probe reads it for the toolchain (never tokens or secrets), and where they were read."""
    from archgap.codec import decode
    from archgap.orchestrate.shared import probe_facts
    from archgap.probe.facts import ToolchainFacts

    request: dict[str, Any] = {"toolchains": {"site_packages": [], "source_checks": []}}
    response = probe_facts(target, request, timeout, root, env_from)
    problem = response.errors.get("env_from") or response.errors.get("toolchains")
    data = response.section("toolchains")
    if problem or data is None:
        raise ProbeError(f"--env-from {env_from}: {problem or 'the probe gave no environment'}")
    facts = decode(ToolchainFacts, data)
    return tuple(v for v in facts.env if v.source == facts.env_source), facts.env_source


def gates(
    dists: Sequence[str] = (),
    *,
    paths: Sequence[str] = (),
    python: str | None = None,
    kinds: Sequence[str] = (),
    gpus: Sequence[str] = (),
    target: Target = LOCAL,
    show_all: bool = False,
    root: str = "/",
    timeout: float = DEFAULT_TIMEOUT,
) -> GatesResult:
    """Where packages detect or gate GPU architectures, in ``paths``, else in ``dists``, else
    in all of site-packages; only ``kinds`` (all by default); with ``gpus``, only the raises and
    asserts that reject one of them (the GPU's compute capability leads there: each gate's
    branch evaluated for it). ``UsageError`` for an unknown kind, a path missing here or
    ``kinds`` beside ``gpus``; ``UnknownGpu``; ``ProbeError`` when the source could not be
    searched."""
    from archgap.analysis import source_shown as shown
    from archgap.probe.facts import GatesFacts
    from archgap.results import GatesResult

    unknown = [k for k in kinds if k not in shown.GATE_KINDS]
    if unknown:
        raise UsageError(f"--kind {', '.join(unknown)}: choose from {', '.join(shown.GATE_KINDS)}")
    if gpus and kinds:
        raise UsageError("--gpu lists the raises and asserts that reject the GPU: without --kind")
    targets = resolve(gpus)
    check_paths(target, paths)
    request = gates_request(list(dists), list(paths), python)
    facts = decoded(GatesFacts, target, request, timeout, root)
    if facts.error:
        raise ProbeError(facts.error)
    selected, left = shown.select_gates(facts, tuple(kinds), show_all)
    if not targets:
        return GatesResult(selected, left)
    rejecting, why = shown.rejecting(selected, targets)
    labels = tuple(f"{g.label} ({g.compute_capability})" for g in targets)
    return GatesResult(rejecting, left, labels, why)
