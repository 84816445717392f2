"""A scan as a Node Feature Discovery feature file: ``name=value`` lines that nfd-worker's local
source turns into node labels, read from ``/etc/kubernetes/node-feature-discovery/features.d/``
(NFD's customization guide, "Local feature source": names carry their namespace, here
``feature.node.kubernetes.io/``, since unprefixed names are deprecated; a
``# +expiry-time=<RFC3339>`` directive makes nfd-worker ignore the labels after that time, so they
do not outlive the DaemonSet that writes them; files over 64 kB are ignored).

Every label below is named ``feature.node.kubernetes.io/archgap.<...>``:
  archgap.state=ok|gap|unknown          the judgement; unknown: archgap could not judge (no
                                        interpreter, no GPU visible, ...): then no archgap.ok
  archgap.ok=true|false                 only when judged: no gap on a present (or named) GPU
  archgap.health=ok|no-kernel|...       the health code (see orchestrate/health.py)
  archgap.gaps=N
  archgap.<package>.sm_<XY>=<verdict>   per package x GPU: native, jit, partial, none, blocked,
                                        unknown
  archgap.<package>.jit.sm_<XY>=fails   per JIT finding that is not ok (fails, unknown)

Names and values follow the Kubernetes label syntax (a name and a value of at most 63
characters, alphanumerics with ``-_.`` inside); a package name that would not fit is cut and
given a short hash so that two packages never share a label. Renders ``results.NodeHealth``
(decided by ``orchestrate.health``) only.
"""

from __future__ import annotations

import hashlib
import re
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from archgap.results import NodeHealth

MAX_NAME = 63
NAMESPACE = "feature.node.kubernetes.io/"
PREFIX = "archgap."
STATES = {0: "ok", 1: "gap", 2: "unknown"}  # by the health exit code
# https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set
LABEL_VALUE = re.compile(r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")


def _name(package: str, suffix: str) -> str:
    """``archgap.<package>.<suffix>`` within 63 characters, in label characters only."""
    clean = re.sub(r"[^A-Za-z0-9]+", "-", package.lower()).strip("-") or "package"
    room = MAX_NAME - len(PREFIX) - len(suffix) - 1
    if len(clean) > room:
        digest = hashlib.sha256(package.encode()).hexdigest()[:6]
        clean = clean[: room - 7].rstrip("-") + "-" + digest
    return f"{PREFIX}{clean}.{suffix}"


def _sm(compute_capability: str) -> str:
    return "sm_" + compute_capability.replace(".", "")


def feature_file(health: NodeHealth, now: float, expires_in: float) -> str:
    """The feature file for this node: present GPUs, and named ones (``--gpu``/``--require``);
    a node that could not be judged has only the state and the health code."""
    labels: dict[str, str] = {f"{PREFIX}state": STATES[health.exit_code]}
    if health.judged:
        labels[f"{PREFIX}ok"] = "true" if health.exit_code == 0 else "false"
    labels[f"{PREFIX}health"] = health.code
    if health.judged:  # no counts or verdicts unless judged
        labels[f"{PREFIX}gaps"] = str(health.gaps)
        for v in health.verdicts:
            labels[_name(v.package, _sm(v.compute_capability))] = v.value
        for v in health.jit:
            labels[_name(v.package, "jit." + _sm(v.compute_capability))] = v.value
    expiry = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now + expires_in))
    header = (
        "# archgap scan: kernel and JIT verdicts for this node's GPUs (archgap scan --nfd)\n"
        f"# +expiry-time={expiry}\n"
    )
    return header + "".join(
        f"{NAMESPACE}{k}={v}\n" for k, v in labels.items() if LABEL_VALUE.fullmatch(v)
    )
