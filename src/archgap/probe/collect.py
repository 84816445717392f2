"""The probe's single entry point: a JSON request in, JSON facts out.

Local commands call ``collect`` in-process; remote ones send this package to the target's Python
and call the same function there (``python -m archgap.probe`` reads the request on stdin). Each
section is a function ``collect_<section>(system, params) -> JSON data`` in a probe module; a
section that fails becomes an error value, never an exception, and the other sections go on.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from .binary.deep_plan import judged_native_sets
from .environment.system import System
from .facts import FACTS_VERSION

# section name -> (probe module, function). Modules are imported only when their section is asked.
SECTIONS: Dict[str, Tuple[str, str]] = {
    "gpu": ("environment.gpu", "collect_gpu"),
    "python": ("environment.pyenv", "collect_python"),
    "binaries": ("binary.binfiles", "collect_binaries"),
    "toolchains": ("environment.toolkit", "collect_toolchains"),
    "trace": ("source.trace", "collect_trace"),
    "gates": ("source.gates", "collect_gates"),
    "code": ("source.sites", "collect_code"),
    "verify": ("actions.verify", "collect_verify"),
    "caches": ("environment.jit_caches", "collect_caches"),
    "loader": ("environment.loader", "collect_loader"),
}
# Sections that mostly wait for commands they run (the target's interpreter, the NVML child,
# each toolkit's --version): several of them in one request run at the same time, in threads
# that all end before any other section starts (reading binaries may fork a helper, which a
# process with other threads must not).
CONCURRENT = frozenset(("gpu", "python", "toolchains", "caches"))
# (section, its data or None, its error or None, seconds)
Outcome = Tuple[str, Any, Optional[str], float]


def collect(request: Mapping[str, Any], system: System) -> Dict[str, Any]:
    """Run every requested section; ``request`` maps section name -> its parameters.

    ``"binaries": {"of_python": true}`` reads the native files of the environment the "python"
    section found, so one round trip brings both the packages and their kernels.
    """
    facts: Dict[str, Any] = {
        "facts_version": FACTS_VERSION,
        "host": os.uname().nodename,  # gethostname(2)'s answer (socket's import costs 2 ms)
        "platform": "%s %s %s" % (os.uname().sysname, os.uname().release, os.uname().machine),
        "probe_python": sys.version.split()[0],
        "env": dict(system.env),
        "env_source": system.env_source,
        "sections": {},
        "errors": {},
        "seconds": {},  # what each section took on the target (reading, not analysis)
        # When the facts were collected (UTC, ISO 8601): how `fleet --from` tells a document
        # a node pushed an hour ago from one whose timer stopped a month ago.
        "collected_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    binaries = request.get("binaries")
    binaries = binaries if isinstance(binaries, dict) else {}
    deferred = binaries.get("of_python")
    now = [
        (name, params) for name, params in request.items() if not (deferred and name == "binaries")
    ]
    waiting = [(name, params) for name, params in now if name in CONCURRENT]
    together = dict(_run_together(waiting, system)) if len(waiting) > 1 else {}
    for name, params in now:  # the facts keep the request's order of sections
        _record(facts, together.get(name) or _run_section(name, params, system))
    if deferred:
        _record(facts, _run_section("binaries", _of_python(binaries, facts), system))
    return facts


def _of_python(binaries: Mapping[str, Any], facts: Dict[str, Any]) -> Dict[str, Any]:
    """The parameters of the "binaries" section that reads the native files of the environment
    the "python" section found (``of_python``): each distribution's and the unowned ones."""
    env = facts["sections"].get("python") or {}
    paths = set(env.get("unowned_native_files") or [])
    for dist in env.get("distributions") or []:
        paths.update(dist.get("native_files") or [])
    deep = bool(binaries.get("deep", True))
    params = {"paths": sorted(paths), "deep": deep, "detail": bool(binaries.get("detail", True))}
    if deep and "deep_plan" in binaries:
        # Deeply only where hidden entries can matter for the GPUs judged (deep_plan.py).
        params["native_sets"] = judged_native_sets(
            binaries["deep_plan"], facts["sections"].get("gpu")
        )
    return params


def _run_together(sections: List[Tuple[str, Any]], system: System) -> List[Tuple[str, Outcome]]:
    """Each section in a thread of its own; returns once every one has ended."""
    outcomes: Dict[str, Outcome] = {}

    def run(name: str, params: Any) -> None:
        outcomes[name] = _run_section(name, params, system)

    threads = [threading.Thread(target=run, args=section, daemon=True) for section in sections]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return list(outcomes.items())


def _run_section(name: str, params: Any, system: System) -> Outcome:
    if name not in SECTIONS:
        return name, None, "unknown section", -1.0
    module_name, function_name = SECTIONS[name]
    started = time.monotonic()
    try:
        module = importlib.import_module("." + module_name, __package__)
        function: Callable[[System, Any], Any] = getattr(module, function_name)
        data, error = function(system, params), None
    except Exception as exc:  # a broken section is a value; the rest of the probe goes on
        data, error = None, "%s: %s" % (type(exc).__name__, exc)
    return name, data, error, round(time.monotonic() - started, 3)


def _record(facts: Dict[str, Any], outcome: Outcome) -> None:
    name, data, error, seconds = outcome
    if error is None:
        facts["sections"][name] = data
    else:
        facts["errors"][name] = error
    if seconds >= 0:  # an unknown section took no time
        facts["seconds"][name] = seconds
