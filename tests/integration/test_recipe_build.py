"""Each recipe, compiled with the machine's nvcc 13.0 into a small library, passes its own CI gate
(`archgap kernels LIB --require GPU` for every GPU of its set); a build that misses a GPU fails it
and names the target the recipe expects."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from archgap.cli import main
from archgap.report.jsondoc import schema
from tests.helpers import CUDA_BIN
from tests.nvcc_build import NVCC, build_all

pytestmark = pytest.mark.skipif(not NVCC.exists(), reason=f"{NVCC} (nvcc 13.0) is not installed")

SETS = {
    "hopper-blackwell-spark": (["H100", "RTX PRO 6000", "GB10"], False),
    "b200-b300": (["B200", "B300"], False),
    "b200-b300-arch": (["B200", "B300"], True),
    "t4-a100-h100": (["T4", "A100", "H100"], False),
}


def run_json(capsys: pytest.CaptureFixture[str], command: str, *args: str) -> tuple[int, Any]:
    code = main([command, "--json", *args])
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, schema(command))
    return code, doc


def recipe_of(capsys: pytest.CaptureFixture[str], gpus: list[str], arch: bool) -> dict[str, Any]:
    args = [a for g in gpus for a in ("--gpu", g)] + ["--toolkit", "13.0"]
    code, doc = run_json(capsys, "recipe", *args, *(["--arch-specific"] if arch else []))
    assert code == 0 and doc["complete"]
    recipe_doc: dict[str, Any] = doc
    return recipe_doc


@pytest.fixture(scope="module")
def built() -> dict[str, tuple[dict[str, Any], Path]]:
    from archgap.analysis.recipe.recipe import recipe
    from archgap.analysis.verdicts.compat import resolve_gpu
    from archgap.codec import encode
    from archgap.report.recipe import body

    docs = {
        name: encode(body(recipe([resolve_gpu(g) for g in gpus], "13.0", arch)))
        for name, (gpus, arch) in SETS.items()
    }
    jobs = {name: (doc["spellings"]["nvcc"].split(), ".so") for name, doc in docs.items()}
    # vllm#56548: a build for sm_100a only, used on a B300 (10.3).
    jobs["sm100a-only"] = (["-gencode", "arch=compute_100a,code=sm_100a"], ".so")
    libs = build_all(jobs)
    return {name: (docs.get(name, {}), lib) for name, lib in libs.items()}


@pytest.mark.parametrize("name", sorted(SETS))
def test_recipe_build_passes_its_gate(
    name: str, built: dict[str, tuple[dict[str, Any], Path]], capsys: pytest.CaptureFixture[str]
) -> None:
    gpus, arch = SETS[name]
    doc = recipe_of(capsys, gpus, arch)
    expected_doc, lib = built[name]
    assert doc["spellings"] == expected_doc["spellings"]  # the CLI prints what was built
    # What nvcc put into the library is exactly the recipe's targets.
    code, listing = run_json(capsys, "kernels", str(lib))
    assert code == 0
    found = {
        ("compute_" if e["kind"] == "ptx" else "sm_") + f"{e['arch']}{e['variant']}"
        for e in listing["files"][0]["entries"]
    }
    assert found == {t["name"] for t in doc["targets"]}
    require = [a for g in gpus for a in ("--require", g)]
    code, gate = run_json(capsys, "kernels", str(lib), *require, "--strict")
    assert code == 0, gate["require"]["failures"]
    assert gate["require"]["passed"] and gate["require"]["libraries"] == 1


def test_sm100a_only_build_fails_on_b300_and_names_the_expected_target(
    built: dict[str, tuple[dict[str, Any], Path]], capsys: pytest.CaptureFixture[str]
) -> None:
    # sm_100a runs on exactly 10.0: nothing in the library runs on a 10.3 (no PTX either).
    _doc, lib = built["sm100a-only"]
    code, gate = run_json(capsys, "kernels", str(lib), "--require", "B200", "--require", "B300")
    assert code == 1
    (failure,) = gate["require"]["failures"]
    assert (failure["gpu"], failure["verdict"]) == ("B300", "none")
    assert failure["expected"] == ["sm_100"]  # plain sm_100 runs on 10.0 and 10.3
    assert gate["require"]["recipe"] == "10.0+PTX"
    assert main(["kernels", str(lib), "--require", "B300"]) == 1
    text = capsys.readouterr().out
    assert "require B300 (10.3): FAIL" in text
    assert "expected from the recipe: sm_103" in text  # a B300 alone: its own plain target


def test_ptx_only_passes_unless_strict(capsys: pytest.CaptureFixture[str]) -> None:
    # libcomp_default.so: sm_80, sm_120a, compute_90 (build.sh). On a GB10 (12.1) sm_120a does not
    # run (exactly 12.0), compute_90 PTX JIT-compiles (12.1 >= 9.0): jit.
    lib = str(CUDA_BIN / "libcomp_default.so")
    code, gate = run_json(capsys, "kernels", lib, "--require", "GB10")
    assert code == 0 and gate["require"]["passed"]
    code, gate = run_json(capsys, "kernels", lib, "--require", "GB10", "--strict")
    assert code == 1
    assert [f["verdict"] for f in gate["require"]["failures"]] == ["jit"]
    assert gate["require"]["failures"][0]["expected"] == ["sm_121"]


def test_no_device_code_fails_the_gate(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    empty = tmp_path / "libempty.so"
    empty.write_bytes(b"")
    code, gate = run_json(capsys, "kernels", str(empty), "--require", "H100")
    assert code == 1
    assert gate["require"]["failures"][0]["reason"] == "no file with device code in the given paths"


def test_strict_without_require_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernels", str(CUDA_BIN / "libmix.so"), "--strict"]) == 2
    assert "--strict needs --require" in capsys.readouterr().err


def test_gate_on_a_remote_host(built: dict[str, tuple[dict[str, Any], Path]]) -> None:
    # The same gate where the build is: the library is read by the probe on the ssh test host.
    from tests.helpers import json_output, run_cli
    from tests.integration.test_remote_services import require, ssh_env

    require("ssh")
    _doc, lib = built["sm100a-only"]
    args = ("kernels", "--host", "alpha", str(lib), "--require", "B300", "--json")
    result = run_cli(*args, env=ssh_env(), timeout=120)
    gate = json_output(result, "kernels")["require"]
    assert result.returncode == 1
    assert [(f["gpu"], f["verdict"], f["expected"]) for f in gate["failures"]] == [
        ("B300", "none", ["sm_103"])
    ]
