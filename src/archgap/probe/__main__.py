"""``python -m archgap.probe``: a JSON request on stdin, the facts as JSON on stdout.

Input: ``{"request": {section: params, ...}, "root": "/", "env_from": null}``. The output is the
dict ``collect`` returns; it always exits 0 once it could read its input, because failures are
values inside the facts. The transport runs the same ``run`` function on remote hosts, where this
package is loaded from memory (its name there is not ``archgap.probe``), so nothing here may
depend on the package's name or on files next to it.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict, Mapping, Optional, Tuple

from .collect import collect
from .system import System


def _environ_from(source: str, root: str) -> Tuple[Optional[Dict[str, str]], str]:
    """The environment of a running service (a PID) or an env file (``KEY=VALUE`` lines)."""
    if source.isdigit():
        path = os.path.join(root, "proc", source, "environ")
        with open(path, "rb") as f:
            raw = f.read(1 << 20)
        pairs = [item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item]
        environ = {k.decode("utf-8", "replace"): v.decode("utf-8", "replace") for k, v in pairs}
        return environ, "/proc/%s/environ" % source
    environ = {}
    with open(source, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if line.startswith("export "):
                line = line[len("export ") :].strip()
            if not line or line.startswith("#") or "=" not in line:
                continue
            key, value = line.split("=", 1)
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            environ[key.strip()] = value
    return environ, source


def run(payload: Mapping[str, Any]) -> Dict[str, Any]:
    """Collect the facts a request asks for; never raises (a bad input becomes an error value)."""
    request = payload.get("request")
    if not isinstance(request, dict):
        return {"errors": {"request": "expected an object mapping section -> parameters"}}
    root = payload.get("root") or "/"
    env_from = payload.get("env_from")
    environ: Optional[Dict[str, str]] = None
    env_source = "shell"
    env_problem = None
    if env_from:
        try:
            environ, env_source = _environ_from(str(env_from), str(root))
        except (OSError, ValueError) as exc:
            env_problem = "cannot read environment from %s: %s" % (
                env_from,
                getattr(exc, "strerror", None) or exc,
            )
    system = System.local(root=str(root), environ=environ, env_source=env_source)
    facts = collect(request, system)
    if env_problem:
        facts.setdefault("errors", {})["env_from"] = env_problem
    return facts


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
