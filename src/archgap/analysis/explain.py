"""From a crash log to the root cause: signature match, chain of steps, root cause, ranked fixes.

Pure: a parsed log, the signatures, and (optionally) a view of the examined environment (installed
sources as text, environment variables, the GPU, the nvcc a JIT would use) in; a ``Diagnosis`` out.

With an environment, the chain is read off the installed code: the raising line and its guard, the
state the guard reads (``TARGET_CUDA_ARCHS``), every write of that state with the branch it sits in,
knobs (environment variables in those branch conditions), exceptions swallowed around a write and
what raises them, and the CUDA-version and GPU conditions of that raise joined with the machine's
facts. Every line number comes from the installed source, none is stored. Without an environment
the answer is built from what the log states and the signatures' knowledge, marked as such. An
error no signature knows is reported as unknown, with what was recognised: never an invented cause.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from archgap.analysis.logparse import Frame, ParsedLog
from archgap.kb.signatures import FIX_KINDS, Signature

# How a step is known.
CONFIRMED = "confirmed"  # read on the examined environment (installed source, env, nvcc, --gpu)
FROM_LOG = "from-log"  # stated by the log
KNOWLEDGE = "knowledge"  # archgap's signature knowledge base (not checked here)
UNCONFIRMED = "unconfirmed"  # from the log, contradicted by the examined environment

_MUTATORS = frozenset(
    (
        "add",
        "append",
        "extend",
        "update",
        "insert",
        "setdefault",
        "pop",
        "clear",
        "remove",
        "discard",
    )
)
_BROAD = frozenset(("Exception", "BaseException"))
_SITE_DIRS = ("site-packages/", "dist-packages/")
_VERSION_CALL = re.compile(r"cuda_version", re.IGNORECASE)


# ---------------------------------------------------------------- inputs: the examined environment
@dataclass(frozen=True)
class InstalledDistribution:
    name: str
    version: str
    files: Mapping[str, str]  # site-packages-relative path of each .py it owns -> source text


@dataclass(frozen=True)
class NvccFact:
    """The nvcc a JIT resolves (FlashInfer: CUDA_HOME, CUDA_PATH, which nvcc, /usr/local/cuda)."""

    path: str
    version: str | None  # "12.8"; None when it could not be run
    resolved_from: str  # "CUDA_HOME=/usr/local/cuda-12.8 (shell)", "PATH", "/usr/local/cuda"
    error: str | None = None


@dataclass(frozen=True)
class ToolkitOption:
    home: str
    version: str


@dataclass(frozen=True)
class GpuFact:
    name: str
    compute_capability: str  # "12.0"
    source: str  # "--gpu sm_120", "nvidia-smi"


@dataclass(frozen=True)
class ExaminedEnvironment:
    description: str  # "/path/bin/python (3.11.2)"
    env: Mapping[str, str]
    env_source: str  # "shell", "/proc/123/environ", an env file
    distributions: tuple[InstalledDistribution, ...]
    gpus: tuple[GpuFact, ...] = ()
    nvcc: NvccFact | None = None
    toolkits: tuple[ToolkitOption, ...] = ()  # other toolkits found (for fixes)

    def distribution_of(self, relpath: str) -> InstalledDistribution | None:
        for dist in self.distributions:
            if relpath in dist.files:
                return dist
        return None

    def distribution(self, name: str) -> InstalledDistribution | None:
        wanted = _normalise(name)
        for dist in self.distributions:
            if _normalise(dist.name) == wanted:
                return dist
        return None


# ---------------------------------------------------------------- outputs
@dataclass(frozen=True)
class SignatureMatch:
    signature: str
    project: str
    text: str  # the matched text
    line: int
    workers: tuple[str, ...]
    count: int
    in_traceback: bool


@dataclass(frozen=True)
class Step:
    text: str
    location: str  # "flashinfer/compilation_context.py:62", or "" for a fact
    fact: str  # the code line or the machine fact
    source: str  # where it was read: a file, a command, the log, a signature
    status: str  # CONFIRMED, FROM_LOG, KNOWLEDGE, UNCONFIRMED


@dataclass(frozen=True)
class FixSuggestion:
    kind: str  # env < toolkit < upgrade < patch
    text: str
    source: str


@dataclass(frozen=True)
class Recognised:
    gpus: tuple[str, ...]
    compute_capabilities: tuple[str, ...]
    versions: tuple[tuple[str, str], ...]  # ("torch", "2.9.1+cu128")
    paths: tuple[tuple[str, str], ...]  # ("cuda_home", "/usr/local/cuda")
    frames: tuple[str, ...]  # "file:line in function" of the last traceback
    error: str  # the last exception, or ""
    workers: tuple[str, ...]


@dataclass(frozen=True)
class Diagnosis:
    status: str  # "diagnosed", "unknown", "no-error"
    signature: str | None  # the signature of the error the log ends with
    root_signature: str | None  # the signature that explains it (may be the same)
    error: str
    steps: tuple[Step, ...]
    root_cause: str
    fixes: tuple[FixSuggestion, ...]
    matches: tuple[SignatureMatch, ...]
    recognised: Recognised
    confirmed: bool  # the chain was confirmed on the examined environment
    notes: tuple[str, ...] = ()
    environment: str = ""  # what was examined ("" = log only)


# ---------------------------------------------------------------- signature matching
def match_signatures(log: ParsedLog, signatures: Sequence[Signature]) -> tuple[SignatureMatch, ...]:
    """Every signature found in the log, exceptions of tracebacks first, then other lines."""
    found: dict[tuple[str, str], SignatureMatch] = {}
    texts: list[tuple[str, int, tuple[str, ...], int, bool]] = []
    for tb in log.tracebacks:
        joined = " ".join(f"{tb.exception_type}: {tb.message}".split())
        texts.append((joined, tb.first_line, tb.workers, len(tb.workers), True))
    warned = {w.text: w for w in log.warnings}
    for line, text in log.messages:
        warning = warned.get(text)
        workers, count = (warning.workers, warning.count) if warning else ((), 1)
        texts.append((text, line, workers, count, False))
    for text, line, workers, count, in_tb in texts:
        for signature in signatures:
            match = signature.search(text)
            if match is None:
                continue
            key = (signature.id, match.group(0))
            if key in found:
                old = found[key]
                found[key] = SignatureMatch(
                    old.signature,
                    old.project,
                    old.text,
                    old.line,
                    tuple(dict.fromkeys((*old.workers, *workers))),
                    old.count + (count if not in_tb else 0),
                    old.in_traceback or in_tb,
                )
                continue
            found[key] = SignatureMatch(
                signature.id, signature.project, match.group(0), line, workers, count, in_tb
            )
    return tuple(sorted(found.values(), key=lambda m: (not m.in_traceback, m.line)))


# ---------------------------------------------------------------- code facts (ast over text)
@dataclass(frozen=True)
class Guard:
    kind: str  # "if" (inside the body), "else" (inside orelse), "for", "try"
    line: int
    text: str
    node: ast.AST = field(compare=False, repr=False)


@dataclass(frozen=True)
class RaiseFact:
    file: str
    line: int
    function: str
    code: str
    message: str
    guards: tuple[Guard, ...]


@dataclass(frozen=True)
class WriteFact:
    file: str
    line: int
    function: str
    code: str
    empty_init: bool
    guards: tuple[Guard, ...]
    swallowed_at: int | None  # line of a broad except around it that only logs or passes
    handler_text: str
    raises: tuple[RaiseFact, ...]  # raises reachable through calls in the written value


class _Module:
    def __init__(self, relpath: str, text: str) -> None:
        self.relpath = relpath
        self.lines = text.splitlines()
        try:
            self.tree: ast.Module | None = ast.parse(text)
        except (SyntaxError, ValueError):
            self.tree = None
        self.parents: dict[ast.AST, ast.AST] = {}
        if self.tree is not None:
            for node in ast.walk(self.tree):
                for child in ast.iter_child_nodes(node):
                    self.parents[child] = node

    def line(self, number: int) -> str:
        return self.lines[number - 1].strip() if 0 < number <= len(self.lines) else ""

    def statement_at(self, number: int) -> ast.stmt | None:
        best: ast.stmt | None = None
        if self.tree is None:
            return None
        for node in ast.walk(self.tree):
            if not isinstance(node, ast.stmt):
                continue
            inside = node.lineno <= number <= (node.end_lineno or 0)
            if inside and (best is None or node.lineno >= best.lineno):
                best = node
        return best

    def function_of(self, node: ast.AST) -> str:
        current: ast.AST | None = node
        while current is not None:
            if isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return current.name
            current = self.parents.get(current)
        return "<module>"

    def guards(self, node: ast.AST) -> tuple[Guard, ...]:
        out: list[Guard] = []
        child, parent = node, self.parents.get(node)
        while parent is not None and not isinstance(
            parent, (ast.FunctionDef, ast.AsyncFunctionDef)
        ):
            if isinstance(parent, ast.If):
                kind = "if" if child in parent.body else "else" if child in parent.orelse else ""
                if kind:
                    out.append(Guard(kind, parent.lineno, ast.unparse(parent.test), parent))
            elif isinstance(parent, (ast.For, ast.AsyncFor)) and child in parent.body:
                out.append(Guard("for", parent.lineno, ast.unparse(parent.iter), parent))
            elif isinstance(parent, ast.Try) and child in parent.body:
                out.append(Guard("try", parent.lineno, "", parent))
            child, parent = parent, self.parents.get(parent)
        return tuple(out)

    def functions(self, name: str) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
        if self.tree is None:
            return []
        return [
            n
            for n in ast.walk(self.tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name
        ]

    def raises_in(self, function: ast.AST) -> tuple[RaiseFact, ...]:
        out: list[RaiseFact] = []
        for node in ast.walk(function):
            if isinstance(node, ast.Raise) and node.exc is not None:
                out.append(self._raise_fact(node))
        return tuple(out)

    def _raise_fact(self, node: ast.Raise) -> RaiseFact:
        message = ""
        exc = node.exc
        if isinstance(exc, ast.Call) and exc.args:
            message = _literal_text(exc.args[0])
        return RaiseFact(
            self.relpath,
            node.lineno,
            self.function_of(node),
            self.line(node.lineno),
            message,
            self.guards(node),
        )


def _literal_text(node: ast.AST) -> str:
    """The constant text of a string or f-string (placeholders dropped)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)
        )
    return ""


def _written_names(target: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(target):
        if isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.Name):
            names.add(node.id)
    return names


def _names_read(expr: ast.AST) -> list[str]:
    """Names and attribute names an expression reads, outermost attribute last."""
    out: list[str] = []
    for node in ast.walk(expr):
        if isinstance(node, ast.Name):
            out.append(node.id)
        elif isinstance(node, ast.Attribute):
            out.append(node.attr)
    return out


def _swallowing_handler(module: _Module, guards: tuple[Guard, ...]) -> tuple[int | None, str]:
    """The broad ``except`` around a statement whose body only logs, prints or passes."""
    for guard in guards:
        if guard.kind != "try" or not isinstance(guard.node, ast.Try):
            continue
        for handler in guard.node.handlers:
            broad = handler.type is None or (
                isinstance(handler.type, ast.Name) and handler.type.id in _BROAD
            )
            quiet = all(
                isinstance(s, (ast.Pass, ast.Continue))
                or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Call))
                for s in handler.body
            )
            if broad and quiet:
                body = "; ".join(module.line(s.lineno) for s in handler.body)
                return handler.lineno, body
    return None, ""


def find_writes(module: _Module, name: str) -> tuple[WriteFact, ...]:
    """Every statement of a module that writes ``name`` (assignment or mutation)."""
    if module.tree is None:
        return ()
    statements: dict[int, tuple[ast.stmt, bool]] = {}
    for node in ast.walk(module.tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(name in _written_names(t) and _last_name(t) == name for t in targets):
                value = node.value
                empty = (
                    isinstance(value, ast.Call)
                    and not value.args
                    and _call_name(value) in ("set", "list", "dict", "tuple")
                ) or (isinstance(value, (ast.List, ast.Dict, ast.Set)) and not _has_items(value))
                statements[node.lineno] = (node, bool(empty))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _MUTATORS
            and _last_name(node.func.value) == name
        ):
            stmt = _enclosing_statement(module, node)
            if stmt is not None:
                statements.setdefault(stmt.lineno, (stmt, False))
    out: list[WriteFact] = []
    for line in sorted(statements):
        stmt, empty = statements[line]
        guards = module.guards(stmt)
        swallowed, handler = _swallowing_handler(module, guards)
        raises: list[RaiseFact] = []
        for call in (n for n in ast.walk(stmt) if isinstance(n, ast.Call)):
            callee = _call_name(call)
            if callee and callee not in _MUTATORS:
                for function in module.functions(callee):
                    raises.extend(module.raises_in(function))
        out.append(
            WriteFact(
                module.relpath,
                line,
                module.function_of(stmt),
                module.line(line),
                empty,
                guards,
                swallowed,
                handler,
                tuple(raises),
            )
        )
    return tuple(out)


def _has_items(node: ast.AST) -> bool:
    if isinstance(node, (ast.List, ast.Set)):
        return bool(node.elts)
    if isinstance(node, ast.Dict):
        return bool(node.keys)
    return True


def _last_name(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Subscript):
        return _last_name(node.value)
    return ""


def _call_name(call: ast.Call) -> str:
    return _last_name(call.func)


def _enclosing_statement(module: _Module, node: ast.AST) -> ast.stmt | None:
    current: ast.AST | None = node
    while current is not None and not isinstance(current, ast.stmt):
        current = module.parents.get(current)
    return current


def _env_knobs(text: str) -> tuple[str, ...]:
    """Environment variables a condition reads: "X" in os.environ, os.environ.get("X"), getenv."""
    found = re.findall(r"""['"]([A-Z][A-Z0-9_]{2,})['"]\s*(?:in\s+os\.environ|\))""", text)
    found += re.findall(r"""(?:environ\.get|getenv)\(\s*['"]([A-Z][A-Z0-9_]{2,})['"]""", text)
    return tuple(dict.fromkeys(found))


# ---------------------------------------------------------------- helpers
def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def site_relative(path: str) -> str | None:
    """A frame's path relative to its site-packages (paths in logs come from other machines)."""
    path = path.replace("\\", "/")
    for marker in _SITE_DIRS:
        index = path.rfind(marker)
        if index >= 0:
            return path[index + len(marker) :]
    return None


def _version_tuple(text: str | None) -> tuple[int, ...]:
    match = re.match(r"\s*(\d+(?:\.\d+)*)", text or "")
    return tuple(int(p) for p in match.group(1).split(".")) if match else ()


def _cc_major(cc: str) -> int | None:
    match = re.match(r"(\d+)\.", cc)
    return int(match.group(1)) if match else None


def recognise(log: ParsedLog) -> Recognised:
    last = log.tracebacks[-1] if log.tracebacks else None
    versions = tuple(
        (e.kind, e.value)
        for e in log.evidence
        if e.kind
        in (
            "torch",
            "torch_cuda",
            "flashinfer",
            "nvcc",
            "driver",
            "driver_cuda",
            "vllm",
            "sglang",
            "triton",
            "flashinfer_cuda_version",
        )
    )
    paths = tuple(
        (e.kind, e.value)
        for e in log.evidence
        if e.kind in ("cuda_home", "cuda_path", "flashinfer_cuda_arch_list", "torch_cuda_arch_list")
    )
    return Recognised(
        gpus=tuple(e.value for e in log.evidence_of("gpu")),
        compute_capabilities=tuple(e.value for e in log.evidence_of("compute_capability")),
        versions=versions,
        paths=paths,
        frames=tuple(f"{f.file}:{f.line} in {f.function}" for f in last.frames) if last else (),
        error=f"{last.exception_type}: {last.message.splitlines()[0] if last.message else ''}"
        if last
        else "",
        workers=log.workers,
    )


# ---------------------------------------------------------------- the diagnosis
@dataclass
class _Chain:
    steps: list[Step] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    confirmed: bool = False
    contradicted: bool = False
    required_cuda: str | None = None
    knobs_unset: list[str] = field(default_factory=list)
    nvcc_line: str = ""

    def add(self, text: str, location: str, fact: str, source: str, status: str) -> None:
        self.steps.append(Step(text, location, fact, source, status))


def explain(
    log: ParsedLog,
    signatures: Sequence[Signature],
    environment: ExaminedEnvironment | None = None,
) -> Diagnosis:
    """The diagnosis of a log, confirmed on ``environment`` where one is given."""
    by_id = {s.id: s for s in signatures}
    matches = match_signatures(log, signatures)
    recognised = recognise(log)
    if not matches:
        status = "unknown" if log.tracebacks or _looks_like_error(log) else "no-error"
        return Diagnosis(
            status=status,
            signature=None,
            root_signature=None,
            error=recognised.error,
            steps=(),
            root_cause="",
            fixes=(),
            matches=(),
            recognised=recognised,
            confirmed=False,
            notes=("no known architecture-gap signature in this input",),
            environment=environment.description if environment else "",
        )

    primary = _primary(matches, by_id)
    signature = by_id[primary.signature]
    explaining = _explaining(primary, matches, by_id)
    root = explaining or primary
    root_signature = by_id[root.signature]

    chain = _Chain()
    frames = _error_frames(log, primary)
    chain.add(
        f"The error: {primary.text}",
        _frame_location(frames[-1]) if frames else "",
        frames[-1].code if frames else "",
        f"log line {primary.line}" + _workers_note(primary),
        FROM_LOG,
    )
    if explaining is not None:
        chain.add(
            f"Earlier in the log: {explaining.text}",
            "",
            "",
            f"log line {explaining.line}" + _workers_note(explaining),
            FROM_LOG,
        )

    walked = False
    if environment is not None:
        walked = _walk_code(chain, log, signature, frames, environment, matches, by_id)
    if not walked:
        _knowledge_steps(chain, log, signature, root_signature, environment)

    root_cause = _root_cause(chain, signature, root_signature, root, log, environment, walked)
    fixes = _fixes(signature, root_signature, chain, log, environment)
    if chain.contradicted:
        chain.notes.append(
            "unconfirmed: the log contradicts the examined environment; the service's environment "
            "differs (examine the service's own environment with --env-from PID or an env file)"
        )
    return Diagnosis(
        status="diagnosed",
        signature=signature.id,
        root_signature=root_signature.id,
        error=primary.text,
        steps=tuple(chain.steps),
        root_cause=root_cause,
        fixes=fixes,
        matches=matches,
        recognised=recognised,
        confirmed=chain.confirmed and not chain.contradicted,
        notes=tuple(chain.notes),
        environment=environment.description if environment else "",
    )


def _looks_like_error(log: ParsedLog) -> bool:
    return any(("error" in text.lower()) for _, text in log.messages)


def _primary(matches: tuple[SignatureMatch, ...], by_id: dict[str, Signature]) -> SignatureMatch:
    """The error the log ends with: the last traceback's match, else the last non-secondary one."""
    in_tb = [m for m in matches if m.in_traceback]
    if in_tb:
        return max(in_tb, key=lambda m: m.line)
    primary = [m for m in matches if not by_id[m.signature].secondary]
    return max(primary or list(matches), key=lambda m: m.line)


def _explaining(
    primary: SignatureMatch, matches: tuple[SignatureMatch, ...], by_id: dict[str, Signature]
) -> SignatureMatch | None:
    """Another match in the log that the primary's signature names as its usual cause."""
    wanted = by_id[primary.signature].explained_by
    for wanted_id in wanted:
        for match in matches:
            if match.signature == wanted_id and match is not primary:
                if wanted_id == "flashinfer-failed-device-capability":
                    deeper = [m for m in matches if m.signature in wanted and m is not match]
                    if deeper:
                        continue
                return match
    return None


def _workers_note(match: SignatureMatch) -> str:
    workers = [w for w in match.workers if w]
    if not workers:
        return f" ({match.count}x)" if match.count > 1 else ""
    shown = ", ".join(workers[:8]) + (", ..." if len(workers) > 8 else "")
    return f", {match.count}x from {shown}"


def _error_frames(log: ParsedLog, primary: SignatureMatch) -> tuple[Frame, ...]:
    for tb in reversed(log.tracebacks):
        if primary.text in " ".join(f"{tb.exception_type}: {tb.message}".split()):
            return tb.frames
    return ()


def _frame_location(frame: Frame) -> str:
    relative = site_relative(frame.file)
    return f"{relative or frame.file}:{frame.line}"


def _walk_code(
    chain: _Chain,
    log: ParsedLog,
    signature: Signature,
    frames: tuple[Frame, ...],
    environment: ExaminedEnvironment,
    matches: tuple[SignatureMatch, ...],
    by_id: dict[str, Signature],
) -> bool:
    """The chain read off the installed code; False when the raise site is not installed."""
    site = _locate_raise(signature, frames, environment, chain)
    if site is None:
        return False
    dist, module, raise_line = site
    source = f"{dist.name} {dist.version} installed ({environment.description})"
    statement = module.statement_at(raise_line)
    if statement is None:
        return False
    function = module.function_of(statement)
    chain.add(
        f"Raised in {function}()",
        f"{module.relpath}:{raise_line}",
        module.line(raise_line),
        source,
        CONFIRMED,
    )
    chain.confirmed = True
    guards = module.guards(statement)
    condition = next((g for g in guards if g.kind in ("if", "else")), None)
    state_names: list[str] = []
    if condition is not None:
        chain.add(
            f"It raises when `{_condition_text(condition)}`",
            f"{module.relpath}:{condition.line}",
            module.line(condition.line),
            source,
            CONFIRMED,
        )
        state_names = _state_names(module, statement, condition)
    for name in state_names[:2]:
        _follow_state(chain, log, name, dist, source, environment, module, statement)
    return True


def _condition_text(condition: Guard) -> str:
    return f"not ({condition.text})" if condition.kind == "else" else condition.text


def _locate_raise(
    signature: Signature,
    frames: tuple[Frame, ...],
    environment: ExaminedEnvironment,
    chain: _Chain,
) -> tuple[InstalledDistribution, _Module, int] | None:
    # 1. The log's own last frame, mapped by site-packages-relative path onto this environment.
    if frames:
        last = frames[-1]
        relative = site_relative(last.file)
        dist = environment.distribution_of(relative) if relative else None
        if dist is not None and relative is not None:
            module = _Module(relative, dist.files[relative])
            installed = module.line(last.line)
            if last.code and installed != last.code.strip():
                located = _find_code(module, last.code.strip())
                chain.notes.append(
                    f"{relative}:{last.line} here reads `{installed}`, the log shows "
                    f"`{last.code.strip()}`: the installed {dist.name} {dist.version} differs from "
                    "the one that crashed"
                )
                if located is None:
                    return None
                return dist, module, located
            return dist, module, last.line
    # 2. The signature's known raise sites, found by their code text in the installed version.
    for raise_site in signature.raise_sites:
        dist = environment.distribution(raise_site.distribution)
        if dist is None or not raise_site.covers(dist.version) or raise_site.file not in dist.files:
            continue
        module = _Module(raise_site.file, dist.files[raise_site.file])
        line = _find_code(module, raise_site.code)
        if line is not None:
            return dist, module, line
    return None


def _find_code(module: _Module, code: str) -> int | None:
    for number, text in enumerate(module.lines, start=1):
        if code in text:
            return number
    return None


def _state_names(module: _Module, statement: ast.stmt, condition: Guard) -> list[str]:
    """The state a raise's condition depends on: names in the test, and the loop each is set in."""
    names = [n for n in _names_read(condition.node.test) if n not in ("not", "len")]  # type: ignore[attr-defined]
    function = _enclosing_function(module, statement)
    state: list[str] = []
    if function is None:
        return names
    for name in names:
        for node in ast.walk(function):
            if isinstance(node, ast.Assign) and any(_last_name(t) == name for t in node.targets):
                for guard in module.guards(node):
                    if guard.kind == "for" and isinstance(guard.node, (ast.For, ast.AsyncFor)):
                        # The loop's collection: its outermost attribute (ctx.TARGET_CUDA_ARCHS).
                        collection = _last_name(guard.node.iter)
                        if collection and collection not in state:
                            state.append(collection)
    # Upper-case names (module or instance state) are what other code writes.
    direct = [n for n in names if n.isupper()]
    return state + [n for n in direct if n not in state]


def _enclosing_function(module: _Module, node: ast.AST) -> ast.AST | None:
    current: ast.AST | None = node
    while current is not None and not isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef)):
        current = module.parents.get(current)
    return current


def _follow_state(
    chain: _Chain,
    log: ParsedLog,
    name: str,
    dist: InstalledDistribution,
    source: str,
    environment: ExaminedEnvironment,
    reader: _Module,
    statement: ast.stmt,
) -> None:
    writes: list[WriteFact] = []
    modules: dict[str, _Module] = {}
    for relpath, text in dist.files.items():
        if name in text:
            module = _Module(relpath, text)
            found = find_writes(module, name)
            if found:
                modules[relpath] = module
                writes.extend(found)
    if not writes:
        return
    writes.sort(key=lambda w: (w.file, w.line))
    empty = [w for w in writes if w.empty_init]
    for write in empty:
        chain.add(
            f"{name} starts empty",
            f"{write.file}:{write.line}",
            write.code,
            source,
            CONFIRMED,
        )
    # Group the other writes by the branch (if/else) that guards them.
    branches: dict[tuple[int, str], list[WriteFact]] = {}
    for write in writes:
        if write.empty_init:
            continue
        branch = _branch_guard(write)
        key = (branch.line, branch.kind) if branch else (0, "")
        branches.setdefault(key, []).append(write)
    for (_, kind), group in sorted(
        branches.items(), key=lambda item: (item[0][0], item[0][1] != "if")
    ):
        module = modules[group[0].file]
        lines = "/".join(str(w.line) for w in group)
        condition = _branch_guard(group[0])
        knobs = _env_knobs(condition.text) if condition else ()
        swallowing = [w for w in group if w.swallowed_at is not None]
        if knobs and kind == "if" and not swallowing:
            _knob_branch(chain, log, name, group, knobs, condition, environment, source, lines)
        elif swallowing:
            for write in swallowing:
                _swallowed_write(chain, log, name, write, module, environment, source, kind, knobs)
        else:
            where = f" (under `{condition.text}`)" if condition else ""
            chain.add(
                f"{name} is also written here{where}",
                f"{group[0].file}:{lines}",
                group[0].code,
                source,
                CONFIRMED,
            )


def _branch_guard(write: WriteFact) -> Guard | None:
    """The branch a write belongs to: the one a knob decides, else the innermost if/else."""
    branches = [g for g in write.guards if g.kind in ("if", "else")]
    return next((g for g in branches if _env_knobs(g.text)), branches[0] if branches else None)


def _knob_branch(
    chain: _Chain,
    log: ParsedLog,
    name: str,
    group: list[WriteFact],
    knobs: tuple[str, ...],
    condition: Guard | None,
    environment: ExaminedEnvironment,
    source: str,
    lines: str,
) -> None:
    knob = knobs[0]
    value = environment.env.get(knob)
    file = group[0].file
    if value is None:
        chain.knobs_unset.append(knob)
        chain.add(
            f"The {knob} branch (writes at :{lines.replace('/', '/:')}) is not taken: "
            f"{knob} is not "
            f"set in the examined environment ({environment.env_source})",
            f"{file}:{condition.line if condition else group[0].line}",
            condition.text if condition else "",
            f"environment ({environment.env_source})",
            CONFIRMED,
        )
    else:
        chain.add(
            f"{knob}={value!r} is set ({environment.env_source}): {name} is taken from it "
            f"(writes at {file}:{lines})",
            f"{file}:{condition.line if condition else group[0].line}",
            condition.text if condition else "",
            f"environment ({environment.env_source})",
            CONFIRMED,
        )


def _swallowed_write(
    chain: _Chain,
    log: ParsedLog,
    name: str,
    write: WriteFact,
    module: _Module,
    environment: ExaminedEnvironment,
    source: str,
    branch_kind: str,
    knobs: tuple[str, ...],
) -> None:
    # Which of the raises reachable from the write fired: the one whose message the log shows.
    logged = {w.text: w for w in log.warnings}
    fired: RaiseFact | None = None
    seen_text = ""
    for candidate in write.raises:
        if not candidate.message:
            continue
        for text in [*logged, *(t for _, t in log.messages)]:
            if candidate.message in text:
                fired, seen_text = candidate, text
                break
        if fired:
            break
    branch = (
        f" in the else branch of `{', '.join(knobs)}`" if branch_kind == "else" and knobs else ""
    )
    if fired is None:
        # No message in the log: a raise whose conditions hold on this environment fires here.
        for candidate in write.raises:
            scratch = _Chain()
            evaluated, holds = _raise_conditions(scratch, candidate, environment, source)
            if evaluated and holds:
                chain.add(
                    f"The auto-detect write at :{write.line}{branch} never completes: "
                    f"{candidate.function}() raises at :{candidate.line} on this environment and "
                    f"the `except` at :{write.swallowed_at} swallows it",
                    f"{write.file}:{write.line}",
                    write.code,
                    source,
                    CONFIRMED,
                )
                chain.add(
                    f"The swallowed exception: {candidate.message}",
                    f"{candidate.file}:{candidate.line}",
                    candidate.code,
                    source,
                    CONFIRMED,
                )
                chain.steps.extend(scratch.steps)
                chain.required_cuda = scratch.required_cuda
                chain.nvcc_line = scratch.nvcc_line
                return
    if fired is None:
        chain.add(
            f"The write at :{write.line}{branch} can fail silently: the `except` at "
            f":{write.swallowed_at} swallows any exception ({write.handler_text})",
            f"{write.file}:{write.line}",
            write.code,
            source,
            CONFIRMED,
        )
        for candidate in write.raises:
            chain.add(
                f"{candidate.function}() can raise {candidate.message or 'an exception'}",
                f"{candidate.file}:{candidate.line}",
                candidate.code,
                source,
                CONFIRMED,
            )
        return
    warning = logged.get(seen_text)
    who = ""
    if warning is not None:
        workers = [w for w in warning.workers if w]
        who = f" ({warning.count}x" + (f" from {', '.join(workers[:8])}" if workers else "") + ")"
    chain.add(
        f"The auto-detect write at :{write.line}{branch} never completes: "
        f"{fired.function}() raises "
        f"at :{fired.line} and the `except` at :{write.swallowed_at} swallows it",
        f"{write.file}:{write.line}",
        write.code,
        source,
        CONFIRMED,
    )
    chain.add(
        f"The swallowed exception, as the handler logged it{who}: {seen_text}",
        f"{fired.file}:{fired.line}",
        fired.code,
        "log",
        FROM_LOG,
    )
    _raise_conditions(chain, fired, environment, source)


def _raise_conditions(
    chain: _Chain, fired: RaiseFact, environment: ExaminedEnvironment, source: str
) -> tuple[int, bool]:
    """Join the raise's guards (GPU major, CUDA version) with the machine's facts.

    Returns (how many guards were evaluated, whether all evaluated ones hold)."""
    evaluated, holds_all = 0, True
    for guard in reversed(fired.guards):  # outermost first: the GPU test, then the version
        if guard.kind not in ("if", "else"):
            continue
        major = re.fullmatch(r"major\s*==\s*(\d+)", guard.text)
        version_call = _VERSION_CALL.search(guard.text)
        if major and guard.kind == "if":
            wanted = int(major.group(1))
            gpus = [g for g in environment.gpus if _cc_major(g.compute_capability) == wanted]
            evaluated += 1
            if not gpus:
                holds_all = False
            if gpus:
                gpu = gpus[0]
                chain.add(
                    f"`{guard.text}` holds: the GPU is {gpu.name} (compute capability "
                    f"{gpu.compute_capability})",
                    f"{fired.file}:{guard.line}",
                    guard.text,
                    gpu.source,
                    CONFIRMED,
                )
        elif version_call:
            required = re.search(r"['\"](\d+\.\d+)['\"]", guard.text)
            if not required:
                continue
            chain.required_cuda = required.group(1)
            needs_false = guard.kind == "else"
            nvcc = environment.nvcc
            if nvcc is None or nvcc.version is None:
                why = nvcc.error if nvcc and nvcc.error else "no nvcc found"
                chain.add(
                    f"`{guard.text}` depends on the CUDA version of the nvcc the package finds: "
                    f"here {why}",
                    f"{fired.file}:{guard.line}",
                    guard.text,
                    "toolchain",
                    CONFIRMED,
                )
                continue
            below = _version_tuple(nvcc.version) < _version_tuple(required.group(1))
            relation = "<" if below else ">="
            holds = below == needs_false
            evaluated += 1
            holds_all = holds_all and holds
            chain.nvcc_line = f"nvcc {nvcc.version} at {nvcc.path} (from {nvcc.resolved_from})"
            chain.add(
                f"The nvcc it resolves is {nvcc.version} {relation} {required.group(1)}, so "
                f"`{guard.text}` is {'false' if below else 'true'}"
                + ("" if holds else ": this environment would NOT raise here"),
                "",
                f"{nvcc.path} --version: release {nvcc.version}; "
                f"resolved from {nvcc.resolved_from}",
                f"nvcc --version ({environment.env_source} environment)",
                CONFIRMED if holds else UNCONFIRMED,
            )
            if not holds:
                chain.contradicted = True
    return evaluated, holds_all


def _knowledge_steps(
    chain: _Chain,
    log: ParsedLog,
    signature: Signature,
    root: Signature,
    environment: ExaminedEnvironment | None,
) -> None:
    if environment is not None:
        chain.notes.append(
            f"the code that raises this is not installed in the examined environment "
            f"({environment.description}); the chain below comes from the log and archgap's "
            "knowledge base"
        )
    chain.add(root.meaning, "", "", f"signature {root.id} ({root.source})", KNOWLEDGE)
    if root is not signature:
        chain.add(signature.meaning, "", "", f"signature {signature.id}", KNOWLEDGE)
    for kind, label in (
        ("gpu", "GPU"),
        ("compute_capability", "compute capability / arch"),
        ("nvcc", "nvcc release"),
        ("flashinfer_cuda_version", "FlashInfer's CUDA version"),
        ("cuda_home", "CUDA_HOME"),
        ("flashinfer", "flashinfer"),
        ("torch", "torch"),
    ):
        values = [e for e in log.evidence if e.kind == kind]
        if values:
            chain.add(
                f"The log states {label}: {', '.join(dict.fromkeys(e.value for e in values[:4]))}",
                "",
                values[0].text,
                f"log line {values[0].line}",
                FROM_LOG,
            )


def _root_cause(
    chain: _Chain,
    signature: Signature,
    root_signature: Signature,
    root: SignatureMatch,
    log: ParsedLog,
    environment: ExaminedEnvironment | None,
    walked: bool,
) -> str:
    if walked and chain.required_cuda and chain.nvcc_line and not chain.contradicted:
        knob = f", {chain.knobs_unset[0]} is not set" if chain.knobs_unset else ""
        return (
            f"The nvcc the package resolves ({chain.nvcc_line}) is older than the "
            f"{chain.required_cuda} it requires for this GPU{knob}: the arch detection raises, a "
            f"bare `except` swallows it, and the empty arch set makes it reject the GPU "
            f"({signature.id})."
        )
    if chain.contradicted and chain.required_cuda:
        return (
            f"In the service's environment the package found a CUDA toolkit older than "
            f"{chain.required_cuda} (the log shows its version check failing), unlike the "
            f"examined environment ({chain.nvcc_line}); its arch detection failed silently and "
            f"the GPU was rejected."
        )
    cause = root_signature.causes[0].text if root_signature.causes else root_signature.meaning
    return f"{cause} (from the log and the knowledge base: {root_signature.id})."


def _fixes(
    signature: Signature,
    root: Signature,
    chain: _Chain,
    log: ParsedLog,
    environment: ExaminedEnvironment | None,
) -> tuple[FixSuggestion, ...]:
    majors: set[int] = set()
    if environment is not None:
        majors.update(m for g in environment.gpus if (m := _cc_major(g.compute_capability)))
    for evidence in log.evidence_of("compute_capability"):
        digits = re.match(r"(\d{1,2}?)(\d)[af]?$", evidence.value)
        if "." in evidence.value:
            if (m := _cc_major(evidence.value)) is not None:
                majors.add(m)
        elif digits:
            majors.add(int(digits.group(1)))
    if not majors and any("SM 12" in t for _, t in log.messages):
        majors.add(12)
    fixes: list[FixSuggestion] = []
    seen: set[str] = set()
    # The explaining signature's fixes; the error's own only for kinds the first lacks.
    candidates = list(root.fixes)
    kinds = {f.kind for f in candidates}
    candidates += [f for f in signature.fixes if root is not signature and f.kind not in kinds]
    if True:
        for fix in candidates:
            if (
                fix.applies_to_cc_major is not None
                and majors
                and fix.applies_to_cc_major not in majors
            ):
                continue
            text = fix.text
            if fix.kind == "toolkit" and environment is not None and chain.required_cuda:
                usable = [
                    t
                    for t in environment.toolkits
                    if _version_tuple(t.version) >= _version_tuple(chain.required_cuda)
                ]
                if usable:
                    best = max(usable, key=lambda t: _version_tuple(t.version))
                    text = (
                        f"export CUDA_HOME={best.home} PATH={best.home}/bin:$PATH in the service's "
                        f"environment (nvcc {best.version} found there)"
                    )
            if fix.kind == "env" and chain.knobs_unset and "FLASHINFER_CUDA_ARCH_LIST" in text:
                nvcc = environment.nvcc if environment else None
                if nvcc and nvcc.version and _version_tuple(nvcc.version) < (12, 8):
                    continue  # 12.0a needs nvcc >= 12.8
            key = f"{fix.kind}:{text}"
            if key not in seen:
                seen.add(key)
                fixes.append(FixSuggestion(fix.kind, text, fix.source))
    return tuple(sorted(fixes, key=lambda f: FIX_KINDS.index(f.kind)))
