"""Benchmark: `archgap matrix` on the real package index (PyPI, or --index-url), the last N
releases of each package judged on a few GPUs from their wheels, then the same again from the
site's cache.

For each package, the first run (an empty archgap cache, an empty --out folder) prints the
releases and variants judged, the bytes fetched against the full size of the wheels read (what
downloading them would take), the wall time and the verdicts per GPU; then its rerun
(another empty archgap cache: only DIR/matrix-cache.json can answer) prints its bytes fetched
(the index pages, which say which releases exist, are not counted: only wheels) and time; then
the totals and the load average (this machine is shared: the times move with it).

Usage: nice .venv/bin/python bench/matrix.py [PACKAGE...] [--gpu GPU]... [--versions N]
       [--out DIR] [--index-url URL]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ARCHGAP = str(Path(sys.executable).parent / "archgap")
PACKAGES = (
    "flashinfer-python", "bitsandbytes", "xformers", "cupy-cuda12x", "onnxruntime-gpu",
    "nvidia-cublas-cu12", "nvidia-cudnn-cu12", "sgl-kernel", "vllm", "jax-cuda12-plugin",
    "ctranslate2",
)  # fmt: skip
GPUS = ("7.5", "8.0", "9.0", "12.0")  # T4, A100, H100, RTX PRO 6000
TARGET = ("--python-version", "3.12", "--platform", "manylinux_2_28_x86_64")


def run(package: str, args: argparse.Namespace, cache: str) -> tuple[dict[str, Any], float]:
    argv = [ARCHGAP, "matrix", package, "--versions", str(args.versions), "--out", args.out,
            "--json", "-q", *TARGET]  # fmt: skip
    for gpu in args.gpu or GPUS:
        argv += ["--gpu", gpu]
    if args.index_url:
        argv += ["--index-url", args.index_url]
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, check=False,
                          env={**os.environ, "XDG_CACHE_HOME": cache})  # fmt: skip
    seconds = time.monotonic() - started
    try:
        doc: dict[str, Any] = json.loads(done.stdout)
    except ValueError:
        doc = {"error": (done.stderr or done.stdout).strip()[-300:]}
    return doc, seconds


def mb(size: int) -> str:
    return f"{size / 1e6:,.1f} MB"


def describe(doc: dict[str, Any]) -> str:
    if "packages" not in doc:
        return f"error: {doc.get('error') or doc.get('message')}"
    (package,) = doc["packages"]
    if package["problem"]:
        return f"problem: {package['problem']}"
    variants = package["variants"]
    per_gpu: dict[str, Counter[str]] = {}
    for variant in variants:
        for cell in variant["cells"]:
            per_gpu.setdefault(cell["compute_capability"], Counter())[cell["verdict"]] += 1
    unread = sum(1 for v in variants if v["problem"])
    shown = "; ".join(
        f"{cc}: " + " ".join(f"{k} {n}" for k, n in sorted(c.items())) for cc, c in per_gpu.items()
    )
    return (f"{len(package['releases'])} releases ({', '.join(package['releases'])}), "
            f"{len(variants)} variants, {unread} unread; {shown}")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("packages", nargs="*", default=list(PACKAGES))
    parser.add_argument("--gpu", action="append")
    parser.add_argument("--versions", type=int, default=5)
    parser.add_argument("--out", default=tempfile.mkdtemp(prefix="archgap-matrix-"))
    parser.add_argument("--index-url")
    args = parser.parse_args()
    print(f"site: {args.out}; GPUs {', '.join(args.gpu or GPUS)}; last {args.versions} releases",
          flush=True)  # fmt: skip
    totals = {"first": [0, 0, 0.0], "rerun": [0, 0, 0.0]}
    for package in args.packages:  # each package's rerun right after it: figures as they come
        with tempfile.TemporaryDirectory() as cache:
            doc, seconds = run(package, args, cache)
        fetched, size = doc.get("bytes_fetched", 0), doc.get("wheel_bytes", 0)
        totals["first"][0] += fetched
        totals["first"][1] += size
        totals["first"][2] += seconds
        print(f"{package}: {mb(fetched)} fetched of {mb(size)} ({doc.get('wheels_read', 0)} "
              f"wheels) in {seconds:.1f} s; {describe(doc)}", flush=True)  # fmt: skip
        with tempfile.TemporaryDirectory() as cache:
            doc, seconds = run(package, args, cache)
        totals["rerun"][0] += doc.get("bytes_fetched", 0)
        totals["rerun"][2] += seconds
        fetched, read = mb(doc.get("bytes_fetched", 0)), doc.get("wheels_read", 0)
        print(f"  rerun from the cache: {fetched} fetched, {read} wheels read, in {seconds:.1f} s "
              f"(load {os.getloadavg()[0]:.2f})", flush=True)  # fmt: skip
    first, rerun = totals["first"], totals["rerun"]
    print(f"first run: {mb(int(first[0]))} fetched of {mb(int(first[1]))} of wheels "
          f"({100 * first[0] / max(first[1], 1):.1f} %) in {first[2]:.1f} s; rerun from the cache: "
          f"{mb(int(rerun[0]))} in {rerun[2]:.1f} s")  # fmt: skip
    print("load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
