"""``fleet`` exit codes and GPU faults, from probe documents as ``fleet --from`` reads them.

The policy (docs/engines/slurm.md, the document's ``exit_code``): 1 when any host has a gap, else
2 when any host could not be read or reached, else 0. A host whose nvidia-smi fails is a gap with
its own reason (the rule of ``scan --health``'s gpu-fault), not a host without GPUs.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.helpers import CUDA_BIN, install_fake_distribution, json_output, make_venv, run_cli


def _probe(python: Path, env: dict[str, str] | None = None) -> str:
    done = run_cli("probe", "--python", str(python), env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_exit_codes_and_a_gpu_fault(tmp_path: Path) -> None:
    install_fake_distribution(make_venv(tmp_path / "good"), "fakekernels", "1.2.3",
                              {"fakekernels/libmix.so": CUDA_BIN / "libmix.so"})  # fmt: skip
    python = tmp_path / "good" / "bin" / "python"
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text("#!/bin/sh\necho 'Unable to determine the device handle for GPU0000:41:00.0: "
                   "Unknown Error'\nexit 255\n")  # fmt: skip
    smi.chmod(0o755)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "good.json").write_text(_probe(python))
    (inbox / "broken.json").write_text("{not json")

    def fleet() -> tuple[int, dict[str, object]]:
        done = run_cli("fleet", "--json", "--from", str(inbox), "--gpu", "T4")
        doc = json_output(done, "fleet")
        assert doc["exit_code"] == done.returncode
        return done.returncode, doc

    assert fleet()[0] == 2  # no gap; one document unreadable
    (inbox / "faulty.json").write_text(
        _probe(python, {"PATH": f"{smi.parent}:{os.environ['PATH']}"})
    )
    code, doc = fleet()
    assert code == 1  # the fault is a gap, and the unreadable document does not hide it
    hosts = doc["hosts"]
    assert isinstance(hosts, list)
    faulty = [h for h in hosts if any("GPU fault" in g for g in h["gaps"])]
    assert len(faulty) == 1, hosts
    assert faulty[0]["gaps"][0].startswith("GPU fault: nvidia-smi: ")
    assert "Unknown Error" in faulty[0]["gaps"][0]
    (inbox / "broken.json").unlink()
    (inbox / "faulty.json").unlink()
    assert fleet()[0] == 0
