"""`kernels --require ... --format sarif|github`: the build gate's findings for code scanning and
for a GitHub Actions log, on wheels packaged from the fixture libraries nvcc built
(tests/fixtures/cuda/build.sh; what each holds is its nvcc line and what cuobjdump lists):
- libdebug.so: SASS sm_80 only
- libmix.so: SASS sm_75, sm_90, sm_90a, sm_100a, sm_103f, sm_120, sm_120a; PTX compute_75, ...

NVIDIA's rule: SASS sm_XY runs on X.Z with Z >= Y, never across majors. So libdebug.so keeps a
claimed sm_80 and not sm_90; libmix.so keeps both.

The SARIF log is validated against the OASIS schema of SARIF 2.1.0 (tests/fixtures/sarif, from
the TC's repository). The workflow commands are read back as the Actions runner reads them
("::NAME k=v,k=v::DATA" per line; properties split at ',' and '=', '%25' '%0D' '%0A' '%3A'
'%2C' undone: the escapes of actions/toolkit's command.ts), and no line between
`::stop-commands::TOKEN` and `::TOKEN::` is taken as a command (GitHub's "Stopping and starting
workflow commands").
"""

from __future__ import annotations

import json
import os
import re
import zipfile
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from archgap.cli import main
from tests.helpers import CUDA_BIN, ROOT

SCHEMA = json.loads((ROOT / "tests" / "fixtures" / "sarif" / "sarif-schema-2.1.0.json").read_text())
CLAIMS = ("--require", "claimed", "--claims-from", "TORCH_CUDA_ARCH_LIST=8.0;9.0")
COMMAND = re.compile(r"^::([A-Za-z-]+)(?: ([^:]*))?::(.*)$")


def wheel(folder: Path, name: str, members: dict[str, bytes]) -> Path:
    """A wheel with these members and the dist-info pip writes (RECORD lists them)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-1.0-py3-none-manylinux_2_17_x86_64.whl"
    info = f"{name}-1.0.dist-info"
    with zipfile.ZipFile(path, "w") as zf:
        for member, data in members.items():
            zf.writestr(member, data)
        zf.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        zf.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: false\n")
        listed = "".join(f"{m},,\n" for m in [*members, f"{info}/METADATA", f"{info}/RECORD"])
        zf.writestr(f"{info}/RECORD", listed)
    return path


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["kernels", *args])
    return code, capsys.readouterr().out


def sarif(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[dict[str, Any]]]:
    code, out = run(capsys, *args, "--format", "sarif")
    log = json.loads(out)
    jsonschema.Draft4Validator(SCHEMA).validate(log)  # the schema's own $schema: draft-04
    assert log["version"] == "2.1.0"
    (only,) = log["runs"]
    rules = [r["id"] for r in only["tool"]["driver"]["rules"]]
    for result in only["results"]:
        assert rules[result["ruleIndex"]] == result["ruleId"]
    return code, only["results"]


def commands(out: str) -> list[tuple[str, dict[str, str], str]]:
    """The workflow commands the runner would run, in order: (name, properties, data)."""

    def undo(text: str) -> str:
        for escaped, raw in (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","),
                             ("%25", "%")):  # fmt: skip
            text = text.replace(escaped, raw)
        return text

    found = []
    stopped: str | None = None
    for line in out.splitlines():
        if stopped is not None:
            stopped = None if line == f"::{stopped}::" else stopped
            continue
        match = COMMAND.match(line)
        if not match:
            continue
        name, props, data = match.groups()
        if name == "stop-commands":
            stopped = data
            continue
        pairs = (p.split("=", 1) for p in (props or "").split(",") if p)
        found.append((name, {k: undo(v) for k, v in pairs}, undo(data)))
    assert stopped is None, "the commands were never resumed"
    return found


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ci")
    debug, mix = (CUDA_BIN / "libdebug.so").read_bytes(), (CUDA_BIN / "libmix.so").read_bytes()
    return {
        "sm80": wheel(root / "sm80", "kdebug", {"kdebug/libdebug.so": debug}),
        "mix": wheel(root / "mix", "kmix", {"kmix/libmix.so": mix}),
        "empty": wheel(root / "empty", "kpure", {"kpure/__init__.py": b""}),
        # a member name an attacker chose: a newline and a command after it, a '%'
        "hostile": wheel(root / "hostile", "khost", {
            "khost/lib%0A\n::warning::owned.so": debug}),
    }  # fmt: skip


def test_sarif_names_the_wheel_and_the_member_that_lacks_the_claim(
    capsys: pytest.CaptureFixture[str], wheels: dict[str, Path]
) -> None:
    code, results = sarif(capsys, str(wheels["sm80"]), *CLAIMS)
    assert code == 1
    (result,) = results
    assert result["ruleId"] == "claimed-arch-missing" and result["level"] == "error"
    (location,) = result["locations"]
    assert location["physicalLocation"]["artifactLocation"]["uri"] == (
        "file://" + str(wheels["sm80"])
    )
    assert location["logicalLocations"][0]["fullyQualifiedName"] == "kdebug/libdebug.so"
    assert "lacks claimed sm_90 (9.0): none" in result["message"]["text"]


def test_sarif_of_a_passing_build_has_no_results(
    capsys: pytest.CaptureFixture[str], wheels: dict[str, Path]
) -> None:
    code, results = sarif(capsys, str(wheels["mix"]), *CLAIMS)
    assert (code, results) == (0, [])


def test_a_build_without_device_code_and_a_missing_path(
    capsys: pytest.CaptureFixture[str], wheels: dict[str, Path], tmp_path: Path
) -> None:
    """No device code at all fails every claim: one finding for the path; a path that is not
    there is unreadable and exits 2, as the text output does."""
    code, results = sarif(capsys, str(wheels["empty"]), *CLAIMS)
    assert code == 1
    assert [r["ruleId"] for r in results] == ["no-device-code"]
    gone = tmp_path / "gone.so"
    code, results = sarif(capsys, str(wheels["mix"]), str(gone), *CLAIMS)
    assert code == 2
    assert [(r["ruleId"], r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"])
            for r in results] == [("unreadable", f"file://{gone}")]  # fmt: skip


def test_relative_paths_stay_relative(
    capsys: pytest.CaptureFixture[str], wheels: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Code scanning resolves a relative URI against the repository's root: a path given
    relative (dist/x.whl, as a workflow gives it) stays relative."""
    monkeypatch.chdir(wheels["sm80"].parent.parent)
    relative = f"sm80/{wheels['sm80'].name}"
    code, results = sarif(capsys, relative, *CLAIMS)
    assert code == 1
    assert results[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == relative


def test_github_annotations_and_the_report_where_no_command_runs(
    capsys: pytest.CaptureFixture[str], wheels: dict[str, Path]
) -> None:
    code, out = run(capsys, str(wheels["sm80"]), str(wheels["mix"]), *CLAIMS, "--format", "github")
    assert code == 1
    (error,) = commands(out)
    name, props, data = error
    assert (name, props["file"]) == ("error", str(wheels["sm80"]))
    assert props["title"] == "archgap: claimed-arch-missing"
    assert data.startswith(f"{wheels['sm80']}/kdebug/libdebug.so lacks claimed sm_90 (9.0): none")
    assert "require claimed sm_80 (8.0), sm_90 (9.0): FAIL" in out  # the text report, shown
    code, out = run(capsys, str(wheels["mix"]), *CLAIMS, "--format", "github")
    assert (code, commands(out)) == (0, [])


def test_a_hostile_member_name_runs_no_command(
    capsys: pytest.CaptureFixture[str], wheels: dict[str, Path]
) -> None:
    """The member's name carries a newline and '::warning::': the annotation holds it as data
    (read back whole), and the report's lines that show it are inside stop-commands."""
    code, out = run(capsys, str(wheels["hostile"]), *CLAIMS, "--format", "github")
    assert code == 1
    found = commands(out)
    assert [(n, p["title"]) for n, p, _ in found] == [("error", "archgap: claimed-arch-missing")]
    assert found[0][2].startswith(f"{wheels['hostile']}/khost/lib%0A\n::warning::owned.so lacks")


def test_the_action_writes_sarif_and_annotations(wheels: dict[str, Path], tmp_path: Path) -> None:
    """action.yml's steps as the runner runs them (tests/integration/test_claimed_gate.py's
    run_step): installed from the checkout, then the gate on the wheel that lacks sm_90 with
    the sarif input: exit 1, the annotation on the wheel, the SARIF file valid with the same
    finding, and the step's sarif output set; the upload step is another action, run by the
    runner only when upload-sarif is "true"."""
    from tests.integration.test_claimed_gate import action, run_step

    runner_temp = tmp_path / "runner"
    runner_temp.mkdir()
    output = tmp_path / "github_output"
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "RUNNER_TEMP": str(runner_temp),
        "GITHUB_ACTION_PATH": str(ROOT),
        "GITHUB_OUTPUT": str(output),
        **{k: v for k, v in os.environ.items() if k.startswith(("PIP_", "COVERAGE"))},
    }
    install, check, upload = action()["runs"]["steps"]
    assert upload["uses"].startswith("github/codeql-action/upload-sarif@")
    assert "inputs.upload-sarif == 'true'" in upload["if"]
    installed = run_step(install, {}, env)
    assert installed.returncode == 0, installed.stderr[-2000:]
    log = tmp_path / "archgap.sarif"
    inputs = {"paths": str(wheels["sm80"]), "claims-from": "TORCH_CUDA_ARCH_LIST=8.0;9.0",
              "sarif": str(log)}  # fmt: skip
    failed = run_step(check, inputs, env)
    assert failed.returncode == 1, failed.stderr
    found = commands(failed.stdout)
    assert [(p.get("file"), p["title"]) for _, p, _ in found] == [
        (str(wheels["sm80"]), "archgap: claimed-arch-missing"),
        (None, "archgap kernels"),
    ]
    doc = json.loads(log.read_text())
    jsonschema.Draft4Validator(SCHEMA).validate(doc)
    assert [r["ruleId"] for r in doc["runs"][0]["results"]] == ["claimed-arch-missing"]
    assert output.read_text() == f"sarif={log}\n"
    unwritable = run_step(check, {**inputs, "sarif": str(tmp_path / "no" / "x.sarif")}, env)
    assert unwritable.returncode == 2
    assert "the SARIF file could not be written" in unwritable.stdout
