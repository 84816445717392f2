"""The probe's single entry point: a JSON request in, JSON facts out.

Local commands call ``collect`` in-process; remote ones send this package to the target's Python
and call the same function there (``python -m archgap.probe`` reads the request on stdin). Each
section is a function ``collect_<section>(system, params) -> JSON data`` in a probe module; a
section that fails becomes an error value, never an exception, and the other sections go on.
"""

from __future__ import annotations

import importlib
import os
import socket
import sys
import time
from typing import Any, Callable, Dict, Mapping, Tuple

from .deep_plan import judged_native_sets
from .facts import FACTS_VERSION
from .system import System

# section name -> (probe module, function). Modules are imported only when their section is asked.
SECTIONS: Dict[str, Tuple[str, str]] = {
    "gpu": ("gpu", "collect_gpu"),
    "python": ("pyenv", "collect_python"),
    "binaries": ("binfiles", "collect_binaries"),
    "toolchains": ("toolkit", "collect_toolchains"),
    "trace": ("source.trace", "collect_trace"),
    "gates": ("source.gates", "collect_gates"),
    "code": ("source.sites", "collect_code"),
    "verify": ("verify", "collect_verify"),
    "caches": ("jit_caches", "collect_caches"),
}


def collect(request: Mapping[str, Any], system: System) -> Dict[str, Any]:
    """Run every requested section; ``request`` maps section name -> its parameters.

    ``"binaries": {"of_python": true}`` reads the native files of the environment the "python"
    section found, so one round trip brings both the packages and their kernels.
    """
    facts: Dict[str, Any] = {
        "facts_version": FACTS_VERSION,
        "host": socket.gethostname(),
        "platform": "%s %s %s" % (os.uname().sysname, os.uname().release, os.uname().machine),
        "probe_python": sys.version.split()[0],
        "env": dict(system.env),
        "env_source": system.env_source,
        "sections": {},
        "errors": {},
        "seconds": {},  # what each section took on the target (reading, not analysis)
    }
    binaries = request.get("binaries")
    deferred = binaries.get("of_python") if isinstance(binaries, dict) else None
    for name, params in request.items():
        if not (deferred and name == "binaries"):
            _run_section(facts, name, params, system)
    if deferred:
        env = facts["sections"].get("python") or {}
        paths = set(env.get("unowned_native_files") or [])
        for dist in env.get("distributions") or []:
            paths.update(dist.get("native_files") or [])
        deep = bool(binaries.get("deep", True)) if isinstance(binaries, dict) else True
        detail = bool(binaries.get("detail", True)) if isinstance(binaries, dict) else True
        params = {"paths": sorted(paths), "deep": deep, "detail": detail}
        if deep and isinstance(binaries, dict) and "deep_plan" in binaries:
            # Deeply only where hidden entries can matter for the GPUs judged (deep_plan.py).
            gpu = facts["sections"].get("gpu")
            params["native_sets"] = judged_native_sets(binaries["deep_plan"], gpu)
        _run_section(facts, "binaries", params, system)
    return facts


def _run_section(facts: Dict[str, Any], name: str, params: Any, system: System) -> None:
    if name not in SECTIONS:
        facts["errors"][name] = "unknown section"
        return
    module_name, function_name = SECTIONS[name]
    started = time.monotonic()
    try:
        module = importlib.import_module("." + module_name, __package__)
        function: Callable[[System, Any], Any] = getattr(module, function_name)
        facts["sections"][name] = function(system, params)
    except Exception as exc:  # a broken section is a value; the rest of the probe goes on
        facts["errors"][name] = "%s: %s" % (type(exc).__name__, exc)
    facts["seconds"][name] = round(time.monotonic() - started, 3)
