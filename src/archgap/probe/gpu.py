"""GPUs and the driver, from nvidia-smi (with a timeout) and /proc/driver/nvidia/version.

nvidia-smi blocks when a GPU has fallen off the bus, so every call has a hard timeout; a missing
or failing nvidia-smi is a problem value, not an error.
"""

from __future__ import annotations

import re
from dataclasses import asdict
from typing import Any, Dict, List, Optional, Tuple

from .facts import Gpu, GpuFacts, Problem
from .system import System

QUERY_FIELDS = "index,name,uuid,compute_cap,driver_version"
NVIDIA_SMI_TIMEOUT = 15.0

_CUDA_VERSION = re.compile(r"CUDA Version\s*:\s*([0-9]+\.[0-9]+)")
_KERNEL_MODULE = re.compile(r"Kernel Module\b.*?\s([0-9]+\.[0-9]+(?:\.[0-9]+)*)\s")


def parse_query_csv(text: str) -> Tuple[List[Gpu], Optional[str], List[Problem]]:
    """Rows of ``nvidia-smi --query-gpu=QUERY_FIELDS --format=csv,noheader``."""
    gpus: List[Gpu] = []
    drivers: List[str] = []
    problems: List[Problem] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != 5 or not cells[0].isdigit():
            problems.append(Problem("nvidia-smi", "unexpected line: %r" % line[:200]))
            continue
        index, name, uuid, cc, driver = cells
        if not re.match(r"^[0-9]+\.[0-9]+$", cc):
            cc = ""  # "[N/A]" on old drivers: the analysis resolves the name instead
        gpus.append(Gpu(int(index), name, uuid, cc, "nvidia-smi"))
        drivers.append(driver)
    return gpus, (drivers[0] if drivers else None), problems


def read_proc_driver_version(system: System) -> Optional[str]:
    """The kernel module's version from /proc/driver/nvidia/version, if the driver is loaded."""
    try:
        with open(system.path("/proc/driver/nvidia/version"), encoding="utf-8") as f:
            match = _KERNEL_MODULE.search(f.read(4096))
    except OSError:
        return None
    return match.group(1) if match else None


def probe_gpus(system: System, timeout: float = NVIDIA_SMI_TIMEOUT) -> GpuFacts:
    problems: List[Problem] = []
    proc_driver = read_proc_driver_version(system)
    smi = system.which("nvidia-smi")
    if smi is None:
        problems.append(Problem("nvidia-smi", "not found on PATH"))
        source = "/proc/driver/nvidia/version" if proc_driver else "none"
        return GpuFacts((), proc_driver, None, source, tuple(problems))

    query = system.run(
        [smi, "--query-gpu=" + QUERY_FIELDS, "--format=csv,noheader,nounits"],
        timeout=timeout,
    )
    gpus: List[Gpu] = []
    driver = proc_driver
    if query.ok:
        gpus, smi_driver, parse_problems = parse_query_csv(query.stdout)
        problems.extend(parse_problems)
        driver = smi_driver or proc_driver
    else:
        detail = (query.stderr or query.stdout).strip().splitlines()
        problems.append(
            Problem(
                "nvidia-smi", "%s%s" % (query.error, (": " + detail[0][:200]) if detail else "")
            )
        )

    # The CUDA version the driver supports is only in the banner of plain `nvidia-smi`.
    cuda_version = None
    if query.ok:
        banner = system.run([smi], timeout=timeout)
        match = _CUDA_VERSION.search(banner.stdout)
        cuda_version = match.group(1) if match else None
    return GpuFacts(tuple(gpus), driver, cuda_version, "nvidia-smi", tuple(problems))


def collect_gpu(system: System, params: Any) -> Dict[str, Any]:
    return asdict(probe_gpus(system))
