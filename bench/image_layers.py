"""Benchmark: `archgap scan oci:LAYOUT` with each layer decompressed once, against a revision that
read the layers twice (tar headers first, then the layers that provide wanted files), on the same
image in the same run.

The image is built in a temporary directory from real parts, as README's example: the
nvidia-curand and nvidia-cuda-runtime wheels of tests/.data installed into a venv
(/opt/venv/lib/python3.12/site-packages, pyvenv.cfg), one gzip'd layer each (--compression).
The revision before (--before, default: main before the change) is taken with `git archive`
into the temporary directory and run from there (PYTHONPATH); this tree's archgap is the after.
Both run the same command, interleaved, after one warm-up each (bytecode written); the median
of --runs wall times is printed with the load average (this machine is shared), and the two
JSON documents' packages and binaries are compared.

Usage: .venv/bin/python bench/image_layers.py [--runs 3] [--before REV] [--compression gzip]
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
from tests.oci_images import Image, Layer, Member, wheel_files, write_layout  # noqa: E402

DATA = ROOT / "tests" / ".data" / "wheels"
SITE = "opt/venv/lib/python3.12/site-packages"
BEFORE = "004578a"  # main before the one-pass reader (headers, then the wanted layers again)
GPUS = ["--gpu", "RTX PRO 6000", "--gpu", "GB10"]


def build(tmp: Path, compression: str) -> Path:
    layers = [Layer({"opt/venv/pyvenv.cfg": b"home = /usr/bin\n"}, compression)]
    for pattern in ("nvidia_curand-*.whl", "nvidia_cuda_runtime-*.whl"):
        wheel = next(iter(DATA.glob(pattern)))
        files: dict[str, Member] = dict(wheel_files(wheel, SITE))
        layers.append(Layer(files, compression))
    return write_layout(tmp / "oci", {"bench": Image(layers)})


def checkout(tmp: Path, revision: str) -> Path:
    """The src/ tree of ``revision``, unpacked into ``tmp``."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", revision, "src"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
    return tmp / "src"


def run(src: Path, target: str) -> tuple[float, dict[str, object]]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    command = [sys.executable, "-m", "archgap", "scan", target, *GPUS, "--json"]
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)}: exit {done.returncode}: {done.stderr.decode()}")
    return seconds, json.loads(done.stdout)


def essentials(doc: dict[str, object]) -> object:
    """What both revisions must agree on: every verdict with its libraries and reasons, the
    files read, the image, the problems and the host-platform findings."""
    keys = ("packages", "files_scanned", "images", "problems")
    found = {key: doc[key] for key in keys}
    platform = doc["platform"]
    assert isinstance(platform, list)
    # the finding's image label is newer than the two-pass revision
    found["platform"] = [{k: v for k, v in f.items() if k != "image"} for f in platform]
    return json.dumps(found, sort_keys=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", default=BEFORE)
    parser.add_argument("--compression", default="gzip", choices=("gzip", "zstd", "none"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="archgap-bench-") as name:
        tmp = Path(name)
        layout = build(tmp, args.compression)
        blobs = sum(p.stat().st_size for p in (layout / "blobs" / "sha256").iterdir())
        trees = {"before": checkout(tmp, args.before), "after": ROOT / "src"}
        target = f"oci:{layout}:bench"
        docs = {which: run(src, target)[1] for which, src in trees.items()}  # warm-up
        if essentials(docs["before"]) != essentials(docs["after"]):
            raise SystemExit("before and after disagree on verdicts or entries")
        print(f"image: 3 {args.compression} layers, {blobs / 2**20:.1f} MiB of blobs")
        print("load average at start: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
        times: dict[str, list[float]] = {which: [] for which in trees}
        for _ in range(args.runs):
            for which, src in trees.items():
                times[which].append(run(src, target)[0])
        for which, found in times.items():
            label = f"{which} ({args.before})" if which == "before" else which
            runs = " ".join(f"{t:.2f}" for t in found)
            print(f"{label:>16}: median {statistics.median(found):.2f} s  (runs: {runs})")
        print("same verdicts, libraries, images and problems: yes")
        print("load average at end: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
