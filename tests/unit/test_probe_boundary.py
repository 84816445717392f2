"""The probe travels: Python 3.8 syntax and library, nothing imported from outside itself."""

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import archgap.probe
from tests.helpers import vermin

PROBE = Path(archgap.probe.__file__).parent
MODULES = sorted(PROBE.rglob("*.py"))  # subpackages (source/) travel too


def optional_imports(tree: ast.AST) -> set[ast.AST]:
    """Imports in the body of a ``try`` that catches ImportError: used when installed (the
    ``isal`` extra's faster inflater), the stdlib's way otherwise."""
    found: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
            isinstance(h.type, ast.Name) and h.type.id == "ImportError" for h in node.handlers
        ):
            found.update(n for statement in node.body for n in ast.walk(statement))
    return found


def test_probe_imports_only_stdlib_and_itself() -> None:
    offenders = []
    for path in MODULES:
        tree = ast.parse(path.read_text(), str(path))
        optional = optional_imports(tree)
        for node in ast.walk(tree):
            if node in optional:
                continue
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top != "__future__" and top not in sys.stdlib_module_names:
                    offenders.append(f"{path.relative_to(PROBE)}:{node.lineno} imports {name}")
    assert not offenders


def test_probe_is_python38_compatible() -> None:
    result = vermin(PROBE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_probe_runs_alone_in_an_isolated_interpreter(tmp_path: Path) -> None:
    # Copied out of the package, under another name, with -I -S: as on a bare remote host. The
    # trace section lives in the source/ subpackage, whose modules import the probe's own (..).
    shutil.copytree(PROBE, tmp_path / "travelling_probe")
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "m.py").write_text("ARCHS = []\nprint(ARCHS)\n")
    request = {"nonsense": {}, "trace": {"name": "ARCHS", "paths": [str(tmp_path / "code")]}}
    code = (
        f"import sys; sys.path.insert(0, {str(tmp_path)!r});"
        "import json, travelling_probe.collect as c, travelling_probe.environment.system as s;"
        f"print(json.dumps(c.collect({request!r}, s.System.local())))"
    )
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    facts = json.loads(result.stdout)
    assert facts["errors"] == {"nonsense": "unknown section"}
    found = facts["sections"]["trace"]["occurrences"]
    assert [(o["kind"], o["line"]) for o in found] == [("write", 1), ("read", 2)]


def test_analysis_reads_wire_types_without_loading_the_scanners() -> None:
    # The wire dataclasses live in probe.facts; the pure analysis must not pull in the AST walkers
    # (finder, flow, trace, gates, sites) just to name the types it reads. A fresh interpreter:
    # this test process has imported them already.
    scanners = [f"archgap.probe.source.{m}" for m in ("finder", "flow", "trace", "gates", "sites")]
    code = (
        "import sys, json, archgap.analysis.explain.diagnosis, archgap.analysis.scan;"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('archgap.'))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout)
    assert "archgap.analysis.explain.diagnosis" in loaded and "archgap.probe.facts" in loaded
    assert [m for m in scanners if m in loaded] == []
