"""scripts/complexity, the lint step's complexity gate, on small modules whose count is known.

McCabe's cyclomatic complexity is one plus one per decision point; radon counts an `if` as one
and a boolean operator joining n operands as n - 1 (its documented rules). So a function of k
plain `if` statements scores k + 1, and `if a and b:` scores one more than `if a:`.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "complexity"


def _gate() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("archgap_complexity_gate", str(SCRIPT))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _ifs(name: str, count: int, joined: int = 0) -> str:
    """A function of `count` plain ifs, the first testing `joined` + 1 names joined by `and`."""
    lines = [f"def {name}(x):"]
    for i in range(count):
        test = " and ".join(f"x{j}" for j in range(joined + 1)) if i == 0 else f"x == {i}"
        lines += [f"    if {test}:", f"        return {i}"]
    lines.append("    return -1")
    return "\n".join(lines) + "\n"


def _checkout(tmp_path: Path, source: str) -> Path:
    package = tmp_path / "src" / "archgap"
    package.mkdir(parents=True)
    (package / "m.py").write_text(source)
    return tmp_path


def _run(root: Path) -> int:
    result = _gate().main(["--root", str(root)])
    assert isinstance(result, int)
    return result


def test_fifteen_ifs_score_sixteen_and_fail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _checkout(tmp_path, _ifs("big", 15) + _ifs("small", 14))
    assert _gate().scores(root, root / "src" / "archgap") == {"src/archgap/m.py::big": 16}
    assert _run(root) == 1
    assert "src/archgap/m.py::big: complexity 16 > 15" in capsys.readouterr().err


def test_fourteen_ifs_pass(tmp_path: Path) -> None:
    assert _run(_checkout(tmp_path, _ifs("small", 14))) == 0


def test_boolean_operators_count(tmp_path: Path) -> None:
    # 14 ifs (15) pass; the same with `x0 and x1 and x2` in the first test is 15 + 2 = 17.
    root = _checkout(tmp_path, _ifs("plain", 14) + _ifs("joined", 14, joined=2))
    assert _gate().scores(root, root / "src" / "archgap") == {"src/archgap/m.py::joined": 17}


def test_methods_and_nested_functions_are_named_once(tmp_path: Path) -> None:
    nested = _ifs("inner", 16).replace("\n", "\n    ")
    source = "class C:\n    " + _ifs("method", 16).replace("\n", "\n    ") + "\n"
    source += "def outer():\n    " + nested + "\n    return inner\n"
    root = _checkout(tmp_path, source)
    assert _gate().scores(root, root / "src" / "archgap") == {
        "src/archgap/m.py::C.method": 17,
        "src/archgap/m.py::outer.inner": 17,
    }


def test_list_prints_worst_first_and_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _checkout(tmp_path, _ifs("big", 16) + _ifs("bigger", 18))
    assert _gate().main(["--root", str(root), "--list"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "19 src/archgap/m.py::bigger",
        "17 src/archgap/m.py::big",
    ]
