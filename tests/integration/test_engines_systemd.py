"""systemd: deploy/systemd/archgap-probe.{service,timer} checked by `systemd-analyze verify`
(unknown keys, bad values, a command that is not executable), and the service's commands run as
systemd runs them: Environment= first, then EnvironmentFile= over it, and `${NAME}` replaced by
the variable's value as one argument (systemd.service(5), "Command lines").
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers import ROOT, json_output, run_cli

UNITS = ROOT / "deploy" / "systemd"
INSTALLED = "/usr/local/bin/archgap"


def _verify(directory: Path) -> subprocess.CompletedProcess[str]:
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is not installed (Debian's systemd; scripts/services)"
    units = [str(directory / n) for n in ("archgap-probe.service", "archgap-probe.timer")]
    return subprocess.run([analyze, "verify", *units], capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip


def _units(tmp_path: Path) -> Path:
    """The shipped units, with archgap where this checkout has it instead of /usr/local/bin."""
    copy = tmp_path / "units"
    copy.mkdir()
    archgap = str(Path(sys.executable).parent / "archgap")
    for unit in UNITS.iterdir():
        (copy / unit.name).write_text(unit.read_text().replace(INSTALLED, archgap))
    return copy


def test_units_verify_clean_and_a_broken_one_does_not(tmp_path: Path) -> None:
    units = _units(tmp_path)
    verified = _verify(units)
    assert verified.returncode == 0 and not (verified.stdout + verified.stderr).strip(), (
        verified.stdout + verified.stderr
    )
    timer = units / "archgap-probe.timer"
    timer.write_text(timer.read_text().replace("OnUnitActiveSec", "OnUnitActiveSecs"))
    assert "Unknown key" in _verify(units).stderr


def test_the_service_writes_the_document_fleet_reads(tmp_path: Path) -> None:
    service = (_units(tmp_path) / "archgap-probe.service").read_text()
    settings = dict(re.findall(r"^(\w+)=(.*)$", service, re.M))
    env = dict(item.split("=", 1) for item in shlex.split(settings["Environment"]))
    inbox = tmp_path / "shared" / "inbox"  # not there yet: ExecStartPre makes it
    env_file = tmp_path / "archgap-probe"  # what /etc/default/archgap-probe holds
    env_file.write_text(f"ARCHGAP_PYTHON={sys.executable}\nARCHGAP_OUT={inbox}\n")
    assert settings["EnvironmentFile"] == "-/etc/default/archgap-probe"
    for line in env_file.read_text().splitlines():
        key, _, value = line.partition("=")
        env[key] = value
    for command in ("ExecStartPre", "ExecStart"):
        argv = [re.sub(r"\$\{(\w+)\}", lambda m: env[m.group(1)], word)
                for word in settings[command].split()]  # fmt: skip
        ran = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        assert ran.returncode == 0, (argv, ran.stderr)
    (document,) = inbox.iterdir()
    assert document.suffix == ".json"
    doc = json_output(run_cli("fleet", "--json", "--from", str(inbox)), "fleet")
    assert doc["documents"] == 1 and len(doc["hosts"]) == 1
