"""Ansible: the README's playbook (deploy/ansible/archgap.yml) run by a real ansible-playbook
against localhost; `archgap probe --script` as a facts.d executable, collected and judged by
`fleet --from`.

facts.d contract (Ansible's setup module): an executable *.fact file whose stdout is JSON; a
non-zero exit or non-JSON output is an error in ansible_local. libptxonly.so has only compute_80
PTX, so on a T4 (7.5) the package has no kernel.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import CUDA_BIN, ROOT, install_fake_distribution, json_output, make_venv, run_cli

PLAYBOOK = ROOT / "deploy" / "ansible" / "archgap.yml"


def test_probe_script_is_a_facts_d_executable(tmp_path: Path) -> None:
    fact = tmp_path / "archgap.fact"
    fact.write_text(run_cli("probe", "--script").stdout)
    fact.chmod(0o755)
    # No GPU on this machine: still JSON on stdout and exit 0.
    ran = subprocess.run([str(fact)], capture_output=True, text=True, timeout=120, check=False)
    assert ran.returncode == 0, ran.stderr
    facts = json.loads(ran.stdout)
    assert facts["sections"]["gpu"]["gpus"] == []


def test_the_readme_playbook_with_a_real_ansible(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    install_fake_distribution(
        make_venv(venv), "ptxkernels", "0.1", {"ptxkernels/libptx.so": CUDA_BIN / "libptxonly.so"}
    )
    probe = tmp_path / "archgap-probe.py"
    probe.write_text(run_cli("probe", "--script", "--python", str(venv / "bin" / "python")).stdout)
    facts_dir, out = tmp_path / "facts.d", tmp_path / "out"
    facts_dir.mkdir()
    out.mkdir()
    playbook = Path(sys.executable).parent / "ansible-playbook"
    ran = subprocess.run(
        [str(playbook), "-i", "localhost,", "-c", "local", str(PLAYBOOK),
         "-e", f"probe={probe}", "-e", f"facts_dir={facts_dir}", "-e", f"out_dir={out}",
         "-e", f"ansible_python_interpreter={sys.executable}"],
        capture_output=True, text=True, timeout=180, cwd=tmp_path, check=False,
        env={**os.environ, "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
             "ANSIBLE_HOME": str(tmp_path / "ansible-home"), "ANSIBLE_NOCOLOR": "1"},
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-2000:]
    assert "failed=0" in ran.stdout
    assert [p.name for p in out.iterdir()] == ["localhost.json"]
    result = run_cli("fleet", "--json", "--from", str(out), "--gpu", "T4")
    doc = json_output(result, "fleet")
    assert result.returncode == 1 and doc["documents"] == 1
    (host,) = doc["hosts"]
    assert host["packages"] == ["ptxkernels==0.1"]
    assert host["gaps"][0].startswith("ptxkernels 0.1 cannot run on 7.5 (T4)")
