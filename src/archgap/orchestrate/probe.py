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
    from archgap.report import k8s as k8s_types
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
    namespace: str | None = None,
    image: str | None = None,
    from_workload: str | None = None,
    container: str | None = None,
    python: str | None = None,
    node_selector: str | None = None,
    runtime_class: str | None = None,
    interval: int = 3600,
    metrics: str = "textfile",
) -> list[dict[str, Any]]:
    """The Kubernetes objects that run archgap on every GPU node ``node_selector`` picks
    (default: GPU Feature Discovery's label), in the serving ``image`` or the image and ``env:``
    of ``from_workload`` (a Deployment/DaemonSet/StatefulSet manifest, YAML or JSON; its
    ``container``). ``probe``: the standalone probe of ``python``, once per node; ``nfd``:
    ``scan --nfd`` every ``interval`` seconds (the image must have archgap installed), metrics
    to node_exporter's textfile directory or, ``metrics="servicemonitor"``, to an exporter with a
    ServiceMonitor. ``namespace`` None: ``archgap-probe`` or ``archgap-nfd``. The DaemonSet's
    ``archgap.dev/judged`` annotation says what is judged (``k8s_judged``). ``UsageError`` for a
    name Kubernetes would refuse, a workload that cannot be read, or no image."""
    from archgap.report import k8s

    if mode not in ("probe", "nfd"):
        raise UsageError(f"mode {mode!r}: choose probe or nfd")
    if metrics not in ("textfile", "servicemonitor"):
        raise UsageError(f"--metrics {metrics!r}: choose textfile or servicemonitor")
    if interval < 60:
        raise UsageError("--interval must be at least 60 seconds")
    judged = k8s_judged(image, from_workload, container, mode)
    selector = node_selector or k8s.GPU_NODE_SELECTOR
    namespace = namespace or k8s.NAMESPACES[mode]
    placement = k8s.checked(namespace, judged.image, selector, runtime_class or k8s.RUNTIME_CLASS)
    interpreter = python or DEFAULT_PYTHON
    if mode == "nfd":
        return k8s.nfd_manifest(namespace, judged, interpreter, interval, placement, metrics)
    # The probe inspects the same interpreter that runs it in the container.
    script = probe_script(interpreter)
    return k8s.probe_manifest(namespace, judged, interpreter, script, placement)


def k8s_judged(
    image: str | None, from_workload: str | None, container: str | None, mode: str = "probe"
) -> k8s_types.Judged:
    """The image and ``env:`` the pods run in: ``image`` as named, or those of the workload in
    the file ``from_workload`` (YAML needs PyYAML; ``kubectl get -o json`` output never does);
    both: the workload's ``env:`` in ``image``."""
    from archgap.report.k8s import Judged
    from archgap.report.k8s_workload import judged_from_workload

    if container is not None and from_workload is None:
        raise UsageError("--container goes with --from-workload")
    if from_workload is not None:
        judged = judged_from_workload(_documents(from_workload), container, from_workload)
        if image is None:
            return judged
        # The workload's env: in another image (nfd: the serving image with archgap beside it).
        return Judged(image, judged.env, f"{judged.source}, image --image", judged.not_carried)
    if image is None:
        why = (
            "your serving image with archgap beside it (deploy/kubernetes/Containerfile builds one)"
            if mode == "nfd"
            else "the serving image, whose Python environment is judged"
        )
        raise UsageError(f"--mode {mode} needs --image or --from-workload: {why}")
    return Judged(image)


def _documents(path: str) -> list[Any]:
    """The objects in a JSON or YAML file; ``UsageError`` with the reason when it has none."""
    import json

    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(
            f"--from-workload {path}: {getattr(exc, 'strerror', None) or exc}"
        ) from None
    try:
        return [json.loads(text)]
    except ValueError:
        pass
    try:
        import yaml  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        raise UsageError(
            f"--from-workload {path}: not JSON, and reading YAML needs PyYAML (pip install "
            "pyyaml), or give `kubectl get ... -o json` output"
        ) from None
    try:
        return [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise UsageError(f"--from-workload {path}: not YAML: {str(exc).splitlines()[0]}") from None
