"""Every bad argument is a ``UsageError`` raised by ``archgap.api`` before anything is probed,
fetched or written: the CLI prints it as one line (exit 2) and the MCP server as a tool error,
neither re-wrapping anything."""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable
from typing import Any

import pytest

from archgap import api
from archgap.errors import UsageError
from archgap.transport.target import LOCAL, named_target


def test_a_target_is_named_once_and_checked() -> None:
    assert named_target({}) is LOCAL
    ssh = named_target({"host": "root@gpu1:2222"}, None, 7.0)
    assert ssh.name == "root@gpu1:2222" and ssh.python == "python3"
    assert ssh.prefix[-3:] == ("root", "--", "gpu1") and "ConnectTimeout=7" in ssh.prefix
    with pytest.raises(UsageError, match="name one target, not host and pod"):
        named_target({"host": "gpu1", "pod": "ns/p"})
    with pytest.raises(UsageError, match="container '-it'"):  # read as an option by docker
        named_target({"container": "-it"})


def test_bad_arguments_of_each_command() -> None:
    cases: list[tuple[Callable[[], object], str]] = [
        (lambda: api.probe(sections=["gpu", "nope"]), "--sections: unknown nope"),
        (lambda: api.scan(driver="latest"), "--driver 'latest'"),
        (lambda: api.versions("torch", gpus=["T4"], driver="5"), "--driver '5'"),
        (lambda: api.versions("torch[", gpus=["T4"]), "not a file, URL or requirement"),
        (lambda: api.verify(["/nonexistent/libx.so"]), "no such file or directory"),
        (lambda: api.gates(kinds=["raises"]), "--kind raises"),
        (lambda: api.fleet_run(api.FleetSource(hosts=(("gpu1", None),)),
                               options=api.FleetOptions(jobs=0)), "--jobs must be at least 1"),
        (lambda: api.FleetSource(srun_args=("-p", "gpu")), "use them with --slurm"),
        (lambda: api.fleet_run(api.FleetSource(hostfile="/nonexistent/hosts")), "--hostfile"),
        (lambda: api.scan(gpus=["RTX 9999"]), "RTX 9999"),
    ]  # fmt: skip
    for call, message in cases:
        with pytest.raises(UsageError, match=message.replace("(", r"\(")):
            call()


def test_kubernetes_names_are_checked_as_kubernetes_takes_them() -> None:
    # DNS-1123 labels (namespace, RuntimeClass) and label selectors, as the API server validates.
    cases: list[tuple[dict[str, Any], str]] = [
        ({"namespace": "GPU_Nodes"}, "--namespace 'GPU_Nodes' is not a DNS-1123 label"),
        ({"runtime_class": "Nvidia"}, "--runtime-class 'Nvidia'"),
        ({"node_selector": "gpu"}, "--node-selector 'gpu' is not a label KEY=VALUE"),
        ({"interval": 30}, "--interval must be at least 60 seconds"),
        ({"metrics": "pushgateway"}, "--metrics 'pushgateway'"),
    ]
    for keywords, message in cases:
        with pytest.raises(UsageError, match=message):
            api.k8s_manifest(image="registry.local/serving:1", **keywords)
    # No default image: an image without the serving environment judges nothing (all "ok").
    for mode in ("probe", "nfd"):
        with pytest.raises(UsageError, match=f"--mode {mode} needs --image or --from-workload"):
            api.k8s_manifest(mode)


def test_the_probe_manifest_defaults() -> None:
    # GPU Feature Discovery labels GPU nodes nvidia.com/gpu.present=true; the probe runs in the
    # image named, whose own interpreter (python3) is the one inspected; namespace archgap-probe.
    objects = api.k8s_manifest(image="registry.local/serving:1")
    (daemonset,) = [o for o in objects if o["kind"] == "DaemonSet"]
    assert daemonset["metadata"]["namespace"] == "archgap-probe"
    pod = daemonset["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert pod["runtimeClassName"] == "nvidia"
    assert pod["containers"][0]["image"] == "registry.local/serving:1"
    assert "; python3 -c 'import gzip; exec(" in pod["containers"][0]["command"][-1]


def test_the_standalone_probe_is_python_of_the_stdlib_only() -> None:
    script = api.probe_script(sections=["gpu"])
    tree = ast.parse(script)  # it parses: a Python file
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in getattr(node, "names", [])
        if not (isinstance(node, ast.ImportFrom) and node.level)
    }
    assert imported <= sys.stdlib_module_names and script.startswith("#!/usr/bin/env python3\n")
    with pytest.raises(UsageError, match="--sections: unknown gpus"):
        api.probe_script(sections=["gpus"])
