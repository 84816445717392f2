"""A fleet's facts, host by host: probed over ssh (many at a time), through Slurm (one task per
node) or Ray (one task per alive node), or read from the probe documents any engine wrote
(archgap probe, its standalone script, pdsh/clush output). What ``archgap fleet`` and
``api.fleet`` collect; the analysis (analysis.fleet) takes the hosts one at a time."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from archgap.errors import UsageError
from archgap.request import DEFAULT_SECTIONS, probe_request
from archgap.transport.run import TransportFailure
from archgap.transport.target import DEFAULT_CONNECT_TIMEOUT, DEFAULT_PYTHON, DEFAULT_TIMEOUT

if TYPE_CHECKING:
    from archgap.probe.facts import ProbeResponse


@dataclass(frozen=True)
class HostInput:
    """One host as a fleet engine returned it: facts, or why there are none."""

    name: str
    facts: ProbeResponse | None
    error_kind: str | None = None
    error: str | None = None
    stderr: str = ""


UNREADABLE = "unreadable"  # a host whose facts document is malformed


def host_from_facts(name: str, facts: Any) -> HostInput:
    """A host from its facts document, decoded once here where a document enters; a malformed
    one is an unreadable host with the reason."""
    from archgap.codec import DecodeError, decode
    from archgap.probe.facts import ProbeResponse

    why = _shape_problem(facts)
    if why is None:
        try:
            return HostInput(name, decode(ProbeResponse, facts))
        except DecodeError as exc:
            why = str(exc)
    return HostInput(name, None, UNREADABLE, why)


def _shape_problem(facts: Any) -> str | None:
    """Why a facts document cannot be read (its top level has the wrong types), or None."""
    if not isinstance(facts, Mapping):
        return "the facts are not an object"
    errors = facts.get("errors")
    if errors is not None and not isinstance(errors, Mapping):
        return f"'errors' is {type(errors).__name__}, not an object"
    sections = facts.get("sections")
    if not isinstance(sections, Mapping):
        return f"'sections' is {type(sections).__name__}, not an object"
    for name, section in sections.items():
        if not isinstance(section, Mapping | list):
            return f"section {str(name)[:40]!r} is {type(section).__name__}"
    return None


# tell(done, total, item): one more host answered (a progress display).
Tell = Callable[[int, int, str], None]


class FleetInputError(UsageError):
    """Hosts that cannot be probed as given: an unreadable hostfile, a bad or repeated host
    name, none at all, a --from path that does not exist."""


@dataclass(frozen=True)
class FleetSource:
    """Where the hosts' facts come from: one of ssh ``hosts`` ((host, its interpreter or None))
    and those of a ``hostfile``, ``slurm`` (with ``srun_args``), ``ray`` (an address, or
    "auto") or probe ``documents`` (files and directories)."""

    hosts: tuple[tuple[str, str | None], ...] = ()
    slurm: bool = False
    srun_args: tuple[str, ...] = ()
    ray: str | None = None
    documents: tuple[str, ...] = ()
    hostfile: str | None = None
    ray_runtime_env: str | None = None  # a Ray job's runtime_env, JSON: the probe runs in it

    def __post_init__(self) -> None:
        if self.srun_args and not self.slurm:
            raise FleetInputError("arguments after -- are srun options: use them with --slurm")
        if self.ray_runtime_env is not None:
            self.runtime_env()

    def runtime_env(self) -> dict[str, Any] | None:
        """``ray_runtime_env`` parsed (a JSON object, or ``@FILE`` holding one); None without."""
        text = self.ray_runtime_env
        if text is None:
            return None
        if not self.ray:
            raise FleetInputError("--runtime-env is a Ray job's: use it with --ray")
        try:
            if text.startswith("@"):
                text = Path(text[1:]).read_text(encoding="utf-8")
            value = json.loads(text)
        except (OSError, ValueError) as exc:
            raise FleetInputError(
                f"--runtime-env: {getattr(exc, 'strerror', None) or exc}"
            ) from None
        if not isinstance(value, dict):
            raise FleetInputError("--runtime-env: expected a JSON object (a Ray runtime_env)")
        return value

    @property
    def by_ssh(self) -> bool:
        return bool(self.hosts or self.hostfile)


# A pushed document older than this is stale (fleet --stale-after): two runs of an hourly timer
# (a systemd timer, a cron job, a DaemonSet's --interval 3600) missed, not one late.
DEFAULT_STALE_AFTER = 7200.0


@dataclass(frozen=True)
class FleetOptions:
    """How the hosts are probed: the probe sections, the interpreter to inspect (None: python3
    there, or a hostfile's per host; on Ray each node's worker interpreter), hosts at a time
    and the time limits; ``stale_after``: how old (seconds) a document read may be and still
    count as the host's present state; ``env_from``: the environment each probed host judges
    instead of its shell's (an env file such as a systemd EnvironmentFile, or
    /proc/PID/environ of the serving process, read on that host)."""

    sections: tuple[str, ...] = DEFAULT_SECTIONS
    python: str | None = None
    jobs: int = 32
    timeout: float = DEFAULT_TIMEOUT
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    stale_after: float = DEFAULT_STALE_AFTER
    env_from: str | None = None


def hostfile_hosts(path: str) -> list[tuple[str, str | None]]:
    """A hostfile's hosts: one per line, ``[user@]host[:port] [PYTHON]``; # starts a comment."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise FleetInputError(f"--hostfile {path}: {exc.strerror or exc}") from None
    hosts: list[tuple[str, str | None]] = []
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) > 2:
            raise FleetInputError(f"--hostfile: expected 'HOST [PYTHON]', got {line.strip()!r}")
        hosts.append((words[0], words[1] if len(words) == 2 else None))
    return hosts


def collect_hosts(
    source: FleetSource, options: FleetOptions, tell: Tell | None = None
) -> Iterator[HostInput]:
    """Every host's facts or failure, as ``HostInput`` values, as they come (the report keeps
    a summary of each, not its facts). ``UnknownSection`` for a section the probe does not
    have; ``FleetInputError`` for ``env_from`` with a source that probes nothing here (--from)
    or whose jobs take their environment elsewhere (Ray: the runtime_env)."""
    _check_env_from(source, options.env_from)
    for host in _hosts_of(source, options, tell):
        yield judged_environment(host)


def _check_env_from(source: FleetSource, env_from: str | None) -> None:
    if env_from is None:
        return
    if not env_from.strip():
        raise FleetInputError("--env-from: empty; expected a file on each host (or a PID)")
    if source.documents:
        raise FleetInputError(
            "--env-from is read on each probed host: documents (--from) were collected with "
            "the environment `archgap probe --env-from` named"
        )
    if source.ray:
        raise FleetInputError("--env-from: a Ray job's environment is its --runtime-env")


# A host whose --env-from could not be read there: no facts were collected (the probe never
# judges the shell's environment in its place), and the fleet reports the host as failed.
ENV_UNREADABLE = "env-unreadable"


def judged_environment(host: HostInput) -> HostInput:
    """``host`` as it came, or a failure when its facts say the environment it was to judge
    (--env-from, on that host or in the document's probe) could not be read."""
    errors = host.facts.errors if host.facts is not None else None
    problem = errors.get("env_from") if isinstance(errors, Mapping) else None
    if not problem:
        return host
    message = f"the environment to judge could not be read: {problem}"
    return HostInput(host.name, None, ENV_UNREADABLE, message, host.stderr)


def _hosts_of(source: FleetSource, options: FleetOptions, tell: Tell | None) -> Iterator[HostInput]:
    # python None in the request: each host's own interpreter, filled in per target.
    request = probe_request(options.sections, None)
    if source.documents:
        yield from read_documents(source.documents)
    elif source.slurm:
        from archgap.transport.slurm import run_probe_slurm

        python = options.python or DEFAULT_PYTHON
        slurm = run_probe_slurm(
            list(source.srun_args), request, python, options.timeout, options.env_from
        )
        yield from _engine_inputs(slurm.error, slurm.tasks, "slurm")
    elif source.ray:
        from archgap.transport.ray_fleet import run_probe_ray

        address = None if source.ray == "auto" else source.ray
        ray = run_probe_ray(address, request, options.python, options.timeout, source.runtime_env())
        yield from _engine_inputs(ray.error, ray.nodes, f"ray {source.ray}")
    else:
        listed = hostfile_hosts(source.hostfile) if source.hostfile else []
        yield from _ssh_hosts([*source.hosts, *listed], request, options, tell or _untold)


def _untold(_done: int, _total: int, _item: str) -> None:
    """No progress display."""


def _ssh_hosts(
    hosts: Sequence[tuple[str, str | None]],
    request: dict[str, Any],
    options: FleetOptions,
    tell: Tell,
) -> Iterator[HostInput]:
    from archgap.transport.run import run_many
    from archgap.transport.target import TargetError, ssh_target

    python = options.python or DEFAULT_PYTHON
    targets = []
    for spec, host_python in hosts:
        try:
            targets.append(ssh_target(spec, host_python or python, options.connect_timeout))
        except TargetError as exc:
            raise FleetInputError(str(exc)) from None
    if not targets:
        raise FleetInputError("no hosts given")
    if len({t.name for t in targets}) != len(targets):
        raise FleetInputError("a host is named twice")
    answered = run_many(targets, request, options.jobs, options.timeout, options.env_from)
    for done, (target, result) in enumerate(answered, start=1):
        tell(done, len(targets), target.name)
        if isinstance(result, TransportFailure):
            yield HostInput(target.name, None, result.kind, result.message, result.stderr)
        else:
            yield HostInput(target.name, result)


def _engine_inputs(error: Any, results: Any, engine: str) -> list[HostInput]:
    """``HostInput`` values from an engine that probes every node at once (Slurm, Ray)."""
    if error is not None:
        return [HostInput(engine, None, error.kind, error.message, error.stderr)]
    return [
        HostInput(name, None, r.kind, r.message, r.stderr)
        if isinstance(r, TransportFailure)
        else HostInput(name, r, None)
        for name, r in results
    ]


def _documents_in(text: str) -> list[Any]:
    """JSON documents in a file: one document, JSON Lines, or ``host: {json}`` lines (pdsh)."""
    try:
        return [json.loads(text)]
    except (ValueError, RecursionError):
        pass
    docs: list[Any] = []
    for line in text.splitlines():
        start = line.find("{")
        if start < 0:
            continue
        prefix = line[:start].rstrip().rstrip(":").strip()
        try:
            doc = json.loads(line[start:])
        except (ValueError, RecursionError):
            continue
        docs.append({"__name": prefix, **doc} if prefix and isinstance(doc, dict) else doc)
    return docs


def _not_json(text: str) -> tuple[str, str]:
    """Why a file holds no JSON document: cut off inside one (a probe killed mid-write, a full
    disk), or no JSON at all."""
    body = text.strip()
    if body.startswith(("{", "[")):
        try:
            json.loads(body)
        except RecursionError:
            return "not-json", "JSON nested deeper than the parser goes"
        except json.JSONDecodeError as exc:
            if exc.pos >= len(body) - 1 or "Unterminated string" in exc.msg:
                return "truncated", f"the JSON stops after {len(body)} bytes, inside a value"
            return "not-json", f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
    return "not-json", "no JSON document in the file"


def read_documents(paths: Sequence[str]) -> Iterator[HostInput]:
    """Probe output of any engine: archgap probe documents, raw facts, or the failures recorded;
    one file at a time.

    One ``HostInput`` per document read (a file without one counts as one, a failure); a path
    that does not exist raises ``FleetInputError``. In a directory only documents are read
    (``DOCUMENT_SUFFIXES``); a file named is read whatever its name."""
    files: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if _is_document(p))
        elif path.is_file():
            files.append(path)
        else:
            raise FleetInputError(f"--from {given}: no such file or directory")
    for file in files:
        try:
            text = file.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            continue  # renamed or removed since the directory was listed
        except OSError as exc:
            yield HostInput(str(file), None, "unreadable", exc.strerror or str(exc))
            continue
        docs = _documents_in(text)
        if not docs:
            yield HostInput(str(file), None, *_not_json(text))
        for doc in docs:
            yield _host_from_document(doc, file)


# What `probe --out` writes (HOST.json) and JSON Lines of many; not an editor's backup
# (HOST.json~, HOST.json.bak, #HOST.json#), a copy tool's partial file or anything else.
DOCUMENT_SUFFIXES = (".json", ".jsonl")


def _is_document(path: Path) -> bool:
    """A file in a --from directory that is a document: a .json or .jsonl file, not a dot file
    (a document still being written by `probe --out` or a copy tool: the finished one is
    renamed into place)."""
    name = path.name
    return name[0] != "." and name.endswith(DOCUMENT_SUFFIXES) and path.is_file()


def _host_from_document(doc: Any, file: Path) -> HostInput:
    if not isinstance(doc, dict):
        return HostInput(str(file), None, "not-facts", "a JSON document that is not an object")
    given = doc.get("__name") or doc.get("target")
    if doc.get("command") == "probe" and isinstance(doc.get("error"), dict):
        err = doc["error"]
        name = str(file.stem if given in (None, "local") else given)
        return HostInput(name, None, str(err.get("kind")), str(err.get("message")), "")
    facts = doc.get("facts") if doc.get("command") == "probe" else doc
    if not isinstance(facts, dict) or "sections" not in facts:
        return HostInput(str(file), None, "not-facts", "not archgap probe facts")
    name = str(facts.get("host") or file.stem) if given in (None, "local") else str(given)
    return host_from_facts(name, facts)
