"""Benchmark: `archgap explain` on logs of many short lines (the 64 MiB cap bounds bytes, not
lines), each figure with its anchor, `grep -c error` over the same file (plain-text speed).

Logs, generated in a temporary directory (nothing kept):

  1. quiet flood      3,000,000 lines 'INFO step ok' (39 MB)
  2. numbered flood   3,000,000 lines 'step N ok' (a number on every line: 45 MB)
  3. prefixed flood   SGLang's decode lines with a rank prefix, to 64 MiB (650,000 lines)
  4. JSON lines       the same flood as JSON records, a traceback in the last one
  5. one 2 GiB line   a sparse file, its error at its end (read: 64 MiB; held: a few KiB)

Prints wall and CPU seconds and the max RSS of each whole process, the median of --runs.

Usage: .venv/bin/python bench/explain_flood.py [--runs 3] [--src DIR]  (DIR: another tree's src/,
to compare a change with what it replaced)
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
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ERROR = "RuntimeError: FlashInfer requires GPUs with sm75 or higher"
DECODE = (
    "[2026-11-27 09:14:09 TP1] Decode batch, #running-req: 3, #token: {n}, "
    "gen throughput (token/s): 99.1\n"
)


def quiet(path: Path) -> None:
    with path.open("w") as out:
        for _ in range(30):  # in pieces: a child forked from a large parent counts its pages
            out.write("INFO step ok\n" * 100_000)


def numbered(path: Path) -> None:
    with path.open("w") as out:
        for start in range(0, 3_000_000, 100_000):
            out.write("".join(f"step {n} ok\n" for n in range(start, start + 100_000)))


def prefixed(path: Path) -> None:
    with path.open("w") as out:
        size = n = 0
        while size < 64 << 20:
            size += out.write(DECODE.format(n=n))
            n += 1
        out.write(f"{ERROR}\n")


def json_lines(path: Path) -> None:
    with path.open("w") as out:
        for n in range(500_000):
            out.write(json.dumps({"level": "info", "msg": DECODE.format(n=n).strip()}) + "\n")
        trace = f'Traceback (most recent call last):\n  File "/a/x.py", line 3, in f\n{ERROR}\n'
        out.write(json.dumps({"level": "error", "msg": "died", "exc_info": trace}) + "\n")


def huge_line(path: Path) -> None:
    with path.open("wb") as out:
        out.seek(2 << 30)
        out.write(f" {ERROR}\n".encode())


LOGS: dict[str, Callable[[Path], None]] = {
    "quiet flood": quiet,
    "numbered flood": numbered,
    "prefixed flood": prefixed,
    "JSON lines": json_lines,
    "one 2 GiB line": huge_line,
}


def measure(argv: list[str], runs: int, env: dict[str, str]) -> tuple[float, float, int]:
    """Median wall and CPU seconds and the largest max RSS (MiB) of ``runs`` runs."""
    results = []
    for _ in range(runs):
        started = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        _, _, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        results.append((wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss >> 10))
    return (
        statistics.median(r[0] for r in results),
        statistics.median(r[1] for r in results),
        max(r[2] for r in results),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--src", type=Path, default=ROOT / "src", help="the archgap to run")
    args = parser.parse_args()
    runs, env = args.runs, {**os.environ, "PYTHONPATH": str(args.src.resolve())}
    print(f"load average {os.getloadavg()[0]:.2f}, {runs} runs each")
    print(f"{'log':<16} {'MB':>6} {'explain s':>10} {'cpu s':>7} {'MiB':>6} {'grep -c s':>10}")
    with tempfile.TemporaryDirectory() as scratch:
        for name, build in LOGS.items():
            path = Path(scratch) / "log"
            build(path)
            size = path.stat().st_size / 1e6
            explain = [sys.executable, "-m", "archgap", "explain", str(path), "--log-only"]
            wall, cpu, rss = measure(explain, runs, env)
            anchor = measure(["grep", "-c", "error", str(path)], runs, env)[0]
            print(f"{name:<16} {size:>6.0f} {wall:>10.2f} {cpu:>7.2f} {rss:>6} {anchor:>10.2f}")
            path.unlink()


if __name__ == "__main__":
    main()
