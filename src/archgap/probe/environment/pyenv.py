"""The inspected Python environment: its interpreter, site-packages and installed distributions.

Nothing is imported from the environment. Another interpreter is asked for its paths as
``python -I -S`` (no .pth files, no sitecustomize, no user site: none of its code runs), and
distributions are read from their ``.dist-info`` METADATA and RECORD files.
"""

from __future__ import annotations

import csv
import functools
import os
import re
import sys
import sysconfig
import threading
from dataclasses import asdict
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Set, Tuple

from ..binary.names import NATIVE_LAST, is_native_file
from ..facts import Distribution, Problem, PythonEnvironment
from .imports import with_unresolved_imports
from .preloads import package_inits, preloaded
from .system import System, read_regular

# What is read of a distribution's metadata files, and what an interpreter may answer.
MAX_METADATA_BYTES = 1 << 20  # the headers come first; long descriptions follow them
# The largest RECORDs seen are ~2.5 MB (~20,000 files). Rows are capped too: a RECORD of short
# rows is millions of strings (64 MiB of "ab,,\n" took 2 GB and 9 s).
MAX_RECORD_BYTES = 16 << 20  # ~130,000 files
MAX_RECORD_ROWS = 1 << 18
MAX_ANSWER_BYTES = 1 << 20
MAX_PATH_CHARS = 4096
MAX_SITE_DIRS = 64

# Run as ``python -I -S -c`` (site.py would run the environment's .pth files): without site.py a
# venv's interpreter does not know its own prefix, so the script finds pyvenv.cfg itself. A venv
# takes the venv scheme: the default scheme of Debian's and Ubuntu's Python is posix_local
# (<prefix>/local/lib/pythonX.Y/dist-packages), which a venv never has. The system's own
# directories come from site.getsitepackages, which those distributions patch to their dist-packages
# (importing site with -S defines it without running anything). The answer is NUL-separated
# fields (no path holds a NUL): importing json took half of the script's 20 ms.
_PATHS_SCRIPT = """
import os, site, sys, sysconfig
def lib_dirs(prefix, scheme):
    paths = sysconfig.get_paths(scheme, vars={"base": prefix, "platbase": prefix})
    return [paths.get("purelib"), paths.get("platlib")]
def system_dirs():
    base = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_exec_prefix})
    dirs = [base.get("purelib"), base.get("platlib")]
    return dirs + list(site.getsitepackages([sys.base_prefix]))
cfg = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(sys.executable))), "pyvenv.cfg")
if os.path.isfile(cfg):
    system_site = False
    with open(cfg) as f:
        for line in f:
            key, _, value = line.partition("=")
            if key.strip() == "include-system-site-packages":
                system_site = value.strip().lower() == "true"
    schemes = sysconfig.get_scheme_names()
    dirs = lib_dirs(os.path.dirname(cfg), "venv" if "venv" in schemes else "posix_prefix")
    dirs += system_dirs() if system_site else []
else:
    dirs = system_dirs()
print("\\0".join([sys.executable, sys.version.split()[0]] + [d or "" for d in dirs]))
"""


# A RECORD name that may be a native file's once normalised: also "x.so/" and "lib/x.so/.".
RECORD_LAST = NATIVE_LAST | {"/", "."}


# Several sections of one probe ask about the same interpreter, some at the same time (collect.py
# runs them in threads): the first asks it, the others wait for its answer.
_ASKING = threading.Lock()


def interpreter_paths(
    system: System, python: Optional[str] = None
) -> Tuple[str, str, Tuple[str, ...], Optional[Problem]]:
    """(executable, version, site-packages dirs, problem) of ``python`` (default: this one)."""
    with _ASKING:
        return _interpreter_paths(system, python)


@functools.lru_cache(maxsize=8)
def _interpreter_paths(
    system: System, python: Optional[str]
) -> Tuple[str, str, Tuple[str, ...], Optional[Problem]]:
    if python is None:
        paths = sysconfig.get_paths()
        dirs = _existing((paths.get("purelib"), paths.get("platlib")))
        return sys.executable, sys.version.split()[0], dirs, None
    if os.sep in python and os.path.isdir(python):
        return python, "", (), Problem(python, "cannot run %s: is a directory" % python)
    result = system.run(
        [python, "-I", "-S", "-c", _PATHS_SCRIPT], timeout=30, limit=MAX_ANSWER_BYTES
    )
    if not result.ok:
        reason = result.error or "failed"
        detail = result.stderr.strip().splitlines()[-1:] if result.stderr.strip() else []
        message = "cannot run %s: %s%s" % (python, reason, (": " + detail[0]) if detail else "")
        return python, "", (), Problem(python, message)
    try:
        answer = _checked_answer(result.stdout)
    except ValueError as exc:
        return python, "", (), Problem(python, "unexpected interpreter answer: %s" % exc)
    return answer[0], answer[1], _existing(answer[2]), None


def _checked_answer(text: str) -> Tuple[str, str, List[str]]:
    """(executable, version, paths) of an interpreter's answer (``_PATHS_SCRIPT``: NUL-separated
    executable, version and paths, "" for a path it does not have); ValueError says what is
    wrong (the interpreter is the inspected environment's: its answer is input like any file)."""
    fields = (text[:-1] if text.endswith("\n") else text).split("\0")
    if len(fields) < 2:
        raise ValueError("not NUL-separated executable, version and paths")
    executable, version, dirs = fields[0], fields[1], [path for path in fields[2:] if path]
    if not _is_path(executable):
        raise ValueError("executable is not a path")
    if not re.match(r"^\d+\.\d+[\w.+]*$", version):
        raise ValueError("version is not a version")
    if len(fields) - 2 > MAX_SITE_DIRS:
        raise ValueError("paths are more than %d" % MAX_SITE_DIRS)
    if not all(_is_path(path) for path in dirs):
        raise ValueError("paths holds something that is not a path")
    return executable, version, dirs


def _is_path(value: Any) -> bool:
    return (
        isinstance(value, str)
        and value.startswith("/")
        and len(value) <= MAX_PATH_CHARS
        and "\0" not in value
    )


def _existing(paths: Any) -> Tuple[str, ...]:
    seen: List[str] = []
    for path in paths:
        if (
            path
            and os.path.isdir(path)
            and os.path.realpath(path) not in map(os.path.realpath, seen)
        ):
            seen.append(path)
    return tuple(seen)


def canonical_name(name: str) -> str:
    """A distribution name as PEP 503 compares them: runs of -_. as one -, lowercase."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_metadata(dist_info: str) -> Tuple[str, str]:
    """(Name, Version) from a .dist-info METADATA file's headers."""
    data, _ = read_regular(os.path.join(dist_info, "METADATA"), MAX_METADATA_BYTES)
    return metadata_fields(data)


def metadata_fields(data: bytes) -> Tuple[str, str]:
    """(Name, Version) from the headers of METADATA's bytes (installed, or in a wheel)."""
    name, version = "", ""
    for line in data.decode("utf-8", "replace").split("\n"):
        if not line.strip():
            break  # headers end at the first blank line; the description follows
        if line.startswith("Name:") and not name:
            name = line[5:].strip()
        elif line.startswith("Version:") and not version:
            version = line[8:].strip()
    return name, version


MAX_REQUIRES = 512  # Requires-Dist lines kept (torch has ~20, with its extras ~60)


def metadata_requires(data: bytes) -> Tuple[str, ...]:
    """The Requires-Dist values of METADATA's headers (PEP 508 strings, not parsed here)."""
    found: List[str] = []
    for line in data.decode("utf-8", "replace").split("\n"):
        if not line.strip() or len(found) >= MAX_REQUIRES:
            break
        if line.startswith("Requires-Dist:"):
            found.append(line[len("Requires-Dist:") :].strip()[:MAX_PATH_CHARS])
    return tuple(found)


def record_files(dist_info: str, bad: Optional[List[str]] = None) -> Tuple[str, ...]:
    """Absolute paths of every file a distribution's RECORD lists (may include missing files).

    Rows that cannot be read (a NUL byte, a field over csv's 128 KiB limit, a path with a NUL)
    are skipped and described in ``bad``; the other rows count as before."""
    site = os.path.dirname(dist_info)
    data, more = read_regular(os.path.join(dist_info, "RECORD"), MAX_RECORD_BYTES)
    names = record_names(data, more, bad if bad is not None else [])
    return tuple(os.path.normpath(os.path.join(site, name)) for name in names)


def record_native_files(
    dist_info: str, bad: List[str], inits: Optional[List[str]] = None
) -> Tuple[str, ...]:
    """``record_files`` that ``is_native_file``, without building the paths of the others
    (torch's RECORD lists ~20,000 files, ~30 of them native): a name whose last character is
    neither "/" nor "." keeps its last component through ``normpath``, so its own name says.
    ``inits`` gets the top-level packages' ``__init__.py`` names (``preloads``)."""
    site = os.path.dirname(dist_info)
    data, more = read_regular(os.path.join(dist_info, "RECORD"), MAX_RECORD_BYTES)
    names = record_names(data, more, bad)
    if inits is not None:
        inits.extend(package_inits(names))
    paths = (
        os.path.normpath(os.path.join(site, name))
        for name in names
        if name[-1:] in RECORD_LAST  # no call for the others: torch's 14,700 names, 37 left
    )
    return tuple(path for path in paths if is_native_file(path))


# A RECORD line without these is split on commas exactly as the csv module splits it.
_CSV_SPECIAL = re.compile(r'["\r\0]')
_CSV_FIELD_LIMIT = 128 << 10  # csv.field_size_limit()'s default


def record_names(data: bytes, more: bool, problems: List[str]) -> List[str]:
    """The file names (relative to site-packages) in RECORD's bytes; rows that cannot be read
    are described in ``problems``."""
    names: List[str] = []
    shown = len(problems) + 3

    def bad(message: str) -> None:  # first_problems shows three; the others cost a reference
        problems.append(message if len(problems) < shown else "")

    if more:
        bad("RECORD is over %d MiB: the rest is not read" % (MAX_RECORD_BYTES >> 20))
    text = data.decode("utf-8", "replace")
    # pip writes RECORD with csv's "\r\n"; replace costs 3 ms on torch's, so only where a CR is
    rows = text.replace("\r\n", "\n") if "\r" in text else text
    simple = '"' not in rows and "\r" not in rows and "\0" not in rows  # _CSV_SPECIAL, fast
    lines = rows.split("\n", MAX_RECORD_ROWS)
    if len(lines) > MAX_RECORD_ROWS:
        bad("RECORD has over %d rows: the rest is not read" % MAX_RECORD_ROWS)
        del lines[MAX_RECORD_ROWS:]
    if simple and max(map(len, lines)) <= MAX_PATH_CHARS:
        # The common RECORD (no quotes, lone CR or NUL, no row too long for a name): each name
        # is what comes before the first comma, as the loop below finds it, 5x faster.
        names.extend(name for name in (line.partition(",")[0] for line in lines) if name)
        return names
    names.extend(_csv_names(lines, bad))
    return names


def _csv_names(lines: List[str], bad: Callable[[str], None]) -> List[str]:
    """The first field of each RECORD line, read as csv reads it; a line csv cannot read or
    whose field is not a file name is told to ``bad``."""
    names: List[str] = []
    for number, line in enumerate(lines, 1):
        plain = line[:-1] if line.endswith("\r") else line  # csv ends a row at "\r" too
        if len(plain) <= _CSV_FIELD_LIMIT and not _CSV_SPECIAL.search(plain):
            name = plain.split(",", 1)[0]  # what csv gives, without a reader per line
        else:
            try:
                row = next(csv.reader([line]), [])
            except csv.Error as exc:
                bad("RECORD line %d: %s" % (number, exc))
                continue
            name = row[0] if row else ""
        if name:
            if "\0" in name or len(name) > MAX_PATH_CHARS:
                bad("RECORD line %d: not a file name" % number)
                continue
            names.append(name)
    return names


def first_problems(problems: List[str]) -> str:
    """The first three problems, and how many more there are."""
    more = " (and %d more)" % (len(problems) - 3) if len(problems) > 3 else ""
    return "; ".join(problems[:3]) + more


def dist_infos(site_packages: Iterable[str], problems: List[Problem]) -> Iterator[Tuple[str, str]]:
    """(site directory, .dist-info path) of every distribution; unlistable dirs go to problems."""
    for site in site_packages:
        try:
            names = sorted(os.listdir(site))
        except OSError as exc:
            problems.append(Problem(site, "cannot list: %s" % (exc.strerror or exc)))
            continue
        for entry in names:
            if entry.endswith(".dist-info"):
                yield site, os.path.join(site, entry)


def installed_distributions(
    site_packages: Tuple[str, ...],
) -> Tuple[Tuple[Distribution, ...], Tuple[Problem, ...]]:
    """Every ``*.dist-info`` in the given directories, with the native files its RECORD owns."""
    dists: List[Distribution] = []
    problems: List[Problem] = []
    for site, dist_info in dist_infos(site_packages, problems):
        try:
            metadata, _ = read_regular(os.path.join(dist_info, "METADATA"), MAX_METADATA_BYTES)
        except OSError as exc:
            problems.append(Problem(dist_info, "unreadable METADATA: %s" % (exc.strerror or exc)))
            continue
        name, version = metadata_fields(metadata)
        bad: List[str] = []
        inits: List[str] = []
        try:
            native = record_native_files(dist_info, bad, inits)
        except OSError as exc:
            problems.append(Problem(dist_info, "unreadable RECORD: %s" % (exc.strerror or exc)))
            native = ()
        if bad:
            problems.append(Problem(dist_info, first_problems(bad)))
        fallback = os.path.basename(dist_info)[: -len(".dist-info")]
        requires = metadata_requires(metadata)
        preloads = preloaded(site, inits) if native else ()
        dists.append(
            Distribution(name or fallback, version, dist_info, native, requires, preloads=preloads)
        )
    return with_unresolved_imports(dists, site_packages), tuple(problems)


def _unowned_native_files(site_packages: Tuple[str, ...], owned: Set[str]) -> Tuple[str, ...]:
    """Native files under site-packages that no RECORD lists (vendored or copied in by hand)."""
    found: List[str] = []
    for site in site_packages:
        for directory, subdirs, files in os.walk(site, followlinks=False):
            subdirs[:] = [d for d in subdirs if not d.endswith((".dist-info", "__pycache__"))]
            for name in files:
                if not is_native_file(name):  # the name alone says (no path built for it)
                    continue
                path = os.path.normpath(os.path.join(directory, name))
                if path not in owned and not os.path.islink(path):
                    found.append(path)
    return tuple(sorted(found))


def discover_environment(system: System, python: Optional[str] = None) -> PythonEnvironment:
    """The environment of ``python`` (default: the running interpreter)."""
    executable, version, site_packages, problem = interpreter_paths(system, python)
    dists, problems = installed_distributions(site_packages)
    owned = {p for d in dists for p in d.native_files}
    unowned = _unowned_native_files(site_packages, owned)
    all_problems = ((problem,) if problem else ()) + problems
    return PythonEnvironment(executable, version, site_packages, dists, unowned, all_problems)


def collect_python(system: System, params: Any) -> Dict[str, Any]:
    python = params.get("python") if isinstance(params, dict) else None
    return asdict(discover_environment(system, python))
