"""Ansible, per pool and with the service's environment: deploy/ansible/archgap.yml run by a real
ansible-playbook on an inventory of two groups (both hosts reached with Ansible's local
connection, each with directories of its own), whose settings come from group variables only.

Ansible's variable precedence (docs, "Understanding variable precedence"): play vars outrank
inventory group_vars and host_vars, and extra vars (-e) outrank all; so a playbook that defines
`archgap_python` under `vars:` ignores the inventory's. The cron refresh runs with cron's
environment (crontab(5): a few variables such as SHELL, PATH=/usr/bin:/bin, HOME), not the
service's: `archgap_env_from` makes the refresh judge the service's (an env file, or the process a
pidfile names, looked up at every run), and a service that is not running is a document with its
reason, not cron's environment judged in its place.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.helpers import CUDA_BIN, ROOT, install_fake_distribution, make_venv

PLAYBOOK = ROOT / "deploy" / "ansible" / "archgap.yml"


def _document(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))


def _cron_command(cron_file: Path) -> tuple[list[str], str]:
    (line,) = [x for x in cron_file.read_text().splitlines() if x and not x.startswith("#")]
    fields = line.split(None, 6)
    return fields[:5], fields[6]


def test_group_vars_set_each_pool_and_the_refresh_judges_the_services_env(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    install_fake_distribution(
        make_venv(venv), "ptxkernels", "0.1", {"ptxkernels/libptx.so": CUDA_BIN / "libptxonly.so"}
    )
    python = str(venv / "bin" / "python")
    env_file = tmp_path / "sglang.env"  # pool a's service: a systemd EnvironmentFile
    env_file.write_text("TORCH_CUDA_ARCH_LIST=12.0\nCUDA_HOME=/usr/local/cuda-12.8\n")
    # Pool b's service: a running process with its own environment, and its pidfile.
    service = subprocess.Popen(
        ["sleep", "600"], env={"PATH": "/usr/bin:/bin", "TORCH_CUDA_ARCH_LIST": "9.0a"}
    )
    pidfile = tmp_path / "vllm.pid"
    pidfile.write_text(f"{service.pid}\n")
    hosts = {name: tmp_path / name for name in ("node-a", "node-b")}
    per_host = {
        name: f"archgap_dir={root}/archgap facts_dir={root}/facts.d cron_file={root}/cron.d/archgap"
        for name, root in hosts.items()
    }
    inventory = tmp_path / "inventory.ini"
    inventory.write_text(
        f"[pool_a]\nnode-a ansible_connection=local {per_host['node-a']}\n"
        f"[pool_b]\nnode-b ansible_connection=local {per_host['node-b']}\n"
        f"[pool_a:vars]\narchgap_python={python}\narchgap_env_from={env_file}\n"
        "schedule='5 * * * *'\n"
        f"[pool_b:vars]\narchgap_python={python}\narchgap_env_from=pidfile:{pidfile}\n"
        f"[all:vars]\narchgap={Path(sys.executable).parent / 'archgap'}\n"
        f"ansible_python_interpreter={sys.executable}\n"
    )
    cwd = tmp_path / "operator"
    cwd.mkdir()
    try:
        ran = subprocess.run(
            [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory),
             str(PLAYBOOK), "-e", "out_dir=collected"],
            capture_output=True, text=True, timeout=300, cwd=cwd, check=False,
            env={**os.environ, "PWD": str(cwd), "ANSIBLE_LOCAL_TEMP": str(tmp_path / "at"),
                 "ANSIBLE_HOME": str(tmp_path / "ah"), "ANSIBLE_NOCOLOR": "1"},
        )  # fmt: skip
        assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-2000:]
        out = cwd / "collected"
        a, b = _document(out / "node-a.json"), _document(out / "node-b.json")
        # The group's interpreter (not the play's python3): the venv's distribution is seen.
        for doc in (a, b):
            names = {d["name"] for d in doc["sections"]["python"]["distributions"]}
            assert "ptxkernels" in names
        # Pool a: the env file's variables, and the document says where they came from.
        assert a["env"]["TORCH_CUDA_ARCH_LIST"] == "12.0"
        assert a["env_source"] == str(env_file)
        # Pool b: the service process's environment, through the link the refresh made.
        assert b["env"]["TORCH_CUDA_ARCH_LIST"] == "9.0a"
        assert b["env_source"].startswith(str(hosts["node-b"] / "archgap" / "service.environ"))
        # The group's schedule, over the play's default.
        fields_a, refresh_a = _cron_command(hosts["node-a"] / "cron.d" / "archgap")
        fields_b, refresh_b = _cron_command(hosts["node-b"] / "cron.d" / "archgap")
        assert fields_a[:2] == ["5", "*"] and fields_b[:2] == ["17", "*"]

        # Run as cron runs them (cron's bare environment, without the service's variables).
        cron_env = {"PATH": "/usr/bin:/bin", "SHELL": "/bin/sh", "HOME": "/root"}
        for refresh in (refresh_a, refresh_b):
            subprocess.run(["/bin/sh", "-c", refresh], check=True, timeout=120, env=cron_env)
        facts_a = _document(hosts["node-a"] / "archgap" / "facts.json")
        facts_b = _document(hosts["node-b"] / "archgap" / "facts.json")
        assert facts_a["env"]["TORCH_CUDA_ARCH_LIST"] == "12.0"
        assert facts_b["env"]["TORCH_CUDA_ARCH_LIST"] == "9.0a"
    finally:
        service.kill()
        service.wait(timeout=30)
    # The service stopped: the next refresh says so and judges nothing, never cron's environment.
    subprocess.run(["/bin/sh", "-c", refresh_b], check=True, timeout=120, env=cron_env)
    stopped = _document(hosts["node-b"] / "archgap" / "facts.json")
    assert "service.environ" in stopped["errors"]["env_from"], stopped.get("errors")
    assert not stopped.get("sections"), stopped.get("sections")
