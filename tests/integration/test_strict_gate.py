"""One meaning of --require and --strict in scan and kernels, on a wheel built here from the
project's nvcc-built libcomp_default.so (build.sh: SASS sm_80 sm_120a, PTX compute_90).

- A100 (8.0) runs sm_80 SASS: native, passes with --strict too.
- H100 (9.0): sm_80 does not run across majors, compute_90 PTX JIT-compiles: jit. PTX only passes
  --require and fails --require --strict (a JIT at load is not a built kernel).
- The same wheel with the library cut in half: nothing in it can be read, so nothing is proven
  for any GPU; --require fails, with or without --strict.
"""

from __future__ import annotations

import json

import pytest

from archgap.cli import main
from tests.helpers import CUDA_BIN, kernel_wheel


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("wheels")
    library = (CUDA_BIN / "libcomp_default.so").read_bytes()
    return {
        "intact": str(kernel_wheel(root / "intact", library)),
        "truncated": str(kernel_wheel(root / "truncated", library[: len(library) // 2])),
    }


def scan_code(capsys: pytest.CaptureFixture[str], *args: str) -> int:
    code = main(["scan", "--json", *args])
    json.loads(capsys.readouterr().out)
    return code


@pytest.mark.parametrize(
    ("gpu", "strict", "code"),
    [("A100", False, 0), ("A100", True, 0), ("H100", False, 0), ("H100", True, 1)],
)
def test_ptx_only_fails_strict_in_scan_and_kernels(
    wheels: dict[str, str], capsys: pytest.CaptureFixture[str], gpu: str, strict: bool, code: int
) -> None:
    more = ["--strict"] if strict else []
    assert scan_code(capsys, wheels["intact"], "--require", gpu, *more) == code
    assert main(["kernels", "--json", wheels["intact"], "--require", gpu, *more]) == code
    capsys.readouterr()


@pytest.mark.parametrize("strict", [False, True])
def test_an_unreadable_library_fails_the_gate(
    wheels: dict[str, str], capsys: pytest.CaptureFixture[str], strict: bool
) -> None:
    more = ["--strict"] if strict else []
    assert scan_code(capsys, wheels["truncated"], "--require", "A100", *more) == 1
    main(["scan", wheels["truncated"], "--require", "A100", *more])
    text = capsys.readouterr().out
    assert "kpkg on A100: unknown" in text
    # kernels: the file is listed as not fully readable (exit 2), the gate does not pass.
    assert main(["kernels", "--json", wheels["truncated"], "--require", "A100", *more]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["files"][0]["error"].startswith("truncated")
    assert not doc["require"]["passed"]
