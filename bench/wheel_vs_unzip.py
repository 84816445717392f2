"""Benchmark: a wheel judged as it is (`archgap kernels WHEEL`) against `unzip` of its native
members + `cuobjdump --list-elf` and `--list-ptx` on each, in one run, whole processes both.

Input: local wheels (default: tests/.data/wheels/nvidia_curand-10.4.0.35-*.whl, from
scripts/testdata); cuobjdump from tests/.data/venv-cuobjdump.

Prints one row per wheel: its size and native members, wall and CPU times of each way (median of
--runs, the two ways alternating), the ratio, the CPU floor no wheel reader with archgap's
inflater can go under (inflating the native members once, in this process, CRC included, with
the inflater archgap uses: python-isal when installed, else zlib; plus archgap's start), the best
CPU ratio that floor allows (CPU: on a shared machine wall times also measure the other
processes), the wall floor (the inflating shared by archgap's inflating threads, plus its start:
archgap inflates members in ``zipmembers.WORKERS`` threads, so its wall time can be under the
CPU floor), archgap's peak RSS, and whether the target lists agree on every member; then the
load average (this machine is shared: the figures move with it). With --nginx,
the bytes fetched when each wheel is read from a range-capable index (nginx on loopback, as
tests/integration/test_index.py serves it); with --url, from that URL.

Usage: .venv/bin/python bench/wheel_vs_unzip.py [WHEEL...] [--runs N] [--url URL] [--nginx]
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
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / ".data"
ARCHGAP = str(Path(sys.executable).parent / "archgap")
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from archgap.archives.zipmembers import INFLATER, WORKERS  # noqa: E402
from archgap.probe.binary.names import NATIVE_NAME  # noqa: E402
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


def batches(names: list[str], limit: int = 100_000) -> list[list[str]]:
    """The names in groups of at most ``limit`` characters (one unzip command line each)."""
    found: list[list[str]] = [[]]
    size = 0
    for name in names:
        if found[-1] and size + len(name) + 1 > limit:
            found.append([])
            size = 0
        found[-1].append(name)
        size += len(name) + 1
    return found


def unzip_cuobjdump_run(
    wheel: Path, members: list[str], tool: str
) -> tuple[float, float, dict[str, list[str]]]:
    names: dict[str, list[str]] = {}
    before = os.times()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for batch in batches(members):  # the command line's limit (a wheel of 16,000 cubins)
            subprocess.run(["unzip", "-q", "-o", str(wheel), *batch, "-d", tmp], check=True)
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
    """CPU seconds to inflate the native members once with archgap's inflater (CRC included),
    in 4 MiB chunks, keeping nothing: the work every reader of a deflated member must do."""
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
                INFLATER.decompressobj(-15) if info.compress_type == zipfile.ZIP_DEFLATED else None
            )
            left, crc = info.compress_size, 0
            while left:
                chunk = handle.read(min(left, 4 << 20))
                left -= len(chunk)
                crc = INFLATER.crc32(inflate.decompress(chunk) if inflate else chunk, crc)
            assert crc == info.CRC, info.filename
    return time.process_time() - started


def start_cost() -> float:
    """CPU seconds of `archgap --version`: the interpreter and the CLI's imports (CPU, as the
    inflate: on a loaded machine wall time measures the other processes too)."""
    before = os.times()
    subprocess.run([ARCHGAP, "--version"], capture_output=True, check=True)
    after = os.times()
    return (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )


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
    from archgap.targets import read_targets

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


@dataclass
class Row:
    """One wheel's figures (medians of the runs)."""

    name: str
    mib: float
    members: int
    largest_mib: float
    ours: float
    ours_cpu: float
    theirs: float
    theirs_cpu: float
    inflate: float
    start: float
    rss_mib: float
    agree: bool
    differ: list[str]  # the first members whose lists differ, with both lists

    @property
    def floor(self) -> float:
        return self.inflate + self.start

    @property
    def wall_floor(self) -> float:
        return self.inflate / WORKERS + self.start


def measure(wheel: Path, runs: int, tool: str) -> Row:
    """archgap and unzip + cuobjdump on one wheel, alternating, ``runs`` times each."""
    with zipfile.ZipFile(wheel) as zf:
        infos = [i for i in zf.infolist() if NATIVE_NAME.search(i.filename)]
    members = [i.filename for i in infos]
    ours, ours_cpu, theirs, theirs_cpu, floors, starts, rss = [], [], [], [], [], [], 0
    differ: list[str] = []
    for _ in range(runs):
        wall, cpu, peak, names = archgap_run(wheel)
        ours.append(wall)
        ours_cpu.append(cpu)
        rss = max(rss, peak)
        wall2, cpu2, names2 = unzip_cuobjdump_run(wheel, members, tool)
        theirs.append(wall2)
        theirs_cpu.append(cpu2)
        differ += [f"{m}: archgap {names.get(m, [])}, cuobjdump {names2[m]}" for m in members
                   if names.get(m, []) != names2[m]][: 3 - len(differ)]  # fmt: skip
        floors.append(inflate_floor(wheel, infos))
        starts.append(start_cost())
    med = statistics.median
    largest = max((i.file_size for i in infos), default=0) / 2**20
    return Row(
        wheel.name, wheel.stat().st_size / 2**20, len(members), largest, med(ours),
        med(ours_cpu), med(theirs), med(theirs_cpu), med(floors), med(starts), rss / 1024,
        not differ, differ,
    )  # fmt: skip


HEADER = (
    f"{'wheel':<58} {'MiB':>6} {'native':>6} {'archgap s':>9} {'CPU':>6} {'unzip+cuobjdump s':>17} "
    f"{'CPU':>6} {'ratio':>6} {'CPU':>6} {'floor s':>7} {'best':>6} {'wall floor':>10} "
    f"{'RSS MiB':>7} agree"
)


def row_text(r: Row) -> str:
    name = r.name if len(r.name) <= 58 else r.name[:55] + "..."
    return (
        f"{name:<58} {r.mib:>6.0f} {r.members:>6} {r.ours:>9.2f} {r.ours_cpu:>6.2f} "
        f"{r.theirs:>17.2f} {r.theirs_cpu:>6.2f} {r.theirs / r.ours:>5.1f}x "
        f"{r.theirs_cpu / r.ours_cpu:>5.1f}x {r.floor:>7.2f} "
        f"{r.theirs_cpu / r.floor:>5.1f}x {r.wall_floor:>10.2f} {r.rss_mib:>7.0f} "
        f"{'yes' if r.agree else 'NO'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    default = next(iter(sorted(DATA.glob("wheels/nvidia_curand-*.whl"))), None)
    parser.add_argument("wheels", nargs="*", default=[str(default)] if default else [])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--url", help="also: bytes fetched from this wheel URL (range requests)")
    parser.add_argument(
        "--nginx", action="store_true", help="also: bytes fetched of each wheel from nginx"
    )
    args = parser.parse_args()
    if not args.wheels:
        sys.exit("give wheels (or run scripts/testdata)")
    tool = cuobjdump()
    print(f"median of {args.runs} runs each; ratio = unzip+cuobjdump / archgap, wall then CPU; "
          f"floor = CPU of inflating the native members once ({INFLATER.__name__}, as archgap "
          "does, CRC included) + archgap's start; best = unzip+cuobjdump CPU / floor: the CPU "
          "ratio no reader with this inflater can beat; wall floor = the inflating shared by "
          f"archgap's {WORKERS} inflating threads + its start")  # fmt: skip
    print(HEADER)
    for name in args.wheels:
        row = measure(Path(name), args.runs, tool)
        print(row_text(row), flush=True)
        print(f"  load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; largest native "
              f"member {row.largest_mib:.0f} MiB unpacked")  # fmt: skip
        for line in row.differ:
            print(f"  differs: {line}")
    if args.nginx:
        for name in args.wheels:
            nginx_bytes(Path(name))
    if args.url:
        ranged_bytes(args.url)


if __name__ == "__main__":
    main()
