"""archgap k8s-manifest: YAML that runs archgap on every GPU node of a Kubernetes cluster.

``--mode probe`` (default): the standalone probe (gzipped) in a ConfigMap and a DaemonSet that
prints each node's facts once (collect with ``kubectl logs`` and ``archgap fleet --from``), in
namespace ``archgap-probe`` (Pod Security "baseline"). ``--mode nfd``: a DaemonSet (namespace
``archgap-nfd``, "privileged") in an image with archgap installed that keeps a Node Feature
Discovery feature file and metrics current (``--metrics servicemonitor``: an exporter, a Service
and a ServiceMonitor). The pods run in the serving image (``--image``, or ``--from-workload
FILE``: the image and ``env:`` of your Deployment/DaemonSet), request no GPU and see every GPU
through ``--runtime-class`` (default nvidia) with NVIDIA_VISIBLE_DEVICES=all, as GPU Feature
Discovery does. What is judged goes to stderr and into the DaemonSet's archgap.dev/judged
annotation. YAML by default, ``--json`` the same objects in a JSON document. Exit 0; 2 on a bad
argument.
"""

from __future__ import annotations

import argparse
import sys

from archgap.cli import options as opt
from archgap.cli.common import EXIT_OK, Output
from archgap.report.k8s import GPU_NODE_SELECTOR, NAMESPACES, RUNTIME_CLASS
from archgap.transport.target import DEFAULT_PYTHON

HELP = "Kubernetes YAML: a DaemonSet running the probe (or scan --nfd) on every GPU node"
DESCRIPTION = (
    "Print Kubernetes manifests (YAML) that run archgap on every GPU node (by default the "
    "nodes labelled nvidia.com/gpu.present=true). Exit 0; 2 on a bad argument."
)
OPTIONS = (
    opt.option("--mode", choices=("probe", "nfd"), default="probe"),
    opt.option(
        "--namespace",
        default=None,
        metavar="NS",
        help=f"default {NAMESPACES['probe']} (--mode probe) or {NAMESPACES['nfd']} (--mode nfd): "
        "one namespace per Pod Security level",
    ),
    opt.option(
        "--image",
        default=None,
        help="the serving image (its Python environment is what gets judged); for --mode nfd "
        "with archgap installed (deploy/kubernetes/Containerfile builds one)",
    ),
    opt.option(
        "--from-workload",
        default=None,
        metavar="FILE",
        help="take the image and the container's env: from this Deployment/DaemonSet/"
        "StatefulSet manifest (YAML, or kubectl get -o json); with --image, only its env:",
    ),
    opt.option(
        "--container",
        default=None,
        metavar="NAME",
        help="with --from-workload: the container to take (needed when it has several)",
    ),
    opt.option(
        "--python",
        default=None,
        metavar="PATH",
        help=f"the interpreter to inspect inside the image (default {DEFAULT_PYTHON})",
    ),
    opt.option(
        "--node-selector",
        metavar="KEY=VALUE",
        help=f"the nodes to run on, by label (default {GPU_NODE_SELECTOR}, GPU Feature "
        "Discovery's)",
    ),
    opt.option(
        "--runtime-class",
        default=None,
        metavar="NAME",
        help=f"the RuntimeClass that shows the pod every GPU with NVIDIA_VISIBLE_DEVICES=all "
        f"(default {RUNTIME_CLASS}); no pod requests a nvidia.com/gpu",
    ),
    opt.option(
        "--interval", type=int, default=3600, metavar="S", help="--mode nfd: seconds between scans"
    ),
    opt.option(
        "--metrics",
        choices=("textfile", "servicemonitor"),
        default="textfile",
        help="--mode nfd: metrics into node_exporter's textfile directory on the node, or served "
        "by an exporter container with a Service and a Prometheus Operator ServiceMonitor",
    ),
    opt.output(),
)


def run(args: argparse.Namespace, out: Output) -> int:
    from archgap.api import k8s_manifest
    from archgap.report.k8s import to_yaml

    docs = k8s_manifest(
        args.mode, namespace=args.namespace, image=args.image, from_workload=args.from_workload,
        container=args.container, python=args.python, node_selector=args.node_selector,
        runtime_class=args.runtime_class, interval=args.interval, metrics=args.metrics,
    )  # fmt: skip
    judged = next(
        d["metadata"]["annotations"]["archgap.dev/judged"] for d in docs if d["kind"] == "DaemonSet"
    )
    print(f"archgap: {judged}", file=sys.stderr)
    if out.json_mode:
        out.emit("k8s-manifest", {"mode": args.mode, "judged": judged, "objects": docs})
    else:
        sys.stdout.write(to_yaml(docs))
    return EXIT_OK
