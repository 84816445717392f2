"""The tools: which api function each one calls, its JSON document and its one-line summary.

Inputs are not written here: ``schema.derive`` reads them off the api function, so a tool
takes exactly the keywords the api does, under the same names. A tool is listed only when the
api has its function. Results are not rendered here either: the command's report module makes
the document (``document(result)``, or ``body`` for the few that take more than the result,
``BODY_INPUTS``), the same one its ``--json`` prints, checked against the command's schema.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from typing import Any

import jsonschema

from archgap.mcp import detail
from archgap.mcp.schema import Derived, derive, narrowed

# The same names mean the same thing in every tool: described once.
DESCRIBED = {
    "python": "the interpreter whose environment is inspected, on the target when one is named "
    "(default: python3 there; here, the interpreter this server runs under: name the project's). "
    "Here it must be the interpreter of a real environment (a venv or conda env) inside the "
    "roots, or one the server was started with (--allow-python)",
    "gpus": "GPUs to judge against: names (RTX PRO 6000, H100, GB10) or compute capabilities "
    "(12.0, sm_120)",
    "host": "inspect over ssh: [user@]host[:port], as the user's ssh config knows it",
    "container": "inspect inside a running container (docker/podman exec)",
    "pod": "inspect inside a Kubernetes pod: [namespace/]pod[/container]",
    "via": "inspect through this command prefix, which starts a program on the target "
    "(srun --nodelist n1, ...)",
    "env_from": "the service's environment instead of the shell's: a process id or an env file",
    "log": "the text of the error log (or a bare error message)",
    "paths": "files or directories (here: inside the client's roots or --allow-root)",
    "dists": "installed distributions by name",
    "timeout": "seconds the probe may take on the target",
    "name": "the variable or attribute to trace (TARGET_CUDA_ARCHS)",
    "kinds": "only these kinds of gate",
    "require": "GPUs that must be covered (names or compute capabilities): for kernels the "
    "build gate, for probe the GPUs the machine must have",
    "deep": "read every kernel entry, not one row per kind",
    "strict": "a library with only PTX (or nothing) for a GPU fails too",
    "driver": "judge against this NVIDIA driver version (580.65.06) instead of the detected one",
    "show_all": "include vendored, example and test trees",
    "documents": "archgap probe documents: files or directories of them",
    "package": "a project name, or a requirement that narrows the versions (torch>=2.8)",
    "first": "stop at the newest version that covers the GPUs",
    "names": "GPU names or compute capabilities to look up (default: every GPU archgap knows)",
    "sections": "the facts to collect: gpu, python, toolchains, binaries, caches, loader",
    "from_paths": "archgap probe documents whose GPUs are built for too (files or directories)",
    "toolkit": "the CUDA version to build with (12.8, 13.0); default: the newest that builds "
    "native code for every GPU",
    "arch_specific": "arch-specific targets (sm_90a, sm_120a) for kernels that use their features",
    "ptx": "also PTX of the newest architecture, which the driver compiles for later GPUs",
    "env_file": "the service's environment file that the fix edits (KEY=value lines)",
    "systemd": "the systemd unit that the fix gives a drop-in (sglang.service)",
    "systemd_dir": "where the unit's drop-in directory is",
    "state_dir": "the directory of the fix journal and its backups on the target (default: "
    "its user's state directory)",
    "only": "apply only the fixes of this kind (env, upgrade, patch); default: the kind the "
    "plan ranks first",
    "force": "also restore files edited since archgap changed them (their edits are lost)",
}
VIA_ALLOWED = (
    "inspect through this command prefix, which starts a program on the target: one of the "
    "prefixes the server was started with (--allow-via)"
)
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
    changes: bool = False  # writes on the target: listed only when the server allows fixes
    open_world: bool = True  # may reach other machines or indexes (a target, a URL, PyPI)

    @property
    def command(self) -> str:
        return self.document or self.name

    def derived(self, function: Callable[..., Any], allow_via: Sequence[str] = ()) -> Derived:
        """The tool's input; ``via`` only with the prefixes the server allows, else absent;
        ``detail`` where the command's report has something to leave out (mcp.detail)."""
        derived = derive(function, self.omit | frozenset(self.fixed), PROGRESS, DESCRIBED)
        derived = narrowed(derived, "via", allow_via, VIA_ALLOWED)
        if not detail.offered(self.command):
            return derived
        level = {"type": "string", "enum": list(detail.LEVELS), "default": detail.DEFAULT}
        properties = {**derived.schema["properties"], "detail": level}
        properties["detail"] = {"description": detail.DESCRIPTION, **level}
        schema = {**derived.schema, "properties": properties}
        return replace(derived, schema=schema, properties=derived.properties | {"detail"})


READ_ONLY = (
    ToolSpec(
        "scan",
        "scan",
        "Can every package of a Python environment run on these GPUs? Verdicts from the kernels "
        "in every native library, the toolkits JIT compilers will use and the code that gates "
        "the architecture; gaps with their chain of causes and fixes.",
    ),
    ToolSpec(
        "health",
        "health",
        "Can this node run the stack, as a Slurm/NHC health check or a drain policy sees it: OK "
        "or the first reason it cannot (a stable code: gpu-fault, gpu-missing, no-kernel, "
        "blocked, jit-fails; exit 1), or why it could not be judged (exit 2); with require, the "
        "GPUs the node must have.",
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
        "Python source: the writes that decide its value (with gpus, whether each write's "
        "branch is taken on them; with env_from, which feeding variables the service sets).",
    ),
    ToolSpec(
        "gates",
        "gates",
        "Where installed packages detect or gate GPU architectures (capability checks, arch "
        "lists, raises); with gpus, only the raises and asserts that reject those GPUs.",
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
        open_world=False,
    ),
    ToolSpec(
        "gpus",
        "gpus",
        "The GPUs archgap knows: compute capability, architecture, source.",
        open_world=False,
    ),
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
        omit=frozenset(
            {"hosts", "hostfile", "slurm", "srun_args", "ray", "ray_runtime_env", "options"}
        ),
        open_world=False,
    ),
    ToolSpec(
        "fix",
        "fix",
        "The fixes scan proposes, as exact changes: each diff or command, and the export lines "
        "where no file is named. A plan: nothing is changed (fix_apply applies it).",
        fixed={"apply": False, "undo": False},
        omit=frozenset({"force", "only", "state_dir"}),
    ),
)
# They change the target: listed (and callable) only when the server is started with --allow-fix.
CHANGING = (
    ToolSpec(
        "fix_apply",
        "fix",
        "Apply the fixes scan proposes on the target (reversibly: each file backed up, a file "
        "changed since the plan refused), then scan again to confirm them; fix_undo reverts.",
        fixed={"apply": True, "undo": False},
        omit=frozenset({"force"}),
        document="fix",
        changes=True,
    ),
    ToolSpec(
        "fix_undo",
        "fix",
        "Revert every change fix_apply (or archgap fix --apply) made on the target, newest "
        "first, from the journal in state_dir; a file edited since is refused unless force.",
        fixed={"undo": True, "apply": False},
        omit=frozenset(
            {"python", "gpus", "env_from", "env_file", "systemd", "systemd_dir", "only"}
        ),
        document="fix",
        changes=True,
    ),
)
ALLOW_FIX = "--allow-fix"


# The commands whose report module's ``body`` takes more than the result: those inputs, from
# the call's arguments and the seconds it took. Every other command's module has
# ``document(result)``, or a ``body(result)`` put in the versioned envelope here.
BODY_INPUTS: dict[str, Callable[[Mapping[str, Any], float], tuple[Any, ...]]] = {
    "scan": lambda arguments, seconds: (seconds,),
    "versions": lambda arguments, seconds: (bool(arguments.get("first")), seconds),
}


class DocumentError(Exception):
    """A result whose document does not follow the command's schema (archgap's own fault)."""


def document(
    spec: ToolSpec, result: Any, arguments: Mapping[str, Any], seconds: float
) -> dict[str, Any]:
    """The tool's result as the command's versioned JSON document, checked against the
    command's schema: the api's document itself (fleet), or the typed result as
    ``archgap.report.<command>`` renders it."""
    command = spec.command
    doc = result if isinstance(result, dict) else _rendered(command, result, arguments, seconds)
    problem = jsonschema.exceptions.best_match(_output_validator(command).iter_errors(doc))
    if problem is not None:
        where = "/".join(str(p) for p in problem.absolute_path)
        raise DocumentError(
            f"the {command} document does not follow its schema"
            f"{' at ' + where if where else ''}: {problem.message}"
        )
    return doc


def shown(spec: ToolSpec, doc: Mapping[str, Any], arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The document at the call's ``detail`` (mcp.detail), checked against the schema again."""
    level = str(arguments.get("detail") or detail.DEFAULT)
    out = detail.reduced(spec.command, doc, level)
    problem = jsonschema.exceptions.best_match(_output_validator(spec.command).iter_errors(out))
    if problem is not None:
        raise DocumentError(f"the {spec.command} document at detail {level}: {problem.message}")
    return out


def _rendered(
    command: str, result: Any, arguments: Mapping[str, Any], seconds: float
) -> dict[str, Any]:
    rendering = importlib.import_module(f"archgap.report.{command}")
    inputs = BODY_INPUTS.get(command)
    if inputs is None and hasattr(rendering, "document"):
        made: dict[str, Any] = rendering.document(result)
        return made
    from archgap.report.jsondoc import document as envelope

    extra = inputs(arguments, seconds) if inputs is not None else ()
    return envelope(command, rendering.body(result, *extra))


@cache
def output_schema(command: str) -> dict[str, Any]:
    """The command's JSON Schema file (schema/<command>.schema.json)."""
    text = resources.files("archgap.schema").joinpath(f"{command}.schema.json").read_text()
    loaded: dict[str, Any] = json.loads(text)
    return loaded


# Words for a reader, not constraints: the listed output schemas leave them out (they are in
# the schema files and docs/json.md), about a fifth of the tool list.
_PROSE = frozenset({"description", "$comment", "title", "examples"})
_NAMES = frozenset({"properties", "patternProperties", "$defs"})  # maps of names to schemas


def _without_prose(node: Any, names: bool = False) -> Any:
    if isinstance(node, dict):
        return {
            key: _without_prose(value, key in _NAMES and not names)
            for key, value in node.items()
            if names or key not in _PROSE
        }
    if isinstance(node, list):
        return [_without_prose(item) for item in node]
    return node


@cache
def listed_schema(command: str) -> dict[str, Any]:
    """The command's output schema as the tool list gives it: the same constraints as the
    schema file, without its prose (a property named ``description`` stays)."""
    stripped: dict[str, Any] = _without_prose(output_schema(command))
    return stripped


@cache
def _output_validator(command: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(output_schema(command))


def summary(spec: ToolSpec, doc: Mapping[str, Any]) -> str:
    """One line that says what the document found."""
    line = _SUMMARIES.get(spec.command, _done)(doc)
    return f"archgap {spec.name}: {line}"


def _scan(doc: Mapping[str, Any]) -> str:
    python = doc.get("python") or {}
    if not python.get("site_packages"):  # nothing was judged: say why, not "no gap"
        return _unread(doc, python.get("executable"))
    verdicts = doc.get("packages") or []  # one entry per package and GPU
    gpus = [g.get("label") for g in doc.get("gpus") or []]
    failing = [f for f in doc.get("jit") or [] if f.get("status") == "fails"]
    head = "gap found" if doc.get("gap") else "no gap"
    judged = _verdict_counts(verdicts)
    packages = len({v.get("package") for v in verdicts})
    line = (
        f"{head}: {packages} package(s) with device code on {len(gpus)} GPU(s) "
        f"({', '.join(str(g) for g in gpus)})"
        + (f", verdicts (package x GPU): {judged}" if judged else "")
        + (f"; {len(failing)} JIT failure(s)" if failing else "")
    )
    return line + "".join(_jit_failure(f) for f in failing[:1])


def _unread(doc: Mapping[str, Any], executable: str | None) -> str:
    """A scan that read no environment: the problems the scan names for its interpreter."""
    why = [p.get("reason") for p in doc.get("problems") or [] if p.get("subject") == executable]
    return f"no environment read at {executable}: {'; '.join(why) or 'no site-packages'}"


def _verdict_counts(verdicts: list[dict[str, Any]]) -> str:
    """How many package x GPU verdicts of each kind: "2 native, 1 none" ("" for none)."""
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[v.get("verdict", "?")] = counts.get(v.get("verdict", "?"), 0) + 1
    return ", ".join(f"{n} {verdict}" for verdict, n in sorted(counts.items()))


def _jit_failure(finding: Mapping[str, Any]) -> str:
    """A failing JIT finding, as the summary names the first: package, version, GPU, error."""
    where = f" on {finding['gpu']}" if finding.get("gpu") else ""
    what = finding.get("error") or finding.get("cause")
    return f"; {finding.get('package')} {finding.get('version')}{where}: {what}"


def _health(doc: Mapping[str, Any]) -> str:
    return f"{doc.get('line')} (exit {doc.get('exit_code')})"


def _explain(doc: Mapping[str, Any]) -> str:
    found = doc.get("explain") or {}
    cause = found.get("root_cause") or found.get("error") or "no architecture-gap error found"
    return f"{found.get('status', '?')}: {cause}"


def _kernels(doc: Mapping[str, Any]) -> str:
    """Files read and those among them that carry device code (the summary's own counts: a
    file without any entry is read, not one with device code)."""
    counts = doc.get("summary") or {}
    line = (
        f"{counts.get('files_with_device_code', 0)} of {counts.get('files', 0)} file(s) "
        "with device code"
    )
    if counts.get("unreadable"):
        line += f", {counts['unreadable']} unreadable"
    gate = doc.get("require")
    if gate:
        line += f"; require {', '.join(gate.get('gpus') or [])}: "
        line += "passed" if gate.get("passed") else f"{len(gate.get('failures') or [])} failure(s)"
    return line


def _trace(doc: Mapping[str, Any]) -> str:
    found = doc.get("trace") or {}
    kinds = [o.get("kind") for o in found.get("occurrences") or []]
    return (
        f"{found.get('name')}: {kinds.count('write')} write(s), {kinds.count('read')} read(s) "
        f"in {len(found.get('defining_files') or [])} defining file(s)"
    )


def _gates(doc: Mapping[str, Any]) -> str:
    """The gates shown, counted over every target and function (not the keys of the body)."""
    targets = (doc.get("gates") or {}).get("targets") or []
    functions = [f for t in targets for f in t.get("functions") or []]
    gates = sum(len(f.get("gates") or []) for f in functions)
    return f"{gates} gate(s) in {len(functions)} function(s)"


def _fleet(doc: Mapping[str, Any]) -> str:
    head = "gap found" if doc.get("gap") else "no gap"
    return f"{head} on {len(doc.get('hosts') or [])} host(s)"


def _versions(doc: Mapping[str, Any]) -> str:
    if doc.get("install"):
        return f"{doc.get('winner')}: {doc.get('install')}"
    return str(doc.get("problem") or "no released version covers the GPUs")


def _recipe(doc: Mapping[str, Any]) -> str:
    targets = ", ".join(t.get("name", "?") for t in doc.get("targets") or [])
    oldest = (doc.get("builds_with") or {}).get("oldest")
    spellings = doc.get("spellings") or {}
    return (
        f"{targets or 'no target'} (CUDA {doc.get('toolkit')}, builds with >= {oldest}); "
        f"TORCH_CUDA_ARCH_LIST={spellings.get('TORCH_CUDA_ARCH_LIST', '?')!r}"
    )


def _gpus(doc: Mapping[str, Any]) -> str:
    found = doc.get("gpus") or []
    if len(found) > 3:
        return f"{len(found)} GPU(s)"
    named = [
        f"{g.get('name')} {g.get('compute_capability')} ({g.get('architecture')})" for g in found
    ]
    return f"{len(found)} GPU(s): {'; '.join(named)}" if named else "no GPU"


def _probe(doc: Mapping[str, Any]) -> str:
    error = doc.get("error")
    if error:
        return f"{doc.get('target')} could not be probed: {error.get('message')}"
    sections = (doc.get("facts") or {}).get("sections") or {}
    gpus = (sections.get("gpu") or {}).get("gpus")
    line = f"facts of {doc.get('target')} ({', '.join(sorted(sections)) or 'no section'})"
    if gpus is not None:
        line += f", {len(gpus)} GPU(s)"
    missing = doc.get("missing") or []
    return line + (f"; missing {', '.join(missing)}" if missing else "")


def _fix(doc: Mapping[str, Any]) -> str:
    undo = doc.get("undo")
    if undo is not None:
        return _undo(undo)
    actions = doc.get("actions") or []
    line = ("gap found" if doc.get("gap") else "no gap") + f", {len(actions)} action(s)"
    line += f", first: {actions[0].get('action')}" if actions else ""
    applied = doc.get("applied")
    if applied:
        return line + _applied(applied, doc.get("verified") or [])
    return line + (" (a plan: nothing changed)" if actions else "")


def _undo(undo: Mapping[str, Any]) -> str:
    """An undo: the files restored, those refused, the error."""
    line = f"undo: {len(undo.get('restored') or [])} file(s) restored"
    refused = undo.get("refused") or []
    line += f", {len(refused)} refused (edited since; force restores them)" if refused else ""
    return line + (f"; {undo['error']}" if undo.get("error") else "")


def _applied(applied: Mapping[str, Any], verified: list[dict[str, Any]]) -> str:
    """What --apply changed, what it refused, and what the new scan says of each finding."""
    line = f"; applied: {len(applied.get('changed') or [])} file(s) changed"
    if applied.get("error"):
        line += f", refused: {applied['error']}"
    statuses = [v.get("status") for v in verified]
    return line + (f"; rescanned: {', '.join(str(s) for s in statuses)}" if statuses else "")


def _done(doc: Mapping[str, Any]) -> str:
    return "done"


_SUMMARIES: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "scan": _scan,
    "health": _health,
    "explain": _explain,
    "trace": _trace,
    "gates": _gates,
    "kernels": _kernels,
    "versions": _versions,
    "recipe": _recipe,
    "gpus": _gpus,
    "probe": _probe,
    "fleet": _fleet,
    "fix": _fix,
}
