"""Kubernetes without a cluster: `archgap k8s-manifest` validated against the Kubernetes OpenAPI
schemas that kubernetes-validate ships (strict: unknown fields are errors), the probe it carries
run as the DaemonSet runs it and read back by `fleet --from`, and `scan --nfd` feature files
checked against the Kubernetes label syntax.

Label syntax (kubernetes.io/docs/concepts/overview/working-with-objects/labels): a name of at most
63 characters, beginning and ending with an alphanumeric, with dashes, underscores and dots
between; a value of the same form or empty. nfd-worker prefixes names without a namespace with
feature.node.kubernetes.io/.
"""

from __future__ import annotations

import copy
import datetime
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from tests.helpers import CUDA_BIN, install_fake_distribution, json_output, make_venv, run_cli

LABEL = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
K8S = kubernetes_validate.latest_version()


def manifest(*args: str) -> list[dict[str, Any]]:
    result = run_cli("k8s-manifest", *args)
    assert result.returncode == 0, result.stderr
    docs = [d for d in yaml.safe_load_all(result.stdout) if d is not None]
    for doc in docs:
        kubernetes_validate.validate(doc, K8S, strict=True)
    return docs


def test_probe_manifest_is_valid_and_its_daemonset_output_feeds_fleet(tmp_path: Path) -> None:
    docs = manifest("--namespace", "gpu-audit", "--image", "registry.local/serving:1.2")
    assert [d["kind"] for d in docs] == ["Namespace", "ConfigMap", "DaemonSet"]
    config_map, daemonset = docs[1], docs[2]
    script = config_map["data"]["archgap-probe.py"]
    # The same probe as `archgap probe --script`, byte for byte, inspecting the container's python3.
    assert script == run_cli("probe", "--script", "--python", "python3").stdout
    pod = daemonset["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    (container,) = pod["containers"]
    assert container["image"] == "registry.local/serving:1.2"
    # What the container does, with the ConfigMap mounted elsewhere and without the final sleep.
    (tmp_path / "archgap-probe.py").write_text(script)
    command = container["command"][2].replace("/probe/", f"{tmp_path}/")
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
    result = run_cli("fleet", "--json", "--from", str(inbox))
    doc = json_output(result, "fleet")
    assert [h["name"] for h in doc["hosts"]] == ["gpu-node-17"] and doc["documents"] == 1


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
    as_yaml = manifest("--mode", "nfd")
    result = run_cli("k8s-manifest", "--mode", "nfd", "--json")
    doc = json_output(result, "k8s-manifest")
    assert doc["objects"] == as_yaml


def test_k8s_manifest_refuses_bad_names() -> None:
    result = run_cli("k8s-manifest", "--namespace", "Bad_NS")
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
