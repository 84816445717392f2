"""Fleet fan-out on loopback: wall time of `archgap fleet` over 32 hosts versus one host.

Starts the test services (scripts/services: a real sshd on 127.0.0.5 reached through 32 ssh-config
aliases h01..h32), builds a small venv with one CUDA library, then times (median of --repeat runs):

  1. one host                         archgap fleet --hosts h01
  2. 32 hosts                         archgap fleet --hosts h01..h32
  3. 32 hosts, a third refused        11 aliases point at a closed port (host down, RST)
  4. 32 hosts, a third silent         11 aliases point at a listener that never answers
                                      (powered-off host; bounded by --connect-timeout)

Target: (2) and (3) within 2x of (1). Prints the measured wall times and ratios, and the floor:
N bare ``ssh HOST true`` logins at once. On loopback every sshd and every remote probe runs on
this machine's own cores, so with few cores the fan-out is CPU-bound (in a real fleet that work
runs on the remote hosts).
Usage: .venv/bin/python bench/fleet_loopback.py [--repeat 3] [--jobs 32] [--connect-timeout 2]
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.helpers import CUDA_BIN, install_fake_distribution, make_venv  # noqa: E402
from tests.integration.test_remote_services import SilentListener, closed_port  # noqa: E402


def timed(argv: list[str], env: dict[str, str], repeat: int) -> tuple[float, dict]:
    times, doc = [], {}
    for _ in range(repeat):
        started = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
        times.append(time.perf_counter() - started)
        doc = json.loads(done.stdout)
    return statistics.median(times), doc


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=32)
    parser.add_argument("--connect-timeout", type=float, default=2.0)
    args = parser.parse_args()

    base = tempfile.mkdtemp(prefix="archgap-bench-")
    services = [sys.executable, str(ROOT / "scripts" / "services")]
    subprocess.run([*services, "start", base], check=True)
    try:
        status = json.loads(Path(base, "status.json").read_text())
        if not status["ssh"]["ok"]:
            print(f"sshd could not be started: {status['ssh']['reason']}")
            return 2
        venv = Path(base) / "venv"
        site = make_venv(venv)
        install_fake_distribution(
            site, "fakekernels", "1.2.3", {"fakekernels/libmix.so": CUDA_BIN / "libmix.so"}
        )
        config = Path(status["ssh"]["config"])
        refused, silent = closed_port(), SilentListener().port
        # Dead hosts: extra aliases in a copy of the test ssh config.
        extra = "".join(
            f"Host r{i:02d}\n  HostName 127.0.0.1\n  Port {refused}\n"
            f"Host s{i:02d}\n  HostName 127.0.0.1\n  Port {silent}\n"
            for i in range(1, 12)
        )
        bench_config = Path(base) / "bench_ssh_config"
        bench_config.write_text(extra + config.read_text())
        env = {**os.environ, "ARCHGAP_SSH_CONFIG": str(bench_config)}
        python = str(venv / "bin" / "python")
        fleet = [sys.executable, "-m", "archgap", "fleet", "--json", "--python", python]
        fleet += ["--gpu", "12.0", "--jobs", str(args.jobs)]
        fleet += ["--connect-timeout", str(args.connect_timeout)]
        alive = [f"h{i:02d}" for i in range(1, 33)]
        cases = {
            "1 host": ["h01"],
            "32 hosts": alive,
            "32 hosts, 11 refused": alive[:21] + [f"r{i:02d}" for i in range(1, 12)],
            "32 hosts, 11 silent": alive[:21] + [f"s{i:02d}" for i in range(1, 12)],
        }
        results = {}
        for name, hosts in cases.items():
            seconds, doc = timed([*fleet, "--hosts", ",".join(hosts)], env, args.repeat)
            results[name] = seconds
            print(
                f"{name:24} {seconds:6.2f} s  answered {len(doc['hosts']):2d}  "
                f"not probed {len(doc['unreachable']):2d}  groups {len(doc['groups'])}"
            )
        # The floor on this machine: the same number of bare ssh logins, all at once.
        for count in (1, 32):
            started = time.perf_counter()
            procs = [
                subprocess.Popen(
                    ["ssh", "-F", str(bench_config), "-o", "BatchMode=yes", f"h{i:02d}", "true"]
                )
                for i in range(1, count + 1)
            ]
            for proc in procs:
                proc.wait()
            elapsed = time.perf_counter() - started
            print(f"baseline: {count:2d} x 'ssh HOST true' in parallel {elapsed:6.2f} s")
        one = results["1 host"]
        cpus, timeout = os.cpu_count(), args.connect_timeout
        print(f"\ncpus: {cpus}  jobs: {args.jobs}  connect timeout: {timeout} s")
        for name in list(cases)[1:]:
            ratio = results[name] / one
            verdict = "within 2x" if ratio <= 2 else "OVER 2x"
            print(f"ratio {name:24} / 1 host = {ratio:4.2f}  ({verdict})")
    finally:
        subprocess.run([*services, "stop", base], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
