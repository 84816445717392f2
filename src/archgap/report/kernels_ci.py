"""The build gate (``kernels --require``) for CI: SARIF 2.1.0 for code scanning, and GitHub
workflow commands (annotations) for the job's log and summary. One finding per library that
fails a required or claimed GPU, per given path with no device code at all, and per file that
could not be read; each names the file (a wheel's member: the wheel, the member in the text).

SARIF: OASIS "Static Analysis Results Interchange Format Version 2.1.0" (errata 01), validated in
the tests against its schema (sarif-schema-2.1.0.json). Workflow commands: GitHub's "Workflow
commands for GitHub Actions" (``::error file=F,title=T::MESSAGE``), escaped as the Actions
toolkit escapes them (actions/toolkit packages/core/src/command.ts: ``escapeData`` ``%`` CR LF,
``escapeProperty`` those and ``:`` ``,``); the text report that follows them is printed inside
``::stop-commands::TOKEN`` so that nothing an inspected file names is run as a command.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

if TYPE_CHECKING:
    from archgap.analysis.recipe.gate import GateFailure, GateResult
    from archgap.results import KernelsResult

SARIF_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)

# (id, short description, help): the rules a finding can break
RULES: tuple[tuple[str, str, str], ...] = (
    (
        "gpu-not-covered",
        "A library with device code has nothing that runs on a required GPU",
        "Build for the GPU (SASS for its compute capability, or PTX the driver JIT-compiles "
        "for it; with --strict only SASS): the recipe's TORCH_CUDA_ARCH_LIST or nvcc -gencode.",
    ),
    (
        "claimed-arch-missing",
        "A library lacks an architecture the build claims",
        "The build claims the architecture (TORCH_CUDA_ARCH_LIST, CMAKE_CUDA_ARCHITECTURES, "
        "-gencode flags, [tool.archgap], a wheel variant's nvidia :: sm_arch) but the library "
        "carries no SASS (or, for a PTX claim, no PTX) that serves it.",
    ),
    (
        "no-device-code",
        "The paths hold no file with device code",
        "A CUDA build that ships no SASS or PTX runs nothing on a GPU: check that the build "
        "compiled its .cu sources with nvcc and packaged the libraries.",
    ),
    (
        "unreadable",
        "A file could not be read completely",
        "archgap could not read the file (missing, truncated, corrupt): nothing is proven.",
    ),
)
RULE_INDEX = {rule[0]: index for index, rule in enumerate(RULES)}
ARCHIVES = (".whl", ".conda", ".tar.bz2", ".zip", ".egg")


@dataclass(frozen=True)
class Finding:
    rule: str
    file: str  # the file on disk (a wheel, not its member)
    member: str  # inside the archive; "" for a plain file
    message: str
    key: str  # what identifies the finding across runs (for fingerprints)


def split_archive(path: str) -> tuple[str, str]:
    """``dist/a.whl/pkg/lib.so`` -> (``dist/a.whl``, ``pkg/lib.so``); a plain file -> (path, "")."""
    parts = path.split("/")
    for index, part in enumerate(parts[:-1]):
        if part.endswith(ARCHIVES):
            return "/".join(parts[: index + 1]), "/".join(parts[index + 1 :])
    return path, ""


def findings(result: KernelsResult) -> list[Finding]:
    """What fails, in the order the text report lists it: unreadable files, then the gate's."""
    found: list[Finding] = []
    for binary in result.files:
        if binary.error or binary.format == "unreadable":
            file, member = split_archive(binary.path)
            why = binary.error or "unreadable"
            found.append(Finding("unreadable", file, member, f"{binary.path}: {why}", binary.path))
    gate = result.gate
    if gate is None:
        return found
    for failure in gate.failures:
        if not failure.path:
            for given in result.paths or ("",):
                found.append(
                    Finding("no-device-code", given, "", f"{given}: {failure.reason}", given)
                )
            continue
        found.append(_gate_finding(gate, failure))
    # a build without device code fails each claim alike: one finding per path
    return list({(f.rule, f.key): f for f in found}.values())


def _gate_finding(gate: GateResult, failure: GateFailure) -> Finding:
    """A library the gate failed: a claimed target it lacks, or a required GPU it does not
    cover (with the targets the recipe expects)."""
    cc = failure.compute_capability
    mode = " (strict: PTX only fails)" if gate.strict else ""
    file, member = split_archive(failure.path)
    if failure.claim:
        rule = "claimed-arch-missing"
        what = f"lacks claimed {failure.claim} ({cc}){mode}: {failure.verdict}"
        source = f" (claimed by {gate.claimed_from})" if gate.claimed_from else ""
    else:
        rule = "gpu-not-covered"
        what = f"on required {failure.gpu} ({cc}){mode}: {failure.verdict}"
        expected = " or ".join(failure.expected)
        source = f"; the recipe expects {expected}" if expected else ""
    message = f"{failure.path} {what}: {failure.reason}{source}"
    key = f"{failure.path}|{failure.claim or failure.gpu}|{cc}"
    return Finding(rule, file, member, message, key)


# --- SARIF --------------------------------------------------------------------------------------


def _uri(path: str) -> str:
    """An artifact's URI: a relative path as a relative reference (the repository's root the
    base), an absolute one as a file URI, a URL as it is."""
    if "://" in path:
        return path
    if os.path.isabs(path):
        return "file://" + quote(path)
    return quote(path.removeprefix("./"))


def sarif(result: KernelsResult, version: str) -> dict[str, Any]:
    """The SARIF log of the run: one run, archgap's rules, one result per finding."""
    results = []
    for finding in findings(result):
        location: dict[str, Any] = {
            "physicalLocation": {"artifactLocation": {"uri": _uri(finding.file)}}
        }
        if finding.member:
            location["logicalLocations"] = [
                {"fullyQualifiedName": finding.member, "kind": "module"}
            ]
        fingerprint = hashlib.sha256(f"{finding.rule}|{finding.key}".encode()).hexdigest()
        results.append(
            {
                "ruleId": finding.rule,
                "ruleIndex": RULE_INDEX[finding.rule],
                "level": "error",
                "message": {"text": finding.message},
                "locations": [location],
                "partialFingerprints": {"archgapFinding/v1": fingerprint},
            }
        )
    rules = [
        {
            "id": rule,
            "name": "".join(word.capitalize() for word in rule.split("-")),
            "shortDescription": {"text": short},
            "help": {"text": text},
            "defaultConfiguration": {"level": "error"},
        }
        for rule, short, text in RULES
    ]
    driver = {"name": "archgap", "version": version, "rules": rules}
    gate = result.gate
    invocation: dict[str, Any] = {"executionSuccessful": result.unreadable == 0}
    if gate is not None:
        asked = "claimed " + ", ".join(gate.claims) if gate.claims else ", ".join(gate.gpus)
        invocation["properties"] = {"require": asked, "strict": gate.strict}
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{"tool": {"driver": driver}, "invocations": [invocation], "results": results}],
    }


# --- GitHub workflow commands -------------------------------------------------------------------


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github(result: KernelsResult, report: Sequence[str]) -> str:
    """An ``::error`` command per finding, then the text report (plain ``report`` lines) where
    the runner runs no command: between ``::stop-commands::TOKEN`` and ``::TOKEN::``, the token
    a digest of the report itself (which therefore cannot contain it)."""
    lines = []
    for finding in findings(result):
        title = f"archgap: {finding.rule}"
        where = f"file={escape_property(finding.file)},title={escape_property(title)}"
        lines.append(f"::error {where}::{escape_data(finding.message)}")
    body = "\n".join(report)
    token = "archgap-" + hashlib.sha256(body.encode()).hexdigest()[:32]
    lines += [f"::stop-commands::{token}", body, f"::{token}::"]
    return "\n".join(lines) + "\n"
