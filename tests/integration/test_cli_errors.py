"""Errors first: a failure is one line on stderr and exit 2, before (instead of) any report; a
wrong option shows the usage of the command it was given to; names that match nothing come
with the closest known ones. And `archgap gpus`, the list those names come from."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from archgap.cli import parse
from tests.helpers import DATA, json_output, need_data, run_cli

FLASHINFER = DATA / "venv-flashinfer-python-0.6.8" / "bin" / "python"


def one_error_line(result: subprocess.CompletedProcess[str], text: str) -> None:
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("archgap: ") and text in lines[0], result.stderr


def test_missing_interpreter_is_one_error_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "bin" / "python"
    one_error_line(
        run_cli("scan", "--python", str(missing), "--gpu", "12.0"),
        f"cannot run {missing}: not found",
    )


def test_directory_as_interpreter_says_so(tmp_path: Path) -> None:
    for command in (["scan", "--gpu", "12.0"], ["gates"], ["trace", "X"]):
        result = run_cli(*command, "--python", str(tmp_path))
        one_error_line(result, f"cannot run {tmp_path}: is a directory")


def test_wrong_option_shows_the_commands_usage() -> None:
    result = run_cli("scan", "--jsn")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("usage: archgap scan ")
    assert (
        "archgap scan: error: unrecognized arguments: --jsn (did you mean --json?)" in result.stderr
    )
    result = run_cli("kernels", "--bogus", ".")
    assert (
        result.stderr.startswith("usage: archgap kernels ") and "did you mean" not in result.stderr
    )


def test_unknown_gpu_suggests_close_names() -> None:
    result = run_cli("scan", "--gpu", "H10")
    one_error_line(result, "unknown GPU 'H10': did you mean NVIDIA H100")
    result = run_cli("scan", "--gpu", "RTX PRO 600")
    one_error_line(result, "did you mean NVIDIA RTX PRO 6000 Blackwell")
    one_error_line(
        run_cli("scan", "--gpu", "Voodoo 5"), "unknown GPU 'Voodoo 5': give a compute capability"
    )


def test_unknown_distribution_suggests_the_installed_name_and_python() -> None:
    need_data(FLASHINFER.parent.parent.name)
    result = run_cli("gates", "flashinfer", "--python", str(FLASHINFER))
    assert result.returncode == 2
    assert "unknown distribution 'flashinfer' in the environment of" in result.stderr
    assert "did you mean flashinfer-python?" in result.stderr and "--python PATH" in result.stderr


def test_gpus_lists_the_knowledge_base() -> None:
    doc = json_output(run_cli("gpus", "--json"), "gpus")
    by_name = {g["name"]: g for g in doc["gpus"]}
    # CUDA Programming Guide, Table 28: sm_120f code runs on 12.0 and 12.1, sm_121f on 12.1 only.
    assert by_name["NVIDIA GB10 (DGX Spark)"]["family_targets"] == ["120f", "121f"]
    assert by_name["NVIDIA H100"]["compute_capability"] == "9.0"
    assert by_name["NVIDIA H100"]["family_targets"] == []
    ccs = [tuple(map(int, g["compute_capability"].split("."))) for g in doc["gpus"]]
    assert ccs == sorted(ccs, reverse=True)  # newest first
    result = run_cli("gpus", "12.1", "--format", "csv")
    header, *rows = list(csv.reader(result.stdout.splitlines()))
    assert header[:2] == ["GPU", "CC"] and {r[1] for r in rows} == {"12.1"}
    text = run_cli("gpus", "H100").stdout.splitlines()
    assert text[1].split()[:4] == ["NVIDIA", "H100", "9.0", "sm_90"]
    assert text[-1] == "[1] https://developer.nvidia.com/cuda-gpus"
    one_error_line(run_cli("gpus", "H10"), "did you mean NVIDIA H100")


def test_gpus_resolves_names_as_gpu_does() -> None:
    # A driver-reported name ("H100 PCIe", nvidia-smi's form) denotes the product it identifies
    # for `archgap gpus` as for --gpu: one resolver of names.
    from archgap.analysis.verdicts.compat import resolve_gpu
    from archgap.api import gpus

    for name in ("H100 PCIe", "Tesla V100-SXM2-32GB", "H100"):
        chosen = gpus([name])
        assert chosen, name
        assert {p.compute_capability for p in chosen} == {str(resolve_gpu(name).compute_capability)}
    assert [p.name for p in gpus(["H100 PCIe"])] == ["NVIDIA H100"]


def test_trace_without_a_name_asks_for_the_name(capsys: pytest.CaptureFixture[str]) -> None:
    # PATH is optional (nargs="*"): only NAME is missing.
    with pytest.raises(SystemExit) as stopped:
        parse(["trace"])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "archgap trace: error: the following arguments are required: NAME"
    )


@pytest.mark.parametrize(
    ("command", "option"),
    [("scan", "--gpu"), ("scan", "--require"), ("kernels", "--require"), ("gates", "--kind")],
)
def test_repeatable_lists_split_on_commas(command: str, option: str) -> None:
    given = [command, option, "a, b", option, "c", *(["x.so"] if command == "kernels" else [])]
    assert getattr(parse(given), option[2:]) == ["a", "b", "c"]
    assert getattr(parse([command, *given[5:]]), option[2:]) == []


def test_probe_format_help_names_its_only_format(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(["probe", "--help"])
    assert "--format {json} output format (default json;" in " ".join(
        capsys.readouterr().out.split()
    )


def test_probe_stdout_is_always_one_json_document() -> None:
    # A usage error too: engines that save probe's stdout get a document, not nothing.
    result = run_cli("probe", "--sections", "nope")
    assert result.returncode == 2
    doc = json.loads(result.stdout)
    assert doc["command"] == "probe" and "--sections" in doc["error"]
    assert result.stderr.startswith("archgap: --sections")


def test_standalone_probe_script_answers_help(tmp_path: Path) -> None:
    script = tmp_path / "archgap-probe.py"
    script.write_text(run_cli("probe", "--script").stdout)
    helped = subprocess.run(
        [sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=60
    )
    assert helped.returncode == 0 and helped.stdout.startswith("archgap probe, standalone")
    assert "Usage: python3 archgap-probe.py [REQUEST_JSON]" in helped.stdout
    bad = subprocess.run(
        [sys.executable, str(script), "{not json"], capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.startswith("archgap-probe: REQUEST_JSON is not JSON")


def test_fleet_reports_a_truncated_document_as_truncated(tmp_path: Path) -> None:
    probe = run_cli("probe", "--sections", "gpu")
    assert probe.returncode == 0, probe.stderr
    (tmp_path / "cut.json").write_text(probe.stdout[: len(probe.stdout) // 2])
    (tmp_path / "bad.json").write_text('{"a": 1,, }')
    doc = json_output(run_cli("fleet", "--from", str(tmp_path), "--json"), "fleet")
    kinds = {Path(u["name"]).name: (u["kind"], u["message"]) for u in doc["unreachable"]}
    assert kinds["cut.json"][0] == "truncated" and "inside a value" in kinds["cut.json"][1]
    assert kinds["bad.json"] == (
        "not-json",
        "invalid JSON at line 1 column 9: Expecting property name enclosed in double quotes",
    )


def test_a_probe_that_cannot_reach_its_target_says_so_on_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The document on stdout carries the whole failure; stderr is its one line.
    from archgap.cli import main

    assert main(["probe", "--via", "sh -c 'echo nope >&2; echo second line >&2; exit 3' x"]) == 2
    out, err = capsys.readouterr()
    assert json.loads(out)["error"]["kind"]
    assert len(err.splitlines()) == 1 and err.startswith("archgap: ")
