"""``python -m archgap.probe``: a JSON request on stdin, the facts as JSON on stdout.

Input: ``{"request": {section: params, ...}, "root": "/", "env_from": null, "timeout": 120}``
(``timeout``: the most seconds any command the probe runs may take). The output is the
dict ``collect`` returns; it always exits 0 once it could read its input, because failures are
values inside the facts. The transport runs the same ``run`` function on remote hosts, where this
package is loaded from memory (its name there is not ``archgap.probe``), so nothing here may
depend on the package's name or on files next to it.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional

from .collect import collect
from .environment.service_env import system_with_env_from
from .environment.system import System

if TYPE_CHECKING:
    from .binary.fatbin import Progress


def run(payload: Mapping[str, Any], progress: Optional[Progress] = None) -> Dict[str, Any]:
    """Collect the facts a request asks for; never raises (a bad input becomes an error value).

    ``progress`` (in-process callers only) is told as the binaries are read. ``{"fix": {...}}``
    runs the fix program instead (``fixer.py``: plan, apply, undo)."""
    if "fix" in payload:
        from .actions.fixer import run as run_fix

        return run_fix(payload["fix"])
    request = payload.get("request")
    if not isinstance(request, dict):
        return {"errors": {"request": "expected an object mapping section -> parameters"}}
    env_from = payload.get("env_from")
    system = system_of(payload)
    if env_from:
        service_system, env_problem = system_with_env_from(str(env_from), system)
        if service_system is None:
            # Never the shell's environment in its place: no section is collected.
            facts = collect({}, system)
            facts.setdefault("errors", {})["env_from"] = env_problem
            return facts
        system = service_system
    if progress is not None:
        system = replace(system, progress=progress)
    return collect(request, system)


def system_of(payload: Mapping[str, Any]) -> System:
    """The machine ``payload`` is about, in the shell's environment: its root prefix and the most
    seconds a command may take."""
    system = System.local(root=str(payload.get("root") or "/"))
    timeout = payload.get("timeout")
    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout > 0:
        system = replace(system, timeout=float(timeout))
    return system


def main() -> int:
    try:
        payload = json.loads(sys.stdin.read() or "{}")
    except ValueError as exc:
        sys.stderr.write("archgap probe: the request on stdin is not JSON: %s\n" % exc)
        return 2
    if not isinstance(payload, dict):
        sys.stderr.write("archgap probe: the request on stdin must be a JSON object\n")
        return 2
    json.dump(run(payload), sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
