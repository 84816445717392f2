"""A requirement's dependency set, resolved like ``pip install`` for the target interpreter and
platform (``scan REQUIREMENT --deps``).

Each dependency's Requires-Dist comes from the chosen wheel's METADATA: the PEP 658 file
(``URL.metadata``) when the index serves one, else the wheel's ``.dist-info/METADATA`` member
(through range requests where the server allows: the zip's directory and that member only).
Markers are evaluated for the target (``python_version``, ``sys_platform``, ``platform_machine``
... from ``--python-version`` and ``--platform``, this interpreter's otherwise) and the extras
asked for. Breadth first, the way pip walks: each project gets the newest version that every
specifier seen *so far* allows (pip's choice of wheel). There is no backtracking: a later
requirement that the chosen version does not satisfy is a problem with both requirements named,
not a search for another version. A project already chosen is not resolved again, which also
ends cycles.
"""

from __future__ import annotations

import email.parser
import hashlib
import zipfile
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from packaging.markers import Marker, default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from archgap.index import net
from archgap.index.fetch import FetchError, open_wheel
from archgap.index.resolve import IndexFile, ResolveError, parse_requirement, resolve

MAX_METADATA = 16 << 20
MAX_PROJECTS = 2000  # a dependency set larger than this is cut, with a problem saying so
ROOT = "(command line)"

# platform tag -> marker values (sys_platform, platform_system, os_name)
_SYSTEMS = (
    (("manylinux", "musllinux", "linux"), ("linux", "Linux", "posix")),
    (("macosx",), ("darwin", "Darwin", "posix")),
    (("win",), ("win32", "Windows", "nt")),
)
_MACHINES = ("x86_64", "aarch64", "ppc64le", "s390x", "armv7l", "i686", "riscv64", "arm64",
             "universal2", "amd64", "win32")  # fmt: skip
_WINDOWS_MACHINES = {"amd64": "AMD64", "win32": "x86", "arm64": "ARM64"}


@dataclass(frozen=True)
class Chosen:
    """One project of the set: the wheel pip would install, and who asked for it."""

    name: str
    version: str
    file: IndexFile
    index: str
    extras: tuple[str, ...]
    required_by: tuple[str, ...]  # "demo-app 1.0", or ROOT


@dataclass(frozen=True)
class DepProblem:
    requirement: str
    required_by: str
    reason: str


@dataclass(frozen=True)
class Resolution:
    chosen: tuple[Chosen, ...]  # in the order they were chosen (the roots first)
    problems: tuple[DepProblem, ...]


def marker_environment(python_version: str | None, platform: str | None) -> dict[str, str]:
    """The PEP 508 environment of the target: this interpreter's, with the Python version and
    the platform's values replaced when they are given."""
    env = {key: str(value) for key, value in default_environment().items()}
    if python_version:
        parts = python_version.split(".")
        env["python_version"] = ".".join(parts[:2])
        env["python_full_version"] = python_version if len(parts) > 2 else f"{python_version}.0"
    if platform:
        for prefixes, (sys_platform, system, os_name) in _SYSTEMS:
            if platform.startswith(prefixes):
                env.update(sys_platform=sys_platform, platform_system=system, os_name=os_name)
        machine = next((m for m in _MACHINES if platform.endswith(m)), None)
        if machine:
            windows = env.get("sys_platform") == "win32"
            env["platform_machine"] = (
                _WINDOWS_MACHINES.get(machine, machine) if windows else machine
            )
    return env


def applies(requirement: Requirement, env: dict[str, str], extras: Sequence[str]) -> bool:
    """Whether the requirement's marker holds on the target, for no extra or one of ``extras``."""
    marker: Marker | None = requirement.marker
    if marker is None:
        return True
    return any(marker.evaluate({**env, "extra": extra}) for extra in ("", *extras))


def requires_dist(file: IndexFile) -> list[str]:
    """The Requires-Dist lines of a wheel's METADATA; ResolveError when it cannot be read."""
    data = _metadata_file(file) if file.metadata else _metadata_member(file)
    message = email.parser.BytesParser().parsebytes(data, headersonly=True)
    return [str(line) for line in message.get_all("Requires-Dist") or []]


def _metadata_file(file: IndexFile) -> bytes:
    url = file.url + ".metadata"
    try:
        data, _ = net.fetch_bytes(url, cap=MAX_METADATA)
    except net.NetError as exc:
        raise ResolveError(str(exc)) from None
    digest = hashlib.sha256(data).hexdigest()
    if file.metadata_sha256 and digest != file.metadata_sha256.lower():
        raise ResolveError(f"{url}: sha256 {digest} is not the index's {file.metadata_sha256}")
    return data


def _metadata_member(file: IndexFile) -> bytes:
    try:
        handle, _ = open_wheel(file.url, file.sha256)
    except FetchError as exc:
        raise ResolveError(str(exc)) from None
    try:
        with handle, zipfile.ZipFile(handle) as zf:
            names = [n for n in zf.namelist() if n.count("/") == 1]
            member = next((n for n in names if n.endswith(".dist-info/METADATA")), None)
            if member is None:
                raise ResolveError(f"{file.url}: no .dist-info/METADATA in the wheel")
            with zf.open(member) as stream:
                return stream.read(MAX_METADATA)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        raise ResolveError(f"{file.url}: not a readable wheel: {exc}") from None


@dataclass
class _Project:
    chosen: Chosen
    requires: list[Requirement]
    extras: set[str]
    required_by: list[str] = field(default_factory=list)


class _Walk:
    """The state of one resolution: the specifiers seen, the projects chosen, the queue."""

    def __init__(self, index_urls: list[str], python_version: str | None, platform: str | None):
        self.index_urls, self.python_version, self.platform = index_urls, python_version, platform
        self.env = marker_environment(python_version, platform)
        self.specifiers: dict[str, SpecifierSet] = {}
        self.first_asked: dict[str, str] = {}
        self.projects: dict[str, _Project] = {}
        self.queue: deque[tuple[Requirement, str]] = deque()
        self.problems: list[DepProblem] = []

    def add(self, requirement: Requirement, parent: str) -> None:
        name = canonicalize_name(requirement.name)
        # what every requirement accepted so far allows (one that failed is not kept: it would
        # turn every later requirement of the project into a failure too)
        specifier = self.specifiers.get(name, SpecifierSet()) & requirement.specifier
        project = self.projects.get(name)
        if project is None:
            self._choose(requirement, name, specifier, parent)
            return
        version = Version(project.chosen.version)
        if not specifier.contains(version, prereleases=True):
            first = self.first_asked.get(name, ROOT)
            why = (f"{project.chosen.name} {version} was chosen first (for {first}) and does "
                   f"not satisfy {specifier}; no backtracking")  # fmt: skip
            self.problems.append(DepProblem(str(requirement), parent, why))
            return
        self.specifiers[name] = specifier
        project.required_by.append(parent)
        new = sorted(set(requirement.extras) - project.extras)
        if new:  # the extras' dependencies now apply too
            project.extras.update(new)
            self._enqueue(project, new)

    def _choose(
        self, requirement: Requirement, name: str, specifier: SpecifierSet, parent: str
    ) -> None:
        if len(self.projects) >= MAX_PROJECTS:
            why = f"more than {MAX_PROJECTS} projects in the set: not resolved further"
            self.problems.append(DepProblem(str(requirement), parent, why))
            return
        try:
            picked = resolve(
                f"{requirement.name}{specifier}", self.index_urls, self.python_version,
                self.platform,
            )  # fmt: skip
        except ResolveError as exc:
            self.problems.append(DepProblem(str(requirement), parent, str(exc)))
            return
        requires: list[Requirement] = []
        try:
            for line in requires_dist(picked.file):
                requires.append(Requirement(line))
        except (ResolveError, InvalidRequirement) as exc:
            why = f"{picked.name} {picked.version}: its dependencies are unknown: {exc}"
            self.problems.append(DepProblem(str(requirement), parent, why))
        chosen = Chosen(picked.name, picked.version, picked.file, picked.index, (), ())
        project = _Project(chosen, requires, set(requirement.extras), [parent])
        self.projects[name] = project
        self.specifiers[name] = specifier
        self.first_asked[name] = parent
        self._enqueue(project, ["", *sorted(project.extras)])

    def _enqueue(self, project: _Project, extras: Sequence[str]) -> None:
        label = f"{project.chosen.name} {project.chosen.version}"
        for dependency in project.requires:
            marker = dependency.marker
            if marker is None and "" not in extras:
                continue  # queued with the project's own dependencies already
            if marker is None or any(marker.evaluate({**self.env, "extra": e}) for e in extras):
                self.queue.append((dependency, label))

    def result(self) -> Resolution:
        chosen = tuple(
            replace(
                p.chosen,
                extras=tuple(sorted(p.extras)),
                required_by=tuple(dict.fromkeys(p.required_by)),
            )
            for p in self.projects.values()
        )
        return Resolution(chosen, tuple(self.problems))


def resolve_set(
    roots: Sequence[str],
    index_urls: list[str],
    python_version: str | None = None,
    platform: str | None = None,
) -> Resolution:
    """The projects ``pip install ROOTS`` would install on the target, with their wheels; what
    could not be resolved is a problem (the rest of the set is still resolved)."""
    walk = _Walk(index_urls, python_version, platform)
    for text in roots:
        try:
            requirement = parse_requirement(text)
        except ResolveError as exc:
            walk.problems.append(DepProblem(text, ROOT, str(exc)))
            continue
        if applies(requirement, walk.env, ()):
            walk.queue.append((requirement, ROOT))
    while walk.queue:
        requirement, parent = walk.queue.popleft()
        walk.add(requirement, parent)
    return walk.result()
