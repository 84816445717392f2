"""Kubernetes without a cluster: `archgap k8s-manifest` validated against the Kubernetes OpenAPI
schemas that kubernetes-validate ships (strict: unknown fields are errors), each object measured
as client-side `kubectl apply` stores it, its pods checked against the Pod Security "baseline"
rules, the probe it carries run as the DaemonSet runs it and read back by `fleet --from`, and
`scan --nfd` feature files checked against the Kubernetes label syntax.

`kubectl apply` (client-side) keeps the object it applied, as JSON, in the metadata annotation
kubectl.kubernetes.io/last-applied-configuration; the API server refuses an object whose
annotations (keys and values) total more than 256 KiB (apimachinery's
TotalAnnotationSizeLimitB), and etcd one over about 1.5 MiB (a ConfigMap holds at most 1 MiB).
The annotation is kubectl's own: `kubectl create --dry-run=client --save-config` writes the same
one apply does, and needs of a server only its discovery documents (which resources exist), which
a stand-in on loopback serves.

Label syntax (kubernetes.io/docs/concepts/overview/working-with-objects/labels): a name of at most
63 characters, beginning and ending with an alphanumeric, with dashes, underscores and dots
between; a value of the same form or empty. nfd-worker prefixes names without a namespace with
feature.node.kubernetes.io/.
"""

from __future__ import annotations

import base64
import copy
import datetime
import gzip
import json
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from tests.helpers import CUDA_BIN, install_fake_distribution, json_output, make_venv, run_cli

LABEL = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
K8S = kubernetes_validate.latest_version()


SERVING = "registry.local/serving:1.2"
# Kinds of the Prometheus Operator's CRDs: not in the Kubernetes OpenAPI schemas (checked apart).
OPERATOR_GROUP = "monitoring.coreos.com/"


def manifest(*args: str) -> list[dict[str, Any]]:
    result = run_cli("k8s-manifest", *args)
    assert result.returncode == 0, result.stderr
    docs = [d for d in yaml.safe_load_all(result.stdout) if d is not None]
    for doc in docs:
        if not doc["apiVersion"].startswith(OPERATOR_GROUP):
            kubernetes_validate.validate(doc, K8S, strict=True)
    return docs


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
ANNOTATIONS_LIMIT = 256 * 1024
CONFIGMAP_LIMIT = 1024 * 1024
# What the API server's discovery says of the kinds the manifests use (all kubectl reads here).
DISCOVERY = {
    "/api": {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []},
    "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": [{"name": "apps",
              "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
              "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"}}]},
    "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
        {"name": "namespaces", "singularName": "namespace", "namespaced": False,
         "kind": "Namespace", "verbs": ["create", "get"]},
        {"name": "configmaps", "singularName": "configmap", "namespaced": True,
         "kind": "ConfigMap", "verbs": ["create", "get"]}]},
    "/apis/apps/v1": {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "apps/v1",
                      "resources": [{"name": "daemonsets", "singularName": "daemonset",
                                     "namespaced": True, "kind": "DaemonSet",
                                     "verbs": ["create", "get"]}]},
}  # fmt: skip


class _Discovery(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = DISCOVERY.get(self.path.split("?")[0])
        data = json.dumps(body).encode()
        self.send_response(200 if body else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data) if body else 0))
        self.end_headers()
        if body:
            self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def discovery() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Discovery)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def as_applied(objects: list[dict[str, Any]], server: str, home: Path) -> list[dict[str, Any]]:
    """The objects as client-side `kubectl apply` would send them: with its annotation."""
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is not installed (Debian's kubernetes-client; scripts/services)"
    ran = subprocess.run(
        [kubectl, "create", "--dry-run=client", "--save-config", "--validate=false", "-o", "json",
         "-f", "-", "--server", server],
        input="".join(f"---\n{json.dumps(o)}\n" for o in objects), capture_output=True,
        text=True, timeout=60, env={"PATH": "/usr/bin:/bin", "HOME": str(home)}, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    decoder, text = json.JSONDecoder(), ran.stdout
    out: list[dict[str, Any]] = []
    while text.strip():
        obj, end = decoder.raw_decode(text.lstrip())
        text = text.lstrip()[end:]
        out += obj.get("items", [obj]) if obj.get("kind") == "List" else [obj]
    return out


def sizes(obj: dict[str, Any]) -> tuple[int, int]:
    """(its annotations' size as the API server counts it, the whole object's, as JSON)."""
    annotations = obj["metadata"]["annotations"]
    assert LAST_APPLIED in annotations
    total = sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())
    return total, len(json.dumps(obj, separators=(",", ":")).encode())


def test_probe_manifest_is_valid_and_its_daemonset_output_feeds_fleet(tmp_path: Path) -> None:
    docs = manifest("--namespace", "gpu-audit", "--image", "registry.local/serving:1.2")
    assert [d["kind"] for d in docs] == ["Namespace", "ConfigMap", "DaemonSet"]
    config_map, daemonset = docs[1], docs[2]
    (packed,) = config_map["binaryData"].values()
    script = gzip.decompress(base64.b64decode(packed)).decode()
    # The same probe as `archgap probe --script`, byte for byte, inspecting the container's python3.
    assert script == run_cli("probe", "--script", "--python", "python3").stdout
    pod = daemonset["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    (container,) = pod["containers"]
    assert container["image"] == "registry.local/serving:1.2"
    # What the container does, with the ConfigMap mounted elsewhere and without the final sleep.
    (mount,) = container["volumeMounts"]
    for name, data in config_map["binaryData"].items():
        (tmp_path / name).write_bytes(base64.b64decode(data))  # as the kubelet projects it
    command = container["command"][2].replace(mount["mountPath"] + "/", f"{tmp_path}/")
    command = command.replace("python3", sys.executable).replace("; exec sleep infinity", "")
    ran = subprocess.run(
        ["/bin/sh", "-c", command], capture_output=True, text=True, timeout=120,
        env={"NODE_NAME": "gpu-node-17", "PATH": "/usr/bin:/bin"}, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("gpu-node-17: {")
    inbox = tmp_path / "logs"
    inbox.mkdir()
    (inbox / "kubectl-logs.txt").write_text(ran.stdout)
    # The logs file named itself, as the docs do (a directory is read for *.json/*.jsonl only).
    result = run_cli("fleet", "--json", "--from", str(inbox / "kubectl-logs.txt"))
    doc = json_output(result, "fleet")
    assert [h["name"] for h in doc["hosts"]] == ["gpu-node-17"] and doc["documents"] == 1


def test_every_object_fits_what_client_side_apply_stores(discovery: str, tmp_path: Path) -> None:
    docs = manifest("--image", SERVING)
    objects = [*docs, *manifest("--mode", "nfd", "--image", "registry.local/archgap:0.1")]
    applied = as_applied(objects, discovery, tmp_path)
    assert [o["kind"] for o in applied] == [o["kind"] for o in objects]
    for obj in applied:
        annotations, whole = sizes(obj)
        # Well under the limit: room for the probe to grow and for the user's own annotations.
        assert annotations < ANNOTATIONS_LIMIT * 3 // 4, (obj["kind"], annotations)
        assert whole < CONFIGMAP_LIMIT, (obj["kind"], whole)
    # The measure catches the plain script in `data`, which client-side apply is refused.
    config_map = copy.deepcopy(docs[1])
    (packed,) = config_map.pop("binaryData").values()
    config_map["data"] = {"archgap-probe.py": gzip.decompress(base64.b64decode(packed)).decode()}
    (plain,) = as_applied([config_map], discovery, tmp_path)
    assert sizes(plain)[0] > ANNOTATIONS_LIMIT


# Pod Security Standards, "baseline" (kubernetes.io/docs/concepts/security/pod-security-standards):
# no host namespaces, privileged containers, hostPath volumes or host ports, and no capability
# added beyond this set.
BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL",
                         "MKNOD", "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID",
                         "SYS_CHROOT"}  # fmt: skip


def baseline_violations(pod: dict[str, Any]) -> list[str]:
    found = [f"spec.{k}" for k in ("hostNetwork", "hostPID", "hostIPC") if pod.get(k)]
    found += [f"volume {v['name']}: hostPath" for v in pod.get("volumes", []) if "hostPath" in v]
    for c in pod.get("containers", []) + pod.get("initContainers", []):
        security = c.get("securityContext") or {}
        if security.get("privileged") or (security.get("windowsOptions") or {}).get("hostProcess"):
            found.append(f"{c['name']}: privileged")
        added = set((security.get("capabilities") or {}).get("add") or []) - BASELINE_CAPABILITIES
        found += [f"{c['name']}: capability {cap}" for cap in sorted(added)]
        found += [f"{c['name']}: hostPort" for p in c.get("ports", []) if p.get("hostPort")]
        if security.get("procMount", "Default") != "Default":
            found.append(f"{c['name']}: procMount")
    return found


def test_probe_pods_pass_pod_security_baseline_and_nfd_says_why_it_cannot() -> None:
    probe = manifest("--image", SERVING)
    namespace, pod = probe[0], probe[-1]["spec"]["template"]["spec"]
    assert baseline_violations(pod) == []
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    # The checker is not blind: what the nfd DaemonSet needs (the two host directories nfd-worker
    # and node_exporter read) is what baseline forbids, and its namespace says so.
    nfd = manifest("--mode", "nfd", "--image", "registry.local/archgap:0.1")
    assert baseline_violations(nfd[-1]["spec"]["template"]["spec"]) == [
        "volume features: hostPath", "volume textfile: hostPath"]  # fmt: skip
    assert nfd[0]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    broken = copy.deepcopy(pod)
    broken["hostPID"] = True
    broken["containers"][0]["securityContext"] = {"capabilities": {"add": ["SYS_ADMIN", "CHOWN"]}}
    assert baseline_violations(broken) == ["spec.hostPID", "archgap: capability SYS_ADMIN"]


def test_no_pod_requests_a_gpu_and_every_pod_sees_them_through_the_runtime_class() -> None:
    """A pod that requests nvidia.com/gpu holds that GPU while it lives (the probe pod sleeps,
    the nfd pod loops), and on a node whose GPUs are all allocated it is never scheduled, so
    the node is never judged. GPU Feature Discovery requests none: it runs under the NVIDIA
    RuntimeClass (k8s-device-plugin's deployments/helm/nvidia-device-plugin/templates/
    daemonset-gfd.yml: runtimeClassName, no nvidia.com/gpu in resources), and the NVIDIA
    runtime exposes the GPUs NVIDIA_VISIBLE_DEVICES names (all) to such a pod."""
    for args in ((), ("--mode", "nfd"), ("--mode", "nfd", "--metrics", "servicemonitor")):
        docs = manifest(*args, "--image", SERVING)
        text = json.dumps(docs)
        assert 'nvidia.com/gpu"' not in text.replace('"key": "nvidia.com/gpu"', ""), args
        (daemonset,) = [d for d in docs if d["kind"] == "DaemonSet"]
        spec = daemonset["spec"]["template"]["spec"]
        assert spec["runtimeClassName"] == "nvidia", args
        container = spec["containers"][0]
        assert "nvidia.com/gpu" not in container["resources"].get("limits", {}), args
        assert "nvidia.com/gpu" not in container["resources"].get("requests", {}), args
        assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"} in container["env"], args
        # Still placed on GPU nodes only, and tolerating their GPU taint.
        assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec[
            "tolerations"
        ]
    pod = manifest("--image", SERVING, "--runtime-class", "nvidia-cdi", "--node-selector",
                   "example.com/pool=a100")[-1]  # fmt: skip
    spec = pod["spec"]["template"]["spec"]
    assert spec["runtimeClassName"] == "nvidia-cdi"
    assert spec["nodeSelector"] == {"example.com/pool": "a100"}


def test_each_mode_has_its_own_namespace_at_its_own_pod_security_level() -> None:
    """Applying one mode after the other must not relabel the first one's namespace: probe pods
    meet "baseline", the nfd pods write host directories and need "privileged"."""
    probe, nfd = manifest("--image", SERVING), manifest("--mode", "nfd", "--image", SERVING)
    namespaces = {
        docs[0]["metadata"]["name"]: docs[0]["metadata"]["labels"][
            "pod-security.kubernetes.io/enforce"
        ]
        for docs in (probe, nfd)
    }
    assert namespaces == {"archgap-probe": "baseline", "archgap-nfd": "privileged"}
    for docs in (probe, nfd):
        name = docs[0]["metadata"]["name"]
        assert all(d["metadata"]["namespace"] == name for d in docs[1:])


def test_bad_placement_and_no_serving_image_are_usage_errors() -> None:
    image = ("--image", SERVING)
    for args, says in ((("--node-selector", "no-equals-sign", *image), "KEY=VALUE"),
                       (("--node-selector", "a=b c", *image), "KEY=VALUE"),
                       (("--runtime-class", "Not_A_Label", *image), "DNS-1123"),
                       (("--mode", "nfd"), "needs --image"),
                       ((), "needs --image"),  # no default image: an empty one judges nothing
                       (("--container", "app", *image), "--container goes with --from-workload"),
                       (("--from-workload", "/nonexistent/d.yaml"), "No such file")):  # fmt: skip
        result = run_cli("k8s-manifest", *args)
        assert result.returncode == 2 and says in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr


def test_nfd_manifest_is_valid_and_the_validator_catches_a_broken_one() -> None:
    docs = manifest("--mode", "nfd", "--image", "registry.local/archgap:0.1", "--python",
                    "/srv/venv/bin/python")  # fmt: skip
    daemonset = docs[-1]
    pod = daemonset["spec"]["template"]["spec"]
    volumes = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"]}
    assert volumes["features"] == "/etc/kubernetes/node-feature-discovery/features.d"
    command = daemonset["spec"]["template"]["spec"]["containers"][0]["command"][2]
    assert "archgap scan --python /srv/venv/bin/python --nfd " in command
    broken = copy.deepcopy(daemonset)
    del broken["spec"]["selector"]  # apps/v1 requires it
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S, strict=True)
    typo = copy.deepcopy(daemonset)
    typo["spec"]["template"]["spec"]["nodeSelectr"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(typo, K8S, strict=True)


def test_k8s_manifest_json_is_the_same_objects() -> None:
    args = ("--mode", "nfd", "--image", "registry.local/archgap:0.1")
    as_yaml = manifest(*args)
    result = run_cli("k8s-manifest", *args, "--json")
    doc = json_output(result, "k8s-manifest")
    assert doc["objects"] == as_yaml


def test_k8s_manifest_refuses_bad_names() -> None:
    result = run_cli("k8s-manifest", "--namespace", "Bad_NS", "--image", SERVING)
    assert result.returncode == 2 and "DNS-1123" in result.stderr


def _feature_labels(path: Path) -> tuple[dict[str, str], list[str]]:
    """The labels nfd-worker's local source makes of a feature file (NFD's customization guide,
    "Input format": ``<namespace>/<name>[=<value>]``, ``#`` comments, ``# +`` directives), and
    the directives."""
    labels, directives = {}, []
    for line in path.read_text().splitlines():
        if line.startswith("# +"):
            directives.append(line[3:])
        if line.startswith("#"):
            continue
        key, _, value = line.partition("=")
        namespace, _, name = key.partition("/")
        assert namespace == "feature.node.kubernetes.io", key
        assert LABEL.fullmatch(name), name
        assert value == "" or LABEL.fullmatch(value), value
        labels[name] = value
    assert len(path.read_bytes()) < 64 * 1024  # nfd-worker ignores larger files
    return labels, directives


def test_nfd_feature_file(tmp_path: Path) -> None:
    """libptxonly.so has only compute_80 PTX: no kernel for a T4 (7.5), PTX JIT on 12.0."""
    venv = tmp_path / "venv"
    install_fake_distribution(
        make_venv(venv), "ptx_Kernels.Extra" + "x" * 60, "0.1",
        {"ptxkernels/libptx.so": CUDA_BIN / "libptxonly.so"},
    )  # fmt: skip
    features = tmp_path / "features.d" / "archgap"
    features.parent.mkdir()
    before = time.time()
    result = run_cli("scan", "--python", str(venv / "bin" / "python"), "--gpu", "T4",
                     "--gpu", "12.0", "--nfd", str(features), "--nfd-expiry", "900")  # fmt: skip
    assert result.returncode == 1, result.stderr
    labels, directives = _feature_labels(features)
    assert labels["archgap.state"] == "gap"
    assert labels["archgap.ok"] == "false" and labels["archgap.health"] == "no-kernel"
    assert labels["archgap.gaps"] == "1"
    # The labels expire 900 s after the scan, in the RFC 3339 form nfd-worker parses.
    (directive,) = directives
    name, _, when = directive.partition("=")
    parsed = datetime.datetime.strptime(when, "%Y-%m-%dT%H:%M:%SZ")
    expiry = parsed.replace(tzinfo=datetime.timezone.utc)
    assert name == "expiry-time" and before + 899 <= expiry.timestamp() <= time.time() + 900
    # The long package name is cut to fit 63 characters, with a hash to keep it unique.
    per_gpu = {k.rsplit(".", 1)[1]: v for k, v in labels.items() if k.count(".") >= 2}
    assert per_gpu == {"sm_75": "none", "sm_120": "jit"}
    assert all(k.startswith("archgap.ptx-kernels-extraxxx") for k in labels if k.count(".") >= 2)


def test_nfd_never_says_ok_without_a_judgement(tmp_path: Path) -> None:
    """The serving interpreter missing, or no GPU visible in the pod: nothing was judged, so no
    archgap.ok label a pod could select on, only archgap.state=unknown."""
    features = tmp_path / "archgap"
    for args in (("--python", "/nonexistent/python", "--gpu", "T4"), ("--python", sys.executable)):
        result = run_cli("scan", *args, "--nfd", str(features), env={"PATH": "/usr/bin:/bin"})
        assert "Traceback" not in result.stderr, result.stderr
        labels, _ = _feature_labels(features)
        assert labels["archgap.state"] == "unknown" and "archgap.ok" not in labels, labels
        assert "archgap.gaps" not in labels, labels  # not "0 gaps": nothing was looked at
        assert labels["archgap.health"] in ("no-python", "probe-failed", "no-gpu"), labels
