"""The tools: which api function each one calls, its JSON document and its one-line summary.

Inputs are not written here: ``schema.derive`` reads them off the api function, so a tool
takes exactly the keywords the api does, under the same names. A tool is listed only when the
api has its function.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from archgap.mcp.schema import Derived, derive

# The same names mean the same thing in every tool: described once.
DESCRIBED = {
    "python": "the interpreter whose environment is inspected, on the target when one is named "
    "(default: python3 there; here, the interpreter this server runs under: name the project's)",
    "gpus": "GPUs to judge against: names (RTX PRO 6000, H100, GB10) or compute capabilities "
    "(12.0, sm_120)",
    "host": "inspect over ssh: [user@]host[:port], as the user's ssh config knows it",
    "container": "inspect inside a running container (docker/podman exec)",
    "pod": "inspect inside a Kubernetes pod: [namespace/]pod[/container]",
    "via": "inspect through this command prefix, which starts a program on the target "
    "(srun --nodelist n1, ...)",
    "env_from": "the service's environment instead of the shell's: a process id or an env file",
    "log": "the text of the error log (or a bare error message)",
    "paths": "files or directories",
    "dists": "installed distributions by name",
    "timeout": "seconds the probe may take on the target",
    "name": "the variable or attribute to trace (TARGET_CUDA_ARCHS)",
    "kinds": "only these kinds of gate",
    "require": "GPUs the code must run on (names or compute capabilities): the build gate",
    "deep": "read every kernel entry, not one row per kind",
    "strict": "a library with only PTX (or nothing) for a GPU fails too",
    "driver": "judge against this NVIDIA driver version (580.65.06) instead of the detected one",
    "show_all": "include vendored, example and test trees",
    "documents": "archgap probe documents: files or directories of them",
    "package": "a project name, or a requirement that narrows the versions (torch>=2.8)",
    "first": "stop at the newest version that covers the GPUs",
}
# The server fills these: a callback told as work proceeds becomes MCP progress notifications.
PROGRESS = frozenset({"progress", "tell"})


@dataclass(frozen=True)
class ToolSpec:
    """One tool: the api function (by name) it calls, keywords it fixes (not offered), the
    parameters it does not offer, and a line that says what it is for."""

    name: str
    function: str
    purpose: str
    fixed: Mapping[str, Any] = field(default_factory=dict)
    omit: frozenset[str] = frozenset()
    document: str = ""  # the schema's command, when not the tool's name

    @property
    def command(self) -> str:
        return self.document or self.name

    def derived(self, function: Callable[..., Any]) -> Derived:
        return derive(function, self.omit | frozenset(self.fixed), PROGRESS, DESCRIBED)


READ_ONLY = (
    ToolSpec(
        "scan",
        "scan",
        "Can every package of a Python environment run on these GPUs? Verdicts from the kernels "
        "in every native library, the toolkits JIT compilers will use and the code that gates "
        "the architecture; gaps with their chain of causes and fixes.",
    ),
    ToolSpec(
        "explain",
        "explain",
        "Explain a crash log: the architecture-gap error in it, the chain of causes (confirmed on "
        "the environment when one is named) and the fixes.",
        omit=frozenset({"origin"}),
    ),
    ToolSpec(
        "trace",
        "trace",
        "Where a variable or attribute (TARGET_CUDA_ARCHS, ...) is written and read in installed "
        "Python source: the writes that decide its value.",
    ),
    ToolSpec(
        "gates",
        "gates",
        "Where installed packages detect or gate GPU architectures (capability checks, arch "
        "lists, raises).",
    ),
    ToolSpec(
        "kernels",
        "kernels",
        "The device code (SASS and PTX targets) in native libraries, wheels or build outputs; "
        "with require, whether it runs on those GPUs.",
    ),
    ToolSpec(
        "versions",
        "versions",
        "The released versions of a package on the indexes, newest first, each judged on the "
        "GPUs from its wheel: which one to install.",
    ),
    ToolSpec(
        "recipe",
        "recipe",
        "The fewest build targets that give every GPU native code, spelled for "
        "TORCH_CUDA_ARCH_LIST, CMake and nvcc.",
    ),
    ToolSpec("gpus", "gpus", "The GPUs archgap knows: compute capability, architecture, source."),
    ToolSpec(
        "probe",
        "probe",
        "The raw facts of a machine (GPUs, driver, toolkits, the Python environment) as "
        "archgap collects them.",
    ),
    ToolSpec(
        "fleet",
        "fleet",
        "Compare the hosts of a fleet from probe documents (files or directories of `archgap "
        "probe` output): drift, coverage, gaps per host.",
        omit=frozenset({"hosts", "slurm", "srun_args", "ray", "options"}),
    ),
    ToolSpec(
        "fix",
        "fix",
        "The fixes scan proposes, as exact changes (a plan: nothing is changed).",
        fixed={"apply": False},
        omit=frozenset({"undo", "force", "only"}),
    ),
)
# Changes the target: listed only when the server is started with --allow-fix.
FIX_APPLY = ToolSpec(
    "fix_apply",
    "fix",
    "Apply the fixes scan proposes on the target (reversibly: each file backed up, undone by "
    "`archgap fix --undo`), then scan again to confirm them.",
    fixed={"apply": True},
    omit=frozenset({"undo", "force"}),
    document="fix",
)


def document(spec: ToolSpec, result: Any, arguments: Mapping[str, Any], seconds: float) -> Any:
    """The tool's result as the command's versioned JSON document: the api's document itself,
    or its typed result as ``archgap.report.<command>.document`` renders it."""
    if isinstance(result, dict):
        return result
    import importlib

    rendering = importlib.import_module(f"archgap.report.{spec.command}")
    if hasattr(rendering, "document"):
        return rendering.document(result)
    from archgap.report.jsondoc import document as envelope

    if spec.command == "scan":
        from archgap.report.scan import body

        return envelope("scan", body(result, seconds))
    if spec.command == "versions":
        from archgap.report.versions import body as versions_body

        return envelope("versions", versions_body(result, bool(arguments.get("first")), seconds))
    raise TypeError(f"{spec.name}: no JSON document for {type(result).__name__}")


@cache
def output_schema(command: str) -> dict[str, Any]:
    """The command's JSON Schema file (schema/<command>.schema.json)."""
    text = resources.files("archgap.schema").joinpath(f"{command}.schema.json").read_text()
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def summary(spec: ToolSpec, doc: Mapping[str, Any]) -> str:
    """One line that says what the document found."""
    line = _SUMMARIES.get(spec.command, _done)(doc)
    return f"archgap {spec.name}: {line}"


def _scan(doc: Mapping[str, Any]) -> str:
    packages = doc.get("packages") or []
    failing = [f for f in doc.get("jit") or [] if f.get("status") == "fails"]
    head = "gap found" if doc.get("gap") else "no gap"
    line = f"{head} ({len(packages)} package(s) with device code judged)"
    for f in failing[:1]:
        line += f"; {f.get('package')} {f.get('version')} on {f.get('gpu')}: {f.get('error')}"
    return line


def _explain(doc: Mapping[str, Any]) -> str:
    found = doc.get("explain") or {}
    cause = found.get("root_cause") or found.get("error") or "no architecture-gap error found"
    return f"{found.get('status', '?')}: {cause}"


def _counted(key: str, noun: str) -> Callable[[Mapping[str, Any]], str]:
    return lambda doc: f"{len(doc.get(key) or [])} {noun}"


def _trace(doc: Mapping[str, Any]) -> str:
    found = doc.get("trace") or {}
    kinds = [o.get("kind") for o in found.get("occurrences") or []]
    return (
        f"{found.get('name')}: {kinds.count('write')} write(s), {kinds.count('read')} read(s) "
        f"in {len(found.get('defining_files') or [])} defining file(s)"
    )


def _fleet(doc: Mapping[str, Any]) -> str:
    head = "gap found" if doc.get("gap") else "no gap"
    return f"{head} on {len(doc.get('hosts') or [])} host(s)"


def _versions(doc: Mapping[str, Any]) -> str:
    if doc.get("install"):
        return f"{doc.get('winner')}: {doc.get('install')}"
    return str(doc.get("problem") or "no released version covers the GPUs")


def _recipe(doc: Mapping[str, Any]) -> str:
    spellings = doc.get("spellings") or {}
    return f"TORCH_CUDA_ARCH_LIST={spellings.get('TORCH_CUDA_ARCH_LIST', '?')!r}"


def _probe(doc: Mapping[str, Any]) -> str:
    if doc.get("error"):
        return f"{doc.get('target')}: {doc['error']}"
    missing = doc.get("missing") or []
    return f"facts of {doc.get('target')}" + (f"; missing {', '.join(missing)}" if missing else "")


def _fix(doc: Mapping[str, Any]) -> str:
    actions = doc.get("actions") or []
    line = f"{len(actions)} action(s)" + (f", first: {actions[0].get('action')}" if actions else "")
    applied = doc.get("applied")
    if applied:
        line += f"; applied: {len(applied.get('changed') or [])} file(s) changed"
        if applied.get("error"):
            line += f", refused: {applied['error']}"
    return line


def _done(doc: Mapping[str, Any]) -> str:
    return "done"


_SUMMARIES: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "scan": _scan,
    "explain": _explain,
    "trace": _trace,
    "gates": _counted("gates", "gate(s)"),
    "kernels": _counted("files", "file(s) with device code"),
    "versions": _versions,
    "recipe": _recipe,
    "gpus": _counted("gpus", "GPU(s)"),
    "probe": _probe,
    "fleet": _fleet,
    "fix": _fix,
}
