"""`archgap kernels --require claimed` on libraries the machine's nvcc 13.0 builds from the
project's k.cu, and the GitHub Action and pre-commit hook that run it.

Expectations from NVIDIA's rules and the claim syntaxes' documented meaning:
- ``-gencode arch=compute_80,code=sm_80`` embeds sm_80 SASS alone. SASS runs within its major
  from its minor up: it serves a claimed 8.0, never 9.0 (another major), and it is no PTX, so a
  claimed "8.0+PTX" (torch: ``code=compute_80`` too) or CMake's plain "80" (real and virtual)
  is not met; CMake's "80-real" is.
- PTX ``compute_75`` is JIT-compiled for any compute capability >= 7.5: it keeps a claimed
  compute_80 (forward compatibility) and serves 9.0 through the JIT, which ``--strict`` refuses.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from archgap.cli import main
from archgap.report.jsondoc import schema
from tests.helpers import ROOT, kernel_wheel
from tests.nvcc_build import NVCC, build_all

pytestmark = pytest.mark.skipif(not NVCC.exists(), reason=f"{NVCC} (nvcc 13.0) is not installed")

SM80 = ["-gencode", "arch=compute_80,code=sm_80"]
SM80_PTX75 = [*SM80, "-gencode", "arch=compute_75,code=compute_75"]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    libs = build_all({"sm80": (SM80, ".so"), "sm80-ptx75": (SM80_PTX75, ".so")})
    root = tmp_path_factory.mktemp("claimed")
    return {**libs, "wheel": kernel_wheel(root / "wheel", libs["sm80"].read_bytes())}


def gate(
    capsys: pytest.CaptureFixture[str], path: Path, claim: str, *more: str
) -> tuple[int, dict[str, Any]]:
    code = main(["kernels", "--json", str(path), "--require", "claimed", "--claims-from", claim,
                 *more])  # fmt: skip
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, schema("kernels"))
    return code, doc["require"]


def lacking(require: dict[str, Any]) -> list[tuple[str, str]]:
    return [(f["claim"], f["path"].rsplit("/", 1)[-1]) for f in require["failures"]]


@pytest.mark.parametrize(
    ("claim", "code", "lacks"),
    [
        ("TORCH_CUDA_ARCH_LIST=8.0;9.0", 1, [("sm_90", "libk.so")]),
        ("TORCH_CUDA_ARCH_LIST=8.0", 0, []),
        ("TORCH_CUDA_ARCH_LIST=8.0+PTX", 1, [("compute_80", "libk.so")]),
        ("CMAKE_CUDA_ARCHITECTURES=80-real", 0, []),
        ("CMAKE_CUDA_ARCHITECTURES=80", 1, [("compute_80", "libk.so")]),
        ("CMAKE_CUDA_ARCHITECTURES=80-real;86-real", 0, []),  # sm_80 runs on 8.6
    ],
    ids=[
        "torch-9.0-missing",
        "torch-8.0",
        "torch-ptx-missing",
        "cmake-real",
        "cmake-both",
        "cmake-same-major",
    ],
)
def test_sm80_wheel_against_claims(
    built: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
    claim: str,
    code: int,
    lacks: list[tuple[str, str]],
) -> None:
    got, require = gate(capsys, built["wheel"], claim)
    assert (got, lacking(require)) == (code, lacks)
    assert require["claimed_from"].startswith(claim.split("=")[0])


def test_the_failure_names_the_arch_the_source_and_the_file(
    built: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    env = {**os.environ, "TORCH_CUDA_ARCH_LIST": "8.0;9.0"}
    result = subprocess.run(
        [sys.executable, "-m", "archgap", "kernels", str(built["wheel"]), "--require", "claimed",
         "--no-config"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 1
    assert "claimed by TORCH_CUDA_ARCH_LIST (environment): 8.0;9.0" in result.stdout
    assert re.search(r"kpkg/libk\.so lacks sm_90 \(9\.0\): none", result.stdout)


def test_older_ptx_keeps_the_ptx_claim_and_strict_refuses_jit(
    built: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    lib = built["sm80-ptx75"]
    assert gate(capsys, lib, "TORCH_CUDA_ARCH_LIST=8.0+PTX")[0] == 0
    assert gate(capsys, lib, "TORCH_CUDA_ARCH_LIST=8.0;9.0")[0] == 0  # 9.0 through the JIT
    code, require = gate(capsys, lib, "TORCH_CUDA_ARCH_LIST=8.0;9.0", "--strict")
    assert (code, [(f["claim"], f["verdict"]) for f in require["failures"]]) == (
        1,
        [("sm_90", "jit")],
    )


def test_the_build_own_compile_database(
    built: dict[str, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The command that built the library, as CMake/Bear would record it, claims what it made."""
    command = [str(NVCC), "-shared", "-Xcompiler", "-fPIC", *SM80_PTX75, "-c", "k.cu"]
    database = tmp_path / "compile_commands.json"
    database.write_text(json.dumps([{"directory": "/src", "file": "k.cu", "arguments": command}]))
    code, require = gate(capsys, built["sm80-ptx75"], str(database))
    assert code == 0 and require["claims"] == ["sm_80", "compute_75"]
    code, require = gate(capsys, built["sm80"], str(database))
    assert (code, lacking(require)) == (1, [("compute_75", built["sm80"].name)])


# --- the GitHub Action and the pre-commit hook ---------------------------------------------------

ACTION_KEYS = {"name", "author", "description", "inputs", "outputs", "runs", "branding"}
INPUT_KEYS = {"description", "required", "default", "deprecationMessage"}
EXPRESSION = re.compile(r"\$\{\{\s*inputs\.([A-Za-z0-9_-]+)\s*\}\}")


def action() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "action.yml").read_text())
    return loaded


def test_action_metadata_follows_github_syntax() -> None:
    """GitHub's metadata syntax: name and description required; a composite action's runs has
    using: composite and steps, each run step a shell; inputs have a description."""
    meta = action()
    assert set(meta) <= ACTION_KEYS and meta["name"] and meta["description"]
    assert meta["runs"]["using"] == "composite"
    for name, spec in meta["inputs"].items():
        assert set(spec) <= INPUT_KEYS and spec["description"], name
    for step in meta["runs"]["steps"]:
        used = EXPRESSION.findall(json.dumps(step))
        assert set(used) <= set(meta["inputs"]), used
        if "uses" in step:  # another action (upload-sarif): its inputs, no script
            assert "run" not in step and "@" in step["uses"]
            continue
        assert "run" in step and step["shell"] == "bash"
        assert "${{" not in step["run"]  # inputs reach the script as variables, never pasted in


def test_pre_commit_manifest_is_valid() -> None:
    from pre_commit.clientlib import load_manifest  # type: ignore[import-untyped]

    (hook,) = load_manifest(str(ROOT / ".pre-commit-hooks.yaml"))
    assert (hook["id"], hook["language"]) == ("archgap-kernels", "python")
    files = re.compile(hook["files"])
    assert all(files.search(n) for n in ("dist/a-1.0-cp311-linux_x86_64.whl", "lib/libk.so.12"))
    assert not any(files.search(n) for n in ("src/k.cu", "setup.py", "libk.so.txt"))


def run_step(step: dict[str, Any], inputs: dict[str, str], env: dict[str, str]) -> Any:
    """One step as the runner runs it: ${{ inputs.X }} in its env evaluated (the input, else its
    default), the script run by `bash --noprofile --norc -eo pipefail FILE`."""
    declared = action()["inputs"]
    values = {k: inputs.get(k, str(v.get("default", ""))) for k, v in declared.items()}
    step_env = {k: EXPRESSION.sub(lambda m: values[m.group(1)], str(v))
                for k, v in step.get("env", {}).items()}  # fmt: skip
    script = Path(env["RUNNER_TEMP"]) / "step.sh"
    script.write_text(step["run"])
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        env={**env, **step_env}, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def test_the_action_runs_as_the_runner_runs_it(built: dict[str, Path], tmp_path: Path) -> None:
    """Install from the action's checkout (GITHUB_ACTION_PATH) with pip, then the gate on the
    wheel: 8.0;9.0 claimed fails (exit 1, an error annotation), 8.0 passes."""
    runner_temp = tmp_path / "runner"
    runner_temp.mkdir()
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "RUNNER_TEMP": str(runner_temp),
        "GITHUB_ACTION_PATH": str(ROOT),
        "GITHUB_WORKSPACE": str(built["wheel"].parent),
        **{k: v for k, v in os.environ.items() if k.startswith(("PIP_", "COVERAGE"))},
    }
    install, check, *_ = action()["runs"]["steps"]
    installed = run_step(install, {}, env)
    assert installed.returncode == 0, installed.stderr[-2000:]
    pattern = str(built["wheel"].parent / "*.whl")
    failed = run_step(check, {"paths": pattern, "claims-from": "TORCH_CUDA_ARCH_LIST=8.0;9.0"}, env)
    assert failed.returncode == 1, failed.stderr
    assert "lacks sm_90 (9.0): none" in failed.stdout
    assert "::error title=archgap kernels::" in failed.stdout
    passed = run_step(check, {"paths": pattern}, {**env, "TORCH_CUDA_ARCH_LIST": "8.0"})
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "require claimed sm_80 (8.0): pass" in passed.stdout
