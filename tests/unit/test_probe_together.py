"""The probe's waiting sections (gpu, python, toolchains, caches) run at the same time, with the
same facts, in the request's order, and no thread left behind (a deep read may fork after them).

The commands are stand-ins at the process boundary that take a known time: a recorded
nvidia-smi and a recorded nvcc banner, each behind a half-second sleep (no GPU or second toolkit
here). One after the other the sections take their times added up; at the same time the longest.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from archgap.probe.collect import collect
from archgap.probe.environment.system import System
from tests.toolkit_stubs import BANNERS

SMI = Path(__file__).parent.parent / "fixtures" / "nvidia_smi"
SLEEP = 0.5


def _slow(bin_dir: Path, name: str, body: str) -> None:
    tool = bin_dir / name
    tool.write_text(f"#!/bin/sh\nsleep {SLEEP}\n{body}\n")
    tool.chmod(0o755)


def _system(tmp_path: Path) -> System:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    csv, banner = SMI / "rtx_pro_6000_x8.csv", SMI / "rtx_pro_6000_x8.banner"
    _slow(bin_dir, "nvidia-smi", f'case "$1" in --query-gpu=*) cat {csv};; *) cat {banner};; esac')
    _slow(bin_dir, "nvcc", f"cat {BANNERS / 'nvcc-12.8.txt'}")
    return System.local(environ={"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)})


def test_waiting_sections_overlap_and_keep_their_facts_and_order(tmp_path: Path) -> None:
    system = _system(tmp_path)
    request: dict[str, Any] = {
        "toolchains": {"site_packages": []},
        "nope": {},
        "gpu": {},
        "caches": {},
    }
    before = set(threading.enumerate())  # other tests of this process may keep server threads
    started = time.monotonic()
    facts = collect(request, system)
    elapsed = time.monotonic() - started
    assert set(threading.enumerate()) <= before  # every section's thread has ended
    # nvidia-smi and nvcc waited at the same time: less than the sections' times added up.
    assert elapsed < sum(facts["seconds"].values()) - SLEEP * 0.7, facts["seconds"]
    assert list(facts["sections"]) == ["toolchains", "gpu", "caches"]
    assert facts["errors"] == {"nope": "unknown section"}
    assert list(facts["seconds"]) == ["toolchains", "gpu", "caches"]
    # The same facts as each section collected alone.
    for name in ("toolchains", "gpu", "caches"):
        assert facts["sections"][name] == collect({name: request[name]}, system)["sections"][name]
    gpus = facts["sections"]["gpu"]["gpus"]
    assert [g["name"] for g in gpus] == ["NVIDIA RTX PRO 6000 Blackwell Server Edition"] * 8
    toolkits = facts["sections"]["toolchains"]["toolkits"]
    on_path = [t for t in toolkits if t["tool"] == "nvcc" and t["found_by"] == "PATH"]
    assert [t["full_version"] for t in on_path] == ["12.8.93"]


def test_each_toolkits_version_runs_at_the_same_time(tmp_path: Path) -> None:
    # Three toolkits (CUDA_HOME, CUDA_PATH, CONDA_PREFIX), each nvcc half a second: one after
    # the other 1.5 s, together 0.5 s. Each is still reported with its own banner's version.
    homes = {}
    for name, version in (("CUDA_HOME", "12.6"), ("CUDA_PATH", "12.8"), ("CONDA_PREFIX", "12.9")):
        home = tmp_path / name
        (home / "bin").mkdir(parents=True)
        _slow(home / "bin", "nvcc", f"cat {BANNERS / f'nvcc-{version}.txt'}")
        homes[name] = str(home)
    system = System.local(environ={"PATH": "/usr/bin:/bin", **homes})
    before = set(threading.enumerate())
    started = time.monotonic()
    facts = collect({"toolchains": {"site_packages": []}}, system)
    assert time.monotonic() - started < 2 * SLEEP + 0.4
    toolkits = facts["sections"]["toolchains"]["toolkits"]
    found = {t["found_by"]: t["full_version"] for t in toolkits if t["home"] in homes.values()}
    assert found == {"CUDA_HOME": "12.6.68", "CUDA_PATH": "12.8.93", "CONDA_PREFIX": "12.9.41"}
    assert set(threading.enumerate()) <= before


def test_the_footer_counts_sections_that_ran_together_once() -> None:
    # gpu, python, toolchains and caches started together: the probe waited for the longest
    # (0.30 s), not for their sum (0.76 s); a section that ran alone (code) adds its own time.
    from archgap.api import report_from_facts
    from archgap.report.scan import _where_the_time_went

    seconds = {"gpu": 0.3, "python": 0.2, "toolchains": 0.25, "caches": 0.01, "binaries": 1.0}
    facts = {"facts_version": 1, "host": "h", "platform": "Linux", "probe_python": "3.8",
             "env": {}, "env_source": "shell", "sections": {}, "errors": {}}  # fmt: skip
    footer = _where_the_time_went(report_from_facts({**facts, "seconds": seconds}), 2.0)
    assert "read in 1.00 s, the rest of the probe 0.30 s" in footer
    footer = _where_the_time_went(
        report_from_facts({**facts, "seconds": {**seconds, "code": 0.5}}), 2.5
    )
    assert "the rest of the probe 0.80 s" in footer
