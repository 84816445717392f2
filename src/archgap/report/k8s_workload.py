"""The serving image and ``env:`` of a user's Deployment, DaemonSet or StatefulSet manifest
(``archgap k8s-manifest --from-workload FILE``): what the probe pods then run in, so that the
environment judged is the one the serving pods get. Pure: parsed objects in, ``Judged`` out.

What comes along (Kubernetes API, core/v1 EnvVar): an entry with a ``value``, or with
``valueFrom.fieldRef`` (the pod's own fields, the same in any pod). What cannot: ``configMapKeyRef``
and ``secretKeyRef`` (they name objects of the workload's namespace, not archgap's; copied, the
pod would not start), ``resourceFieldRef`` (the limits of a container archgap's pod has not),
``envFrom`` (whole ConfigMaps or Secrets, likewise), and the variables archgap sets itself. Each
is named in ``Judged.not_carried``, so the report says what was not judged.
"""

from __future__ import annotations

from typing import Any

from archgap.errors import UsageError
from archgap.report.k8s import OWN_ENV, Judged

WORKLOADS = ("Deployment", "DaemonSet", "StatefulSet")


def _workload(docs: list[Any], where: str) -> dict[str, Any]:
    objects: list[Any] = []
    for doc in docs:  # a List (kubectl get -o json/yaml of several) holds its objects in items
        if isinstance(doc, dict) and doc.get("kind") == "List":
            objects += doc.get("items") or []
        else:
            objects.append(doc)
    found = [o for o in objects if isinstance(o, dict) and o.get("kind") in WORKLOADS]
    if not found:
        raise UsageError(f"--from-workload {where}: no {', '.join(WORKLOADS)} in it")
    if len(found) > 1:
        names = ", ".join(f"{o['kind']}/{(o.get('metadata') or {}).get('name')}" for o in found)
        raise UsageError(f"--from-workload {where}: several workloads ({names}); give one")
    return found[0]


def _container(workload: dict[str, Any], name: str | None, where: str) -> dict[str, Any]:
    spec = ((workload.get("spec") or {}).get("template") or {}).get("spec") or {}
    containers = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    names = [str(c.get("name")) for c in containers]
    if name is not None:
        chosen = [c for c in containers if c.get("name") == name]
        if not chosen:
            raise UsageError(f"--container {name!r}: not in {where} (it has {', '.join(names)})")
        return chosen[0]
    if len(containers) != 1:
        raise UsageError(
            f"--from-workload {where}: {len(containers)} containers"
            + (f" ({', '.join(names)}): name one with --container" if containers else "")
        )
    return containers[0]


def _carried(entry: Any) -> tuple[dict[str, Any] | None, str]:
    """The entry as the probe pod can have it, or None and why not."""
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        return None, "an entry without a name"
    name = entry["name"]
    if name in OWN_ENV:
        return None, f"{name} (archgap sets it)"
    source = entry.get("valueFrom")
    if source is None:
        return {"name": name, "value": str(entry.get("value", ""))}, ""
    if isinstance(source, dict) and set(source) == {"fieldRef"}:
        return {"name": name, "valueFrom": source}, ""
    kinds = "/".join(sorted(source)) if isinstance(source, dict) else "valueFrom"
    return None, f"{name} ({kinds})"


def _env(container: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """The container's ``env:`` entries that come along, and what does not (with why)."""
    env: list[dict[str, Any]] = []
    not_carried: list[str] = []
    for entry in container.get("env") or []:
        kept, why = _carried(entry)
        if kept is None:
            not_carried.append(why)
        else:
            env.append(kept)
    for source in container.get("envFrom") or []:
        refs = [
            k for k in ("configMapRef", "secretRef") if isinstance(source, dict) and k in source
        ]
        ref = (source.get(refs[0]) or {}).get("name") if refs else None
        not_carried.append(f"envFrom {refs[0] if refs else '?'} {ref}")
    return env, not_carried


def judged_from_workload(docs: list[Any], container: str | None, where: str) -> Judged:
    """The image and ``env:`` of the one workload in ``docs`` (its ``container``, or its only
    one); ``UsageError`` naming what is missing or ambiguous."""
    workload = _workload(docs, where)
    chosen = _container(workload, container, where)
    image = chosen.get("image")
    if not isinstance(image, str) or not image.strip():
        raise UsageError(f"--from-workload {where}: container {chosen.get('name')!r} has no image")
    env, not_carried = _env(chosen)
    meta = workload.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    described = (
        f"{str(workload['kind']).lower()}/{namespace}/{meta.get('name')} "
        f"container {chosen.get('name')}"
    )
    return Judged(image.strip(), tuple(env), described, tuple(not_carried))
