"""Real builds with the machine's nvcc 13.0 for tests that compile what they check.

Outputs are cached under tests/.artifacts/nvcc/ by a hash of the nvcc banner, the source and the
command line, so a second run of the suite compiles nothing; builds of one test module run in
parallel (nvcc spends most of its time waiting on its own child processes).
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

from tests.helpers import FIXTURES, ROOT

NVCC = Path("/usr/local/cuda-13.0/bin/nvcc")
ARTIFACTS = ROOT / "tests" / ".artifacts" / "nvcc"
KERNEL = FIXTURES / "cuda" / "k.cu"


@cache
def nvcc_banner() -> str:
    return subprocess.run(
        [str(NVCC), "--version"], capture_output=True, text=True, check=True, timeout=60
    ).stdout


def build(flags: Sequence[str], suffix: str, source: Path = KERNEL) -> Path:
    """``nvcc FLAGS -o OUT source``; ``suffix`` picks the output (".so" adds -shared)."""
    shared = ["-shared", "-Xcompiler", "-fPIC", "-cudart", "shared"] if suffix == ".so" else []
    command = [*shared, *flags]
    key = hashlib.sha256(
        "\0".join([nvcc_banner(), source.read_text(), *command]).encode()
    ).hexdigest()[:20]
    out = ARTIFACTS / f"{key}{suffix}"
    if not out.exists():
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(out.name + ".part")
        subprocess.run(
            [str(NVCC), *command, "-o", str(partial), str(source)],
            check=True,
            capture_output=True,
            timeout=300,
        )
        partial.rename(out)
    return out


def build_all(jobs: dict[str, tuple[Sequence[str], str]]) -> dict[str, Path]:
    """Several builds at once: name -> (flags, suffix)."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {
            name: pool.submit(build, flags, suffix) for name, (flags, suffix) in jobs.items()
        }
        return {name: future.result() for name, future in futures.items()}
