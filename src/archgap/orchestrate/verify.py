"""``verify``: each library's device code loaded through the CUDA driver on the GPUs, compared
with the scan's verdicts."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from archgap.orchestrate.shared import check_paths, checked_facts
from archgap.request import load_request, verify_request
from archgap.transport.target import LOCAL, Target

if TYPE_CHECKING:
    from archgap.analysis.verify import VerifyReport


def verify(
    paths: Sequence[str] = (),
    *,
    python: str | None = None,
    gpu_indices: Sequence[int] = (),
    target: Target = LOCAL,
    gpu_timeout: float = 300.0,
    root: str = "/",
    timeout: float = 3600.0,
) -> VerifyReport:
    """Load each library's device code through the CUDA driver on the GPUs and compare with the
    scan's verdicts. ``paths`` (files or directories) or else the environment of ``python``;
    ``gpu_indices`` (default: one GPU of each model). Raises ``ProbeError`` when the facts could
    not be collected and ``UsageError`` for a path missing here; no GPU or driver is a report
    with ``error`` set."""
    from archgap.analysis.verify import compare, load_plan
    from archgap.codec import decode
    from archgap.probe.facts import BinaryFacts, GpuFacts, PythonEnvironment

    check_paths(target, paths)
    if target.is_local:  # the report names the files to whoever reads it
        paths = [os.path.abspath(p) for p in paths]
    facts = checked_facts(target, verify_request(paths, python), timeout, root)
    binaries = [decode(BinaryFacts, b) for b in facts.section("binaries") or ()]
    python_data = facts.section("python")
    env = decode(PythonEnvironment, python_data) if python_data else None
    gpu_data = facts.section("gpu")
    driver = decode(GpuFacts, gpu_data).driver_version if gpu_data else None
    plan, skipped = load_plan(binaries)
    loaded = checked_facts(target, load_request(plan, gpu_indices, gpu_timeout), timeout, root)
    section = loaded.section("verify") or {}
    empty = PythonEnvironment("", "", (), (), ())
    return compare(section, binaries, env or empty, skipped, driver)
