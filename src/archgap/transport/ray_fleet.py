"""The probe once on every alive node of a Ray cluster (``archgap fleet --ray [ADDRESS]``).

One task per node, pinned to it (``NodeAffinitySchedulingStrategy``, not soft) and claiming no
CPU, so a busy cluster still answers. The task (``ray_task``, shipped by value: the workers need
nothing of archgap) runs the same stdin bootstrap as ssh or srun, by default with the worker's
own interpreter. Needs ``pip install 'archgap[ray]'`` on the machine that runs the fleet, with the
cluster's Python minor version (a Ray rule).

A job does not run in the raylet's environment but in its ``runtime_env``: its ``env_vars`` are
set in its workers, and its ``pip``/``uv``/``conda`` environment or ``py_executable`` is the
interpreter they run. ``fleet --ray --runtime-env JSON`` gives the probe task that same
``runtime_env`` (Ray builds it on each node as for the job), so the worker interpreter and the
variables judged are the job's; each document's ``env_source`` names the runtime_env.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from archgap.probe.facts import ProbeResponse
from archgap.transport.bootstrap import probe_input, remote_argv, stdin_payload
from archgap.transport.run import (
    PROBE_FAILED,
    TIMEOUT,
    TRANSPORT_MISSING,
    UNREACHABLE,
    TransportFailure,
    classify_probe,
    fill_python,
)
from archgap.transport.target import Target


@dataclass(frozen=True)
class RayResult:
    """Per alive node, the facts or why not; or why the cluster could not be reached."""

    nodes: tuple[tuple[str, ProbeResponse | TransportFailure], ...]
    error: TransportFailure | None = None


def _names(nodes: list[dict[str, Any]]) -> list[str]:
    """Each node's hostname, with its address and port where two nodes share a hostname."""
    hosts = [str(n.get("NodeManagerHostname") or n.get("NodeManagerAddress")) for n in nodes]
    return [
        h
        if hosts.count(h) == 1
        else f"{h}@{n.get('NodeManagerAddress')}:{n.get('NodeManagerPort')}"
        for h, n in zip(hosts, nodes, strict=True)
    ]


def _reachable(address: str, timeout: float = 5.0) -> str | None:
    """Why a ``HOST:PORT`` GCS address does not answer, or None (ray.init itself retries for
    minutes before it gives up on a closed port)."""
    import socket

    host, _, port = address.rpartition(":")
    if "://" in address or not port.isdigit() or not host:
        return None  # a ray:// client address or a name ray resolves itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        return f"{exc.strerror or exc}"
    return None


def _connect(address: str | None) -> Any:
    """The ``ray`` module, connected; a ``TransportFailure`` when it cannot be."""
    try:
        import logging

        import ray
    except ImportError:
        return TransportFailure(
            TRANSPORT_MISSING, "ray is not installed here: pip install 'archgap[ray]'"
        )
    problem = _reachable(address) if address else None
    if problem:
        return TransportFailure(UNREACHABLE, f"ray cluster {address}: {problem}")
    try:
        ray.init(
            address=address or "auto",
            logging_level=logging.ERROR,
            log_to_driver=False,
            configure_logging=False,
        )
    except Exception as exc:  # ray raises ConnectionError, RuntimeError, ValueError ...
        return TransportFailure(UNREACHABLE, f"ray cluster {address or 'auto'}: {exc}")
    return ray


def runtime_env_source(runtime_env: dict[str, Any]) -> str:
    """How a document names the environment judged: the runtime_env's fields (values of
    env_vars left out: only the allowlisted ones are reported, in the facts' env)."""
    parts = []
    for key, value in sorted(runtime_env.items()):
        if key == "env_vars" and isinstance(value, dict):
            parts.append(f"env_vars: {', '.join(sorted(map(str, value)))}")
        elif isinstance(value, str):
            parts.append(f"{key}: {value}")
        else:
            parts.append(key)
    return f"ray runtime_env ({'; '.join(parts)})"


def run_probe_ray(
    address: str | None,
    request: dict[str, Any],
    python: str | None,
    timeout: float,
    runtime_env: dict[str, Any] | None = None,
) -> RayResult:
    """Probe every alive node once, in the job's ``runtime_env`` where given; ``python`` None:
    each worker's own interpreter (the runtime_env's, if it names one)."""
    ray = _connect(address)
    if isinstance(ray, TransportFailure):
        return RayResult((), ray)
    try:
        return _probe_nodes(ray, request, python, timeout, runtime_env)
    finally:
        ray.shutdown()


def _probe_nodes(
    ray: Any,
    request: dict[str, Any],
    python: str | None,
    timeout: float,
    runtime_env: dict[str, Any] | None,
) -> RayResult:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from archgap.transport import ray_task

    ray.cloudpickle.register_pickle_by_value(ray_task)
    task = ray.remote(num_cpus=0, max_retries=0)(ray_task.probe_on_node)
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    payload = stdin_payload(probe_input(fill_python(request, python or ray_task.WORKER_PYTHON)))
    loader_args = remote_argv("python")[1:]
    extra = {"runtime_env": runtime_env} if runtime_env else {}
    refs = [
        task.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False), **extra
        ).remote(python, loader_args, payload, timeout)
        for n in nodes
    ]
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout + 10)
    done = set(ready)
    results: list[tuple[str, ProbeResponse | TransportFailure]] = []
    for name, ref in zip(_names(nodes), refs, strict=True):
        if ref not in done:
            ray.cancel(ref, force=True)
            results.append((name, TransportFailure(TIMEOUT, f"{name}: no answer from Ray")))
            continue
        try:
            code, out, err, _host, executable = ray.get(ref)
        except Exception as exc:  # the task or its node failed
            results.append((name, TransportFailure(PROBE_FAILED, f"{name}: {exc}")))
            continue
        target = Target("via", name, ("ray",), executable)
        if code is None:
            results.append((name, TransportFailure(TIMEOUT, f"{name}: {err}")))
            continue
        answer = classify_probe(target, code, out, err)
        if runtime_env and isinstance(answer, ProbeResponse):
            answer = replace(answer, env_source=runtime_env_source(runtime_env))
        results.append((name, answer))
    return RayResult(tuple(results))
