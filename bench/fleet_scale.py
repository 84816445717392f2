"""Fleet at scale: `archgap fleet --from DIR` over generated real-looking fleets, CPU and memory.

A real fleet is a few dozen distinct machines repeated, and every host still differs from its
twins: its name, each GPU's UUID, what each probe section took, when it was collected. The
generator starts from real probe documents (`archgap probe` on real environments from
tests/.data: flashinfer-python 0.6.8, cupy-cuda12x 14.2.0, bitsandbytes 0.50.2, warp-lang
1.19.0, ctranslate2 4.8.5) and makes configurations from them:

  environment (5) x GPU mix (A100 x8, H100 x8, L4 x4 + T4 x2, RTX PRO 6000 x8)
                  x driver (570.133.20 / CUDA 12.8, 580.65.06 / CUDA 13.0)       = 40 configurations

Every host gets its own name, GPU UUIDs (GPU-xxxxxxxx-...), section timings and collection time;
host i has configuration i mod 40, and one in 7 hosts' environment has a package at another
version (a deciding fact: that makes more configurations, up to 80). Documents are written one
file per host (the push model: `archgap probe --out DIR` on every node).

Target (issue 40): 10,000 hosts <= 15 s CPU; 50,000 hosts <= 60 s CPU and <= 500 MB peak RSS.
Prints, per size: the CPU seconds of the `archgap fleet` process (its rusage from os.wait4:
user + system), its peak RSS (ru_maxrss), the wall time, the groups found, and the load
average while it ran (this machine is shared: wall time is not the figure, CPU time is).

Usage: .venv/bin/python bench/fleet_scale.py [--hosts 10000,50000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / ".data"
ARCHGAP = ROOT / ".venv" / "bin" / "archgap"
ENVIRONMENTS = (
    "venv-flashinfer-python-0.6.8",
    "venv-cupy-cuda12x-14.2.0",
    "venv-bitsandbytes-0.50.2",
    "venv-warp-lang-1.19.0",
    "venv-ctranslate2-4.8.5",
)
# (name, compute capability, count): the GPU mixes of the fleet's node types.
MIXES = (
    (("NVIDIA A100-SXM4-80GB", "8.0", 8),),
    (("NVIDIA H100 80GB HBM3", "9.0", 8),),
    (("NVIDIA L4", "8.9", 4), ("Tesla T4", "7.5", 2)),
    (("NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0", 8),),
)
DRIVERS = (("570.133.20", "12.8"), ("580.65.06", "13.0"))


def real_documents() -> list[dict]:
    """`archgap probe` on each real environment (a few seconds each)."""
    docs = []
    for name in ENVIRONMENTS:
        python = DATA / name / "bin" / "python"
        if not python.exists():
            sys.exit(f"missing {python}: run scripts/testdata")
        ran = subprocess.run([str(ARCHGAP), "probe", "--python", str(python)],
                             capture_output=True, text=True, check=True)  # fmt: skip
        docs.append(json.loads(ran.stdout))
    return docs


def configurations(docs: list[dict]) -> list[dict]:
    configs = []
    for doc in docs:
        for mix in MIXES:
            for driver, cuda in DRIVERS:
                config = copy.deepcopy(doc)
                gpu = config["facts"]["sections"]["gpu"] = {
                    "gpus": [], "driver_version": driver, "driver_cuda_version": cuda,
                    "source": "nvidia-smi", "problems": [],
                }  # fmt: skip
                for name, cc, count in mix:
                    for _ in range(count):
                        index = len(gpu["gpus"])
                        card = {"index": index, "name": name, "uuid": "", "source": "nvidia-smi"}
                        gpu["gpus"].append({**card, "compute_capability": cc})
                configs.append(config)
    return configs


def bumped(doc: dict) -> dict:
    """The same machine with its first distribution one patch version on."""
    doc = copy.deepcopy(doc)
    dists = doc["facts"]["sections"]["python"]["distributions"]
    if dists:
        dists[0]["version"] += ".post1"
    return doc


def host_document(config: dict, i: int, rng: random.Random) -> str:
    doc = config.copy()
    facts = dict(config["facts"])
    name = f"gpu{i:05d}"
    doc["target"] = name
    facts["host"] = f"{name}.cluster.example"
    facts["seconds"] = {k: round(rng.uniform(0.01, 3.0), 3) for k in config["facts"]["seconds"]}
    facts["collected_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    sections = dict(facts["sections"])
    gpu = dict(sections["gpu"])
    gpu["gpus"] = [
        {**g, "uuid": f"GPU-{rng.getrandbits(32):08x}-{rng.getrandbits(16):04x}-"
                      f"{rng.getrandbits(16):04x}-{rng.getrandbits(16):04x}-{rng.getrandbits(48):012x}"}
        for g in gpu["gpus"]
    ]  # fmt: skip
    sections["gpu"] = gpu
    facts["sections"] = sections
    doc["facts"] = facts
    return json.dumps(doc)


def generate(directory: Path, hosts: int, configs: list[dict], variants: list[dict]) -> int:
    rng = random.Random(40)
    for i in range(hosts):
        config = (variants if i % 7 == 3 else configs)[i % len(configs)]
        (directory / f"gpu{i:05d}.json").write_text(host_document(config, i, rng))
    return sum(f.stat().st_size for f in directory.iterdir())


def measure(directory: Path) -> dict:
    load_before = os.getloadavg()
    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        ran = subprocess.Popen([str(ARCHGAP), "fleet", "--from", str(directory), "--json"],
                               stdout=out, stderr=err)  # fmt: skip
        # The fleet process's own usage (wait4), not the largest of every child so far: the
        # probes that made the documents are children too.
        _, status, usage = os.wait4(ran.pid, 0)
        wall = time.monotonic() - started
        code = os.waitstatus_to_exitcode(status)
        if code not in (0, 1):
            err.seek(0)
            sys.exit(f"fleet exited {code}: {err.read()[-2000:]}")
        out.seek(0)
        doc = json.load(out)
    return {
        "hosts": len(doc["hosts"]),
        "groups": len(doc["groups"]),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),  # Linux: KiB
        "wall_s": round(wall, 2),
        "load_average": [load_before[0], os.getloadavg()[0]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", default="10000,50000")
    parser.add_argument("--keep", metavar="DIR", help="write the documents here and keep them")
    args = parser.parse_args()
    configs = configurations(real_documents())
    variants = [bumped(c) for c in configs]
    for hosts in (int(n) for n in args.hosts.split(",")):
        directory = Path(args.keep or tempfile.mkdtemp(prefix="archgap-fleet-scale-"))
        directory.mkdir(parents=True, exist_ok=True)
        try:
            size = generate(directory, hosts, configs, variants)
            result = measure(directory)
            result["documents_mb"] = round(size / 2**20)
            print(json.dumps(result), flush=True)
        finally:
            if not args.keep:
                shutil.rmtree(directory)


if __name__ == "__main__":
    main()
