"""Benchmark: a wheel judged as it is (`archgap kernels WHEEL`) against `unzip` of its native
members + `cuobjdump --list-elf` and `--list-ptx` on each, in one run, whole processes both.

Input: a local wheel (default: tests/.data/wheels/nvidia_curand-10.4.0.35-*.whl, from
scripts/testdata); cuobjdump from tests/.data/venv-cuobjdump.

Prints: the native members, agreement of the target lists (per member), wall and CPU times of
each way (median of --runs), the ratio, and the floor no wheel reader can go under: inflating the
native members once (zlib, in this process) plus the interpreter's start; archgap's peak RSS
against the largest native member; the bytes fetched when the same wheel is read from a
range-capable index (nginx on loopback, as tests/integration/test_index.py serves it; skipped
when nginx is not installed) or from --url; and the load average (this machine is shared: the
figures move with it).

Usage: .venv/bin/python bench/wheel_vs_unzip.py [WHEEL] [--runs N] [--url URL] [--no-nginx]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / ".data"
ARCHGAP = str(Path(sys.executable).parent / "archgap")
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from archgap.probe.pyenv import NATIVE_NAME  # noqa: E402
from tests.integration.test_kernels_cuobjdump import LINE  # noqa: E402
from tests.loopback_index import NGINX, nginx_server  # noqa: E402


def cuobjdump() -> str:
    hits = sorted(DATA.glob("venv-cuobjdump/lib/python*/site-packages/nvidia/*/bin/cuobjdump"))
    if not hits:
        sys.exit("run scripts/testdata first (installs cuobjdump)")
    return str(hits[0])


def archgap_run(wheel: Path) -> tuple[float, float, int, dict[str, list[str]]]:
    started = time.perf_counter()
    proc = subprocess.Popen(
        [ARCHGAP, "kernels", str(wheel), "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, _status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    cpu = usage.ru_utime + usage.ru_stime
    doc = json.loads(out)
    names: dict[str, list[str]] = {}
    for f in doc["files"]:
        member = f["path"][len(str(wheel)) + 1 :]
        listed = [e for e in f["entries"] if e["listed"]]
        sass = [f"sm_{e['arch']}{e['variant'] if e['variant'] == 'a' else ''}" for e in listed
                if e["kind"] == "sass"]  # fmt: skip
        ptx = [f"sm_{e['arch']}{e['variant']}" for e in listed if e["kind"] == "ptx"]
        names[member] = sass + ptx
    return wall, cpu, usage.ru_maxrss, names


def unzip_cuobjdump_run(
    wheel: Path, members: list[str], tool: str
) -> tuple[float, float, dict[str, list[str]]]:
    names: dict[str, list[str]] = {}
    before = os.times()
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
    wall = time.perf_counter() - started
    after = os.times()
    return (
        wall,
        (after.children_user - before.children_user)
        + (after.children_system - before.children_system),
        names,
    )


def inflate_floor(wheel: Path, infos: list[zipfile.ZipInfo]) -> float:
    """CPU seconds to inflate the native members once with zlib (CRC included), in 4 MiB
    chunks, keeping nothing: the work every reader of a deflated member must do."""
    started = time.process_time()
    with wheel.open("rb") as handle:
        for info in infos:
            handle.seek(info.header_offset + 26)
            name_len, extra_len = (
                int.from_bytes(handle.read(2), "little"),
                int.from_bytes(handle.read(2), "little"),
            )
            handle.seek(info.header_offset + 30 + name_len + extra_len)
            inflate = (
                zlib.decompressobj(-15) if info.compress_type == zipfile.ZIP_DEFLATED else None
            )
            left, crc = info.compress_size, 0
            while left:
                chunk = handle.read(min(left, 4 << 20))
                left -= len(chunk)
                crc = zlib.crc32(inflate.decompress(chunk) if inflate else chunk, crc)
            assert crc == info.CRC, info.filename
    return time.process_time() - started


def start_cost() -> float:
    """Wall seconds of `archgap --version`: the interpreter and the CLI's imports."""
    started = time.perf_counter()
    subprocess.run([ARCHGAP, "--version"], capture_output=True, check=True)
    return time.perf_counter() - started


def nginx_bytes(wheel: Path) -> None:
    """The wheel served by nginx on loopback (range requests: only the zip directory and the
    native members cross the wire), read by URL as `scan URL` reads it."""
    if NGINX is None:
        print("nginx: not installed (scripts/services installs nginx-light): range bytes skipped")
        return
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "files").mkdir()
        (Path(tmp) / "files" / wheel.name).symlink_to(wheel.resolve())
        with nginx_server(Path(tmp), Path(tmp)) as url:
            os.environ["XDG_CACHE_HOME"] = tmp  # no cached copy: the wheel is read by ranges
            ranged_bytes(f"{url}/files/{wheel.name}")


def ranged_bytes(url: str) -> None:
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
    parser.add_argument("--no-nginx", action="store_true", help="skip the loopback index")
    args = parser.parse_args()
    if not args.wheel:
        sys.exit("give a wheel (or run scripts/testdata)")
    wheel = Path(args.wheel)
    tool = cuobjdump()
    with zipfile.ZipFile(wheel) as zf:
        infos = [i for i in zf.infolist() if NATIVE_NAME.search(i.filename)]
    members = [i.filename for i in infos]
    largest = max((i.file_size for i in infos), default=0)
    print(f"wheel: {wheel.name} ({wheel.stat().st_size / 2**20:.1f} MiB), {len(members)} native "
          f"members, largest {largest / 2**20:.1f} MiB unpacked")  # fmt: skip
    ours, ours_cpu, theirs, theirs_cpu, floors, starts, rss = [], [], [], [], [], [], 0
    agree = True
    for _ in range(args.runs):
        wall, cpu, peak, names = archgap_run(wheel)
        ours.append(wall)
        ours_cpu.append(cpu)
        rss = max(rss, peak)
        wall2, cpu2, names2 = unzip_cuobjdump_run(wheel, members, tool)
        theirs.append(wall2)
        theirs_cpu.append(cpu2)
        agree = agree and all(names.get(m, []) == names2[m] for m in members)
        floors.append(inflate_floor(wheel, infos))
        starts.append(start_cost())
    a, b = statistics.median(ours), statistics.median(theirs)
    ac, bc = statistics.median(ours_cpu), statistics.median(theirs_cpu)
    floor = statistics.median(floors) + statistics.median(starts)
    print(f"agreement with cuobjdump on every member: {'yes' if agree else 'NO'}")
    print(f"archgap kernels WHEEL:          {a:.2f} s wall, {ac:.2f} s CPU (median of {args.runs})")
    print(f"unzip + cuobjdump per member:   {b:.2f} s wall, {bc:.2f} s CPU (median of {args.runs})")
    print(f"ratio: {b / a:.1f}x wall, {bc / ac:.1f}x CPU")
    print(f"floor of any reader: inflate the native members {statistics.median(floors):.2f} s CPU "
          f"+ archgap's start {statistics.median(starts):.2f} s = {floor:.2f} s; best possible "
          f"ratio {b / floor:.1f}x wall")  # fmt: skip
    print(
        f"archgap peak RSS: {rss / 1024:.0f} MiB (largest native member {largest / 2**20:.0f} MiB)"
    )
    if not args.no_nginx:
        nginx_bytes(wheel)
    if args.url:
        ranged_bytes(args.url)
    print("load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
