"""scan's triton finding cites the installed triton's own source line for the rule it applies
(sm_arch_from_capability: ``suffix = "a" if capability >= 90 else ""``), not the line numbers
of the release the rule was read off. The installed copy here is triton 3.8.0's function placed
at a line of this test's choosing (the wheel is not in the test data), with a ptxas that prints
CUDA 12.9's banner (triton 3.8.0 bundles ptxas 12.9.86, kb/jit.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archgap.cli import main
from tests.helpers import install_fake_distribution, make_venv

# triton/backends/nvidia/compiler.py of the 3.x releases (the function as released).
RELEASED = """def sm_arch_from_capability(capability: int):
    # TODO: Handle non-"a" sms
    suffix = "a" if capability >= 90 else ""
    return f"sm_{capability}{suffix}"
"""
PTXAS = """#!/bin/sh
echo 'ptxas: NVIDIA (R) Ptx optimizing assembler'
echo 'Cuda compilation tools, release 12.9, V12.9.86'
"""
PADDING = 40  # lines before the function in this copy


def test_the_chain_cites_the_installed_triton_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    compiler, ptxas = tmp_path / "compiler.py", tmp_path / "ptxas"
    compiler.write_text("# padding\n" * PADDING + RELEASED)
    ptxas.write_text(PTXAS)
    site = make_venv(tmp_path / "venv")
    nvidia = "triton/backends/nvidia"
    files = {f"{nvidia}/compiler.py": compiler, f"{nvidia}/bin/ptxas": ptxas}
    install_fake_distribution(site, "triton", "3.8.0", files)
    (site / nvidia / "bin" / "ptxas").chmod(0o755)
    python = str(tmp_path / "venv" / "bin" / "python")
    main(["scan", "--python", python, "--gpu", "12.0", "--json"])
    doc = json.loads(capsys.readouterr().out)
    (finding,) = [f for f in doc["jit"] if f["package"] == "triton"]
    sources = [fact["source"] for fact in finding["chain"]]
    suffix_line = PADDING + 3  # the third line of the function
    assert f"{site / nvidia / 'compiler.py'}:{suffix_line}" in sources
    assert not any("3.9.0" in s for s in sources)  # no other release's line numbers
