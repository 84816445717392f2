"""GPUs and the driver: nvidia-smi or NVML (each with a timeout), /proc/driver/nvidia/version.

nvidia-smi blocks when a GPU has fallen off the bus, so every call has a hard timeout; a missing
or failing nvidia-smi is a problem value, not an error. Containers often carry the driver's
``libnvidia-ml.so.1`` (mounted by the NVIDIA container toolkit) but no nvidia-smi: then NVML is
asked directly, through ``ctypes`` in a child interpreter, because an NVML call blocks just like
nvidia-smi does and only a process can be killed at a timeout.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import asdict
from typing import Any, Dict, List, Optional, Tuple

from ..facts import Gpu, GpuFacts, Problem
from .system import System, read_regular

QUERY_FIELDS = "index,name,uuid,compute_cap,driver_version"
NVIDIA_SMI_TIMEOUT = 15.0

NVML_LIBRARY = "libnvidia-ml.so.1"
# Where distributions, CUDA containers (/usr/local/nvidia) and WSL put the driver's NVML.
NVML_LIBRARY_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/local/nvidia/lib64",
    "/usr/lib/wsl/lib",
)

# What the dynamic loader searches for a bare name besides LD_LIBRARY_PATH: its cache of the
# ld.so.conf directories (names NUL-terminated), then its trusted directories (ld.so(8)).
LOADER_CACHE = "/etc/ld.so.cache"
MAX_LOADER_CACHE_BYTES = 16 << 20
LOADER_DEFAULT_DIRS = ("/lib", "/usr/lib", "/lib64")

_CUDA_VERSION = re.compile(r"CUDA Version\s*:\s*([0-9]+\.[0-9]+)")
_KERNEL_MODULE = re.compile(r"Kernel Module\b.*?\s([0-9]+\.[0-9]+(?:\.[0-9]+)*)\s")

# The NVML query, run as `python -I -S -c NVML_QUERY_CODE LIBRARY`. Self-contained on purpose: on a
# remote host the probe package lives in memory only, so the child cannot import it. Python 3.8,
# standard library only. Signatures follow nvml.h: nvmlReturn_t is an int-sized enum (0 = success),
# nvmlDevice_t an opaque pointer; buffer sizes are NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE (80),
# NVML_DEVICE_NAME_V2_BUFFER_SIZE (96) and NVML_DEVICE_UUID_V2_BUFFER_SIZE (96). It prints one JSON
# object: {"load_error"} or {"init_error"}, else {"driver", "cuda", "gpus", "problems"}.
NVML_QUERY_CODE = r"""
import ctypes
import json
import sys


def query(library):
    try:
        nvml = ctypes.CDLL(library)
    except OSError as exc:
        return {"load_error": str(exc)}
    c_int, c_uint, c_void_p = ctypes.c_int, ctypes.c_uint, ctypes.c_void_p
    c_char_p, pointer, byref = ctypes.c_char_p, ctypes.POINTER, ctypes.byref

    def error_text(code):
        try:
            describe = nvml.nvmlErrorString
        except AttributeError:
            return "NVML error %d" % code
        describe.argtypes = [c_int]
        describe.restype = c_char_p
        text = describe(code)
        return text.decode("utf-8", "replace") if text else "NVML error %d" % code

    def call(name, argtypes, *args):
        # None on success, else "name: NVML's error text".
        try:
            function = getattr(nvml, name)
        except AttributeError:
            return "%s: not exported by %s" % (name, library)
        function.argtypes = argtypes
        function.restype = c_int
        code = function(*args)
        return None if code == 0 else "%s: %s" % (name, error_text(code))

    failure = call("nvmlInit_v2", [])
    if failure:
        return {"init_error": failure}
    problems = []
    answer = {"driver": None, "cuda": None, "gpus": [], "problems": problems}
    try:
        text = ctypes.create_string_buffer(80)
        failure = call("nvmlSystemGetDriverVersion", [c_char_p, c_uint], text, 80)
        if failure:
            problems.append(["driver version", failure])
        else:
            answer["driver"] = text.value.decode("utf-8", "replace")
        version = c_int(0)
        failure = call("nvmlSystemGetCudaDriverVersion_v2", [pointer(c_int)], byref(version))
        if failure:
            problems.append(["driver CUDA version", failure])
        else:
            answer["cuda"] = version.value
        count = c_uint(0)
        failure = call("nvmlDeviceGetCount_v2", [pointer(c_uint)], byref(count))
        if failure:
            problems.append(["GPU count", failure])
        for index in range(count.value):
            subject = "GPU %d" % index
            handle = c_void_p()
            failure = call(
                "nvmlDeviceGetHandleByIndex_v2", [c_uint, pointer(c_void_p)], index, byref(handle)
            )
            if failure:
                problems.append([subject, failure])
                continue
            gpu = {"index": index, "name": "", "uuid": "", "cc": None}
            for key, name in (("name", "nvmlDeviceGetName"), ("uuid", "nvmlDeviceGetUUID")):
                text = ctypes.create_string_buffer(96)
                failure = call(name, [c_void_p, c_char_p, c_uint], handle, text, 96)
                if failure:
                    problems.append([subject, failure])
                else:
                    gpu[key] = text.value.decode("utf-8", "replace")
            major, minor = c_int(0), c_int(0)
            failure = call(
                "nvmlDeviceGetCudaComputeCapability",
                [c_void_p, pointer(c_int), pointer(c_int)],
                handle,
                byref(major),
                byref(minor),
            )
            if failure:
                problems.append([subject, failure])
            else:
                gpu["cc"] = [major.value, minor.value]
            answer["gpus"].append(gpu)
    finally:
        call("nvmlShutdown", [])
    return answer


try:
    result = query(sys.argv[1])
except Exception as exc:  # a value for the parent, never a traceback
    result = {"error": "%s: %s" % (type(exc).__name__, exc)}
sys.stdout.write(json.dumps(result))
"""


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


def find_nvml(system: System) -> Optional[str]:
    """The target's ``libnvidia-ml.so.1``: its LD_LIBRARY_PATH, then the usual directories.

    On the real root the bare name is returned as a last resort, so the dynamic loader's own
    cache (ld.so.conf) is searched too; under a test root that would find the host's library.
    Not when that cache is readable and does not name the library: no loader would find it, and
    a child interpreter only to learn so costs 30 ms of CPU (every scan on a machine without a
    GPU driver).
    """
    library_path = system.getenv("LD_LIBRARY_PATH") or ""
    directories = [d for d in library_path.split(":") if d.startswith("/")]
    for directory in directories + list(NVML_LIBRARY_DIRS) + list(LOADER_DEFAULT_DIRS):
        candidate = os.path.join(system.path(directory), NVML_LIBRARY)
        if os.path.isfile(candidate):
            return candidate
    if system.root not in ("", "/"):
        return None
    try:
        cache, cut = read_regular(LOADER_CACHE, MAX_LOADER_CACHE_BYTES)
    except OSError:  # no cache (musl) or unreadable: the loader decides
        return NVML_LIBRARY
    return NVML_LIBRARY if cut or NVML_LIBRARY.encode() + b"\0" in cache else None


def cuda_version_text(version: int) -> str:
    """NVML's CUDA driver version number as text: 13000 -> "13.0", 12080 -> "12.8"."""
    return "%d.%d" % (version // 1000, (version % 1000) // 10)


def _nvml_failure(answer: Dict[str, Any], library: str) -> Optional[Problem]:
    """Why NVML gave no facts: its library did not load or did not initialise; None if it did."""
    if "load_error" in answer:
        if library == NVML_LIBRARY:
            return Problem("nvml", "%s not found" % NVML_LIBRARY)
        return Problem("nvml", "cannot load %s: %s" % (library, answer["load_error"]))
    for key in ("init_error", "error"):
        if key in answer:
            return Problem("nvml", "%s: %s" % (library, answer[key]))
    return None


def _nvml_gpus(rows: List[Any], problems: List[Problem]) -> List[Gpu]:
    """The GPUs of the NVML child's rows; a row it cannot read is a problem."""
    gpus: List[Gpu] = []
    for row in rows:
        try:
            cc = row["cc"]
            capability = "%d.%d" % (cc[0], cc[1]) if cc else ""
            gpus.append(
                Gpu(int(row["index"]), str(row["name"]), str(row["uuid"]), capability, "nvml")
            )
        except (KeyError, TypeError, ValueError, IndexError):
            problems.append(Problem("nvml", "unexpected GPU row: %r" % (row,)))
    return gpus


def parse_nvml_answer(text: str, library: str) -> Tuple[Optional[GpuFacts], List[Problem]]:
    """The JSON the NVML child printed: facts when NVML initialised, and the problems met."""
    try:
        answer = json.loads(text)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        return None, [Problem("nvml", "unexpected answer from the query: %r" % text[:200])]
    failure = _nvml_failure(answer, library)
    if failure is not None:
        return None, [failure]
    problems = [
        Problem("nvml %s" % item[0], str(item[1]))
        for item in answer.get("problems") or []
        if isinstance(item, list) and len(item) == 2
    ]
    gpus = _nvml_gpus(answer.get("gpus") or [], problems)
    driver = answer.get("driver")
    cuda = answer.get("cuda")
    return (
        GpuFacts(
            tuple(gpus),
            driver if isinstance(driver, str) and driver else None,
            cuda_version_text(cuda) if isinstance(cuda, int) and cuda > 0 else None,
            "nvml",
        ),
        problems,
    )


def query_nvml(system: System, timeout: float) -> Tuple[Optional[GpuFacts], List[Problem]]:
    """Ask the driver's NVML in a child interpreter that is killed at the timeout."""
    library = find_nvml(system)
    if library is None:
        return None, [Problem("nvml", "%s not found" % NVML_LIBRARY)]
    if not sys.executable:
        return None, [Problem("nvml", "no Python executable to run the NVML query with")]
    result = system.run([sys.executable, "-I", "-S", "-c", NVML_QUERY_CODE, library], timeout)
    if not result.ok:
        detail = result.stderr.strip().splitlines()
        reason = "%s: query %s%s" % (
            library,
            result.error,
            (": " + detail[-1][:200]) if detail else "",
        )
        return None, [Problem("nvml", reason)]
    return parse_nvml_answer(result.stdout, library)


def query_nvidia_smi(
    system: System, smi: str, timeout: float, proc_driver: Optional[str]
) -> Tuple[Optional[GpuFacts], List[Problem], bool]:
    """nvidia-smi's facts (None when it failed), its problems, and whether it timed out."""
    query = system.run(
        [smi, "--query-gpu=" + QUERY_FIELDS, "--format=csv,noheader,nounits"],
        timeout=timeout,
        vet=True,  # found on a PATH (a service's, with --env-from): run only if none but
    )  # root or this user can change it
    if not query.ok:
        detail = (query.stderr or query.stdout).strip().splitlines()
        reason = "%s%s" % (query.error, (": " + detail[0][:200]) if detail else "")
        timed_out = query.returncode is None and (query.error or "").startswith("timed out")
        return None, [Problem("nvidia-smi", reason)], timed_out
    gpus, smi_driver, problems = parse_query_csv(query.stdout)
    # The CUDA version the driver supports is only in the banner of plain `nvidia-smi`.
    banner = system.run([smi], timeout=timeout, vet=True)
    match = _CUDA_VERSION.search(banner.stdout)
    cuda_version = match.group(1) if match else None
    facts = GpuFacts(tuple(gpus), smi_driver or proc_driver, cuda_version, "nvidia-smi")
    return facts, problems, False


NVIDIA_SMI_MISSING = "not found on PATH"  # a node without GPUs, unlike one whose nvidia-smi fails


def probe_gpus(system: System, timeout: float = NVIDIA_SMI_TIMEOUT) -> GpuFacts:
    """GPUs from nvidia-smi; from NVML when nvidia-smi is missing or fails; else the driver only.

    After nvidia-smi timed out NVML is not asked: nvidia-smi is itself an NVML client, so the
    driver would block the same way and the probe would only wait twice as long.
    """
    problems: List[Problem] = []
    proc_driver = read_proc_driver_version(system)
    smi = system.which("nvidia-smi")
    smi_timed_out = False
    if smi is None:
        problems.append(Problem("nvidia-smi", NVIDIA_SMI_MISSING))
    else:
        smi_facts, smi_problems, smi_timed_out = query_nvidia_smi(system, smi, timeout, proc_driver)
        problems.extend(smi_problems)
        if smi_facts is not None:
            return GpuFacts(
                smi_facts.gpus,
                smi_facts.driver_version,
                smi_facts.driver_cuda_version,
                smi_facts.source,
                tuple(problems),
            )

    if not smi_timed_out:
        nvml_facts, nvml_problems = query_nvml(system, timeout)
        problems.extend(nvml_problems)
        if nvml_facts is not None:
            return GpuFacts(
                nvml_facts.gpus,
                nvml_facts.driver_version or proc_driver,
                nvml_facts.driver_cuda_version,
                "nvml",
                tuple(problems),
            )

    source = "/proc/driver/nvidia/version" if proc_driver else "none"
    return GpuFacts((), proc_driver, None, source, tuple(problems))


def collect_gpu(system: System, params: Any) -> Dict[str, Any]:
    return asdict(probe_gpus(system))
