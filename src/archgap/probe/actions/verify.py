"""Probe section "verify": load device code through the CUDA driver and report what it did.

For each GPU (a child interpreter per GPU running ``cuda_child``, killed at the timeout: a wedged
driver blocks) and each library, every fatbin container's entries are offered as the CUDA runtime
picks them: SASS first, the highest target first, until the driver takes one; PTX only when no
SASS loads, through the driver's JIT (its wall time measured). A target the driver refused (no
binary for this GPU, PTX too new) is not offered again in the next containers. Containers
cuobjdump does not list (``listed`` false: loaded by the library itself, on demand) are tried only
when the listed ones load nothing, and only until the first image loads (SASS in any container,
else PTX); bare relocatable cubins (linked at run time with cuLink*/nvJitLink) are
not offered. Nothing here decides what *should* load: that is the scan's prediction, compared on the
analysis side.

An image is one fatbin entry re-wrapped as a one-entry fatbin container (header and payload copied
byte for byte, compressed or not: the driver decompresses), or a bare cubin's bytes. Each module
is unloaded before the next is loaded; no kernel is launched.

Params: ``{"libraries": [{"path", "entries": [{"offset", "kind", "arch", "variant", "size",
"listed", "section"}]}], "gpu_indices": [N...] | null, "timeout": seconds per GPU}``.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

from ..binary.elf import ELF_MAGIC
from ..binary.fatcontainer import CONTAINER_HEADER, CONTAINER_MAGIC, ENTRY_HEADER, ENTRY_KINDS
from ..environment.system import System, spawn, stop_process_group
from . import cuda_child

DEFAULT_GPU_TIMEOUT = 300.0
MAX_IMAGE = 1 << 31  # larger than any fatbin entry seen (the biggest cubins are tens of MB)


class ChildGone(Exception):
    """The child stopped answering: it timed out (``timed_out``) or exited."""

    def __init__(self, reason: str, timed_out: bool) -> None:
        super().__init__(reason)
        self.timed_out = timed_out


def child_source() -> Optional[str]:
    """The source of ``cuda_child``, from its loader (a file here, memory on a remote host)."""
    loader = getattr(cuda_child, "__loader__", None)
    get_source = getattr(loader, "get_source", None)
    try:
        return get_source(cuda_child.__name__) if get_source else None
    except (ImportError, OSError):
        return None


def child_argv(source: str, *args: str) -> List[str]:
    return [sys.executable, "-I", "-S", "-c", source, *args]


def child_env(system: System) -> Dict[str, str]:
    """The target's environment; GPU indices in PCI bus order, as nvidia-smi numbers them; eager
    module loading (with lazy loading, the default since CUDA 12.2, a kernel's code reaches the
    GPU only when it is first used, so a failure would hide until then); and the driver's JIT
    cache off: a JIT is timed from scratch (a first start's cost), and nothing is written to the
    user's ~/.nv/ComputeCache."""
    env = system._child_env()
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    env["CUDA_MODULE_LOADING"] = "EAGER"
    env["CUDA_CACHE_DISABLE"] = "1"
    return env


def image_bytes(fd: int, entry: Dict[str, Any]) -> Tuple[Optional[bytes], str]:
    """The bytes to hand the driver for one entry, or None and why they cannot be read."""
    offset, size = int(entry["offset"]), int(entry.get("size") or 0)
    try:
        head = os.pread(fd, ENTRY_HEADER.size, offset)
        if head[:4] == ELF_MAGIC:
            if not 0 < size <= MAX_IMAGE:
                return None, "bare cubin of unknown size"
            data = os.pread(fd, size, offset)
            return (data, "") if len(data) == size else (None, "truncated cubin")
        if len(head) < ENTRY_HEADER.size:
            return None, "truncated entry header"
        fields = ENTRY_HEADER.unpack(head)
        kind, header_size, payload_size, arch = (
            ENTRY_KINDS.get(fields[0]),
            fields[2],
            fields[3],
            fields[8],
        )
        if kind != entry.get("kind") or arch != entry.get("arch"):
            return None, "the entry at 0x%x changed since it was read" % offset
        length = header_size + payload_size
        if not ENTRY_HEADER.size <= header_size <= 4096 or length > MAX_IMAGE:
            return None, "invalid entry header at 0x%x" % offset
        data = os.pread(fd, length, offset)
    except OSError as exc:
        return None, (exc.strerror or str(exc)).lower()
    if len(data) != length:
        return None, "truncated entry at 0x%x" % offset
    return CONTAINER_HEADER.pack(CONTAINER_MAGIC, 1, CONTAINER_HEADER.size, length) + data, ""


class Child:
    """One ``cuda_child serve INDEX`` process and its deadline."""

    def __init__(self, argv: List[str], env: Dict[str, str], deadline: float) -> None:
        self.deadline = deadline
        self.proc = spawn(argv, env, stdin=True)
        self.pending = b""

    def answer(self) -> Dict[str, Any]:
        """The child's next JSON line, waiting until the deadline at most."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.pending:
            left = self.deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise ChildGone("no answer from the driver", True)
            chunk = os.read(fd, 65536)
            if not chunk:
                raise ChildGone("the loader exited (status %s)" % self.proc.poll(), False)
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        try:
            value = json.loads(line.decode("utf-8", "replace"))
        except ValueError:
            value = None
        if not isinstance(value, dict):
            raise ChildGone("unexpected answer from the loader: %r" % line[:200], False)
        return value

    def load(self, image: bytes) -> Dict[str, Any]:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(b'{"size": %d}\n' % len(image))
            self.proc.stdin.write(image)
            self.proc.stdin.flush()
        except OSError:
            raise ChildGone("the loader exited (status %s)" % self.proc.poll(), False) from None
        return self.answer()

    def close(self) -> None:
        """Ask the child to end (it releases the context); kill its group if it does not."""
        proc = self.proc
        left = self.deadline - time.monotonic()
        if proc.poll() is None and left > 0:
            try:
                assert proc.stdin is not None
                proc.stdin.write(b"\n")
                proc.stdin.flush()
                proc.wait(timeout=max(0.1, min(5.0, left)))
            except (OSError, subprocess.TimeoutExpired):
                pass
        if proc.poll() is None:
            stop_process_group(proc)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


def _label(entry: Dict[str, Any]) -> str:
    kind = "PTX" if entry["kind"] == "ptx" else "SASS"
    prefix = "compute_" if entry["kind"] == "ptx" else "sm_"
    return "%s%d%s %s in %s at 0x%x" % (
        prefix, entry["arch"], entry.get("variant") or "", kind,
        entry.get("section") or "file", entry["offset"],
    )  # fmt: skip


def _target(entry: Dict[str, Any]) -> str:
    return _label(entry).split(" ")[0]


# Answers that say "not this image on this GPU": the same for every image of that target (and,
# for PTX, that ISA version), so each target is offered once. Any other error is a failure.
REFUSALS = ("CUDA_ERROR_NO_BINARY_FOR_GPU", "CUDA_ERROR_UNSUPPORTED_PTX_VERSION")


def _preference(entry: Dict[str, Any]) -> Tuple[bool, int, str]:
    """The order the driver prefers: SASS before PTX, the highest target first."""
    return (entry["kind"] != "sass", -int(entry["arch"]), str(entry.get("variant") or ""))


def containers(fd: int, entries: List[Dict[str, Any]]) -> List[List[Dict[str, Any]]]:
    """Entries by the fatbin container that holds them (what the runtime registers and the
    driver chooses from): a container's entries lie back to back, each ending where the next
    begins; a bare cubin is a container of its own."""
    groups: List[List[Dict[str, Any]]] = []
    end = -1
    for entry in sorted(entries, key=lambda e: int(e["offset"])):
        offset = int(entry["offset"])
        try:
            head = os.pread(fd, ENTRY_HEADER.size, offset)
        except OSError:
            head = b""
        if head[:4] == ELF_MAGIC or len(head) < ENTRY_HEADER.size:
            groups.append([entry])
            end = -1
            continue
        fields = ENTRY_HEADER.unpack(head)
        if offset == end and groups:
            groups[-1].append(entry)
        else:
            groups.append([entry])
        end = offset + fields[2] + fields[3]
    return groups


def _attempt(entry: Dict[str, Any], answer: Dict[str, Any]) -> Dict[str, Any]:
    return {
        "image": _label(entry),
        "ok": bool(answer.get("ok")),
        "error": answer.get("error"),
        "error_log": str(answer.get("error_log") or ""),
        "info_log": str(answer.get("info_log") or ""),
        "seconds": float(answer.get("seconds") or 0.0),
        "jit_ms": answer.get("jit_ms"),
        "functions": answer.get("functions"),
    }


class _Library:
    """What loading one library on one GPU gave."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.attempts: List[Dict[str, Any]] = []  # refusals, one per target
        self.failures: List[Dict[str, Any]] = []  # images that failed otherwise
        self.loaded: List[Tuple[Dict[str, Any], Dict[str, Any]]] = []  # (entry, answer)
        self.refused: Dict[Tuple[str, Any], Dict[str, Any]] = {}
        self.empty = 0  # containers with nothing this GPU takes

    def result(self, outcome: str, reason: str, **details: Any) -> Dict[str, Any]:
        row: Dict[str, Any] = dict(
            path=self.path, outcome=outcome, reason=reason, target=None, tier=None, images=0,
            loaded=0, empty=0, functions=None, seconds=0.0, jit_ms=None,
        )  # fmt: skip
        row.update(details)
        row["attempts"] = self.attempts
        row["failures"] = self.failures
        return row

    def container(self, child: Child, fd: int, entries: List[Dict[str, Any]]) -> None:
        """Offer a container's entries in the driver's order until one loads."""
        if not self.offer(child, fd, entries):
            self.empty += 1

    def first_load(self, child: Child, fd: int, groups: List[List[Dict[str, Any]]]) -> None:
        """Self-loaded code until the first image loads: SASS in every container, then PTX.
        Its library loads such code on demand, never all of it: cuFFT's .ldata holds ~24,000
        entries, 7,000 containers of them PTX only, and a JIT of each outlasted a 300 s timeout
        on an H200. The first SASS that loads settles native; else the first PTX settles jit."""
        for kind in ("sass", "ptx"):
            for group in groups:
                if self.offer(child, fd, [e for e in group if e["kind"] == kind]):
                    return

    def offer(self, child: Child, fd: int, entries: List[Dict[str, Any]]) -> bool:
        """Whether one of ``entries``, offered in the driver's order, loaded."""
        for entry in sorted(entries, key=_preference):
            key = (_target(entry), entry.get("ptx_isa") if entry["kind"] == "ptx" else None)
            if key in self.refused:
                continue
            row = _load_entry(child, fd, entry)
            if row["ok"]:
                self.loaded.append((entry, row))
                return True
            name = (row.get("error") or {}).get("name")
            if name in REFUSALS:
                self.refused[key] = row
                self.attempts.append(row)
            else:
                self.failures.append(row)
        return False

    def outcome(self, tier: str, offered: int) -> Dict[str, Any]:
        """native: a container loaded SASS; jit: only PTX loaded; none: nothing loaded."""
        if not self.loaded:
            errors = _errors(self.attempts + self.failures)
            return self.result("none", "no image loaded: %s" % errors, images=offered)
        ptx_only = all(entry["kind"] == "ptx" for entry, _ in self.loaded)
        targets = list(dict.fromkeys(_target(entry) for entry, _ in self.loaded))
        rows = [row for _, row in self.loaded]
        counts = [r["functions"] for r in rows if isinstance(r["functions"], int)]
        jit = [float(r["jit_ms"] or 0) for e, r in self.loaded if e["kind"] == "ptx"]
        return self.result(
            "jit" if ptx_only else "native",
            "%s loaded%s" % (", ".join(targets), " through the JIT" if ptx_only else ""),
            target=", ".join(targets),
            tier=tier,
            images=offered,
            loaded=len(rows),
            empty=self.empty,
            functions=sum(counts) if counts else None,
            seconds=round(sum(r["seconds"] for r in rows), 6),
            jit_ms=round(sum(jit), 3) if jit else None,
        )


def _load_entry(child: Child, fd: int, entry: Dict[str, Any]) -> Dict[str, Any]:
    image, why = image_bytes(fd, entry)
    if image is None:
        return {"image": _label(entry), "ok": False, "error": None, "error_log": why,
                "info_log": "", "seconds": 0.0, "jit_ms": None, "functions": None}  # fmt: skip
    return _attempt(entry, child.load(image))


def _relocatable(fd: int, entry: Dict[str, Any]) -> bool:
    """Whether the entry is a bare relocatable cubin (ET_REL): such images are linked at run
    time (cuLink*, nvJitLink), never loaded as they are, so they are not offered."""
    try:
        head = os.pread(fd, 18, int(entry["offset"]))
    except OSError:
        return False
    return head[:4] == ELF_MAGIC and len(head) == 18 and head[16:18] == b"\x01\x00"


def verify_library(child: Child, library: Dict[str, Any]) -> Dict[str, Any]:
    """Load one library's device code as the runtime picks it (see the module doc)."""
    path = str(library.get("path"))
    lib = _Library(path)
    entries = [e for e in library.get("entries") or [] if e.get("kind") in ("sass", "ptx")]
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        return lib.result("unknown", "cannot open: %s" % (exc.strerror or str(exc)).lower())
    try:
        outcome, offered = _load_tiers(child, lib, fd, entries)
    finally:
        os.close(fd)
    if outcome is not None:
        return outcome
    if not lib.attempts and not lib.failures:
        return lib.result("unknown", "no device code to load")
    return lib.outcome("", offered)


def _load_tiers(
    child: Child, lib: _Library, fd: int, entries: List[Dict[str, Any]]
) -> Tuple[Optional[Dict[str, Any]], int]:
    """Load the listed containers (every one, as the runtime registers them), then the hidden
    ones (the first that loads): (the outcome of the tier that loaded, or None; the containers
    offered)."""
    offered = 0
    entries = [e for e in entries if not _relocatable(fd, e)]
    for tier, listed in (("listed", True), ("hidden", False)):
        groups = containers(fd, [e for e in entries if bool(e.get("listed", True)) == listed])
        offered += len(groups)
        if listed:
            for group in groups:
                lib.container(child, fd, group)
        else:
            lib.first_load(child, fd, groups)
        if lib.loaded:
            return lib.outcome(tier, len(groups)), offered
    return None, offered


def _errors(attempts: List[Dict[str, Any]]) -> str:
    names: List[str] = []
    for attempt in attempts:
        error = attempt.get("error") or {}
        name = error.get("name") or attempt.get("error_log") or "not loaded"
        if name not in names:
            names.append(name)
    return ", ".join(names)


def verify_gpu(
    source: str, env: Dict[str, str], device: Dict[str, Any], libraries: List[Any], timeout: float
) -> Dict[str, Any]:
    """Every library on one GPU, in a child process that is killed at ``timeout`` seconds."""
    started = time.monotonic()
    gpu: Dict[str, Any] = dict(device, status="ok", error=None, libraries=[])
    child = Child(child_argv(source, "serve", str(device["index"])), env, started + timeout)
    current = None
    try:
        ready = child.answer()
        if "ready" not in ready:
            gpu.update(status="failed", error=ready.get("error"))
            return gpu
        for library in libraries:
            current = str(library.get("path"))
            gpu["libraries"].append(verify_library(child, library))
        current = None
    except ChildGone as exc:
        status = "timed out" if exc.timed_out else "failed"
        where = "loading %s" % current if current else "starting on the GPU"
        text = "%s after %.1f s while %s: %s" % (status, time.monotonic() - started, where, exc)
        gpu.update(
            status=status, error={"call": "child", "code": None, "name": status, "text": text}
        )
        done = {row["path"] for row in gpu["libraries"]}
        for library in libraries:
            path = str(library.get("path"))
            if path not in done:
                reason = text if path == current else "not tried: the driver stopped answering"
                gpu["libraries"].append(_Library(path).result("unknown", reason))
    finally:
        child.close()
        gpu["seconds"] = round(time.monotonic() - started, 3)
    return gpu


def enumerate_devices(system: System, source: str, timeout: float) -> Dict[str, Any]:
    """The driver's answer to ``cuda_child devices`` (an "error" on failure)."""
    result = system.run(child_argv(source, "devices"), timeout)
    if not result.ok:
        text = "device query %s%s" % (
            result.error,
            (": " + result.stderr.strip()[-200:]) if result.stderr.strip() else "",
        )
        return {"error": {"call": "child", "code": None, "name": "FAILED", "text": text}}
    try:
        answer = json.loads(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        answer = None
    if not isinstance(answer, dict):
        text = "unexpected answer from the device query: %r" % result.stdout[:200]
        return {"error": {"call": "child", "code": None, "name": "FAILED", "text": text}}
    return answer


def choose_devices(
    devices: List[Dict[str, Any]], indices: Optional[List[int]]
) -> Tuple[List[Dict[str, Any]], List[List[str]]]:
    """The GPUs to load on: those named, else one per distinct model and compute capability."""
    if indices:
        by_index = {d["index"]: d for d in devices}
        chosen = [by_index[i] for i in indices if i in by_index]
        problems = [
            ["GPU %d" % i, "the driver has no GPU %d" % i] for i in indices if i not in by_index
        ]
        return chosen, problems
    seen = set()
    chosen = []
    for device in devices:
        key = (device.get("name"), device.get("compute_capability"))
        if key not in seen:
            seen.add(key)
            chosen.append(device)
    return chosen, []


def collect_verify(system: System, params: Dict[str, Any]) -> Dict[str, Any]:
    """The section: the driver's devices, then every library loaded on each chosen GPU."""
    timeout = float(params.get("timeout") or DEFAULT_GPU_TIMEOUT)
    answer: Dict[str, Any] = {"library": cuda_child.LIBRARY, "driver_version": None, "devices": [],
                              "error": None, "gpus": [], "problems": []}  # fmt: skip
    source = child_source()
    if source is None:
        answer["error"] = {"call": "probe", "code": None, "name": "NO_SOURCE",
                           "text": "the loader's source is not available"}  # fmt: skip
        return answer
    found = enumerate_devices(system, source, timeout)
    if found.get("error"):
        answer["error"] = found["error"]
        return answer
    answer["driver_version"] = found.get("driver_version")
    answer["devices"] = found.get("devices") or []
    answer["problems"] = list(found.get("problems") or [])
    indices = params.get("gpu_indices")
    chosen, problems = choose_devices(answer["devices"], [int(i) for i in indices or []])
    answer["problems"] += problems
    env = child_env(system)
    libraries = list(params.get("libraries") or [])
    answer["gpus"] = [verify_gpu(source, env, device, libraries, timeout) for device in chosen]
    return answer
