"""Benchmark: where users wait, each figure with its anchor measured in the same run.

Input: the real torch 2.14.1+cu130 environment at bench/.data/venv-torch (bench/setup_torch_venv
builds it: 5.5 GB, ~120 native files, ~48,000 fatbin entries). Prints, with the load average:

  1. scan vs kernels        `archgap scan --python T` vs `archgap kernels SITE` (goal <= 1.5x:
                            issue 38),
                            and the peak memory (max RSS) of scan (goal <= 150 MB); kernels'
                            table reads device code only (cuobjdump's work), scan also reads
                            each library's strings (dlopen names, compilers, banner) and deeply
                            where hidden entries matter: against `kernels SITE --json`, which
                            reads the strings too, on the next line; and scan of an interpreter
                            with no packages (a bare venv): scan's fixed work, nothing read
  2. probe document         bytes of `archgap probe --python T --json` (goal <= 1 MB)
  3. fleet ingest           `fleet --from` 64 copies of that document vs 1 (goal <= 3x)
  4. fleet memory           max RSS of `fleet --from` over 1,000 host documents
  5. fan-out                --hosts targets (>= 256) whose transport replays the recorded probe
                            output after --delay seconds, --jobs at a time, probed and judged as
                            `fleet` does; vs the floor hosts / jobs x delay (goal <= 1.5x)
  6. deep vs plain          `kernels --deep` vs `kernels` on the site-packages (goal <= 2x)

Wall times are whole processes (what a user waits for), the median of --runs, warm page cache;
a ratio's two commands run in turn (--runs pairs), with the range of the pairs' ratios.
The trace vs rg and kernels vs cuobjdump figures are bench/trace_vs_rg.py and
bench/kernels_vs_cuobjdump.py.

Usage: .venv/bin/python bench/speed.py [--runs 3] [--hosts 256] [--jobs 32] [--delay 2]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
VENV = ROOT / "bench" / ".data" / "venv-torch"
ARCHGAP = [sys.executable, "-m", "archgap"]
# The archgap of this tree, whatever the venv has installed, with its bytecode (as a
# pip-installed tool has it: without it every run compiles archgap's modules again).
ENV = {
    **{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
    "PYTHONPATH": str(ROOT / "src"),
}


class Run(NamedTuple):
    wall: float  # seconds
    cpu: float  # user + system seconds of the process (and its children)
    rss: int  # max RSS, KiB
    out: bytes


def run(argv: list[str]) -> Run:
    """Wall and CPU seconds, max RSS and stdout of one whole process."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.DEVNULL, env=ENV)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        data = out.read()
    if proc.returncode not in (0, 1):
        sys.exit(f"{' '.join(argv)} exited {proc.returncode}")
    return Run(elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, data)


def summed(results: list[Run]) -> Run:
    """Median wall and CPU seconds and the largest max RSS of ``results``."""
    return Run(
        statistics.median(r.wall for r in results),
        statistics.median(r.cpu for r in results),
        max(r.rss for r in results),
        results[-1].out,
    )


def timed(argv: list[str], runs: int) -> Run:
    """Median wall and CPU seconds, the largest max RSS over ``runs`` runs (after a warm-up)."""
    run(argv)
    return summed([run(argv) for _ in range(runs)])


def paired(ours: list[str], anchor: list[str], runs: int) -> tuple[Run, Run, list[float]]:
    """``ours`` and ``anchor`` run in turn, ``runs`` pairs after a warm-up of each: their medians
    and each pair's wall ratio. On a shared machine the load moves within minutes; runs in a
    row put one command in a busier minute than the other, pairs do not."""
    run(ours)
    run(anchor)
    mine: list[Run] = []
    theirs: list[Run] = []
    for _ in range(runs):
        mine.append(run(ours))
        theirs.append(run(anchor))
    return (
        summed(mine),
        summed(theirs),
        [a.wall / b.wall for a, b in zip(mine, theirs, strict=True)],
    )


def ratio(label: str, ours: Run, anchor: Run, goal: str, pairs: Sequence[float] = ()) -> None:
    """archgap against its anchor, in wall seconds and in CPU seconds (the second one moves
    less with the load of a shared machine); with ``pairs``, the range of the pairs' ratios."""
    spread = f", pairs {min(pairs):.2f}-{max(pairs):.2f}x" if pairs else ""
    report(
        label,
        f"{ours.wall:.2f} s vs {anchor.wall:.2f} s = {ours.wall / anchor.wall:.2f}x wall{spread}, "
        f"{ours.cpu / anchor.cpu:.2f}x CPU ({ours.cpu:.2f} vs {anchor.cpu:.2f} s)",
        goal,
    )


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f}"


def report(label: str, value: str, goal: str) -> None:
    print(f"{label:30} {value}  | {goal}  [{load()}]", flush=True)


def host_documents(doc: dict[str, Any], count: int, folder: Path) -> Path:
    """``count`` copies of one probe document, each with its own host name."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        doc["target"] = doc["facts"]["host"] = f"node{i:04d}"
        (folder / f"node{i:04d}.json").write_text(json.dumps(doc))
    return folder


def fan_out(recorded: Path, hosts: int, jobs: int, delay: float) -> tuple[float, int]:
    """Seconds to probe and judge ``hosts`` replaying targets, and how many answered."""
    from archgap.analysis.fleet import fleet_report
    from archgap.request import probe_request
    from archgap.transport.fleet import HostInput
    from archgap.transport.run import TransportFailure, run_many
    from archgap.transport.target import Target

    # The transport: read the request as ssh would, wait like the network, print the recording.
    script = f"cat >/dev/null; sleep {delay}; cat {shlex.quote(str(recorded))}"
    targets = [
        Target("via", f"replay{i:04d}", ("sh", "-c", script, "replay"), "python3")
        for i in range(hosts)
    ]
    started = time.perf_counter()
    # As `archgap fleet` does: each host judged as it answers, its facts then dropped.
    inputs = (
        HostInput(t.name, None, r.kind, r.message) if isinstance(r, TransportFailure) else
        HostInput(t.name, r)
        for t, r in run_many(targets, probe_request(), jobs, timeout=60 + delay)
    )  # fmt: skip
    fleet = fleet_report(inputs)
    return time.perf_counter() - started, len(fleet.hosts)


def record_probe(python: Path, into: Path) -> None:
    """The stdout of a real probe run through the remote loader (what ssh would bring back)."""
    from archgap.request import probe_request
    from archgap.transport.bootstrap import probe_input, remote_argv, stdin_payload
    from archgap.transport.run import fill_python

    request = fill_python(probe_request(), str(python))
    payload = stdin_payload(probe_input(request))
    done = subprocess.run(
        remote_argv(sys.executable), input=payload, capture_output=True, env=ENV, check=True
    )
    into.write_bytes(done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--hosts", type=int, default=256)
    parser.add_argument("--jobs", type=int, default=32)
    parser.add_argument("--delay", type=float, default=2.0)
    parser.add_argument("--fleet-memory-hosts", type=int, default=1000)
    args = parser.parse_args()
    python = VENV / "bin" / "python"
    sites = sorted(VENV.glob("lib/python*/site-packages"))
    if not python.exists() or not sites:
        sys.exit(f"no {VENV}: run bench/setup_torch_venv first")
    site = str(sites[0])
    print(f"torch environment {site}; {os.cpu_count()} CPUs; runs {args.runs}", flush=True)

    scan_argv = [*ARCHGAP, "scan", "--python", str(python)]
    kernels_argv = [*ARCHGAP, "kernels", site]
    scan, kernels, pairs = paired(scan_argv, kernels_argv, args.runs)
    ratio("1. scan vs kernels", scan, kernels, "goal <= 1.5x", pairs)
    scan_, document, pairs = paired(scan_argv, [*kernels_argv, "--json"], args.runs)
    ratio("   scan vs kernels --json", scan_, document, "the strings read by both", pairs)
    with tempfile.TemporaryDirectory(prefix="archgap-bare-") as bare:
        # scan's own fixed work (start-up, the interpreter's answer, the toolchain, judging,
        # the report) with no package to read, against the same kernels run
        subprocess.run([str(python), "-m", "venv", "--without-pip", bare], check=True)
        fixed, kernels_, pairs = paired(
            [*ARCHGAP, "scan", "--python", f"{bare}/bin/python"], kernels_argv, args.runs
        )
    ratio("   scan, nothing to read", fixed, kernels_, "scan's floor, against goal 1.5x", pairs)
    report("   peak memory (max RSS)", f"scan {scan.rss / 1024:.0f} MB, kernels "
           f"{kernels.rss / 1024:.0f} MB", "goal scan <= 150 MB")  # fmt: skip

    probe_out = run([*ARCHGAP, "probe", "--python", str(python), "--json"]).out
    report("2. probe document", f"{len(probe_out) / 1e6:.2f} MB", "goal <= 1 MB")

    work = Path(tempfile.mkdtemp(prefix="archgap-speed-"))
    doc = json.loads(probe_out)
    one = host_documents(doc, 1, work / "one")
    many = host_documents(doc, 64, work / "many")
    ingest_one = timed([*ARCHGAP, "fleet", "--from", str(one), "--json"], args.runs)
    ingest_many = timed([*ARCHGAP, "fleet", "--from", str(many), "--json"], args.runs)
    ratio("3. fleet --from 64 docs vs 1", ingest_many, ingest_one, "goal <= 3x")

    thousand = host_documents(doc, args.fleet_memory_hosts, work / "thousand")
    fleet = run([*ARCHGAP, "fleet", "--from", str(thousand), "--json"])
    report(
        f"4. fleet --from {args.fleet_memory_hosts} hosts",
        f"max RSS {fleet.rss / 1024:.0f} MB (64 hosts: {ingest_many.rss / 1024:.0f} MB), "
        f"{fleet.wall:.1f} s",
        "bounded",
    )

    recorded = work / "recorded-probe.out"
    record_probe(python, recorded)
    seconds, answered = fan_out(recorded, args.hosts, args.jobs, args.delay)
    floor = math.ceil(args.hosts / args.jobs) * args.delay
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    report(
        f"5. fan-out {args.hosts} hosts, {args.jobs} jobs",
        f"{seconds:.2f} s vs floor {floor:.1f} s = {seconds / floor:.2f}x ({answered} answered;"
        f" this process's max RSS {peak:.0f} MB)",
        "goal <= 1.5x",
    )

    deep, plain, pairs = paired([*kernels_argv, "--deep"], kernels_argv, args.runs)
    ratio("6. kernels --deep vs kernels", deep, plain, "goal <= 2x", pairs)
    subprocess.run(["rm", "-rf", str(work)], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
