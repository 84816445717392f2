"""Ansible: the playbook (deploy/ansible/archgap.yml) run by a real ansible-playbook against
localhost, from a directory that is neither the playbook's nor the facts'; `archgap probe
--script` as a facts.d executable, collected and judged by `fleet --from`.

facts.d contract (Ansible's setup module): an executable *.fact file whose stdout is JSON; a
non-zero exit or non-JSON output is an error in ansible_local. The setup module runs every .fact
at every fact gathering, so the fact only prints a document a scheduled job wrote. cron.d format
(crontab(5)): five time fields, the user, then the command, which cron runs with /bin/sh -c.
libptxonly.so has only compute_80 PTX, so on a T4 (7.5) the package has no kernel.
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


def _playbook(tmp_path: Path, cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    variables = [a for k, v in extra.items() for a in ("-e", f"{k}={v}")]
    return subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local",
         str(PLAYBOOK), *variables, "-e", f"ansible_python_interpreter={sys.executable}"],
        capture_output=True, text=True, timeout=180, cwd=cwd, check=False,
        env={**os.environ, "PWD": str(cwd),  # as the shell that starts it sets PWD
             "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
             "ANSIBLE_HOME": str(tmp_path / "ansible-home"), "ANSIBLE_NOCOLOR": "1"},
    )  # fmt: skip


def test_the_playbook_with_a_real_ansible(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    site = make_venv(venv)
    install_fake_distribution(
        site, "ptxkernels", "0.1", {"ptxkernels/libptx.so": CUDA_BIN / "libptxonly.so"}
    )
    cwd = tmp_path / "operator"
    cwd.mkdir()
    host = tmp_path / "host"  # the managed host's directories, none of them made beforehand
    facts_dir, archgap_dir, cron_file = host / "facts.d", host / "archgap", host / "cron.d/archgap"
    paths = {"facts_dir": str(facts_dir), "archgap_dir": str(archgap_dir),
             "cron_file": str(cron_file)}  # fmt: skip
    archgap, python = str(Path(sys.executable).parent / "archgap"), str(venv / "bin" / "python")
    ran = _playbook(tmp_path, cwd, archgap=archgap, archgap_python=python, out_dir="collected",
                    **paths)  # fmt: skip
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-2000:]
    assert "failed=0" in ran.stdout
    out = cwd / "collected"  # the relative out_dir, where ansible-playbook was started
    assert [p.name for p in out.iterdir()] == ["localhost.json"]
    result = run_cli("fleet", "--json", "--from", str(out), "--gpu", "T4")
    doc = json_output(result, "fleet")
    assert result.returncode == 1 and doc["documents"] == 1
    (judged,) = doc["hosts"]
    assert judged["packages"] == ["ptxkernels==0.1"]
    assert judged["gaps"][0].startswith("ptxkernels 0.1 cannot run on 7.5 (T4)")

    fact = facts_dir / "archgap.fact"

    def gathered() -> dict[str, object]:
        printed = subprocess.run([str(fact)], capture_output=True, text=True, timeout=30)
        assert printed.returncode == 0, printed.stderr
        return dict(json.loads(printed.stdout))

    # The fact prints the cached document: it still does with the probe gone.
    probe = archgap_dir / "archgap-probe.py"
    kept = probe.read_bytes()
    probe.unlink()
    assert gathered() == json.loads((out / "localhost.json").read_text())
    probe.write_bytes(kept)
    # The scheduled job, run as cron runs it, rewrites the document the fact prints.
    (line,) = [x for x in cron_file.read_text().splitlines() if x and not x.startswith("#")]
    fields = line.split(None, 6)
    assert len(fields) == 7 and fields[5] == "root", line
    install_fake_distribution(site, "later", "2.0", {})
    subprocess.run(
        ["/bin/sh", "-c", fields[6]], check=True, timeout=120, env={"PATH": "/usr/bin:/bin"}
    )
    python = gathered()["sections"]["python"]  # type: ignore[index]
    assert {"ptxkernels", "later"} <= {d["name"] for d in python["distributions"]}
    assert not [p.name for p in archgap_dir.iterdir() if p.name.startswith(".")]  # renamed

    # state=absent takes it all away again.
    ran = _playbook(tmp_path, cwd, state="absent", **paths)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-2000:]
    assert not fact.exists() and not cron_file.exists() and not archgap_dir.exists()
