"""archgap's own applied patch, recognised in the installed source: a file whose sha256 is the
``sha256_after`` of a kb/patches.json entry is that patch, made by ``archgap fix --apply --only
patch``. Its finding then says so, with how to take it back, instead of predicting the failure
again and proposing the patch it already holds."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from archgap.analysis.fixes.engine import PATCH
from archgap.analysis.jit.findings import Fact, JitFinding, resolve_nvcc
from archgap.kb import load_json
from archgap.kb import toolchain as kb
from archgap.probe.facts import ToolchainFacts


def _applied(facts: ToolchainFacts, finding: JitFinding) -> tuple[dict[str, Any], str] | None:
    """The kb patch for the finding's release and GPU whose patched bytes are installed, and
    the file."""
    hashes = {c.key: c for c in facts.source_checks if c.sha256}
    for entry in load_json("patches.json")["patches"]:
        if (entry["package"], entry["version"]) != (finding.package, finding.version):
            continue
        if finding.compute_capability not in entry["compute_capabilities"]:
            continue
        check = hashes.get(f"archgap-patch:{entry['id']}")
        if check is not None and check.sha256 == entry["sha256_after"]:
            return entry, check.file
    return None


def recognise(
    findings: Sequence[JitFinding], facts: ToolchainFacts, python: str | None
) -> tuple[JitFinding, ...]:
    """``findings`` with each one that archgap's applied patch answers said to be patched: ok
    when the nvcc the package resolves builds the arch-specific target the patch returns,
    else still open but without the patch among its fixes."""
    out = []
    undo = "archgap fix --undo" + (f" --python {python}" if python else "")
    for finding in findings:
        found = _applied(facts, finding) if finding.status != "ok" else None
        if found is None:
            out.append(finding)
            continue
        entry, path = found
        said = (
            f"patched by archgap fix ({entry['id']}: {path} has the patched file's sha256; "
            f"undo: {undo})"
        )
        fact = Fact(said, "kb/patches.json sha256_after; the probe's hash of the installed file")
        tk = resolve_nvcc(facts, kb.jit_rules().flashinfer.nvcc_lookup).toolkit
        cc = (finding.compute_capability or "").replace(".", "")
        target = f"compute_{cc}a"
        if tk is not None and tk.version and kb.toolkit_can_target(tk.version, target):
            where = f" on {finding.gpu} ({finding.compute_capability})" if finding.gpu else ""
            cause = (
                f"{finding.package} {finding.version}{where}: {said}; with nvcc {tk.version} "
                f"its JIT builds {target}."
            )
            out.append(replace(finding, status="ok", error=None, cause=cause, fixes=()))
            continue
        fixes = tuple(f for f in finding.fixes if f.kind != PATCH)
        out.append(replace(finding, chain=(*finding.chain, fact), fixes=fixes))
    return tuple(out)
