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


def _checkout(tmp_path: Path, source: str, allowed: str) -> tuple[Path, Path]:
    package = tmp_path / "src" / "archgap"
    package.mkdir(parents=True)
    (package / "m.py").write_text(source)
    listed = tmp_path / "allowed.txt"
    listed.write_text(allowed)
    return tmp_path, listed


def _run(root: Path, listed: Path) -> int:
    result = _gate().main(["--root", str(root), "--allowed", str(listed)])
    assert isinstance(result, int)
    return result


def test_fifteen_ifs_score_sixteen_and_fail_unlisted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, listed = _checkout(tmp_path, _ifs("big", 15) + _ifs("small", 14), "")
    assert _gate().scores(root, root / "src" / "archgap") == {"src/archgap/m.py::big": 16}
    assert _run(root, listed) == 1
    assert "src/archgap/m.py::big: complexity 16 > 15" in capsys.readouterr().err


def test_boolean_operators_count(tmp_path: Path) -> None:
    # 14 ifs (15) pass; the same with `x0 and x1 and x2` in the first test is 15 + 2 = 17.
    root, _ = _checkout(tmp_path, _ifs("plain", 14) + _ifs("joined", 14, joined=2), "")
    assert _gate().scores(root, root / "src" / "archgap") == {"src/archgap/m.py::joined": 17}


def test_listed_score_is_a_ceiling(tmp_path: Path) -> None:
    # 16 ifs: 17.
    root, listed = _checkout(tmp_path, _ifs("big", 16), "18 src/archgap/m.py::big\n")
    assert _run(root, listed) == 0  # went down from 18: passes (with a note to lower the line)
    listed.write_text("17 src/archgap/m.py::big\n")
    assert _run(root, listed) == 0
    listed.write_text("16 src/archgap/m.py::big\n")
    assert _run(root, listed) == 1  # grew past what the list allows


def test_methods_and_nested_functions_are_named_once(tmp_path: Path) -> None:
    nested = _ifs("inner", 16).replace("\n", "\n    ")
    source = "class C:\n    " + _ifs("method", 16).replace("\n", "\n    ") + "\n"
    source += "def outer():\n    " + nested + "\n    return inner\n"
    root, _ = _checkout(tmp_path, source, "")
    assert _gate().scores(root, root / "src" / "archgap") == {
        "src/archgap/m.py::C.method": 17,
        "src/archgap/m.py::outer.inner": 17,
    }


def test_a_stale_line_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The function was split (now 15): its line must go, so the list says only what remains.
    root, listed = _checkout(tmp_path, _ifs("big", 14), "16 src/archgap/m.py::big\n")
    assert _run(root, listed) == 1
    assert "gone or <= 15" in capsys.readouterr().err


def test_a_malformed_line_is_one_clear_error(tmp_path: Path) -> None:
    root, listed = _checkout(tmp_path, "", "sixteen src/archgap/m.py::big\n")
    with pytest.raises(SystemExit, match=r"allowed.txt:1: expected 'SCORE path::name'"):
        _run(root, listed)


def test_tighten_lowers_and_drops_but_never_adds(tmp_path: Path) -> None:
    # big: 16 ifs (17), listed at 20; split: 14 ifs (15), listed at 18; new: 15 ifs (16), unlisted.
    source = _ifs("big", 16) + _ifs("split", 14) + _ifs("new", 15)
    listed_text = "# kept\n20 src/archgap/m.py::big\n18 src/archgap/m.py::split\n"
    root, listed = _checkout(tmp_path, source, listed_text)
    assert _gate().main(["--root", str(root), "--allowed", str(listed), "--tighten"]) == 1
    assert listed.read_text() == "# kept\n17 src/archgap/m.py::big\n"  # 'new' still fails
