"""archgap k8s-manifest: YAML that runs archgap on every GPU node of a Kubernetes cluster.

``--mode probe`` (default): the standalone probe in a ConfigMap and a DaemonSet that prints each
node's facts once (collect with ``kubectl logs`` and ``archgap fleet --from``). ``--mode nfd``: a
DaemonSet (an image with archgap installed) that keeps a Node Feature Discovery feature file and
node_exporter textfile metrics current. YAML by default, ``--json`` the same objects in a JSON
document. Exit 0; 2 on a bad argument.
"""

from __future__ import annotations

import argparse
import re
import sys

from archgap.cli import options as opt
from archgap.cli.common import EXIT_OK, Output, UsageError
from archgap.transport.target import DEFAULT_PYTHON

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


HELP = "Kubernetes YAML: a DaemonSet running the probe (or scan --nfd) on every GPU node"
DESCRIPTION = (
    "Print Kubernetes manifests (YAML) that run archgap on every GPU node (nodes labelled "
    "nvidia.com/gpu.present=true). Exit 0; 2 on a bad argument."
)
OPTIONS = (
    opt.option("--mode", choices=("probe", "nfd"), default="probe"),
    opt.option("--namespace", default="archgap", metavar="NS"),
    opt.option(
        "--image",
        default="python:3.12-slim",
        help="the container image: for --mode probe your serving image (its Python environment "
        "is what gets inspected), for --mode nfd an image with archgap installed "
        "(default %(default)s)",
    ),
    opt.option(
        "--python",
        default=None,
        metavar="PATH",
        help=f"the interpreter to inspect inside the image (default {DEFAULT_PYTHON})",
    ),
    opt.option(
        "--interval", type=int, default=3600, metavar="S", help="--mode nfd: seconds between scans"
    ),
    opt.output(),
)


def run(args: argparse.Namespace, out: Output) -> int:
    from archgap.report.k8s import nfd_manifest, probe_manifest, to_yaml

    if not DNS_LABEL.fullmatch(args.namespace):
        raise UsageError(f"--namespace {args.namespace!r} is not a DNS-1123 label")
    if not args.image.strip() or any(c.isspace() for c in args.image):
        raise UsageError(f"--image {args.image!r} is not an image reference")
    if args.interval < 60:
        raise UsageError("--interval must be at least 60 seconds")
    python = args.python or DEFAULT_PYTHON
    if args.mode == "nfd":
        docs = nfd_manifest(args.namespace, args.image, python, args.interval)
    else:
        from archgap.cli.common import request_or_usage_error
        from archgap.request import DEFAULT_SECTIONS
        from archgap.transport.bootstrap import probe_input, standalone_script

        # The probe inspects the same interpreter that runs it in the container.
        request = request_or_usage_error(list(DEFAULT_SECTIONS), python)
        script = standalone_script(probe_input(request, "/", None))
        docs = probe_manifest(args.namespace, args.image, python, script)
    if out.json_mode:
        out.emit("k8s-manifest", {"mode": args.mode, "objects": docs})
    else:
        sys.stdout.write(to_yaml(docs))
    return EXIT_OK
