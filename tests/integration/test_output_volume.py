"""The text reports fit a screen without -v and say everything with it (issue 43 item 4).

Expectations from what the artifacts hold and NVIDIA's rules, not from archgap's output:
- The story (README's quick start): FlashInfer 0.6.8 from PyPI with a CUDA 12.8 nvcc on an RTX PRO
  6000 (12.0) fails at its first JIT call; the report names the error, the cause and the fixes,
  and all of it fits 40 lines. The facts behind the cause are folded into one line that counts
  them, and -v lists each (among them the raise at flashinfer/compilation_context.py:56 of the
  installed 0.6.8 source: ``raise RuntimeError("SM 12.x requires CUDA >= 12.9")``).
- explain of the seed log (tests/fixtures/explain_corpus) with that environment: the chain of
  causes one line a step without -v, each step's code line and source with it, in 40 lines.
- cupy-cuda12x 14.2.0 installed without NVRTC (nvidia-cuda-nvrtc-cu12 is not in the venv): its
  NVRTC-linked modules load on no GPU, so the same reason holds on every GPU named: one line
  naming the number of GPUs; -v gives one line per GPU.
- nvidia-cuda-runtime 13.0.96 and nvidia-curand 10.4.0.35 are CUDA 13 builds; CUDA 13 needs driver
  >= 580 (CUDA release notes, Table 2, minor version compatibility), so on driver 575.57.08 both
  cannot load for the same reason with the same fix: one entry naming both packages.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers import FIXTURES, need_data, run_cli
from tests.toolkit_stubs import banner_toolkit, venv_python

SEED_LOG = FIXTURES / "explain_corpus" / "sglang-incident-flashinfer-0.6.8.log"
NINE = ["T4", "A100", "A10", "L40S", "H100", "B200", "B300", "RTX PRO 6000", "GB10"]


def _story(tmp_path: Path, *extra: str) -> list[str]:
    need_data("venv-flashinfer-python-0.6.8")
    cuda = banner_toolkit(tmp_path / "tk", "12.8")
    python = venv_python("venv-flashinfer-python-0.6.8")
    result = run_cli(
        "scan", "--python", str(python), "--gpu", "RTX PRO 6000", *extra,
        env={"CUDA_HOME": str(cuda), "COLUMNS": "100", "TERM": "dumb"},
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    return result.stdout.splitlines()


def test_the_story_scan_fits_40_lines_and_says_everything_with_v(tmp_path: Path) -> None:
    short = _story(tmp_path)
    assert len(short) <= 40, "\n".join(short)
    text = "\n".join(short)
    assert "RuntimeError: FlashInfer requires GPUs with sm75 or higher" in text
    assert "fix 1:" in text and "FLASHINFER_CUDA_ARCH_LIST=12.0a" in text
    (folded,) = [line for line in short if "evidence:" in line]
    # the fixes come first, the evidence after them, folded into a count
    assert short.index(folded) > max(i for i, line in enumerate(short) if " fix " in f" {line}")
    count = int(re.search(r"evidence: (\d+) facts", folded).group(1))  # type: ignore[union-attr]
    assert "compilation_context.py:56" not in text

    full = _story(tmp_path, "-v")
    facts = [line for line in full if line.startswith("      · ")]
    assert len(facts) == count > 0
    assert any(
        'raise RuntimeError("SM 12.x requires CUDA >= 12.9")' in line
        and "flashinfer/compilation_context.py:56" in line
        for line in facts
    )
    assert len(full) == len(short) + count  # the folded line becomes a heading: nothing is lost


def test_a_reason_shared_by_nine_gpus_is_one_line() -> None:
    (venv,) = need_data("venv-cupy-cuda12x-14.2.0")
    args = ["scan", "--python", str(venv / "bin" / "python")]
    for gpu in NINE:
        args += ["--gpu", gpu]
    short = run_cli(*args, env={"COLUMNS": "200"})
    assert short.returncode in (0, 1), short.stderr
    why = [line for line in short.stdout.splitlines() if line.startswith("  cupy-cuda12x on ")]
    assert len(why) == 1, why
    # the verdict word (none, or blocked: it cannot load) is not this test's subject
    assert why[0].startswith("  cupy-cuda12x on all 9 GPUs: ")
    assert " — nothing loads on these GPUs: " in why[0]
    assert "NVRTC (libnvrtc.so.12) is not installed" in why[0]

    full = run_cli(*args, "-v", env={"COLUMNS": "200"}).stdout.splitlines()
    each = [line for line in full if line.startswith("  cupy-cuda12x on ")]
    assert {line.split(":")[0].split(" on ")[1] for line in each} == set(NINE) and len(each) == 9


@pytest.mark.parametrize("verbose", [False, True])
def test_one_driver_failure_shared_by_two_packages_is_one_entry(verbose: bool) -> None:
    (wheels,) = need_data("wheels")
    runtime = next(wheels.glob("nvidia_cuda_runtime-13.0.96-*.whl"))
    curand = next(wheels.glob("nvidia_curand-10.4.0.35-*.whl"))
    result = run_cli(
        "scan", str(runtime), str(curand), "--gpu", "H100", "--gpu", "B200",
        "--driver", "575.57.08", *(["-v"] if verbose else []),
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    cannot = [line for line in lines if line.startswith("  cannot load:")]
    fixes = [line for line in lines if "install an NVIDIA driver >= 580" in line]
    if verbose:  # each package's own entry, with its own evidence for CUDA 13
        assert len(cannot) == 2 and len(fixes) == 2
        assert any("libcudart.so.13 of nvidia-cuda-runtime" in line for line in cannot)
        assert any("libcurand.so.10 of nvidia-curand" in line for line in cannot)
    else:
        assert len(cannot) == 1 and len(fixes) == 1, cannot
        assert "2 packages (nvidia-cuda-runtime, nvidia-curand): needs driver >= 580" in cannot[0]
        assert "driver 575.57.08 does not run CUDA 13" in cannot[0]
        assert "a build of each package" in fixes[0]


def _explain(tmp_path: Path, *extra: str) -> list[str]:
    need_data("venv-flashinfer-python-0.6.8")
    cuda = banner_toolkit(tmp_path / "tk", "12.8")
    python = venv_python("venv-flashinfer-python-0.6.8")
    result = run_cli(
        "explain", str(SEED_LOG), "--python", str(python), "--gpu", "RTX PRO 6000", *extra,
        env={"CUDA_HOME": str(cuda), "COLUMNS": "100", "TERM": "dumb"},
    )  # fmt: skip
    assert result.returncode == 1, result.stderr  # an architecture gap explained
    return result.stdout.splitlines()


def test_the_story_explain_fits_40_lines_and_says_everything_with_v(tmp_path: Path) -> None:
    """The seed log with the environment it crashed in: the chain's steps one line each (the
    fix first, on the ``next:`` line), the code and source of each step with -v, among them the
    raise at flashinfer/jit/core.py:108 of the released 0.6.8 source."""
    short = _explain(tmp_path)
    assert len(short) <= 40, "\n".join(short)
    assert short[1].startswith("next: ")  # the first fix before anything else
    chain = _chain(short)
    assert chain[1].strip().startswith("source: log line ")  # where the error is in the log
    steps = [line for line in chain if re.match(r"^ {0,2}\d{1,2}\. ", line)]
    assert len(chain) == len(steps) + 2 and len(steps) >= 2  # one line each, but for that
    assert chain[-1].strip().startswith("(-v: ")  # the folded part is said, not dropped
    full = _explain(tmp_path, "-v")
    sources = [line for line in _chain(full) if line.strip().startswith("source: ")]
    assert len(sources) == len(steps)  # every step's source, with -v
    assert '     raise RuntimeError("FlashInfer requires GPUs with sm75 or higher")' in full


def _chain(lines: list[str]) -> list[str]:
    """The lines of the chain section (after ``chain``, up to the blank line)."""
    start = lines.index("chain") + 1
    end = lines.index("", start)
    return lines[start:end]
