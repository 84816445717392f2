"""The Python API and the documents the CLI prints with --json. trace, gates and kernels return
typed results that ``archgap.report`` renders (the CLI prints those renderings: one path, so
their documents are checked in-process against the schema); explain's typed result, rendered,
and fleet's document are compared whole with ``archgap CMD --json`` (a separate process).
Only "seconds" (measured times) may differ.

The inputs are real: Python sources written here, the corpus logs, binaries built by
tests/fixtures/cuda/build.sh and probe documents of real virtual environments."""

from __future__ import annotations

import json
from importlib import import_module
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from archgap import api
from archgap.report import explain as explain_report
from archgap.report.jsondoc import schema
from tests.helpers import CUDA_BIN, FIXTURES, install_fake_distribution, make_venv, run_cli

CORPUS = FIXTURES / "explain_corpus"

# One write of TARGET_CUDA_ARCHS fed by an environment variable, one read, one gate (a
# comparison on the major version that raises): what trace and gates each find.
SOURCE = """\
import os

TARGET_CUDA_ARCHS = set()


def configure():
    global TARGET_CUDA_ARCHS
    TARGET_CUDA_ARCHS = set(os.environ.get("FLASHINFER_CUDA_ARCH_LIST", "").split())


def check(major):
    if major < 8:
        raise RuntimeError("needs sm_80 or newer")
    return TARGET_CUDA_ARCHS
"""


def cli_document(command: str, *args: str) -> tuple[int, dict[str, Any]]:
    result = run_cli(command, *args, "--json", timeout=180)
    assert "Traceback" not in result.stderr, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return result.returncode, doc


def same(cli: dict[str, Any], from_api: dict[str, Any], command: str) -> None:
    """Both documents follow the schema and are equal but for the measured time."""
    for doc in (cli, from_api):
        jsonschema.validate(doc, schema(command))
        assert doc["command"] == command
    assert without_seconds(from_api) == without_seconds(cli)


def without_seconds(doc: Any) -> Any:
    """The document without its measured times ("seconds", at any depth)."""
    if isinstance(doc, dict):
        return {k: without_seconds(v) for k, v in doc.items() if k != "seconds"}
    if isinstance(doc, list):
        return [without_seconds(v) for v in doc]
    return doc


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("apidocs") / "site-packages" / "pkg"
    root.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "arch.py").write_text(SOURCE)
    return root


def rendered(result: Any, command: str) -> dict[str, Any]:
    """The result's document, as the CLI prints it, validated against the command's schema."""
    doc: dict[str, Any] = import_module(f"archgap.report.{command}").document(result)
    jsonschema.validate(doc, schema(command))
    assert doc["command"] == command
    return doc


def test_trace(package: Path) -> None:
    cli = rendered(api.trace("TARGET_CUDA_ARCHS", paths=[str(package)]), "trace")
    # Writes: the module-level assignment, configure's `global` declaration (it makes the
    # assignment below one to the module's name) and that assignment; one read, in check.
    found = [(o["kind"], o["line"]) for o in cli["trace"]["occurrences"]]
    assert found == [("write", 3), ("write", 7), ("write", 8), ("read", 14)]


def test_trace_refuses_a_name_that_is_no_identifier(package: Path) -> None:
    # What `archgap trace "a b; rm"` says (one line, exit 2): the api's UsageError, raised
    # before anything is probed.
    with pytest.raises(api.UsageError, match="cannot trace 'a b; rm'"):
        api.trace("a b; rm", paths=[str(package)])


def test_gates(package: Path) -> None:
    cli = rendered(api.gates(paths=[str(package)], kinds=["raise"]), "gates")
    (target,) = cli["gates"]["targets"]
    (function,) = target["functions"]
    assert function["function"] == "check"
    assert [g["kind"] for g in function["gates"]] == ["raise"]
    with pytest.raises(ValueError, match="--kind nope"):
        api.gates(paths=[str(package)], kinds=["nope"])


def test_explain_of_a_message_alone() -> None:
    message = "RuntimeError: FlashInfer requires GPUs with sm75 or higher"
    code, cli = cli_document("explain", "--message", message, "--log-only")
    assert code == 1  # a known architecture gap
    result = api.explain(message, where=None, origin="--message")
    same(cli, explain_report.document(result), "explain")
    assert cli["explain"]["signature"] == "flashinfer-sm75-gate"
    # the typed result says the same as the document: FlashInfer's own gate message, one line
    assert result.diagnosis.signature == "flashinfer-sm75-gate"
    assert (result.origin, result.lines, result.skipped_bytes) == ("--message", 1, 0)
    assert result.exit_code == code


def test_explain_examines_the_same_environment(tmp_path: Path) -> None:
    log = CORPUS / "sglang-incident-flashinfer-0.6.8.log"
    site = make_venv(tmp_path / "venv")
    python = str(tmp_path / "venv" / "bin" / "python")
    assert site.is_dir()
    code, cli = cli_document("explain", str(log), "--python", python, "--gpu", "12.0")
    assert code == 1
    text = log.read_text(encoding="utf-8")
    result = api.explain(text, gpus=["12.0"], where=api.Where(python), origin=str(log))
    same(cli, explain_report.document(result), "explain")
    assert result.exit_code == code
    assert python in cli["explain"]["environment"]


def test_fleet_from_documents(tmp_path: Path) -> None:
    # build.sh: libmix.so has sm_75 SASS (native on a T4); libptxonly.so only compute_80 PTX,
    # which a 7.5 GPU cannot JIT: a gap on n2.
    probes = tmp_path / "probes"
    probes.mkdir()
    for name, lib in (("n1", "libmix.so"), ("n2", "libptxonly.so")):
        venv = tmp_path / name
        files = {f"kern{name}/{lib}": CUDA_BIN / lib}
        install_fake_distribution(make_venv(venv), f"kern{name}", "1.0", files)
        probe = run_cli("probe", "--python", str(venv / "bin" / "python"), timeout=180)
        assert probe.returncode == 0, probe.stderr
        (probes / f"{name}.json").write_text(probe.stdout)
    code, cli = cli_document("fleet", "--from", str(probes), "--gpu", "T4")
    assert code == 1
    source = api.FleetSource(documents=(str(probes),))
    run = api.fleet(source, gpus=["T4"])
    same(cli, rendered(run, "fleet"), "fleet")
    assert run.document() == rendered(run, "fleet")
    # The typed result says the same as the document: two hosts, one with a gap (n2's PTX).
    assert (run.documents, run.report.exit_code, len(run.report.hosts)) == (2, code, 2)
    assert [h.packages for h in run.report.hosts if h.gaps] == [("kernn2==1.0",)]
    assert cli["documents"] == 2 and len(cli["groups"]) == 2
    gaps = {h["name"]: bool(h["gaps"]) for h in cli["hosts"]}
    assert list(gaps.values()).count(True) == 1


def test_kernels_with_the_build_gate() -> None:
    # build.sh: libmix.so has SASS sm_75 ... sm_120 (native on a T4, 7.5); libptxonly.so only
    # compute_80 PTX, which a 7.5 GPU cannot JIT: the gate fails on it.
    paths = [str(CUDA_BIN / "libmix.so"), str(CUDA_BIN / "libptxonly.so")]
    cli = rendered(api.kernels(paths, require=["T4"]), "kernels")
    assert cli["require"]["passed"] is False
    failed = {f["path"].rsplit("/", 1)[-1] for f in cli["require"]["failures"]}
    assert failed == {"libptxonly.so"}
    assert cli["summary"]["files"] == 2 and cli["summary"]["unreadable"] == 0


def test_probe_requires_a_gpu_this_machine_lacks() -> None:
    # The test machines have no RTX PRO 6000 (none, or an H200): a required 12.0 is missing,
    # named by its compute capability.
    from archgap.report.probe import document

    result = api.probe(sections=["gpu"], require=["RTX PRO 6000"])
    doc = document(result)
    jsonschema.validate(doc, schema("probe"))
    assert result.failure is None and doc["target"] == "local"
    assert result.missing == ("RTX PRO 6000 (compute capability 12.0)",)


def test_fix_checks_its_options_before_anything_runs() -> None:
    with pytest.raises(api.UsageError, match="--undo reverts everything"):
        api.fix(undo=True, apply=True)
    with pytest.raises(api.UsageError, match="--only chooses what --apply changes"):
        api.fix(only="patch")
