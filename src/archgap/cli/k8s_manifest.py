"""archgap k8s-manifest: YAML that runs archgap on every GPU node of a Kubernetes cluster.

``--mode probe`` (default): the standalone probe (gzipped) in a ConfigMap and a DaemonSet that
prints each node's facts once (collect with ``kubectl logs`` and ``archgap fleet --from``); its
namespace enforces Pod Security "baseline". ``--mode nfd``: a DaemonSet in ``--image`` (which must
have archgap installed) that keeps a Node Feature Discovery feature file and node_exporter
textfile metrics current. ``--node-selector`` picks the nodes; each pod requests one
``nvidia.com/gpu``, or uses ``--runtime-class`` to see the GPUs instead. YAML by default,
``--json`` the same objects in a JSON document. Exit 0; 2 on a bad argument.
"""

from __future__ import annotations

import argparse
import sys

from archgap.cli import options as opt
from archgap.cli.common import EXIT_OK, Output
from archgap.report.k8s import GPU_NODE_SELECTOR, PROBE_IMAGE
from archgap.transport.target import DEFAULT_PYTHON

HELP = "Kubernetes YAML: a DaemonSet running the probe (or scan --nfd) on every GPU node"
DESCRIPTION = (
    "Print Kubernetes manifests (YAML) that run archgap on every GPU node (by default the "
    "nodes labelled nvidia.com/gpu.present=true). Exit 0; 2 on a bad argument."
)
OPTIONS = (
    opt.option("--mode", choices=("probe", "nfd"), default="probe"),
    opt.option("--namespace", default="archgap", metavar="NS"),
    opt.option(
        "--image",
        default=None,
        help="the container image: for --mode probe your serving image (its Python environment "
        f"is what gets inspected; default {PROBE_IMAGE}), for --mode nfd an image with archgap "
        "installed in the environment to judge (required: there is no such public image)",
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
        help="see the GPUs through this RuntimeClass (e.g. nvidia) with NVIDIA_VISIBLE_DEVICES=all "
        "instead of requesting one nvidia.com/gpu per pod (a request reserves that GPU while the "
        "pod lives)",
    ),
    opt.option(
        "--interval", type=int, default=3600, metavar="S", help="--mode nfd: seconds between scans"
    ),
    opt.output(),
)


def run(args: argparse.Namespace, out: Output) -> int:
    from archgap.api import k8s_manifest
    from archgap.report.k8s import to_yaml

    docs = k8s_manifest(
        args.mode, namespace=args.namespace, image=args.image, python=args.python,
        node_selector=args.node_selector, runtime_class=args.runtime_class,
        interval=args.interval,
    )  # fmt: skip
    if out.json_mode:
        out.emit("k8s-manifest", {"mode": args.mode, "objects": docs})
    else:
        sys.stdout.write(to_yaml(docs))
    return EXIT_OK
