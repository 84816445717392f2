"""Kubernetes manifests that run archgap on every GPU node, as YAML (``archgap k8s-manifest``).

``probe`` mode: a ConfigMap holding the standalone probe (``archgap probe --script``, gzipped in
``binaryData`` so that each object stays well under the 256 KiB ``last-applied-configuration``
annotation client-side ``kubectl apply`` writes) and a DaemonSet that runs it once per GPU node
in the image you name (the serving image: the one whose Python environment matters) and prints
``NODE: {facts}``; collect the lines with ``kubectl logs`` and judge them with ``archgap fleet
--from``. No hostPath: the namespace enforces Pod Security "baseline". ``nfd`` mode: a DaemonSet
in an image with archgap installed that rewrites a Node Feature Discovery feature file (and a
node_exporter textfile) every interval with ``archgap scan --nfd``; both are host directories,
so that namespace is labelled "privileged", as NFD's and node_exporter's own are. Pure: values
in, text out.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import shlex
from dataclasses import dataclass
from typing import Any

from archgap.errors import UsageError

NAME = "archgap"
FEATURES_DIR = "/etc/kubernetes/node-feature-discovery/features.d"
TEXTFILE_DIR = "/var/lib/node_exporter/textfile"
# GPU Feature Discovery / the GPU Operator label every GPU node with this.
GPU_NODE_SELECTOR = "nvidia.com/gpu.present=true"
PROBE_IMAGE = "python:3.12-slim"  # --mode probe needs only a Python (>= 3.8) in the image
GPU_RESOURCE = "nvidia.com/gpu"  # what the NVIDIA device plugin advertises
PROBE_FILE = "archgap-probe.py.gz"
# Unpacks and runs the probe in the container's own interpreter (stdlib only, nothing written).
_RUN_PROBE = f'import gzip; exec(gzip.open("/probe/{PROBE_FILE}").read())'


@dataclass(frozen=True)
class Placement:
    """Where the pods run and how they see the GPUs.

    ``runtime_class`` None: each pod requests one ``nvidia.com/gpu`` (the device plugin mounts
    it, and a GPU stays reserved while the pod lives); a name: that RuntimeClass (the NVIDIA
    runtime) with ``NVIDIA_VISIBLE_DEVICES=all``, which it honours for unprivileged pods only
    where it is configured to (the NVIDIA Container Toolkit's
    ``accept-nvidia-visible-devices-envvar-when-unprivileged``)."""

    node_selector: dict[str, str]
    runtime_class: str | None = None


# Kubernetes object names: a DNS-1123 label (namespaces, RuntimeClasses); a label key (an
# optional DNS-subdomain prefix and '/', then a name) and a label value.
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
LABEL_KEY = re.compile(
    r"([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
)
LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")


def checked(namespace: str, image: str, node_selector: str, runtime_class: str | None) -> Placement:
    """The placement the names give, each checked as Kubernetes takes it (``UsageError`` names
    the first that is not): ``node_selector`` a label KEY=VALUE."""
    if not DNS_LABEL.fullmatch(namespace):
        raise UsageError(f"--namespace {namespace!r} is not a DNS-1123 label")
    if not image.strip() or any(c.isspace() for c in image):
        raise UsageError(f"--image {image!r} is not an image reference")
    if runtime_class is not None and not DNS_LABEL.fullmatch(runtime_class):
        raise UsageError(f"--runtime-class {runtime_class!r} is not a DNS-1123 label")
    key, equals, value = node_selector.partition("=")
    if not equals or not LABEL_KEY.fullmatch(key) or not LABEL_VALUE.fullmatch(value):
        raise UsageError(f"--node-selector {node_selector!r} is not a label KEY=VALUE")
    return Placement({key: value}, runtime_class)


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


def _namespace(name: str, pod_security: str) -> dict[str, Any]:
    """The namespace, with the Pod Security level its pods are admitted at (PSA labels)."""
    labels = {f"pod-security.kubernetes.io/{mode}": pod_security for mode in ("enforce", "warn")}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


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


def _container(
    image: str, command: list[str], mounts: list[dict[str, Any]], placement: Placement
) -> dict[str, Any]:
    env: list[dict[str, Any]] = [
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
    ]
    limits: dict[str, Any] = {"memory": "1Gi"}
    if placement.runtime_class is None:
        limits[GPU_RESOURCE] = "1"  # the device plugin sets NVIDIA_VISIBLE_DEVICES itself
    else:
        env += [
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
            {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"},  # nvidia-smi, NVML
        ]
    return {
        "name": NAME,
        "image": image,
        "command": command,
        "env": env,
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": limits},
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": mounts,
    }


def _pod_spec(
    container: dict[str, Any], volumes: list[dict[str, Any]], placement: Placement
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeSelector": dict(placement.node_selector),
        "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [container],
        "volumes": volumes,
    }
    if placement.runtime_class is not None:
        spec["runtimeClassName"] = placement.runtime_class
    return spec


def packed_probe(script: str) -> str:
    """The probe as the ConfigMap carries it: gzip, then base64 (``binaryData``)."""
    return base64.b64encode(gzip.compress(script.encode("utf-8"), 9, mtime=0)).decode("ascii")


def probe_manifest(
    namespace: str, image: str, python: str, script: str, placement: Placement
) -> list[dict[str, Any]]:
    """Namespace, the probe ConfigMap and a DaemonSet printing ``$NODE_NAME: {facts}`` once."""
    command = (
        f'printf "%s: " "$NODE_NAME"; {shlex.quote(python)} -c {shlex.quote(_RUN_PROBE)}; '
        "exec sleep infinity"
    )
    mounts = [{"name": "probe", "mountPath": "/probe", "readOnly": True}]
    volumes = [{"name": "probe", "configMap": {"name": f"{NAME}-probe"}}]
    container = _container(image, ["/bin/sh", "-c", command], mounts, placement)
    return [
        _namespace(namespace, "baseline"),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": f"{NAME}-probe",
                "namespace": namespace,
                "labels": _labels("probe"),
            },
            "binaryData": {PROBE_FILE: packed_probe(script)},
        },
        _daemonset(namespace, "probe", _pod_spec(container, volumes, placement)),
    ]


def nfd_manifest(
    namespace: str, image: str, python: str, interval: int, placement: Placement
) -> list[dict[str, Any]]:
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
    container = _container(image, ["/bin/sh", "-c", command], mounts, placement)
    return [
        # hostPath volumes are what Pod Security "baseline" forbids; these two are the
        # directories nfd-worker and node_exporter read on the node.
        _namespace(namespace, "privileged"),
        _daemonset(namespace, "nfd", _pod_spec(container, volumes, placement)),
    ]
