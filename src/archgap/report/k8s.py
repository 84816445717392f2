"""Kubernetes manifests that run archgap on every GPU node, as YAML (``archgap k8s-manifest``).

As NVIDIA's GPU Feature Discovery does (k8s-device-plugin, deployments/helm/.../daemonset-gfd.yml:
``runtimeClassName`` and no ``nvidia.com/gpu`` in its resources), the pods request no GPU: they
run under the NVIDIA RuntimeClass with ``NVIDIA_VISIBLE_DEVICES=all``, so a node whose GPUs are
all allocated is still judged, and no GPU is held by archgap while its pod lives. The pods run in
the SERVING image (named, or taken with its container's ``env:`` from the user's Deployment or
DaemonSet: ``Judged``), so the environment judged is the one the jobs get.

``probe`` mode (namespace ``archgap-probe``, Pod Security "baseline"): a ConfigMap holding the
standalone probe (``archgap probe --script``, gzipped in ``binaryData`` so that each object stays
well under the 256 KiB ``last-applied-configuration`` annotation client-side ``kubectl apply``
writes) and a DaemonSet that runs it once per GPU node and prints ``NODE: {facts}``; collect the
lines with ``kubectl logs`` and judge them with ``archgap fleet --from``. ``nfd`` mode (namespace
``archgap-nfd``, "privileged": it writes host directories, as NFD's and node_exporter's own
namespaces are): a DaemonSet in an image with archgap installed that rewrites a Node Feature
Discovery feature file every interval with ``archgap scan --nfd``, and its metrics either into
node_exporter's textfile directory or, with ``metrics="servicemonitor"``, to a stdlib exporter
container behind a Service that a Prometheus Operator ServiceMonitor scrapes. Separate
namespaces, so applying one mode never relabels the other's. Pure: values in, text out.
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
GPU_RESOURCE = "nvidia.com/gpu"  # what the NVIDIA device plugin advertises (never requested)
RUNTIME_CLASS = "nvidia"  # the GPU Operator's RuntimeClass (and the Container Toolkit's docs')
NAMESPACES = {"probe": "archgap-probe", "nfd": "archgap-nfd"}  # one per Pod Security level
METRICS_PORT = 9713  # the exporter container's, --metrics servicemonitor
METRICS_DIR = "/var/run/archgap-metrics"  # an emptyDir the scan writes and the exporter serves
PROBE_FILE = "archgap-probe.py.gz"
# Unpacks and runs the probe in the container's own interpreter (stdlib only, nothing written).
_RUN_PROBE = f'import gzip; exec(gzip.open("/probe/{PROBE_FILE}").read())'


@dataclass(frozen=True)
class Placement:
    """Where the pods run and how they see the GPUs: ``runtime_class`` (the NVIDIA runtime) with
    ``NVIDIA_VISIBLE_DEVICES=all``, never a ``nvidia.com/gpu`` request (a request reserves a GPU
    while the pod lives, and a node whose GPUs are all taken would never be judged). The runtime
    honours the variable for unprivileged pods where it is configured to (the NVIDIA Container
    Toolkit's ``accept-nvidia-visible-devices-envvar-when-unprivileged``, true by default)."""

    node_selector: dict[str, str]
    runtime_class: str = RUNTIME_CLASS


@dataclass(frozen=True)
class Judged:
    """The image the probe (or scan) runs in and the ``env:`` it gets: what is judged.
    ``source``: where they came from (``--image``, or the workload and container);
    ``not_carried``: the workload's variables that could not come along, each with why."""

    image: str
    env: tuple[dict[str, Any], ...] = ()
    source: str = "--image"
    not_carried: tuple[str, ...] = ()

    def describe(self) -> str:
        names = ", ".join(str(e["name"]) for e in self.env) or "none"
        text = f"judging image {self.image} ({self.source}); env: {names}"
        if self.not_carried:
            text += "; not carried: " + ", ".join(self.not_carried)
        return text

    def as_json(self) -> dict[str, Any]:
        return {
            "image": self.image,
            "source": self.source,
            "env": [str(e["name"]) for e in self.env],
            "not_carried": list(self.not_carried),
        }


# Kubernetes object names: a DNS-1123 label (namespaces, RuntimeClasses); a label key (an
# optional DNS-subdomain prefix and '/', then a name) and a label value.
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
LABEL_KEY = re.compile(
    r"([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
)
LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")


def checked(namespace: str, image: str, node_selector: str, runtime_class: str) -> Placement:
    """The placement the names give, each checked as Kubernetes takes it (``UsageError`` names
    the first that is not): ``node_selector`` a label KEY=VALUE."""
    if not DNS_LABEL.fullmatch(namespace):
        raise UsageError(f"--namespace {namespace!r} is not a DNS-1123 label")
    if not image.strip() or any(c.isspace() for c in image):
        raise UsageError(f"--image {image!r} is not an image reference")
    if not DNS_LABEL.fullmatch(runtime_class):
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


# What archgap sets itself in the container; a workload's entry of the same name is left out.
OWN_ENV = ("NODE_NAME", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES")


def _container(judged: Judged, command: list[str], mounts: list[dict[str, Any]]) -> dict[str, Any]:
    env: list[dict[str, Any]] = [
        *judged.env,
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        # Every GPU of the node, through the runtime, without a device-plugin allocation.
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
        {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"},  # nvidia-smi, NVML
    ]
    return {
        "name": NAME,
        "image": judged.image,
        "command": command,
        "env": env,
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "1Gi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": mounts,
    }


def _pod_spec(
    containers: list[dict[str, Any]], volumes: list[dict[str, Any]], placement: Placement
) -> dict[str, Any]:
    return {
        "nodeSelector": dict(placement.node_selector),
        "runtimeClassName": placement.runtime_class,
        # Scheduled also where the GPU nodes are tainted for GPU work only.
        "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
        "containers": containers,
        "volumes": volumes,
    }


def _annotated(daemonset: dict[str, Any], judged: Judged) -> dict[str, Any]:
    """The DaemonSet, saying which image and environment it judges (``kubectl describe``)."""
    daemonset["metadata"]["annotations"] = {f"{NAME}.dev/judged": judged.describe()}
    return daemonset


def packed_probe(script: str) -> str:
    """The probe as the ConfigMap carries it: gzip, then base64 (``binaryData``)."""
    return base64.b64encode(gzip.compress(script.encode("utf-8"), 9, mtime=0)).decode("ascii")


def probe_manifest(
    namespace: str, judged: Judged, python: str, script: str, placement: Placement
) -> list[dict[str, Any]]:
    """Namespace, the probe ConfigMap and a DaemonSet printing ``$NODE_NAME: {facts}`` once."""
    command = (
        f'printf "%s: " "$NODE_NAME"; {shlex.quote(python)} -c {shlex.quote(_RUN_PROBE)}; '
        "exec sleep infinity"
    )
    mounts = [{"name": "probe", "mountPath": "/probe", "readOnly": True}]
    volumes = [{"name": "probe", "configMap": {"name": f"{NAME}-probe"}}]
    container = _container(judged, ["/bin/sh", "-c", command], mounts)
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
        _annotated(
            _daemonset(namespace, "probe", _pod_spec([container], volumes, placement)), judged
        ),
    ]


# The exporter container (--metrics servicemonitor): the scan's textfile over HTTP, in the
# Prometheus text format (its Content-Type, version 0.0.4), from the image's own Python.
_EXPORTER = f"""\
import http.server as h
class H(h.BaseHTTPRequestHandler):
    def do_GET(self):
        try:
            body, code = open("{METRICS_DIR}/archgap.prom", "rb").read(), 200
        except OSError:
            body, code = b"", 503
        if self.path.split("?")[0] != "/metrics":
            body, code = b"", 404
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
h.HTTPServer(("", {METRICS_PORT}), H).serve_forever()
"""


def nfd_manifest(
    namespace: str,
    judged: Judged,
    python: str,
    interval: int,
    placement: Placement,
    metrics: str = "textfile",
) -> list[dict[str, Any]]:
    """Namespace and a DaemonSet rewriting the node's NFD feature file and its metrics:
    ``metrics`` "textfile" into node_exporter's textfile directory on the node, "servicemonitor"
    to an exporter container, with a Service and a ServiceMonitor for the Prometheus Operator."""
    metrics_dir = TEXTFILE_DIR if metrics == "textfile" else METRICS_DIR
    scan = (
        f"archgap scan --python {shlex.quote(python)} --nfd {FEATURES_DIR}/archgap "
        f"--nfd-expiry {3 * interval} --prometheus {metrics_dir}/archgap.prom >/dev/null"
    )
    command = f"while true; do {scan}; sleep {interval}; done"
    mounts = [
        {"name": "features", "mountPath": FEATURES_DIR},
        {"name": "textfile", "mountPath": metrics_dir},
    ]
    volumes: list[dict[str, Any]] = [
        {"name": "features", "hostPath": {"path": FEATURES_DIR, "type": "DirectoryOrCreate"}},
    ]
    containers = [_container(judged, ["/bin/sh", "-c", command], mounts)]
    extra: list[dict[str, Any]] = []
    if metrics == "textfile":
        volumes.append(
            {"name": "textfile", "hostPath": {"path": TEXTFILE_DIR, "type": "DirectoryOrCreate"}}
        )
    else:
        volumes.append({"name": "textfile", "emptyDir": {}})
        containers.append(_exporter(judged.image, python))
        extra = _service_and_monitor(namespace)
    return [
        # hostPath volumes are what Pod Security "baseline" forbids; features.d is the
        # directory nfd-worker reads on the node (and the textfile one node_exporter's).
        _namespace(namespace, "privileged"),
        _annotated(_daemonset(namespace, "nfd", _pod_spec(containers, volumes, placement)), judged),
        *extra,
    ]


def _exporter(image: str, python: str) -> dict[str, Any]:
    return {
        "name": "metrics",
        "image": image,
        "command": [python, "-I", "-S", "-c", _EXPORTER],
        "ports": [{"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"}],
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [{"name": "textfile", "mountPath": METRICS_DIR, "readOnly": True}],
    }


def _service_and_monitor(namespace: str) -> list[dict[str, Any]]:
    """A headless Service over the exporters and the Prometheus Operator's ServiceMonitor
    (monitoring.coreos.com/v1: spec.selector, spec.endpoints[].port by name)."""
    labels = _labels("nfd")
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": f"{NAME}-metrics", "namespace": namespace, "labels": labels},
            "spec": {
                "clusterIP": "None",
                "selector": labels,
                "ports": [{"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics"}],
            },
        },
        {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "ServiceMonitor",
            "metadata": {"name": NAME, "namespace": namespace, "labels": labels},
            "spec": {
                "selector": {"matchLabels": labels},
                "endpoints": [{"port": "metrics", "interval": "60s", "path": "/metrics"}],
            },
        },
    ]
