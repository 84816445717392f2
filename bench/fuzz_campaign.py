"""The long fuzz campaign: mutated real binaries through the fatbin reader and mutated facts
documents through the fleet report, each case under a time limit (a hang is counted, not waited
for). The suite runs the same cases bounded by count (tests/unit/test_fuzz_hostile.py).

Prints, per kind: cases run, exceptions, hangs (cases over --case-limit seconds), impossible rows
(tests/fuzzing.py binary_violations), elapsed time, the peak RSS of the workers and the load
average; then any archgap process still running. Exits 1 when anything was found.

Usage: .venv/bin/python bench/fuzz_campaign.py [--binaries 1000000] [--fleet 10000]
       [--jobs 2] [--seed 17] [--case-limit 5]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from archgap.analysis.fleet import fleet_report, host_from_facts  # noqa: E402
from archgap.probe.__main__ import run as probe_run  # noqa: E402
from archgap.probe.binary.fatbin import read_binary  # noqa: E402
from archgap.probe.environment.system import descendants  # noqa: E402
from tests.fuzzing import BIN, binary_case, binary_violations, fleet_case, sources  # noqa: E402


class Hang(BaseException):
    """A case over the time limit (BaseException: the reader's own catch-all cannot eat it)."""


def _expire(_signum: int, _frame: Any) -> None:
    raise Hang


def _limited(seconds: float) -> None:
    signal.setitimer(signal.ITIMER_REAL, seconds)


def binary_worker(args: tuple[int, int, int, float, str]) -> dict[str, Any]:
    seed, start, stop, limit, scratch = args
    signal.signal(signal.SIGALRM, _expire)
    originals = sources()
    path = Path(scratch) / f"case-{os.getpid()}"
    result: dict[str, Any] = {"cases": 0, "exceptions": [], "hangs": [], "impossible": []}
    for index in range(start, stop):
        name, data, deep = binary_case(seed, index, originals)
        path.write_bytes(data)
        try:
            _limited(limit)
            facts = read_binary(str(path), deep=deep)
        except Hang:
            result["hangs"].append(index)
            continue
        finally:
            _limited(0)
        result["cases"] += 1
        for violation in binary_violations(facts, len(data)):
            key = "exceptions" if violation.startswith("exception") else "impossible"
            result[key].append(f"{index} {name} deep={deep}: {violation}")
    path.unlink(missing_ok=True)
    result["max_rss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return result


def fleet_worker(args: tuple[int, int, int, float, dict[str, Any]]) -> dict[str, Any]:
    seed, start, stop, limit, doc = args
    signal.signal(signal.SIGALRM, _expire)
    result: dict[str, Any] = {"cases": 0, "exceptions": [], "hangs": [], "impossible": []}
    for index in range(start, stop):
        bad = fleet_case(seed, index, doc)
        try:
            _limited(limit)
            hosts = [host_from_facts("good", doc), host_from_facts("bad", bad)]
            report = fleet_report(hosts, ("T4",))
        except Hang:
            result["hangs"].append(index)
            continue
        except Exception as exc:  # the report must turn any document into a host or a reason
            result["exceptions"].append(f"{index}: {type(exc).__name__}: {exc}"[:300])
            continue
        finally:
            _limited(0)
        result["cases"] += 1
        names = sorted([s.name for s in report.hosts] + [u.name for u in report.unreachable])
        if names != ["bad", "good"] or "good" not in [s.name for s in report.hosts]:
            result["impossible"].append(f"{index}: hosts {names}")
    result["max_rss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return result


def campaign(kind: str, worker: Any, total: int, jobs: int, extra: tuple[Any, ...]) -> bool:
    if total <= 0:
        return True
    seed, limit, payload = extra
    step = max(1, min(20_000, total // (jobs * 4) or 1))
    chunks = [
        (seed, start, min(total, start + step), limit, payload) for start in range(0, total, step)
    ]
    started = time.monotonic()
    merged: dict[str, Any] = {"cases": 0, "exceptions": [], "hangs": [], "impossible": []}
    peak = 0
    with multiprocessing.get_context("fork").Pool(jobs, maxtasksperchild=1) as pool:
        for part in pool.imap_unordered(worker, chunks):
            merged["cases"] += part["cases"]
            for key in ("exceptions", "hangs", "impossible"):
                merged[key] += part[key]
            peak = max(peak, part["max_rss_kib"])
    elapsed = time.monotonic() - started
    load = os.getloadavg()
    print(
        f"{kind}: {total} cases, {merged['cases']} completed, "
        f"{len(merged['exceptions'])} exceptions, {len(merged['hangs'])} hangs "
        f"(limit {limit:g} s), {len(merged['impossible'])} impossible rows; "
        f"{elapsed:.0f} s with {jobs} workers, peak worker RSS {peak / 1024:.0f} MiB, "
        f"load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}"
    )
    for key in ("exceptions", "hangs", "impossible"):
        for item in merged[key][:10]:
            print(f"  {key}: {item}")
    return not (merged["exceptions"] or merged["hangs"] or merged["impossible"])


def leftover_processes() -> list[str]:
    """Processes this campaign started (its descendants) still running."""
    found = []
    for pid in sorted(descendants(os.getpid())):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        found.append(f"{pid}: {cmdline.decode(errors='replace')[:120]}")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binaries", type=int, default=1_000_000)
    parser.add_argument("--fleet", type=int, default=10_000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--case-limit", type=float, default=5.0)
    args = parser.parse_args()
    scratch_root = "/dev/shm" if os.path.isdir("/dev/shm") else None
    ok = True
    with tempfile.TemporaryDirectory(dir=scratch_root) as scratch:
        ok &= campaign(
            "binaries", binary_worker, args.binaries, args.jobs,
            (args.seed, args.case_limit, scratch),
        )  # fmt: skip
    request = {"gpu": {}, "python": {"python": sys.executable}, "binaries": {"paths": [str(BIN)]}}
    doc = json.loads(json.dumps(probe_run({"request": request})))
    ok &= campaign("fleet", fleet_worker, args.fleet, args.jobs, (args.seed, args.case_limit, doc))
    left = leftover_processes()
    print(f"archgap processes left running: {len(left)}")
    for line in left:
        print(f"  {line}")
    return 0 if ok and not left else 1


if __name__ == "__main__":
    sys.exit(main())
