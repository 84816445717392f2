"""Fix texts as templates (kb/fixes.json, issue 44 item 4): every call fills exactly the fields
its template names, every template is used and sourced, and a wording changes by data alone."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from archgap.analysis.verdicts import drivers
from archgap.analysis.verdicts.compat import ComputeCapability, GpuTarget
from archgap.kb.fixes import fix_text, templates
from tests.unit.test_kb_pretend_release import _amend, _clear_caches

SRC = Path(__file__).resolve().parents[2] / "src" / "archgap"


CALLERS = ("fix_text", "fix_words", "worded")  # worded: a Fix, with kind and env


def _calls() -> list[tuple[str, str, frozenset[str]]]:
    """(where, key, the template fields it gives) of every call that words a fix by its key."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) in CALLERS):
                continue
            if any(k.arg is None for k in node.keywords):  # a forwarder: worded's own **fields
                continue
            assert node.args and isinstance(node.args[0], ast.Constant), f"{path}:{node.lineno}"
            names = frozenset(k.arg for k in node.keywords if k.arg not in (None, "kind", "env"))
            found.append((f"{path.name}:{node.lineno}", str(node.args[0].value), names))
    return found


def test_every_call_gives_exactly_the_fields_of_its_template() -> None:
    calls = _calls()
    assert len(calls) >= 14  # the driver checks' six fixes, the FlashInfer engine's eight
    for where, key, names in calls:
        assert key in templates(), f"{where}: no template {key!r} in kb/fixes.json"
        assert names == templates()[key].fields(), where


def test_every_template_is_used_and_sourced() -> None:
    used = {key for _, key, _ in _calls()}
    for key, template in templates().items():
        assert key in used, f"kb/fixes.json {key!r} is used nowhere"
        assert template.source.strip(), key


def test_a_missing_field_raises_rather_than_shows_a_blank() -> None:
    with pytest.raises(KeyError):
        fix_text("driver-last-branch", last_branch="580")


def _gpu(cc: str) -> GpuTarget:
    parsed = ComputeCapability.parse(cc)
    assert parsed is not None
    return GpuTarget(f"sm_{cc.replace('.', '')}", parsed, "named", "test")


def _volta_on_590() -> str:
    # NVIDIA's CUDA Toolkit, Driver, and Architecture Matrix: R580 is the last branch for
    # Maxwell, Pascal and Volta, so a 590 driver runs no Volta GPU (CC 7.0).
    findings = drivers.driver_gpu([_gpu("7.0")], "590.44.01", "named", {})
    assert [f.check for f in findings] == ["driver-gpu"]
    return findings[0].fix


def test_the_last_branch_fix_names_r580_for_volta() -> None:
    assert _volta_on_590() == "install an R580 driver (NVIDIA's last branch for Volta)"


@pytest.fixture
def amended(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """``monkeypatch`` for ``_amend``; after the test the kb and the caches built from the
    amended copy are the real ones again (a cached template would leak into later tests)."""
    yield monkeypatch
    monkeypatch.undo()
    _clear_caches()


def test_a_wording_changes_by_data_alone(amended: pytest.MonkeyPatch) -> None:
    def reword(data: dict[str, dict[str, dict[str, str]]]) -> None:
        data["fixes"]["driver-last-branch"]["text"] = (
            "pin the R{last_branch} branch: it is the last for {architecture}"
        )

    _amend(amended, {"fixes.json": reword})
    assert _volta_on_590() == "pin the R580 branch: it is the last for Volta"


def test_a_key_defined_in_two_files_is_an_error(amended: pytest.MonkeyPatch) -> None:
    def copy_one(data: dict[str, dict[str, dict[str, str]]]) -> None:
        data["fixes"]["driver-last-branch"] = {"text": "again", "source": "a test"}

    _amend(amended, {"fixes_jit.json": copy_one})
    with pytest.raises(ValueError, match="driver-last-branch"):
        templates()
