"""Benchmark: the memory peak of `archgap kernels WHEEL` while it streams one >= 800 MB member.

No wheel on the package index has a native member that large (the largest here: cuBLASLt, 517
MiB), so one is built in a temporary directory from real parts: the nvcc-built
tests/fixtures/cuda/bin/libmix.so (its .nv_fatbin: SASS and PTX cuobjdump lists), with a
non-loaded section (.pad) appended by objcopy that holds copies of NVIDIA's libcurand.so.10
(from the nvidia-curand wheel in tests/.data) up to --mib MiB, so the member compresses like a
real CUDA library. It is zipped (deflate) into a wheel with METADATA and RECORD.

Prints: the member's size, archgap's peak RSS (ru_maxrss of the whole process) for `kernels` and
`kernels --deep`, the wall time, whether the listing equals cuobjdump's on the same ELF, and the
load average (this machine is shared).

Usage: .venv/bin/python bench/wheel_member_memory.py [--mib 820] [--keep DIR]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / ".data"
ARCHGAP = str(Path(sys.executable).parent / "archgap")
LIBMIX = ROOT / "tests" / "fixtures" / "cuda" / "bin" / "libmix.so"
MEMBER = "bigpkg/lib/libbig.so"

sys.path.insert(0, str(Path(__file__).resolve().parent))
from wheel_vs_unzip import LINE, cuobjdump  # noqa: E402


def build(tmp: Path, mib: int) -> tuple[Path, Path]:
    """(the wheel, the ELF it holds); kept ones are reused (--keep)."""
    elf = tmp / "libbig.so"
    wheel = tmp / "bigpkg-1.0-py3-none-manylinux_2_17_x86_64.whl"
    if wheel.exists() and elf.exists():
        return wheel, elf
    libs = DATA.glob("venv-nvidia-curand-*/lib/python*/site-packages/nvidia/*/lib/libcurand.so.*")
    curand = next(iter(libs))
    pad = tmp / "pad.bin"
    with pad.open("wb") as out, curand.open("rb") as real:
        chunk = real.read()
        while out.tell() < mib << 20:
            out.write(chunk[: (mib << 20) - out.tell()])
    subprocess.run(
        ["objcopy", "--add-section", f".pad={pad}", "--set-section-flags", ".pad=contents,readonly",
         str(LIBMIX), str(elf)],
        check=True,
    )  # fmt: skip
    pad.unlink()
    metadata = b"Metadata-Version: 2.1\nName: bigpkg\nVersion: 1.0\n"
    digest = base64.urlsafe_b64encode(hashlib.sha256(elf.read_bytes()).digest()).rstrip(b"=")
    record = (
        f"{MEMBER},sha256={digest.decode()},{elf.stat().st_size}\n"
        "bigpkg-1.0.dist-info/METADATA,,\nbigpkg-1.0.dist-info/RECORD,,\n"
    )
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        zf.write(elf, MEMBER)
        zf.writestr("bigpkg-1.0.dist-info/METADATA", metadata)
        zf.writestr("bigpkg-1.0.dist-info/RECORD", record)
    return wheel, elf


def run(wheel: Path, deep: bool) -> tuple[float, float, int, list[str], str | None]:
    started = time.perf_counter()
    command = [ARCHGAP, "kernels", str(wheel), "--json"] + (["--deep"] if deep else [])
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, _, usage = os.wait4(proc.pid, 0)  # the child's own peak, before Popen reaps it
    wall = time.perf_counter() - started
    doc = json.loads(out)
    [member] = doc["files"]
    listed = [e for e in member["entries"] if e["listed"]]
    names = [f"sm_{e['arch']}{e['variant'] if e['variant'] == 'a' else ''}"
             for e in listed if e["kind"] == "sass"]  # fmt: skip
    names += [f"sm_{e['arch']}{e['variant']}" for e in listed if e["kind"] == "ptx"]
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, names, member.get("error")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=820, help="size of the padding (MiB)")
    parser.add_argument("--keep", help="build in this directory and keep it")
    args = parser.parse_args()
    tmp = Path(args.keep or tempfile.mkdtemp(prefix="archgap-bigmember-"))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        started = time.perf_counter()
        wheel, elf = build(tmp, args.mib)
        size = elf.stat().st_size
        built = time.perf_counter() - started
        print(f"member {MEMBER}: {size / 2**20:.0f} MiB ({size:,} bytes); wheel "
              f"{wheel.stat().st_size / 2**20:.0f} MiB; built in {built:.0f} s")  # fmt: skip
        tool = cuobjdump()
        theirs = []
        for option in ("--list-elf", "--list-ptx"):
            proc = subprocess.run([tool, option, str(elf)], capture_output=True, text=True)
            theirs += [m.group(2) for m in map(LINE.match, proc.stdout.splitlines()) if m]
        for deep in (False, True):
            wall, cpu, rss, names, error = run(wheel, deep)
            label = "kernels --deep WHEEL" if deep else "kernels WHEEL       "
            agree = "n/a (--deep lists more)" if deep else ("yes" if names == theirs else "NO")
            print(f"{label}: {wall:6.1f} s ({cpu:.1f} s CPU), peak RSS {rss / 1024:6.0f} MiB "
                  f"({100 * rss * 1024 / size:.0f}% of the member); cuobjdump agrees: {agree}"
                  + (f"; error: {error}" if error else ""))  # fmt: skip
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    print("load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
