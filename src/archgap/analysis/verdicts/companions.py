"""Check 6 of the load model: a package's companions, installed and at the versions it needs.

A ``Requires-Dist`` (PEP 508) that is not met is a package that does not load:
- **out of range**: an installed companion that ships native files, whose version the
  requirement's specifier excludes (jax-cuda12-plugin 0.4.38 pins jax-cuda12-pjrt ==0.4.38;
  spconv-cu120 2.3.6 needs cumm-cu120 <0.5.0,>=0.4.5): their native libraries are not built to
  load together (the one check ``pip check`` makes, here only for native companions). Unless
  the requirer's libraries bind to the companion's by a versioned soname (``_soname_bound``:
  torch 2.15.0's ``libtorch_cuda.so`` needs ``libcudnn.so.9``, which nvidia-cudnn-cu13 9.28.1.4
  ships, while torch pins 9.26.0.51): the dynamic loader binds by that name, and a soname
  keeps its ABI within its major (cuDNN: a minor release runs what was built against the same
  or an earlier minor). That is pip check's mismatch, said as a ``note`` that blocks nothing
  (``unknown`` when the installed companion is older than the pin: built against a newer minor,
  the requirer may bind symbols the older one lacks);
- **missing**: a companion that is not installed, whose module the package's import needs. The
  need comes from the package's own source (``Distribution.unresolved_imports``: a module-level
  import of a module nothing provides, probe.environment.imports), the requirement from its
  METADATA; the two are joined by name (``cumm`` is ``cumm-cu120``'s, a hint): an import the
  source does not make unconditionally (an optional dependency) or a requirement of an extra is
  no finding.
A requirement of an extra, or whose marker is false for the target's Python, is not one
(markers on the platform are those of this host: a Linux wheel's).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence

from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from archgap.analysis.verdicts.loadcommon import LoadFinding, Status
from archgap.analysis.verdicts.loadcommon import base as _base
from archgap.analysis.verdicts.loadcommon import block as _block
from archgap.kb.fixes import fix_text
from archgap.probe.facts import BinaryFacts, Distribution, PythonEnvironment

PEP_508 = (
    "PEP 508 and the core metadata's Requires-Dist "
    "(https://packaging.python.org/en/latest/specifications/core-metadata/#requires-dist-multiple-use)"
)
SONAME_ABI = (
    "ld.so(8) (https://man7.org/linux/man-pages/man8/ld.so.8.html): a DT_NEEDED name is bound to "
    "the file of that name, whatever its release; cuDNN's API compatibility (https://docs.nvidia."
    "com/deeplearning/cudnn/latest/developer/forward-compatibility.html): minor releases are "
    "binary backward-compatible with applications built against the same or an earlier minor, "
    "not across majors (the soname's number)"
)
VERSIONED_SONAME = re.compile(r"\.so\.\d+")  # libcudnn.so.9, libnccl.so.2; not libtorch.so
IMPORT_SYSTEM = (
    "the import system (https://docs.python.org/3/reference/import.html#searching): a module "
    "no finder on sys.path finds raises ModuleNotFoundError; a module-level import runs when "
    "its module is imported"
)


def companions(
    env: PythonEnvironment,
    blocked: dict[tuple[str, str], str],
    gating: bool,
    binaries: Sequence[BinaryFacts] = (),
) -> list[LoadFinding]:
    """Check 6: one finding per package whose import needs a companion that is not installed
    (``_missing``), and per installed native companion whose version a package's Requires-Dist
    excludes (any PEP 440 specifier: ==0.4.38, <0.5.0,>=0.4.5): a ``note`` where the requirer's
    libraries bind to the companion's by versioned soname (``binaries``: their DT_NEEDED)."""
    installed: dict[str, Distribution] = {canonicalize_name(d.name): d for d in env.distributions}
    needed = {b.path: b.needed for b in binaries}
    findings = _missing(env, installed, blocked, gating)
    for dist in env.distributions:
        for line, req in _requirements(env, dist):
            companion = installed.get(canonicalize_name(req.name))
            if companion is None or not companion.native_files or not req.specifier:
                continue
            try:
                have = Version(companion.version)
            except InvalidVersion:
                continue
            if req.specifier.contains(have, prereleases=True):
                continue
            wanted = f"{companion.name}{req.specifier}"
            why = (
                f"{dist.name} {dist.version} requires {wanted}, and {companion.name} "
                f"{companion.version} is installed"
            )
            pins = [s.version for s in req.specifier if s.operator in ("==", "===")]
            if len(pins) == 1:
                fix = fix_text("companion-pin", companion=companion.name, version=pins[0])
            else:
                fix = fix_text("companion-range", requirement=wanted)
            links = _soname_bound(dist, companion, needed)
            if links:
                findings.append(_soname_note(dist, companion, req, line, links, why, fix))
                continue
            libs = tuple(sorted(set(dist.native_files) | set(companion.native_files)))
            evidence = (
                f"{dist.name} {dist.version}: Requires-Dist: {line} ({dist.dist_info})",
                f"{companion.name} {companion.version} ({companion.dist_info})",
            )
            cause = f"{why}: their native libraries are not built to load together"
            findings.append(
                _fails(blocked, dist.name, libs, why, evidence, cause, fix, PEP_508, gating)
            )
    return findings


def _soname_bound(
    dist: Distribution, companion: Distribution, needed: Mapping[str, tuple[str, ...] | None]
) -> list[str]:
    """The versioned sonames (``libcudnn.so.9``) by which the requirer's libraries bind to files
    the companion ships; [] when none does, or when a requirer's library was not read (its
    DT_NEEDED unknown: no soname link can be shown)."""
    shipped = {_base(p) for p in companion.native_files}
    links: set[str] = set()
    for path in dist.native_files:
        names = needed.get(path)
        if names is None and ".so" not in _base(path):
            continue  # not a shared library (a cubin, a .a): binds nothing by name
        if names is None:
            return []  # a library whose DT_NEEDED was not read
        links.update(n for n in names if n in shipped and VERSIONED_SONAME.search(n))
    return sorted(links)


def _soname_note(
    dist: Distribution,
    companion: Distribution,
    req: Requirement,
    line: str,
    links: list[str],
    why: str,
    fix: str,
) -> LoadFinding:
    """pip check's mismatch where the loader binds by soname: it loads; ``unknown`` when the
    companion is older than every version the requirement allows from below."""
    have = Version(companion.version)
    floors = [Version(s.version) for s in req.specifier
              if s.operator in ("==", "===", ">=", ">", "~=") and "*" not in s.version]  # fmt: skip
    older = any(have < floor for floor in floors)
    bound = ", ".join(links)
    status: Status
    if older:
        status, what = (
            "unknown",
            (
                f"{companion.name} {companion.version} is older than the release it was built "
                "against, and NVIDIA's libraries are binary compatible only with what was built "
                "against the same or an earlier minor: it may need symbols this one lacks"
            ),
        )
    else:
        status, what = (
            "note",
            (
                f"its libraries load {bound} of {companion.name} {companion.version} by soname, "
                "which keeps its ABI within its major: it loads (pip check reports the pin)"
            ),
        )
    return LoadFinding(
        "companion",
        status,
        "",
        dist.name,
        tuple(sorted(dist.native_files)),
        (
            f"{dist.name} {dist.version}: Requires-Dist: {line} ({dist.dist_info})",
            f"{dist.name}'s libraries need {bound} (DT_NEEDED)",
            f"{companion.name} {companion.version} ships {bound} ({companion.dist_info})",
        ),
        f"{why}: {what}",
        f"{fix} (to match the pin; not needed to load)" if not older else fix,
        f"{PEP_508}; {SONAME_ABI}",
        False,
    )


def _requirements(env: PythonEnvironment, dist: Distribution) -> Iterator[tuple[str, Requirement]]:
    """(line, requirement) of each Requires-Dist of ``dist`` that holds in the target: not an
    extra's, its marker true for the target's Python; lines that are not PEP 508 are skipped
    (pip would refuse them too)."""
    marker_env = {"extra": "", "python_version": ".".join(env.python_version.split(".")[:2]),
                  "python_full_version": env.python_version}  # fmt: skip
    for line in dist.requires:
        try:
            req = Requirement(line)
            if req.marker is not None and not req.marker.evaluate(marker_env):
                continue
        except (InvalidRequirement, InvalidMarker, UndefinedComparison,
                UndefinedEnvironmentName):  # fmt: skip
            continue
        yield line, req


def _missing(
    env: PythonEnvironment,
    installed: Mapping[str, Distribution],
    blocked: dict[tuple[str, str], str],
    gating: bool,
) -> list[LoadFinding]:
    """One finding per package whose import needs modules of companions that are not
    installed: each unresolved import joined to the requirement of its name."""
    findings = []
    for dist in env.distributions:
        needed = _needed_imports(env, dist, installed) if dist.unresolved_imports else []
        if needed:
            findings.append(_missing_finding(dist, needed, blocked, gating))
    return findings


# (module, where it is imported, the Requires-Dist line, its requirement)
_Needed = tuple[str, str, str, Requirement]


def _needed_imports(
    env: PythonEnvironment, dist: Distribution, installed: Mapping[str, Distribution]
) -> list[_Needed]:
    """Each unresolved import of ``dist`` joined to the requirement of its name (``cumm`` to
    ``cumm-cu120``) among those not installed; an import no requirement names is not one."""
    absent = [(line, req) for line, req in _requirements(env, dist)
              if canonicalize_name(req.name) not in installed]  # fmt: skip
    needed = []
    for module, where in dist.unresolved_imports:
        wanted = canonicalize_name(module)
        for line, req in absent:
            name = canonicalize_name(req.name)
            if name == wanted or name.startswith(wanted + "-"):
                needed.append((module, where, line, req))
                break
    return needed


def _missing_finding(
    dist: Distribution,
    needed: Sequence[_Needed],
    blocked: dict[tuple[str, str], str],
    gating: bool,
) -> LoadFinding:
    """The package cannot be imported: a ModuleNotFoundError for the first module it needs."""
    modules = ", ".join(f"{m} ({w})" for m, w, _, _ in needed)
    wants = ", ".join(f"{r.name}{r.specifier}" for _, _, _, r in needed)
    what = ("the package that provides it", "is") if len(needed) == 1 else (
        "the packages that provide them", "are")  # fmt: skip
    why = f"its import needs {modules}, and {what[0]} ({wants}) {what[1]} not installed"
    evidence = (
        *(f"{dist.name} {dist.version}: {w}: import {m}" for m, w, _, _ in needed),
        *(f"Requires-Dist: {line} ({dist.dist_info}): not installed" for _, _, line, _ in needed),
    )
    cause = (
        f"{dist.name} {dist.version} cannot be imported: {why} "
        f"(\"ModuleNotFoundError: No module named '{needed[0][0]}'\")"
    )
    fix = "pip install " + " ".join(
        f"'{r.name}{r.specifier}'" if r.specifier else r.name for _, _, _, r in needed
    )
    libs = tuple(sorted(dist.native_files))
    source = f"{PEP_508}; {IMPORT_SYSTEM}"
    return _fails(blocked, dist.name, libs, why, evidence, cause, fix, source, gating)


__all__ = ["PEP_508", "companions"]


def _fails(
    blocked: dict[tuple[str, str], str],
    package: str,
    libs: tuple[str, ...],
    why: str,
    evidence: tuple[str, ...],
    cause: str,
    fix: str,
    source: str,
    gating: bool,
) -> LoadFinding:
    """A companion finding that fails: each of ``libs`` is blocked for ``why``."""
    for path in libs:
        _block(blocked, path, why)
    return LoadFinding(
        "companion", "fails", "", package, libs, evidence, cause, fix, source, gating
    )
