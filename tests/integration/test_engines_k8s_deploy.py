"""Kubernetes as the jobs run it: `k8s-manifest --from-workload` (the serving Deployment's image and
`env:` are what the probe runs in, and the report says so), `--metrics servicemonitor` (the
exporter container served on loopback and its output checked by Prometheus's own promtool), the
Grafana dashboard (deploy/grafana/archgap.json) against the metric families archgap really writes,
the Kustomize base (deploy/kubernetes) built by kubectl's own kustomize, and the Containerfile for
--mode nfd (no image builder or Dockerfile linter can be installed here: hadolint is neither on
PyPI, npm nor in this Debian's archive; its instructions are parsed and checked against the tree,
and the wrapper it installs is run).

core/v1 EnvVar (Kubernetes API reference): `value`, or `valueFrom` with one of fieldRef,
resourceFieldRef, configMapKeyRef, secretKeyRef; `envFrom` takes whole ConfigMaps/Secrets. A
ConfigMap or Secret reference resolves in the pod's own namespace, so it cannot follow the probe
into archgap's. The Prometheus Operator's ServiceMonitor (monitoring.coreos.com/v1) selects
Services by label (spec.selector) and scrapes the endpoints' ports named in spec.endpoints[].port.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from tests.helpers import (
    CUDA_BIN,
    ROOT,
    install_fake_distribution,
    json_output,
    make_venv,
    run_cli,
    wait_for_port,
)
from tests.integration.test_engines_k8s import manifest

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: sglang, namespace: serving}
spec:
  selector: {matchLabels: {app: sglang}}
  template:
    metadata: {labels: {app: sglang}}
    spec:
      containers:
        - name: app
          image: registry.local/sglang:0.5.2-cu128
          env:
            - {name: TORCH_CUDA_ARCH_LIST, value: "9.0 12.0"}
            - {name: CUDA_HOME, value: /usr/local/cuda-12.8}
            - name: POD_IP
              valueFrom: {fieldRef: {fieldPath: status.podIP}}
            - name: HF_TOKEN
              valueFrom: {secretKeyRef: {name: hf, key: token}}
            - {name: NVIDIA_VISIBLE_DEVICES, value: "0"}
          envFrom:
            - configMapRef: {name: serving-config}
        - name: metrics
          image: registry.local/exporter:1
"""


def _container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (daemonset,) = [d for d in docs if d["kind"] == "DaemonSet"]
    return dict(daemonset["spec"]["template"]["spec"]["containers"][0])


def test_the_probe_runs_in_the_workloads_image_with_its_env(tmp_path: Path) -> None:
    workload = tmp_path / "sglang.yaml"
    workload.write_text(DEPLOYMENT)
    docs = manifest("--from-workload", str(workload), "--container", "app")
    container = _container(docs)
    assert container["image"] == "registry.local/sglang:0.5.2-cu128"
    env = {e["name"]: e for e in container["env"]}
    assert env["TORCH_CUDA_ARCH_LIST"] == {"name": "TORCH_CUDA_ARCH_LIST", "value": "9.0 12.0"}
    assert env["CUDA_HOME"]["value"] == "/usr/local/cuda-12.8"
    assert env["POD_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    # A Secret of the workload's namespace cannot follow; archgap's own variable wins, once.
    assert "HF_TOKEN" not in env
    assert [e for e in container["env"] if e["name"] == "NVIDIA_VISIBLE_DEVICES"] == [
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}
    ]
    # What was judged and what was not, in the DaemonSet, on stderr and in JSON.
    (daemonset,) = [d for d in docs if d["kind"] == "DaemonSet"]
    judged = daemonset["metadata"]["annotations"]["archgap.dev/judged"]
    assert judged.startswith("judging image registry.local/sglang:0.5.2-cu128 (deployment/")
    assert "deployment/serving/sglang container app" in judged
    for missing in ("HF_TOKEN (secretKeyRef)", "NVIDIA_VISIBLE_DEVICES (archgap sets it)",
                    "envFrom configMapRef serving-config"):  # fmt: skip
        assert missing in judged, judged
    result = run_cli("k8s-manifest", "--from-workload", str(workload), "--container", "app",
                     "--json")  # fmt: skip
    assert json_output(result, "k8s-manifest")["judged"] == judged
    assert f"archgap: {judged}" in result.stderr

    # The container's command as the kubelet runs it, with the env: it gives: the probe reports
    # the workload's TORCH_CUDA_ARCH_LIST, not the shell's.
    (config_map,) = [d for d in docs if d["kind"] == "ConfigMap"]
    for name, data in config_map["binaryData"].items():
        (tmp_path / name).write_bytes(base64.b64decode(data))
    command = container["command"][2].replace("/probe/", f"{tmp_path}/")
    command = command.replace("python3", sys.executable).replace("; exec sleep infinity", "")
    plain = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    ran = subprocess.run(
        ["/bin/sh", "-c", command], capture_output=True, text=True, timeout=120, check=False,
        env={**plain, "NODE_NAME": "gpu-7", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    node, _, facts = ran.stdout.partition(": ")
    assert node == "gpu-7"
    assert json.loads(facts)["env"]["TORCH_CUDA_ARCH_LIST"] == "9.0 12.0"


def test_workload_from_kubectl_json_and_the_ambiguous_cases(tmp_path: Path) -> None:
    listed = tmp_path / "get.json"  # kubectl get deploy -o json of two: a List
    deployment = yaml.safe_load(DEPLOYMENT)
    other = json.loads(json.dumps(deployment))
    other["metadata"]["name"] = "vllm"
    listed.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [deployment]}))
    docs = manifest("--mode", "nfd", "--from-workload", str(listed), "--container", "app")
    assert _container(docs)["image"] == "registry.local/sglang:0.5.2-cu128"
    # nfd in the serving image with archgap beside it: the workload's env:, the image named.
    docs = manifest("--mode", "nfd", "--from-workload", str(listed), "--container", "app",
                    "--image", "registry.local/sglang-archgap:1")  # fmt: skip
    container = _container(docs)
    assert container["image"] == "registry.local/sglang-archgap:1"
    assert {"name": "TORCH_CUDA_ARCH_LIST", "value": "9.0 12.0"} in container["env"]
    (daemonset,) = [d for d in docs if d["kind"] == "DaemonSet"]
    assert (
        "container app, image --image)"
        in daemonset["metadata"]["annotations"]["archgap.dev/judged"]
    )
    listed.write_text(json.dumps({"kind": "List", "items": [deployment, other]}))
    cases: list[tuple[tuple[str, ...], str]] = [
        (
            (str(listed), "--container", "app"),
            "several workloads (Deployment/sglang, Deployment/vllm)",
        )
    ]
    single = tmp_path / "one.yaml"
    single.write_text(DEPLOYMENT)
    service = tmp_path / "svc.yaml"
    service.write_text("apiVersion: v1\nkind: Service\nmetadata: {name: s}\n")
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: Deployment\n  bad: [indent\n")
    cases += [
        ((str(single),), "2 containers (app, metrics): name one with --container"),
        ((str(single), "--container", "web"), "--container 'web': not in"),
        ((str(service),), "no Deployment, DaemonSet, StatefulSet in it"),
        ((str(broken),), "not YAML"),
    ]
    for args, says in cases:
        result = run_cli("k8s-manifest", "--from-workload", *args)
        assert result.returncode == 2 and says in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scrape(port: int) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read()


def _textfile(tmp_path: Path) -> Path:
    """A real scan's metrics: libptxonly.so has only compute_80 PTX, so no kernel on a T4."""
    venv = tmp_path / "venv"
    install_fake_distribution(
        make_venv(venv), "ptxkernels", "0.1", {"ptxkernels/libptx.so": CUDA_BIN / "libptxonly.so"}
    )
    out = tmp_path / "metrics" / "archgap.prom"
    out.parent.mkdir()
    result = run_cli("scan", "--python", str(venv / "bin" / "python"), "--gpu", "T4",
                     "--prometheus", str(out))  # fmt: skip
    assert result.returncode == 1, result.stderr
    return out


def test_servicemonitor_scrapes_the_exporter_container(tmp_path: Path) -> None:
    docs = manifest("--mode", "nfd", "--image", "registry.local/serving-archgap:1",
                    "--metrics", "servicemonitor")  # fmt: skip
    kinds = {d["kind"]: d for d in docs}
    assert list(kinds) == ["Namespace", "DaemonSet", "Service", "ServiceMonitor"]
    pod = kinds["DaemonSet"]["spec"]["template"]
    scan, exporter = pod["spec"]["containers"]
    # No node_exporter directory: the metrics go through an emptyDir the two containers share.
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["textfile"] == {"name": "textfile", "emptyDir": {}}
    (written,) = [m for m in scan["volumeMounts"] if m["name"] == "textfile"]
    (served,) = [m for m in exporter["volumeMounts"] if m["name"] == "textfile"]
    assert written["mountPath"] == served["mountPath"] and served["readOnly"] is True
    assert f"--prometheus {written['mountPath']}/archgap.prom" in scan["command"][2]
    # Service -> pods -> port, ServiceMonitor -> Service -> port, by the names Kubernetes uses.
    service, monitor = kinds["Service"], kinds["ServiceMonitor"]
    assert service["spec"]["selector"] == pod["metadata"]["labels"]
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] in {p["name"] for p in exporter["ports"]}
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"]
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == [port["name"]]

    # The exporter as the container runs it (its port and directory moved to this machine).
    metrics = tmp_path / "metrics"
    free = _free_port()
    code = exporter["command"][-1].replace(served["mountPath"], str(metrics))
    code = code.replace(str(exporter["ports"][0]["containerPort"]), str(free))
    argv = [sys.executable if a == "python3" else a for a in exporter["command"][:-1]]
    server = subprocess.Popen([*argv, code], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for_port("127.0.0.1", free, 30)
        # Before the first scan: a failed scrape (up 0), never an empty success.
        assert _scrape(free)[0] == 503
        textfile = _textfile(tmp_path)
        status, content_type, body = _scrape(free)
        assert status == 200 and body == textfile.read_bytes()
        assert content_type.startswith("text/plain; version=0.0.4")
        assert b"archgap_gaps" in body
    finally:
        server.terminate()
        server.wait(timeout=30)
    promtool = shutil.which("promtool")
    assert promtool, "promtool is not installed (Debian's prometheus; scripts/services)"
    checked = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True,
                             timeout=60, check=False)  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr


def _families(text: str) -> set[str]:
    return set(re.findall(r"^# TYPE (\S+) ", text, re.M))


def test_grafana_dashboard_uses_only_metrics_archgap_writes(tmp_path: Path) -> None:
    """Every metric name in the dashboard's queries is a family a real scan or fleet file has."""
    textfile = _textfile(tmp_path)
    written = _families(textfile.read_text())
    inbox = tmp_path / "docs"
    inbox.mkdir()
    facts = run_cli("probe", "--json")
    (inbox / "node-1.json").write_text(json.dumps(json_output(facts, "probe")["facts"]))
    fleet_prom = tmp_path / "fleet.prom"
    run_cli("fleet", "--from", str(inbox), "--gpu", "T4", "--prometheus", str(fleet_prom))
    written |= _families(fleet_prom.read_text())
    assert {"archgap_gaps", "archgap_host_up", "archgap_host_stale"} <= written, written
    dashboard = json.loads((ROOT / "deploy" / "grafana" / "archgap.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    exprs += [str(v["query"]) for v in dashboard["templating"]["list"] if v["type"] == "query"]
    used = {m for e in exprs for m in re.findall(r"\barchgap_[a-z_]+", e)}
    assert used and used <= written, used - written
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)) and all("gridPos" in p for p in dashboard["panels"])


BASE = ROOT / "deploy" / "kubernetes"
BASE_ARGS = ("--mode", "nfd", "--image", "archgap-nfd", "--metrics", "servicemonitor")


def _kustomize(path: Path) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is not installed (Debian's kubernetes-client; scripts/services)"
    built = subprocess.run([kubectl, "kustomize", str(path)], capture_output=True, text=True,
                           timeout=60, check=False)  # fmt: skip
    assert built.returncode == 0, built.stderr
    return [d for d in yaml.safe_load_all(built.stdout) if d is not None]


def test_kustomize_base_is_what_k8s_manifest_prints(tmp_path: Path) -> None:
    printed = run_cli("k8s-manifest", *BASE_ARGS)
    assert printed.returncode == 0, printed.stderr
    resource = (BASE / "archgap-nfd.yaml").read_text()
    assert resource.endswith(printed.stdout)  # after its "generated by" comment

    def key(d: dict[str, Any]) -> tuple[str, str]:
        return d["kind"], d["metadata"]["name"]

    assert sorted(_kustomize(BASE), key=key) == sorted(manifest(*BASE_ARGS), key=key)
    # An overlay names the image, as the base's comment says: both containers take it.
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        f"resources: [{os.path.relpath(BASE, overlay)}]\nimages:\n  - name: archgap-nfd\n"
        "    newName: registry.example/serving-archgap\n    newTag: '2.1'\n"
    )
    (daemonset,) = [d for d in _kustomize(overlay) if d["kind"] == "DaemonSet"]
    images = {c["image"] for c in daemonset["spec"]["template"]["spec"]["containers"]}
    assert images == {"registry.example/serving-archgap:2.1"}


def _instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Containerfile: comments dropped, continuations joined."""
    joined = re.sub(r"\\\n", " ", path.read_text())
    out = []
    for line in joined.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_containerfile_refers_to_what_the_tree_has_and_its_wrapper_runs(tmp_path: Path) -> None:
    steps = _instructions(BASE / "Containerfile")
    words = [w for w, _ in steps]
    assert set(words) <= {"ARG", "FROM", "USER", "COPY", "RUN", "ENTRYPOINT", "CMD"}, words
    # FROM the serving image, an ARG declared before it (a build must name it).
    assert steps[0] == ("ARG", "SERVING_IMAGE") and steps[1] == ("FROM", "${SERVING_IMAGE}")
    copied: dict[str, str] = {}
    for word, rest in steps:
        if word == "COPY":
            *sources, dest = rest.split()
            for source in sources:
                assert (ROOT / source).exists(), source  # the build context is the tree's root
                copied[dest.rstrip("/") + ("/" + Path(source).name if dest.endswith("/") else "")
                       ] = source  # fmt: skip
    (entry,) = [json.loads(rest) for word, rest in steps if word == "ENTRYPOINT"]
    wrapper = ROOT / copied[entry[0]]
    assert (ROOT / copied["/tmp/archgap-src/pyproject.toml"]).name == "pyproject.toml"
    # The DaemonSet's command calls `archgap` from PATH: the wrapper's place is on it.
    assert Path(entry[0]).parent.as_posix() == "/usr/local/bin"
    # The wrapper, with the tree's source as its /opt/archgap and this Python as python3.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "python3").symlink_to(sys.executable)
    ran = subprocess.run(
        ["/bin/sh", str(wrapper), "scan", "--help"], capture_output=True, text=True, timeout=120,
        env={"PATH": f"{bindir}:/usr/bin:/bin", "ARCHGAP_HOME": str(ROOT / "src"),
             "PYTHONPATH": "/nonexistent"}, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert "--nfd" in ran.stdout
