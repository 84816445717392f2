"""``probe``: the raw facts of a target; ``probe_script``, the standalone probe; and
``k8s_manifest``, the Kubernetes objects that run it (or ``scan --nfd``) on every GPU node."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from archgap.errors import UsageError
from archgap.orchestrate.shared import resolve
from archgap.request import DEFAULT_SECTIONS, probe_request
from archgap.transport.run import TransportFailure, run_probe
from archgap.transport.target import DEFAULT_PYTHON, DEFAULT_TIMEOUT, LOCAL, Target

if TYPE_CHECKING:
    from archgap.results import ProbeResult


def probe(
    python: str | None = None,
    *,
    sections: Sequence[str] = DEFAULT_SECTIONS,
    target: Target = LOCAL,
    env_from: str | None = None,
    require: Sequence[str] = (),
    root: str = "/",
    timeout: float = DEFAULT_TIMEOUT,
) -> ProbeResult:
    """The raw facts of ``target`` (``sections`` of the environment of ``python``; None: the
    probe's own here, python3 there), or the transport's failure as a value; with ``require``
    the GPUs (by compute capability) the facts do not show. ``UsageError`` for an unknown
    section, ``root`` with a remote target or an unreadable ``env_from``; ``UnknownGpu``."""
    from archgap.analysis.verdicts.compat import ComputeCapability
    from archgap.results import ProbeResult

    wanted = resolve(require)  # a bad name fails before anything is probed
    request = probe_request(sections, python if (python or target.is_local) else target.python)
    if root != "/" and not target.is_local:
        raise UsageError("--root works only on this machine")
    facts = run_probe(target, request, timeout, root, env_from)
    if isinstance(facts, TransportFailure):
        return ProbeResult(target.name, target.kind, None, facts, tuple(require))
    problem = facts.errors.get("env_from")
    if problem:
        raise UsageError(f"--env-from {env_from}: {problem}")
    gpu = facts.section("gpu") or {}
    present = {
        str(cc)
        for entry in gpu.get("gpus") or []
        if (cc := ComputeCapability.parse(str(entry.get("compute_capability", "")))) is not None
    }
    missing = tuple(
        f"{name} (compute capability {gpu_target.compute_capability})"
        for name, gpu_target in zip(require, wanted, strict=True)
        if str(gpu_target.compute_capability) not in present
    )
    return ProbeResult(target.name, target.kind, facts, None, tuple(require), missing)


def probe_script(
    python: str | None = None,
    *,
    sections: Sequence[str] = DEFAULT_SECTIONS,
    env_from: str | None = None,
) -> str:
    """A standalone, standard-library-only Python (>= 3.8) file that prints what ``probe`` would
    (``sections`` of the environment of ``python``; None: the interpreter that runs it), for
    engines that copy a file and run it. ``UsageError`` for an unknown section."""
    from archgap.transport.bootstrap import probe_input, standalone_script

    return standalone_script(probe_input(probe_request(sections, python), "/", env_from))


def k8s_manifest(
    mode: str = "probe",
    *,
    namespace: str = "archgap",
    image: str | None = None,
    python: str | None = None,
    node_selector: str | None = None,
    runtime_class: str | None = None,
    interval: int = 3600,
) -> list[dict[str, Any]]:
    """The Kubernetes objects that run archgap on every GPU node ``node_selector`` picks
    (default: GPU Feature Discovery's label). ``probe``: the standalone probe of ``python`` in
    ``image`` (default python:3.12-slim), once per node; ``nfd``: ``scan --nfd`` every
    ``interval`` seconds in ``image``, which must have archgap installed. ``UsageError`` for a
    name Kubernetes would refuse."""
    from archgap.report import k8s

    if mode not in ("probe", "nfd"):
        raise UsageError(f"mode {mode!r}: choose probe or nfd")
    if mode == "nfd" and image is None:
        raise UsageError(
            "--mode nfd needs --image: an image with archgap installed in the Python "
            "environment to judge (your serving image plus `pip install archgap`)"
        )
    if interval < 60:
        raise UsageError("--interval must be at least 60 seconds")
    image = image or k8s.PROBE_IMAGE
    selector = node_selector or k8s.GPU_NODE_SELECTOR
    placement = k8s.checked(namespace, image, selector, runtime_class)
    interpreter = python or DEFAULT_PYTHON
    if mode == "nfd":
        return k8s.nfd_manifest(namespace, image, interpreter, interval, placement)
    # The probe inspects the same interpreter that runs it in the container.
    script = probe_script(interpreter)
    return k8s.probe_manifest(namespace, image, interpreter, script, placement)
