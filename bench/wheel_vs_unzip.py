"""Benchmark: a wheel judged as it is (`archgap kernels WHEEL`) against `unzip` of its native
members + `cuobjdump --list-elf` and `--list-ptx` on each, in one run, whole processes both.

Input: a local wheel (default: tests/.data/wheels/nvidia_curand-10.4.0.35-*.whl, from
scripts/testdata); cuobjdump from tests/.data/venv-cuobjdump. Optionally --url: a wheel URL on
a server with range support, to measure the bytes fetched against the wheel's size.

Prints: the native members, agreement of the target lists (per member), wall times of each way
(median of --runs), the ratio, archgap's peak RSS against the largest native member, and the
load average (this machine is shared: the figures move with it).

Usage: .venv/bin/python bench/wheel_vs_unzip.py [WHEEL] [--runs N] [--url URL]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / ".data"
ARCHGAP = str(Path(sys.executable).parent / "archgap")
LINE = re.compile(r"^(ELF|PTX) file\s+\d+: .*\.(sm_\d+[af]?)\.(cubin|ptx)$")
NATIVE = re.compile(r"(\.so(\.\d+)*|\.a|\.o|\.cubin|\.fatbin)$")


def cuobjdump() -> str:
    hits = sorted(DATA.glob("venv-cuobjdump/lib/python*/site-packages/nvidia/*/bin/cuobjdump"))
    if not hits:
        sys.exit("run scripts/testdata first (installs cuobjdump)")
    return str(hits[0])


def archgap_run(wheel: Path) -> tuple[float, int, dict[str, list[str]]]:
    started = time.perf_counter()
    proc = subprocess.Popen(
        [ARCHGAP, "kernels", str(wheel), "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, _status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    doc = json.loads(out)
    names: dict[str, list[str]] = {}
    for f in doc["files"]:
        member = f["path"][len(str(wheel)) + 1 :]
        listed = [e for e in f["entries"] if e["listed"]]
        sass = [f"sm_{e['arch']}{e['variant'] if e['variant'] == 'a' else ''}" for e in listed
                if e["kind"] == "sass"]  # fmt: skip
        ptx = [f"sm_{e['arch']}{e['variant']}" for e in listed if e["kind"] == "ptx"]
        names[member] = sass + ptx
    return wall, usage.ru_maxrss, names


def unzip_cuobjdump_run(
    wheel: Path, members: list[str], tool: str
) -> tuple[float, dict[str, list[str]]]:
    names: dict[str, list[str]] = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["unzip", "-q", "-o", str(wheel), *members, "-d", tmp], check=True)
        for member in members:
            found: list[str] = []
            for option in ("--list-elf", "--list-ptx"):
                proc = subprocess.run([tool, option, os.path.join(tmp, member)],
                                      capture_output=True, text=True, check=False)  # fmt: skip
                found += [m.group(2) for m in map(LINE.match, proc.stdout.splitlines()) if m]
            names[member] = found
    return time.perf_counter() - started, names


def ranged_bytes(url: str) -> None:
    sys.path.insert(0, str(ROOT / "src"))
    from archgap.index.targets import read_targets

    started = time.perf_counter()
    contents, fetched = read_targets([url])
    wall = time.perf_counter() - started
    for how in fetched:
        kind = "range requests" if how.ranged else "whole download (no range support)"
        print(f"{url}: {kind}: {how.bytes_fetched:,} of {how.size:,} bytes "
              f"({100 * how.bytes_fetched / max(how.size, 1):.1f}%) in {wall:.2f} s")  # fmt: skip
    for c in contents:
        for p in c.problems:
            print(f"  problem: {p.reason}")


def main() -> None:
    parser = argparse.ArgumentParser()
    default = next(iter(sorted(DATA.glob("wheels/nvidia_curand-*.whl"))), None)
    parser.add_argument("wheel", nargs="?", default=str(default) if default else None)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--url", help="also: bytes fetched from this wheel URL (range requests)")
    args = parser.parse_args()
    if not args.wheel:
        sys.exit("give a wheel (or run scripts/testdata)")
    wheel = Path(args.wheel)
    tool = cuobjdump()
    with zipfile.ZipFile(wheel) as zf:
        infos = [i for i in zf.infolist() if NATIVE.search(i.filename)]
    members = [i.filename for i in infos]
    largest = max((i.file_size for i in infos), default=0)
    print(f"wheel: {wheel.name} ({wheel.stat().st_size / 2**20:.1f} MiB), {len(members)} native "
          f"members, largest {largest / 2**20:.1f} MiB unpacked")  # fmt: skip
    ours, theirs, rss = [], [], 0
    agree = True
    for _ in range(args.runs):
        wall, peak, names = archgap_run(wheel)
        ours.append(wall)
        rss = max(rss, peak)
        wall2, names2 = unzip_cuobjdump_run(wheel, members, tool)
        theirs.append(wall2)
        agree = agree and all(names.get(m, []) == names2[m] for m in members)
    a, b = statistics.median(ours), statistics.median(theirs)
    print(f"agreement with cuobjdump on every member: {'yes' if agree else 'NO'}")
    print(f"archgap kernels WHEEL:          {a:.2f} s (median of {args.runs})")
    print(f"unzip + cuobjdump per member:   {b:.2f} s (median of {args.runs})")
    print(f"ratio: {b / a:.1f}x")
    held = f"largest native member {largest / 2**20:.0f} MiB is held in memory once"
    print(f"archgap peak RSS: {rss / 1024:.0f} MiB ({held})")
    if args.url:
        ranged_bytes(args.url)
    print("load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
