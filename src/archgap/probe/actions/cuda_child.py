"""The CUDA driver API through ctypes, in a child process that can be killed (``verify``).

Run as ``python -I -S -c <this module's source> devices`` (the GPUs the driver sees: one JSON
line) or ``... serve INDEX`` (loads device code on GPU INDEX, one image at a time, read from
stdin). Self-contained on purpose: on a remote host the probe package lives in memory only, so
this file imports nothing but the standard library (Python 3.8), and nothing from the package.

``serve`` protocol: one JSON line ``{"ready": ...}`` or ``{"error": ...}`` once the GPU's primary
context is current; then per request a JSON line ``{"size": N}`` followed by N bytes of image (a
fatbin container or a cubin), answered by one JSON line: the result of cuModuleLoadDataEx (error
name and text, JIT logs, wall time, the JIT's own wall time) and, once loaded, the number of
functions, after which the module is unloaded before the next request. A kernel is never
launched and no memory is allocated beyond the module. An empty line or EOF ends the child.
"""

from __future__ import annotations

import ctypes
import json
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

LIBRARY = "libcuda.so.1"
# cuda.h: CUdevice_attribute and CUjit_option values.
COMPUTE_CAPABILITY_MAJOR = 75
COMPUTE_CAPABILITY_MINOR = 76
CU_JIT_WALL_TIME = 2
CU_JIT_INFO_LOG_BUFFER = 3
CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4
CU_JIT_ERROR_LOG_BUFFER = 5
CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6
CU_JIT_LOG_VERBOSE = 12
LOG_BYTES = 16384

c_int, c_uint, c_void_p, c_char_p = ctypes.c_int, ctypes.c_uint, ctypes.c_void_p, ctypes.c_char_p
byref, POINTER = ctypes.byref, ctypes.POINTER


class DriverError(Exception):
    """A driver call that did not return CUDA_SUCCESS: the call, the code, its name and text."""

    def __init__(self, call: str, code: int, name: str, text: str) -> None:
        super().__init__("%s: %s (%d): %s" % (call, name, code, text))
        self.call, self.code, self.name, self.text = call, code, name, text

    def as_dict(self) -> Dict[str, Any]:
        return {"call": self.call, "code": self.code, "name": self.name, "text": self.text}


class Driver:
    """``libcuda.so.1`` with the signatures of cuda.h (CUresult an int-sized enum)."""

    def __init__(self, library: str = LIBRARY) -> None:
        self.lib = ctypes.CDLL(library)

    def describe(self, code: int) -> Tuple[str, str]:
        """cuGetErrorName / cuGetErrorString of ``code``."""
        found = []
        for function in ("cuGetErrorName", "cuGetErrorString"):
            text = c_char_p()
            try:
                call = getattr(self.lib, function)
            except AttributeError:
                call = None
            if call is not None:
                call.argtypes = [c_int, POINTER(c_char_p)]
                call.restype = c_int
            ok = call is not None and call(code, byref(text)) == 0 and text.value
            found.append(text.value.decode("utf-8", "replace") if ok and text.value else "")
        return found[0] or "CUresult %d" % code, found[1]

    def function(self, name: str, argtypes: List[Any]) -> Any:
        """The entry point ``name`` (None when this driver does not export it)."""
        try:
            function = getattr(self.lib, name)
        except AttributeError:
            return None
        function.argtypes = argtypes
        function.restype = c_int
        return function

    def call(self, name: str, argtypes: List[Any], *args: Any) -> None:
        function = self.function(name, argtypes)
        if function is None:
            raise DriverError(name, -1, "NOT_EXPORTED", "%s does not export %s" % (LIBRARY, name))
        code = function(*args)
        if code != 0:
            raise DriverError(name, code, *self.describe(code))


def open_driver() -> Tuple[Optional[Driver], Optional[Dict[str, Any]]]:
    """The driver after cuInit(0), or the reason there is none."""
    try:
        driver = Driver()
    except OSError as exc:
        return None, {"call": "dlopen", "code": None, "name": "CANNOT_LOAD", "text": str(exc)}
    try:
        driver.call("cuInit", [c_uint], 0)
    except DriverError as exc:
        return None, exc.as_dict()
    return driver, None


def device_info(driver: Driver, index: int) -> Dict[str, Any]:
    device = c_int()
    driver.call("cuDeviceGet", [POINTER(c_int), c_int], byref(device), index)
    name = ctypes.create_string_buffer(256)
    driver.call("cuDeviceGetName", [c_char_p, c_int, c_int], name, 256, device)
    cc = []
    for attribute in (COMPUTE_CAPABILITY_MAJOR, COMPUTE_CAPABILITY_MINOR):
        value = c_int()
        argtypes = [POINTER(c_int), c_int, c_int]
        driver.call("cuDeviceGetAttribute", argtypes, byref(value), attribute, device)
        cc.append(value.value)
    return {
        "index": index,
        "device": device.value,
        "name": name.value.decode("utf-8", "replace"),
        "compute_capability": "%d.%d" % (cc[0], cc[1]),
    }


def devices() -> Dict[str, Any]:
    """The driver's CUDA version and every GPU it enumerates (name, compute capability)."""
    driver, failure = open_driver()
    if driver is None:
        return {"error": failure}
    answer: Dict[str, Any] = {"driver_version": None, "devices": [], "problems": []}
    version = c_int()
    try:
        driver.call("cuDriverGetVersion", [POINTER(c_int)], byref(version))
        answer["driver_version"] = version.value
        count = c_int()
        driver.call("cuDeviceGetCount", [POINTER(c_int)], byref(count))
    except DriverError as exc:
        return {"error": exc.as_dict()}
    for index in range(count.value):
        try:
            answer["devices"].append(device_info(driver, index))
        except DriverError as exc:
            answer["problems"].append(["GPU %d" % index, str(exc)])
    return answer


def _text(buffer: Any) -> str:
    return bytes(buffer.value).decode("utf-8", "replace").strip()


def load(driver: Driver, image: bytes) -> Dict[str, Any]:
    """cuModuleLoadDataEx of one image with the JIT logs, then the function count and unload."""
    info = ctypes.create_string_buffer(LOG_BYTES)
    error = ctypes.create_string_buffer(LOG_BYTES)
    options = [
        CU_JIT_INFO_LOG_BUFFER,
        CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
        CU_JIT_ERROR_LOG_BUFFER,
        CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        CU_JIT_LOG_VERBOSE,
        CU_JIT_WALL_TIME,
    ]
    values = (c_void_p * len(options))(
        ctypes.cast(info, c_void_p), LOG_BYTES, ctypes.cast(error, c_void_p), LOG_BYTES, 1, 0
    )
    keys = (c_int * len(options))(*options)
    data = ctypes.create_string_buffer(image, len(image))
    module = c_void_p()
    argtypes = [POINTER(c_void_p), c_void_p, c_uint, POINTER(c_int), POINTER(c_void_p)]
    started = time.monotonic()
    result: Dict[str, Any] = {"ok": False}
    try:
        driver.call("cuModuleLoadDataEx", argtypes, byref(module), data, len(options), keys, values)
        result["ok"] = True
    except DriverError as exc:
        result["error"] = exc.as_dict()
    result["seconds"] = round(time.monotonic() - started, 6)
    # CU_JIT_WALL_TIME: the driver writes a float (milliseconds) into the option's value slot.
    slot = options.index(CU_JIT_WALL_TIME) * ctypes.sizeof(c_void_p)
    result["jit_ms"] = round(float(ctypes.c_float.from_buffer(values, slot).value), 3)
    result["info_log"] = _text(info)
    result["error_log"] = _text(error)
    if result["ok"]:
        count = c_uint()
        counter = driver.function("cuModuleGetFunctionCount", [POINTER(c_uint), c_void_p])
        if counter is not None and counter(byref(count), module) == 0:
            result["functions"] = count.value
        try:
            driver.call("cuModuleUnload", [c_void_p], module)
        except DriverError as exc:
            result["unload_error"] = exc.as_dict()
    return result


def _write(stream: Any, value: Dict[str, Any]) -> None:
    stream.write((json.dumps(value) + "\n").encode("utf-8"))
    stream.flush()


def serve(index: int) -> int:
    """Make GPU ``index``'s primary context current, then load the images sent on stdin."""
    out = sys.stdout.buffer
    source = sys.stdin.buffer
    driver, failure = open_driver()
    if driver is None:
        _write(out, {"error": failure})
        return 0
    try:
        info = device_info(driver, index)
        context = c_void_p()
        device = info["device"]
        argtypes = [POINTER(c_void_p), c_int]
        driver.call("cuDevicePrimaryCtxRetain", argtypes, byref(context), device)
        driver.call("cuCtxSetCurrent", [c_void_p], context)
    except DriverError as exc:
        _write(out, {"error": exc.as_dict()})
        return 0
    _write(out, {"ready": info})
    try:
        while True:
            line = source.readline()
            if not line.strip():
                break
            size = int(json.loads(line.decode("utf-8"))["size"])
            image = source.read(size)
            if len(image) != size:
                break
            _write(out, load(driver, image))
    finally:
        unset = driver.function("cuCtxSetCurrent", [c_void_p])
        if unset is not None:
            unset(None)
        release = driver.function("cuDevicePrimaryCtxRelease_v2", [c_int]) or driver.function(
            "cuDevicePrimaryCtxRelease", [c_int]
        )
        if release is not None:
            release(device)
    return 0


def main(argv: List[str]) -> int:
    try:
        if argv[:1] == ["devices"]:
            _write(sys.stdout.buffer, devices())
            return 0
        if argv[:1] == ["serve"] and len(argv) == 2:
            return serve(int(argv[1]))
    except Exception as exc:  # a value for the parent, never a traceback
        failure = {"call": "child", "code": None, "name": type(exc).__name__, "text": str(exc)}
        _write(sys.stdout.buffer, {"error": failure})
        return 0
    sys.stderr.write("usage: devices | serve INDEX\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
