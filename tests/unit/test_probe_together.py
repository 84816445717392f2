"""The probe's waiting sections (gpu, python, toolchains, caches) run at the same time, with the
same facts, in the request's order, and no thread left behind (a deep read may fork after them).

The commands are stand-ins at the process boundary: a recorded nvidia-smi and a recorded nvcc
banner. "At the same time" is shown by what they record, not by elapsed seconds: each, run while
a meeting room (a directory) exists, says it came and waits there until every tool expected has
come, then says it met them. One run after the other, the first would wait alone until the
probe's command timeout stopped it (10 s: far past any start-up delay), and never say it met.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from archgap.probe.collect import collect
from archgap.probe.environment.system import System
from tests.toolkit_stubs import BANNERS

SMI = Path(__file__).parent.parent / "fixtures" / "nvidia_smi"


def _meeting(bin_dir: Path, name: str, body: str, room: Path, expected: int) -> None:
    """``bin_dir/name`` runs ``body``; while ``room`` exists it first comes to it, as ``name``
    (and its directory's name), waits for ``expected`` tools to have come, and says it met them
    (after a minute alone it gives up: a guard, should nothing stop it)."""
    who = f"{bin_dir.parent.name}-{name}"
    tool = bin_dir / name
    tool.write_text(
        "#!/bin/sh\n"
        f'if [ -d "{room}" ]; then\n'
        f'  : > "{room}/{who}.came"; i=0\n'
        f'  while [ "$(ls "{room}" | grep -c "[.]came$")" -lt {expected} ]; do\n'
        "    i=$((i + 1)); [ $i -gt 1200 ] && exit 9\n"
        "    sleep 0.05\n"
        "  done\n"
        f'  : > "{room}/{who}.met"\n'
        "fi\n"
        f"{body}\n"
    )
    tool.chmod(0o755)


def _met(room: Path, expected: int) -> None:
    """Every tool came to the room and met all the others there (they ran at the same time);
    the room is then closed, so that the tools run alone answer at once."""
    came, met = sorted(room.glob("*.came")), sorted(room.glob("*.met"))
    assert len(came) == expected, came
    assert [p.stem for p in met] == [p.stem for p in came], "a tool waited alone: ran one by one"
    for note in came + met:
        note.unlink()
    room.rmdir()


def _system(tmp_path: Path, room: Path) -> System:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    csv, banner = SMI / "rtx_pro_6000_x8.csv", SMI / "rtx_pro_6000_x8.banner"
    smi = f'case "$1" in --query-gpu=*) cat {csv};; *) cat {banner};; esac'
    _meeting(bin_dir, "nvidia-smi", smi, room, 2)
    _meeting(bin_dir, "nvcc", f"cat {BANNERS / 'nvcc-12.8.txt'}", room, 2)
    return System.local(environ={"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)})


def test_waiting_sections_overlap_and_keep_their_facts_and_order(tmp_path: Path) -> None:
    room = tmp_path / "room"
    room.mkdir()
    system = _system(tmp_path, room)
    request: dict[str, Any] = {
        "toolchains": {"site_packages": []},
        "nope": {},
        "gpu": {},
        "caches": {},
    }
    before = set(threading.enumerate())  # other tests of this process may keep server threads
    facts = collect(request, system)
    assert set(threading.enumerate()) <= before  # every section's thread has ended
    _met(room, 2)  # nvidia-smi (gpu) and nvcc (toolchains) waited at the same time
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
    # Three toolkits (CUDA_HOME, CUDA_PATH, CONDA_PREFIX): each nvcc waits for the other two.
    # Each is still reported with its own banner's version.
    room = tmp_path / "room"
    room.mkdir()
    homes = {}
    for name, version in (("CUDA_HOME", "12.6"), ("CUDA_PATH", "12.8"), ("CONDA_PREFIX", "12.9")):
        home = tmp_path / name
        (home / "bin").mkdir(parents=True)
        _meeting(home / "bin", "nvcc", f"cat {BANNERS / f'nvcc-{version}.txt'}", room, 3)
        homes[name] = str(home)
    system = System.local(environ={"PATH": "/usr/bin:/bin", **homes})
    before = set(threading.enumerate())
    facts = collect({"toolchains": {"site_packages": []}}, system)
    _met(room, 3)
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
