"""CUDA toolkits the machine and the inspected environment hold, and what JIT compilers will see.

Candidates, in the order the stacks look for them: ``CUDA_HOME``, ``CUDA_PATH``, the ``nvcc`` on
``PATH``, ``/usr/local/cuda`` and ``/usr/local/cuda-*``, ``$CONDA_PREFIX``, pip toolkit wheels
(``nvidia-cuda-nvcc*``, ``-runtime``, ``-nvrtc``, ``nvidia/cu13``) and Triton's bundled ``ptxas``.
Each candidate is reported separately with how it was found, so the analysis can follow each
package's own lookup order. Versions are read, not run: the toolkit's ``version.json`` (CUDA
11.1 and later), its ``version.txt`` (older), or the release line the binary itself carries
(nvcc and ptxas hold their ``--version`` banner as a string). Only where none of these says
is ``nvcc --version`` / ``ptxas --version`` run (with a timeout: a hanging or crashing binary is
a reported fact), and only a binary that ``system.untrusted`` clears: the candidates come from
environments, listings and packages' files, and another user's nvcc would run as this user
(root, judging a service). Where no binary is, the wheel's version is used. Nothing is imported
from the inspected environment; package facts (torch's CUDA build, flashinfer's version, the
source lines a rule depends on) are read from files.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import threading
from dataclasses import asdict, replace
from typing import Any, Dict, Iterable, List, Optional, Tuple

from ..facts import (
    EnvVar,
    InstalledPackage,
    Problem,
    SourceCheck,
    ToolchainFacts,
    Toolkit,
)
from .pyenv import canonical_name, dist_infos, interpreter_paths, read_metadata, record_files
from .system import CommandResult, System, read_regular
from .torchbuild import torch_build

# "Cuda compilation tools, release 12.8, V12.8.93" (nvcc and ptxas print the same line).
_RELEASE_RE = re.compile(r"release (\d+\.\d+), V(\d+(?:\.\d+)*)")
# The same line as the binary carries it (a format string "release %d.%d," does not match).
_CARRIED = b"Cuda compilation tools, release "
_CARRIED_RE = re.compile(rb"Cuda compilation tools, release (\d+\.\d+), V(\d+(?:\.\d+){1,3})")
CARRIED_SCAN_LIMIT = 256 << 20  # bytes of a binary scanned for its line (nvcc 13.0: 30 MB)
_VERSION_TXT_RE = re.compile(r"CUDA Version (\d+\.\d+)((?:\.\d+)*)")
_DOTTED_RE = re.compile(r"^(\d+\.\d+)(\.\d+){0,3}$")
Version = Tuple[str, Optional[str], Optional[str], Optional[str], str]

# Distributions whose version is a CUDA toolkit component version (nvcc 12.8.93, cudart 12.8.57).
TOOLKIT_WHEEL_PREFIXES = ("nvidia-cuda-nvcc", "nvidia-cuda-runtime", "nvidia-cuda-nvrtc")
# Packages whose JIT behaviour is modelled; their versions are reported.
JIT_PACKAGES = ("flashinfer-python", "torch", "triton", "flashinfer-jit-cache", "flashinfer-cubin")
# Variables that steer toolkit lookup and JIT compilation, and which libraries a package loads
# (kb/load.json "loaders" and "torch_gates").
RELEVANT_ENV = ("CUDA_HOME", "CUDA_PATH", "PATH", "CONDA_PREFIX", "BNB_CUDA_VERSION",
                "TORCHAO_FORCE_SKIP_LOADING_SO_FILES")  # fmt: skip
RELEVANT_ENV_PREFIXES = ("FLASHINFER_", "TORCH_", "TRITON_")
DEFAULT_TOOL_TIMEOUT = 10.0


def parse_release(text: str) -> Optional[Tuple[str, str, str]]:
    """(major.minor, full version, the line) from a ``--version`` banner, or None."""
    for line in text.splitlines():
        match = _RELEASE_RE.search(line)
        if match:
            return match.group(1), match.group(2), line.strip()
    return None


def version_json(home: str) -> Optional[Tuple[str, str, str]]:
    """(major.minor, full, what it says) of nvcc in ``home/version.json`` (CUDA >= 11.1:
    ``{"cuda_nvcc": {"version": "12.8.93"}, ...}``; ptxas is part of that component), or None."""
    try:
        data, more = read_regular(os.path.join(home, "version.json"), 1 << 20)
        entry = json.loads(data.decode("utf-8", "replace")).get("cuda_nvcc")
    except (OSError, ValueError, RecursionError, AttributeError):
        return None
    full = entry.get("version") if isinstance(entry, dict) and not more else None
    match = _DOTTED_RE.match(full) if isinstance(full, str) else None
    return (match.group(1), full, "cuda_nvcc %s" % full) if match and full else None


def version_txt(home: str) -> Optional[Tuple[str, str, str]]:
    """(major.minor, full, the line) of ``home/version.txt`` ("CUDA Version 10.2.89"), or None."""
    try:
        data, _more = read_regular(os.path.join(home, "version.txt"), 4096)
    except OSError:
        return None
    match = _VERSION_TXT_RE.search(data.decode("utf-8", "replace"))
    if match is None:
        return None
    return match.group(1), match.group(1) + match.group(2), match.group(0)


def carried_release(path: str, limit: int = CARRIED_SCAN_LIMIT) -> Optional[Tuple[str, str, str]]:
    """(major.minor, full, the line) of the release line the binary at ``path`` carries, read
    from its first ``limit`` bytes (opened without blocking, a regular file only), or None."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        tail, done = b"", 0
        while done < limit:
            chunk = os.read(fd, min(4 << 20, limit - done))
            done += len(chunk)
            buf = tail + chunk
            start = buf.find(_CARRIED)
            while start >= 0:
                match = _CARRIED_RE.match(buf, start)
                # A line cut by the chunk's end is matched again, whole, with the next chunk.
                if match and (match.end() < len(buf) or not chunk):
                    text = match.group(0).decode("ascii")
                    return match.group(1).decode(), match.group(2).decode(), text
                start = buf.find(_CARRIED, start + 1)
            if not chunk:
                return None
            tail = buf[-96:]
    except OSError:
        return None
    finally:
        os.close(fd)
    return None


def read_version(local: str) -> Optional[Tuple[str, str, str, Optional[str]]]:
    """(major.minor, full, what it says, the file that says it or None for the binary itself)
    of the binary at ``local``, read and never run: its toolkit's version.json or version.txt
    (the toolkit: the directory above the binary's real ``bin``), else the release line the
    binary carries; None where none says."""
    real = os.path.realpath(local)
    home = os.path.dirname(os.path.dirname(real))
    for name, reader in (("version.json", version_json), ("version.txt", version_txt)):
        found = reader(home)
        if found is not None:
            return (*found, os.path.join(home, name))
    carried = carried_release(real)
    return None if carried is None else (*carried, None)


class _ToolRunner:
    """Runs each binary's ``--version`` once (several candidates often share one toolkit).

    A ``listing`` runner runs nothing: it notes the binaries asked about (``asked``), so that
    ``run_all`` can run their ``--version`` at the same time before the real pass asks."""

    def __init__(self, system: System, timeout: float, listing: bool = False) -> None:
        self.system = system
        self.timeout = timeout
        self.cache: Dict[str, Version] = {}
        self.listing = listing
        self.asked: List[str] = []

    def version(self, tool_path: str) -> Version:
        """(status, version, full_version, banner or reason, how) for a target-system path."""
        if self.listing:
            self.asked.append(tool_path)
            return "missing", None, None, None, ""
        local = self.system.path(tool_path)
        key = os.path.realpath(local)
        if key not in self.cache:
            self.cache[key] = self._run(tool_path, local)
        return self.cache[key]

    def run_all(self, tool_paths: Iterable[str]) -> None:
        """The ``--version`` of each binary, all at the same time (each is mostly a wait)."""
        first: Dict[str, Tuple[str, str]] = {}
        for tool_path in tool_paths:
            local = self.system.path(tool_path)
            first.setdefault(os.path.realpath(local), (tool_path, local))

        def run(key: str, tool_path: str, local: str) -> None:
            self.cache[key] = self._run(tool_path, local)

        threads = [
            threading.Thread(target=run, args=(key, *paths), daemon=True)
            for key, paths in first.items()
            if key not in self.cache
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def _run(self, tool_path: str, local: str) -> Version:
        how = "`%s --version`" % tool_path
        if not os.path.lexists(local):
            return "missing", None, None, "%s does not exist" % tool_path, how
        if not os.path.isfile(local):
            return "broken", None, None, "%s is not a file (dangling link?)" % tool_path, how
        if not os.access(local, os.X_OK):
            return "broken", None, None, "%s is not executable" % tool_path, how
        found = read_version(local)
        if found is not None:
            where = found[3] or os.path.realpath(local)
            source = _strip_root(self.system, where)
            if found[3] is None:
                source = "the release line in %s" % source
            return "ok", found[0], found[1], found[2], source
        result = self.system.run([local, "--version"], timeout=self.timeout, vet=True)
        return _version_answer(result, how)


def _version_answer(result: CommandResult, how: str) -> Version:
    """What ``TOOL --version`` said: its release, or why it gave none."""
    if result.error is not None and result.error.startswith("not run: "):
        why = "%s; no version.json, version.txt or release line in it gives its version"
        return "untrusted", None, None, why % result.error, how
    if result.error is not None and result.returncode is None:
        status = "timeout" if result.error.startswith("timed out") else "broken"
        return status, None, None, "%s: %s" % (how, result.error), how
    if result.returncode != 0:
        code = result.returncode or 0
        what = "killed by signal %d" % -code if code < 0 else "exited with status %d" % code
        detail = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:]
        return (
            "broken",
            None,
            None,
            "%s %s%s" % (how, what, (": " + detail[0][:200]) if detail else ""),
            how,
        )
    parsed = parse_release(result.stdout + "\n" + result.stderr)
    if parsed is None:
        first = (result.stdout.strip().splitlines() or [""])[0][:200]
        return "broken", None, None, "%s printed no release line: %r" % (how, first), how
    return "ok", parsed[0], parsed[1], parsed[2], how


def _toolkit(
    runner: _ToolRunner, home: str, tool: str, tool_path: str, found_by: str, origin: str
) -> Toolkit:
    status, version, full, text, how = runner.version(tool_path)
    ok = status == "ok"
    local_home = runner.system.path(home)
    real = _strip_root(runner.system, os.path.realpath(local_home))
    return Toolkit(
        real_home=real,
        home=home,
        found_by=found_by,
        origin=origin,
        tool=tool,
        tool_path=tool_path,
        status=status,
        version=version,
        full_version=full,
        version_from=how,
        reason=None if ok else text,
        banner=text if ok else None,
    )


def _strip_root(system: System, local_path: str) -> str:
    """The target-system path of a root-prefixed local path."""
    root = system.root.rstrip("/")
    if root and local_path.startswith(root + "/"):
        return local_path[len(root) :]
    return local_path


def _system_toolkits(system: System, runner: _ToolRunner) -> Tuple[List[Toolkit], Optional[str]]:
    found: List[Toolkit] = []
    src = system.env_source
    for name in ("CUDA_HOME", "CUDA_PATH"):
        value = system.getenv(name)
        if value:
            home = value.rstrip("/") or "/"
            found.append(
                _toolkit(
                    runner,
                    home,
                    "nvcc",
                    os.path.join(home, "bin", "nvcc"),
                    name,
                    "env %s (%s)" % (name, src),
                )
            )
    which = system.which("nvcc")
    which_nvcc = _strip_root(system, which) if which else None
    if which_nvcc:
        home = os.path.dirname(os.path.dirname(which_nvcc))
        found.append(
            _toolkit(
                runner, home, "nvcc", which_nvcc, "PATH", "`which nvcc` with PATH from %s" % src
            )
        )
    found.append(
        _toolkit(
            runner,
            "/usr/local/cuda",
            "nvcc",
            "/usr/local/cuda/bin/nvcc",
            "/usr/local/cuda",
            "default location /usr/local/cuda",
        )
    )
    try:
        entries = sorted(os.listdir(system.path("/usr/local")))
    except OSError:
        entries = []
    for entry in entries:
        if entry.startswith("cuda-") and os.path.isdir(system.path("/usr/local/" + entry)):
            home = "/usr/local/" + entry
            found.append(
                _toolkit(
                    runner,
                    home,
                    "nvcc",
                    home + "/bin/nvcc",
                    "/usr/local/cuda-*",
                    "directory listing of /usr/local",
                )
            )
    conda = system.getenv("CONDA_PREFIX")
    if conda and os.path.exists(system.path(os.path.join(conda, "bin", "nvcc"))):
        found.append(
            _toolkit(
                runner,
                conda,
                "nvcc",
                os.path.join(conda, "bin", "nvcc"),
                "CONDA_PREFIX",
                "env CONDA_PREFIX (%s)" % src,
            )
        )
    return found, which_nvcc


def _dists(site_packages: Iterable[str], problems: List[Problem]) -> List[Tuple[str, str, str]]:
    """(normalised name, version, dist-info path) of the interesting distributions."""
    found: List[Tuple[str, str, str]] = []
    for _site, dist_info in dist_infos(site_packages, problems):
        guess = canonical_name(os.path.basename(dist_info)[: -len(".dist-info")].rsplit("-", 1)[0])
        if not (guess.startswith(TOOLKIT_WHEEL_PREFIXES) or guess in JIT_PACKAGES):
            continue
        try:
            name, version = read_metadata(dist_info)
        except OSError as exc:
            problems.append(Problem(dist_info, "unreadable METADATA: %s" % (exc.strerror or exc)))
            continue
        found.append((canonical_name(name or guess), version, dist_info))
    return found


def _record_binaries(dist_info: str) -> List[str]:
    """Absolute paths of the nvcc/ptxas binaries a distribution's RECORD lists."""
    try:
        files = record_files(dist_info)
    except OSError:
        return []
    return [
        p for p in files if p.split(os.sep)[-2:-1] == ["bin"] and p.endswith(("/nvcc", "/ptxas"))
    ]


def _wheel_toolkits(dists: List[Tuple[str, str, str]], runner: _ToolRunner) -> List[Toolkit]:
    found: List[Toolkit] = []
    for name, version, dist_info in dists:
        if not name.startswith(TOOLKIT_WHEEL_PREFIXES):
            continue
        component = name[len("nvidia-cuda-") :].split("-")[0]
        origin = "RECORD of %s" % os.path.basename(dist_info)
        binaries = _record_binaries(dist_info)
        # Prefer nvcc (it is what JITs call); a ptxas-only wheel still tells its assembler.
        binaries.sort(key=lambda p: 0 if p.endswith("nvcc") else 1)
        if binaries:
            tool_path = binaries[0]
            home = os.path.dirname(os.path.dirname(tool_path))
            tk = _toolkit(runner, home, os.path.basename(tool_path), tool_path, "wheel", origin)
            found.append(replace(tk, component=component))
        else:
            parts = version.split(".")
            found.append(
                Toolkit(
                    home=os.path.dirname(dist_info),
                    found_by="wheel",
                    origin=origin,
                    tool="",
                    tool_path=None,
                    status="wheel",
                    version=".".join(parts[:2]) if len(parts) >= 2 else None,
                    full_version=version,
                    version_from="wheel METADATA (%s %s)" % (name, version),
                    component=component,
                )
            )
    return found


def _triton_toolkits(
    system: System, site_packages: Iterable[str], runner: _ToolRunner
) -> List[Toolkit]:
    found: List[Toolkit] = []
    for site in site_packages:
        bin_dir = os.path.join(site, "triton", "backends", "nvidia", "bin")
        for tool in ("ptxas", "ptxas-blackwell"):
            path = os.path.join(bin_dir, tool)
            if os.path.lexists(path):
                tk = _toolkit(runner, bin_dir, tool, path, "triton", "bundled with triton")
                found.append(tk)
    for name in ("TRITON_PTXAS_PATH", "TRITON_PTXAS_BLACKWELL_PATH"):
        value = system.getenv(name)
        if value:
            found.append(
                _toolkit(
                    runner,
                    os.path.dirname(value),
                    "ptxas",
                    value,
                    name,
                    "env %s (%s)" % (name, system.env_source),
                )
            )
    return found


def _read_lines(path: str) -> Tuple[Optional[List[str]], Optional[str]]:
    """(the lines of the file's first 2,000,000 characters, None) or (None, why not)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(2000000).splitlines(), None
    except OSError as exc:
        return None, "cannot read: %s" % (exc.strerror or exc)


def _first_line_with(lines: List[str], needle: str) -> Optional[int]:
    """The number of the first line holding ``needle`` (from 1), or None."""
    for number, line in enumerate(lines, 1):
        if needle in line:
            return number
    return None


def _source_checks(site_packages: Tuple[str, ...], checks: Any) -> List[SourceCheck]:
    """Look for each requested needle in the installed file (first site dir that has it)."""
    results: List[SourceCheck] = []
    if not isinstance(checks, list):
        return results
    texts: Dict[str, Tuple[Optional[List[str]], Optional[str]]] = {}
    hashes: Dict[str, Optional[str]] = {}
    for check in checks:
        if not isinstance(check, dict):
            continue
        package = str(check.get("package", ""))
        rel = str(check.get("file", ""))
        needle = str(check.get("needle", ""))
        key = str(check.get("key", ""))
        top = rel.split("/", 1)[0]
        sites = [s for s in site_packages if os.path.isdir(os.path.join(s, top))]
        if not sites or not needle:
            continue  # the package is not installed here: nothing to confirm
        path = os.path.join(sites[0], rel)
        if path not in texts:
            texts[path] = _read_lines(path)
        lines, error = texts[path]
        line_no = _first_line_with(lines or [], needle)
        digest = None
        if check.get("hash") == "sha256" and lines is not None:
            if path not in hashes:
                hashes[path] = _sha256(path)
            digest = hashes[path]
        found = line_no is not None
        results.append(SourceCheck(package, key, path, needle, found, line_no, error, digest))
    return results


def _sha256(path: str) -> Optional[str]:
    """The sha256 of the file (at most 2 MB: a source file a kb patch is for), None when it
    cannot be read or is larger."""
    try:
        with open(path, "rb") as f:
            data = f.read(2000001)
    except OSError:
        return None
    return hashlib.sha256(data).hexdigest() if len(data) <= 2000000 else None


def relevant_env(system: System) -> Tuple[EnvVar, ...]:
    return tuple(
        EnvVar(name, value, system.env_source)
        for name, value in system.env
        if name in RELEVANT_ENV or name.startswith(RELEVANT_ENV_PREFIXES)
    )


def discover_toolchains(
    system: System,
    site_packages: Tuple[str, ...],
    source_checks: Any = None,
    timeout: float = DEFAULT_TOOL_TIMEOUT,
) -> ToolchainFacts:
    problems: List[Problem] = []
    dists = _dists(site_packages, problems)

    def candidates(runner: _ToolRunner) -> Tuple[List[Toolkit], Optional[str]]:
        toolkits, which_nvcc = _system_toolkits(system, runner)
        toolkits += _wheel_toolkits(dists, runner)
        toolkits += _triton_toolkits(system, site_packages, runner)
        return toolkits, which_nvcc

    # A first pass lists the binaries; their --version runs at the same time; the second pass
    # builds the toolkits from those answers (the same order and facts as one pass would).
    listing = _ToolRunner(system, timeout, listing=True)
    candidates(listing)
    runner = _ToolRunner(system, timeout)
    runner.run_all(listing.asked)
    toolkits, which_nvcc = candidates(runner)
    packages = tuple(
        InstalledPackage(name, version, dist_info)
        for name, version, dist_info in dists
        if name in JIT_PACKAGES
    )
    return ToolchainFacts(
        env_source=system.env_source,
        env=relevant_env(system),
        which_nvcc=which_nvcc,
        toolkits=tuple(toolkits),
        packages=packages,
        torch=torch_build(site_packages, problems),
        source_checks=tuple(_source_checks(site_packages, source_checks)),
        site_packages=site_packages,
        problems=tuple(problems),
    )


def collect_toolchains(system: System, params: Any) -> Dict[str, Any]:
    """Section "toolchains": params {"site_packages": [...], "python": PATH, "source_checks": [...],
    "timeout": seconds}. Without site_packages, the given (or running) interpreter's are used."""
    params = params if isinstance(params, dict) else {}
    problems: List[Problem] = []
    site = params.get("site_packages")
    if isinstance(site, list):
        site_packages = tuple(str(s) for s in site)
    else:
        _exe, _ver, site_packages, problem = interpreter_paths(system, params.get("python"))
        if problem is not None:
            problems.append(problem)
    timeout = params.get("timeout", DEFAULT_TOOL_TIMEOUT)
    facts = discover_toolchains(
        system,
        site_packages,
        params.get("source_checks"),
        float(timeout) if isinstance(timeout, (int, float)) else DEFAULT_TOOL_TIMEOUT,
    )
    data = asdict(facts)
    data["problems"] = [asdict(p) for p in problems] + list(data["problems"])
    return data
