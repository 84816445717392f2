"""Benchmark: `archgap scan` against a frozen, hand-worked blind set (bench/scan_blind/).

Each set holds packages no test or bench used when it was made, each with the exact versions its
environment had (`pip freeze`), and package x GPU x driver cells worked out by hand from the
artifacts (cuobjdump, an independent fatbin walk, readelf) and NVIDIA's rules, frozen before
archgap was run on them (bench/scan_blind/set1-method.md says how). This script rebuilds each
environment under bench/.data/scan-blind/ (pip install --no-deps of the frozen list: 2.6 GB for
set 1), runs one `archgap scan --python ENV --gpu ... --driver D --json` per driver, and prints
the cells right against the hand-worked verdicts and against the adjudicated ones (a cell
reviewed after the first scoring, with its reason in the set), and each cell that differs.

Not a test: the first-time figure of a set is the one recorded in it (`first_time`); a rerun is
in-sample.

Usage: .venv/bin/python bench/scan_blind.py [SET.json ...] [--show-wrong]   (default: every set)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / ".data" / "scan-blind"
ARCHGAP = [sys.executable, "-m", "archgap"]


def environment(package: dict[str, Any]) -> Path:
    """The package's environment, as frozen: built once."""
    venv = DATA / f"venv-{package['package']}-{package['version']}"
    if not (venv / ".complete").exists():
        subprocess.run(["python3.11", "-m", "venv", "--without-pip", str(venv)], check=True)
        pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
        subprocess.run(
            [*pip, "--python", str(venv / "bin" / "python"), "install", "--no-deps",
             "--only-binary=:all:", *package["install"]],
            check=True,
        )  # fmt: skip
        (venv / ".complete").touch()
    return venv


def scanned(venv: Path, gpus: list[str], driver: str) -> dict[tuple[str, str], str]:
    """(package, GPU) -> archgap's verdict, from one scan of the environment."""
    argv = [*ARCHGAP, "scan", "--python", str(venv / "bin" / "python"), "--driver", driver]
    for gpu in gpus:
        argv += ["--gpu", gpu]
    done = subprocess.run([*argv, "--json"], capture_output=True, text=True)
    doc = json.loads(done.stdout)
    return {(p["package"].lower(), p["gpu"]): p["verdict"] for p in doc["packages"]}


NO_ROW = "no-kernels"  # a package that carries no device code has no row in the scan


def score(path: Path, show_wrong: bool) -> None:
    """Print one set's figures."""
    blind = json.loads(path.read_text())
    rows = []
    for package in blind["packages"]:
        venv = environment(package)
        for driver in blind["drivers"]:
            verdicts = scanned(venv, blind["gpus"], driver)
            for cell in (c for c in package["cells"] if c["driver"] == driver):
                verdict = verdicts.get((package["package"].lower(), cell["gpu"]), NO_ROW)
                judged = cell.get("adjudicated", {}).get("verdict", cell["verdict"])
                rows.append((package["package"], cell, verdict, judged))
    hand = sum(got == cell["verdict"] for _, cell, got, _ in rows)
    adjudicated = sum(got == judged for _, _, got, judged in rows)
    first = blind["first_time"]
    print(f"{path.name}: {len(rows)} cells, {len(blind['packages'])} packages")
    print(f"  first time ({first['commit']}): {first['right']}/{first['cells']} right")
    print(f"  now, against the hand-worked verdicts: {hand}/{len(rows)}")
    print(f"  now, against the adjudicated ones:     {adjudicated}/{len(rows)}")
    for name in dict.fromkeys(p for p, *_ in rows):
        mine = [r for r in rows if r[0] == name]
        print(f"    {name:28} {sum(got == judged for _, _, got, judged in mine)}/{len(mine)}")
    wrong = Counter((judged, got) for _, _, got, judged in rows if got != judged)
    print("  differences (expected -> archgap):", dict(wrong) or "none")
    for name, cell, got, judged in rows if show_wrong else ():
        if got != judged:
            where = f"{name} {cell['gpu']} {cell['driver']}"
            print(f"    {where}: {judged} -> {got}: {cell['why']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sets", nargs="*", type=Path, help="sets to score (default: every set)")
    parser.add_argument("--show-wrong", action="store_true", help="each cell that differs")
    args = parser.parse_args()
    for path in args.sets or sorted((ROOT / "bench" / "scan_blind").glob("set*.json")):
        score(path, args.show_wrong)
    return 0


if __name__ == "__main__":
    sys.exit(main())
