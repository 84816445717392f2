"""The probe's "code" section on a real venv with a hand-built distribution.

Line numbers of MODULE were counted by hand: check() raises at 10 under `if not ok` (9); ok is
assigned at 5 and, inside `for item in STATE` (6), at 8; norm() raises at 20 in the else of
`version_at_least("12.9")` (17), inside `elif major == 12` (16), the else of `major == 9` (14).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archgap.analysis.explain.logparse import parse_log
from archgap.analysis.explain.match import code_request, names_to_trace
from archgap.codec import decode
from archgap.kb.signatures import load_signatures
from archgap.probe.environment.system import System
from archgap.probe.facts import CodeFacts
from archgap.probe.source.sites import collect_code
from tests.helpers import FIXTURES, install_fake_distribution, make_venv

MODULE = """STATE = []


def check():
    ok = False
    for item in STATE:
        if item > 1:
            ok = True
    if not ok:
        raise RuntimeError("nothing eligible")


def norm(major):
    if major == 9:
        return 1
    elif major == 12:
        if version_at_least("12.9"):
            return 2
        else:
            raise RuntimeError("needs 12.9")
    return 0
"""
RAISE_10 = 'raise RuntimeError("nothing eligible")'
# load() raises at 6 in the handler of line 5, of the try at 3; the for-else raise is at 10.
GUARDED = """def load(names):
    import json
    try:
        return json.loads(names)
    except ValueError as exc:
        raise RuntimeError("bad names") from exc
    for name in names:
        break
    else:
        raise RuntimeError("no names")
"""


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("sites")
    site = make_venv(base / "venv")
    source = base / "mod.py"
    source.write_text(MODULE)
    guarded = base / "guarded.py"
    guarded.write_text(GUARDED)
    install_fake_distribution(
        site,
        "demo",
        "1.0",
        {"pkg/mod.py": source, "pkg/__init__.py": source, "pkg/guarded.py": guarded},
    )
    (site / "stray.py").write_text(MODULE)  # in site-packages, owned by no RECORD
    return base / "venv" / "bin" / "python"


def code(python: Path, **params: object) -> CodeFacts:
    data = collect_code(System.local(), {"python": str(python), **params})
    return decode(CodeFacts, json.loads(json.dumps(data)))  # as the transport hands it over


def test_a_frame_maps_by_relative_path_with_guards_reads_and_bindings(venv: Path) -> None:
    (site,) = code(venv, frames=[{"path": "pkg/mod.py", "line": 10, "code": RAISE_10}]).sites
    assert (site.distribution, site.version, site.line, site.function) == (
        "demo",
        "1.0",
        10,
        "check",
    )
    assert site.text == RAISE_10 and site.error is None
    assert [(g.kind, g.condition, g.line) for g in site.guards] == [("if", "not ok", 9)]
    assert site.reads == ("ok",)
    assert [(b.line, b.loop) for b in site.bindings] == [(5, ""), (8, "item in STATE")]
    assert "STATE" in site.bindings[1].reads


def test_a_moved_line_is_found_by_the_logs_code_and_a_missing_one_is_an_error(venv: Path) -> None:
    moved, gone = code(
        venv,
        frames=[
            {"path": "pkg/mod.py", "line": 3, "code": RAISE_10},
            {"path": "pkg/mod.py", "line": 10, "code": "raise ValueError('other')"},
        ],
    ).sites
    assert (moved.requested_line, moved.line) == (3, 10)
    assert gone.line == 0 and gone.error and "reads" in gone.error


def test_a_known_raise_site_is_found_by_its_text_with_nested_conditions(venv: Path) -> None:
    wanted = {"distribution": "Demo", "file": "pkg/mod.py", "code": "needs 12.9"}
    (site,) = code(venv, raise_sites=[wanted]).sites
    assert (site.line, site.function, site.distribution) == (20, "norm", "demo")
    assert [(g.kind, g.condition, g.line) for g in site.guards] == [
        ("else", "major == 9", 14),
        ("if", "major == 12", 16),
        ("else", 'version_at_least("12.9")', 17),
    ]


def test_except_guards_carry_the_handlers_line_and_a_for_else_reads_nothing(venv: Path) -> None:
    wanted = [
        {"distribution": "demo", "file": "pkg/guarded.py", "code": "bad names"},
        {"distribution": "demo", "file": "pkg/guarded.py", "code": "no names"},
    ]
    handled, loop_else = code(venv, raise_sites=wanted).sites
    assert (handled.line, handled.function) == (6, "load")
    assert [(g.kind, g.condition, g.line) for g in handled.guards] == [("except", "ValueError", 5)]
    assert handled.reads == ()
    assert loop_else.line == 10
    assert [(g.kind, g.condition, g.line) for g in loop_else.guards] == [
        ("else", "name in names", 7)
    ]
    assert loop_else.reads == ()


def test_unowned_missing_and_hostile_requests(venv: Path) -> None:
    facts = code(
        venv,
        frames=[
            {"path": "stray.py", "line": 10, "code": RAISE_10},
            {"path": "pkg/absent.py", "line": 1, "code": ""},
            {"path": "../../../etc/passwd.py", "line": 1},
            {"path": "/etc/hosts.py", "line": 1},
            "not a frame",
        ],
        raise_sites=[{"distribution": "nope", "file": "x/y.py", "code": "z"}],
    )
    stray, absent, nope = facts.sites
    assert stray.distribution == "" and stray.line == 10 and stray.function == "check"
    assert absent.error == "not installed in the examined environment"
    assert nope.error == "distribution not installed"


def test_the_requests_explain_asks_for_on_the_incident_log() -> None:
    log = parse_log(
        (FIXTURES / "explain_corpus" / "sglang-incident-flashinfer-0.6.8.log").read_text()
    )
    request = code_request(log, load_signatures())
    assert request["frames"][0]["path"] == "flashinfer/jit/core.py"
    assert request["frames"][0]["line"] == 108
    assert any(s["code"] == "SM 12.x requires CUDA >= 12.9" for s in request["raise_sites"])
    empty = CodeFacts((), (), ())
    assert names_to_trace(log, load_signatures(), empty) == ()
