"""`archgap trace` takes the target options the other commands take (issue 43 item 4): --gpu
evaluates each write's branch for a GPU, --env-from looks up the variables that feed the writes
in a service's environment. On FlashInfer 0.6.8's released files (installed --no-deps by
scripts/testdata, never imported).

Expectations read off flashinfer/jit/core.py (checked below): ``for major, minor in
current_compilation_context.TARGET_CUDA_ARCHS:`` (99), ``if major >= 8:`` (100) / ``eligible =
True`` (101), ``elif major == 7 and minor.isdigit():`` (102) / ``if int(minor) >= 5:`` (103) /
``eligible = True`` (104). A T4 (7.5) and a P100 (6.0) never take 101 (7 < 8, 6 < 8); an RTX PRO
6000 (12.0) takes it when the loop reaches it (the arch set decides that, not the GPU); 104 is not
taken on 12.0 or 6.0 (major == 7 is false there).
compilation_context.py reads FLASHINFER_CUDA_ARCH_LIST (63) and jit/cpp_ext.py CUDA_HOME or
CUDA_PATH (49) on the way to the writes of TARGET_CUDA_ARCHS.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers import need_data, run_cli
from tests.toolkit_stubs import venv_python

LINES = {
    99: "for major, minor in current_compilation_context.TARGET_CUDA_ARCHS:",
    100: "if major >= 8:",
    101: "eligible = True",
    102: "elif major == 7 and minor.isdigit():",
    104: "eligible = True",
}


def _site() -> Path:
    need_data("venv-flashinfer-python-0.6.8")
    (site,) = venv_python("venv-flashinfer-python-0.6.8").parent.parent.glob("lib/python3.*/site-*")
    return site


def _after(lines: list[str], start: str) -> list[str]:
    """The lines under the write that starts with ``start`` (up to the next write)."""
    at = next(i for i, line in enumerate(lines) if line.lstrip().startswith(start))
    out = []
    for line in lines[at + 1 :]:
        if line.lstrip()[:1].isdigit() or not line.startswith("           "):
            break
        out.append(line.strip())
    return out


def test_gpu_evaluates_each_write_branch() -> None:
    core = _site() / "flashinfer" / "jit" / "core.py"
    source = core.read_text().splitlines()
    assert all(source[n - 1].strip() == text for n, text in LINES.items())
    gpus = ["--gpu", "RTX PRO 6000", "--gpu", "T4", "--gpu", "P100"]
    result = run_cli("trace", "eligible", str(core), *gpus, env={"COLUMNS": "300"})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    first = _after(lines, "101")
    assert "on T4 (7.5): not taken" in first and "on P100 (6.0): not taken" in first
    loop = "on RTX PRO 6000 (12.0): taken when the loop `for major, minor in "
    assert any(line.startswith(loop) for line in first), first
    second = _after(lines, "104")
    assert "on RTX PRO 6000 (12.0): not taken" in second and "on P100 (6.0): not taken" in second
    assert any(line.startswith("on T4 (7.5): taken when") for line in second), second
    plain = run_cli("trace", "eligible", str(core), env={"COLUMNS": "300"}).stdout
    assert " taken" not in plain  # without --gpu nothing is evaluated


def test_env_from_says_which_feeding_variables_the_service_sets(tmp_path: Path) -> None:
    _site()
    env = tmp_path / "sglang.env"
    env.write_text("FLASHINFER_CUDA_ARCH_LIST=12.0a\nCUDA_HOME=/opt/cuda-12.8\nHF_TOKEN=hf_x\n")
    python = venv_python("venv-flashinfer-python-0.6.8")
    result = run_cli(
        "trace", "TARGET_CUDA_ARCHS", "--python", str(python), "--dist", "flashinfer-python",
        "--env-from", str(env), env={"COLUMNS": "300"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert f"Environment {env} (--env-from)" in out
    assert f"set in {env}: FLASHINFER_CUDA_ARCH_LIST=12.0a" in out
    assert f"set in {env}: CUDA_HOME=/opt/cuda-12.8" in out
    assert f"not set in {env}" in out  # CUDA_PATH, read beside CUDA_HOME at cpp_ext.py:49
    assert "hf_x" not in out  # a token is never read (the allowlist)
    missing = run_cli("trace", "TARGET_CUDA_ARCHS", "--env-from", str(tmp_path / "none.env"))
    assert missing.returncode == 2 and "--env-from" in missing.stderr
    assert "Traceback" not in missing.stderr
