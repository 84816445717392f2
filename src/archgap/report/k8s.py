"""Kubernetes manifests that run archgap on every GPU node, as YAML (``archgap k8s-manifest``).

``probe`` mode: a ConfigMap holding the standalone probe (``archgap probe --script``) and a
DaemonSet that runs it once per GPU node in the image you name (the serving image: the one whose
Python environment matters) and prints ``NODE: {facts}``; collect the lines with ``kubectl logs``
and judge them with ``archgap fleet --from``. ``nfd`` mode: a DaemonSet in an image with archgap
installed that rewrites a Node Feature Discovery feature file (and a node_exporter textfile) every
interval with ``archgap scan --nfd``. Pure: values in, text out.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

NAME = "archgap"
FEATURES_DIR = "/etc/kubernetes/node-feature-discovery/features.d"
TEXTFILE_DIR = "/var/lib/node_exporter/textfile"
# GPU Feature Discovery / the GPU Operator label every GPU node with this.
GPU_NODE_SELECTOR = {"nvidia.com/gpu.present": "true"}


_PLAIN = re.compile(r"[A-Za-z_/][-A-Za-z0-9_./]*")
_RESERVED = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}


def _scalar(value: Any) -> str:
    """A YAML scalar: plain when that cannot be misread, else a JSON string (valid YAML)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    text = str(value)
    if _PLAIN.fullmatch(text) and text.lower() not in _RESERVED:
        return text
    return json.dumps(text)


def _lines(value: Any, indent: int) -> list[str]:
    """Block-style YAML for dicts and lists of dicts, lists and scalars."""
    pad = " " * indent
    out: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            out += _entry(f"{pad}{_scalar(key)}:", item, indent)
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict) and item:  # "- first: 1" then the other keys below it
                inner = _lines(item, indent + 2)
                out += [f"{pad}- {inner[0].lstrip()}", *inner[1:]]
            else:
                out += _entry(f"{pad}-", item, indent)
    return out


def _entry(head: str, item: Any, indent: int) -> list[str]:
    if isinstance(item, str) and "\n" in item:
        body = [f"{' ' * (indent + 2)}{line}" if line else "" for line in item.split("\n")]
        while body and not body[-1]:
            body.pop()
        return [f"{head} |", *body]
    if isinstance(item, (dict, list)) and item:
        return [head, *_lines(item, indent + 2)]
    if isinstance(item, (dict, list)):
        return [f"{head} {'{}' if isinstance(item, dict) else '[]'}"]
    return [f"{head} {_scalar(item)}"]


def to_yaml(documents: list[dict[str, Any]]) -> str:
    return "".join("---\n" + "\n".join(_lines(doc, 0)) + "\n" for doc in documents)


def _labels(component: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": f"{NAME}-{component}", "app.kubernetes.io/part-of": NAME}


def _daemonset(namespace: str, component: str, pod_spec: dict[str, Any]) -> dict[str, Any]:
    labels = _labels(component)
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": f"{NAME}-{component}", "namespace": namespace, "labels": labels},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        },
    }


def _container(image: str, command: str, mounts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "name": NAME,
        "image": image,
        "command": ["/bin/sh", "-c", command],
        "env": [
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            # The NVIDIA container runtime mounts every GPU's nvidia-smi and NVML without
            # claiming a GPU from the scheduler (the probe only reads).
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
            {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"},
        ],
        "resources": {
            "requests": {"cpu": "50m", "memory": "64Mi"},
            "limits": {"memory": "1Gi"},
        },
        "securityContext": {"allowPrivilegeEscalation": False},
        "volumeMounts": mounts,
    }


def _pod_spec(container: dict[str, Any], volumes: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "nodeSelector": dict(GPU_NODE_SELECTOR),
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [container],
        "volumes": volumes,
    }


def probe_manifest(namespace: str, image: str, python: str, script: str) -> list[dict[str, Any]]:
    """Namespace, the probe ConfigMap and a DaemonSet printing ``$NODE_NAME: {facts}`` once."""
    command = (
        f'printf "%s: " "$NODE_NAME"; {shlex.quote(python)} /probe/archgap-probe.py; '
        "exec sleep infinity"
    )
    mounts = [{"name": "probe", "mountPath": "/probe", "readOnly": True}]
    volumes = [{"name": "probe", "configMap": {"name": f"{NAME}-probe"}}]
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": f"{NAME}-probe",
                "namespace": namespace,
                "labels": _labels("probe"),
            },
            "data": {"archgap-probe.py": script},
        },
        _daemonset(namespace, "probe", _pod_spec(_container(image, command, mounts), volumes)),
    ]


def nfd_manifest(namespace: str, image: str, python: str, interval: int) -> list[dict[str, Any]]:
    """Namespace and a DaemonSet rewriting the node's NFD feature file and textfile metrics."""
    scan = (
        f"archgap scan --python {shlex.quote(python)} --nfd {FEATURES_DIR}/archgap "
        f"--nfd-expiry {3 * interval} --prometheus {TEXTFILE_DIR}/archgap.prom >/dev/null"
    )
    command = f"while true; do {scan}; sleep {interval}; done"
    mounts = [
        {"name": "features", "mountPath": FEATURES_DIR},
        {"name": "textfile", "mountPath": TEXTFILE_DIR},
    ]
    volumes = [
        {"name": "features", "hostPath": {"path": FEATURES_DIR, "type": "DirectoryOrCreate"}},
        {"name": "textfile", "hostPath": {"path": TEXTFILE_DIR, "type": "DirectoryOrCreate"}},
    ]
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        _daemonset(namespace, "nfd", _pod_spec(_container(image, command, mounts), volumes)),
    ]
