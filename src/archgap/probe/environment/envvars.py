"""Which environment variables archgap reads and reports, and how their values are shown.

Only an allowlist of names that steer CUDA toolchains and GPU stacks is ever read from an
environment (a service's, a log's, the probe's own) or reported; anything that looks like a
credential is refused even when its name matches, a value that does not look like what the
variable holds is redacted, and a URL's password is always hidden. Python 3.8 standard library
only (the probe travels).
"""

from __future__ import annotations

import re
from typing import Dict

# Only these variables are ever read from an environment or reported: names that steer CUDA
# toolchains and GPU stacks, exactly (a prefix such as VLLM_ would also take VLLM_PASS), plus
# the documented patterns below. Anything that looks like a credential is refused even if it
# matches, and a value that does not look like what the variable holds is redacted.
ENV_PATH_LISTS = frozenset(("PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "LIBRARY_PATH", "CPATH"))
ENV_PATHS = frozenset(
    (
        "CUDA_HOME", "CUDA_PATH", "CUDA_ROOT", "CUDA_TOOLKIT_ROOT_DIR", "CUDACXX",
        "CUDA_CACHE_PATH", "CONDA_PREFIX", "VIRTUAL_ENV", "HOME", "XDG_CACHE_HOME", "CC", "CXX",
        "NVCC_CCBIN",
        "TORCH_EXTENSIONS_DIR", "TORCH_HOME", "PYTORCH_NVCC",
        "FLASHINFER_CACHE_DIR", "FLASHINFER_WORKSPACE_BASE", "FLASHINFER_CUBIN_DIR",
        "TRITON_PTXAS_PATH", "TRITON_PTXAS_BLACKWELL_PATH", "TRITON_CUOBJDUMP_PATH",
        "TRITON_NVDISASM_PATH", "TRITON_LIBCUDA_PATH", "TRITON_CACHE_DIR", "TRITON_HOME",
        "VLLM_CACHE_ROOT", "VLLM_CUTLASS_SRC_DIR", "VLLM_CONFIG_ROOT",
        "SGLANG_CACHE_DIR", "DG_JIT_CACHE_DIR", "DG_JIT_NVCC_COMPILER", "CUPY_CACHE_DIR",
    )
)  # fmt: skip
ENV_SETTINGS = frozenset(
    (
        "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_FORCE_PTX_JIT", "CUDA_DISABLE_PTX_JIT",
        "CUDA_MODULE_LOADING", "CUDA_CACHE_DISABLE", "CUDA_CACHE_MAXSIZE", "CUDA_VERSION",
        "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "NVIDIA_REQUIRE_CUDA",
        "NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS", "MAX_JOBS", "TORCH_NVCC_FLAGS",
        "FLASHINFER_CUDA_VERSION", "FLASHINFER_JIT_VERBOSE", "FLASHINFER_NVCC_THREADS",
        "TRITON_ALWAYS_COMPILE", "TRITON_DISABLE_LINE_INFO",
        "VLLM_USE_FLASHINFER_SAMPLER", "VLLM_ATTENTION_BACKEND", "VLLM_FA_CMAKE_GPU_ARCHES",
        "VLLM_TARGET_DEVICE", "VLLM_USE_PRECOMPILED", "VLLM_USE_V1",
        "SGLANG_ENABLE_JIT_DEEPGEMM", "SGL_KERNEL_ENABLE_SM90A", "SGL_KERNEL_COMPILE_THREADS",
        "DG_JIT_USE_NVRTC", "DG_JIT_USE_RUNTIME_API", "DG_SKIP_CUDA_BUILD", "DG_FORCE_BUILD",
        "BNB_CUDA_VERSION", "TORCHAO_FORCE_SKIP_LOADING_SO_FILES",
    )
)  # fmt: skip
# Documented patterns: TORCH_CUDA_ARCH_LIST, FLASHINFER_CUDA_ARCH_LIST, any *_CUDA_ARCH_LIST.
ENV_ARCH_LIST = re.compile(r"^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*_CUDA_ARCH(_LIST|S)$")
ENV_ALLOWED_NAMES = ENV_PATH_LISTS | ENV_PATHS | ENV_SETTINGS
ENV_SECRET_MARKERS = (
    "TOKEN", "SECRET", "PASS", "PWD", "KEY", "CRED", "AUTH", "BEARER", "PRIVATE", "COOKIE",
    "SESSION",
)  # fmt: skip
REDACTED = "<redacted>"
# What each kind of value looks like; anything else is replaced by REDACTED.
# A path may hold spaces (WSL's /mnt/c/Program Files): only other whitespace and NUL are odd.
_PATH_VALUE = re.compile(r"^[~./$][^\t\n\r\f\v\0]{0,4095}$")
_ARCH_VALUE = re.compile(r"^[0-9A-Za-z_.;,+ ]{0,512}$")
_SETTING_VALUE = re.compile(r"^[0-9A-Za-z_.,:;=+/ -]{0,256}$")
# A run of letters and digits this long, mixing both, is a key or token, not a setting.
_TOKEN_RUN = re.compile(r"(?=[A-Za-z_-]*[0-9])(?=[0-9_-]*[A-Za-z])[A-Za-z0-9_-]{24,}")
# A URL's password is shown as pip shows it (``redact_auth_from_url``): user:****@host, and a
# lone user name, which is a token, as ****@host.
URL_MASK = "****"
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\"<>]*")


def env_allowed(name: str) -> bool:
    """Whether a variable may be read and reported (never tokens or secrets): an exact name of
    ENV_ALLOWED_NAMES or one matching ENV_ARCH_LIST."""
    upper = name.upper()
    if any(marker in upper for marker in ENV_SECRET_MARKERS):
        return False
    return name in ENV_ALLOWED_NAMES or ENV_ARCH_LIST.match(name) is not None


def plausible_value(name: str, value: str) -> bool:
    """Whether ``value`` looks like what ``name`` holds (a path, a path list, an arch list, a
    short setting); a token pasted into CUDA_PATH does not."""
    if name in ENV_PATH_LISTS:
        return all(not part or _PATH_VALUE.match(part) for part in value.split(":"))
    if name in ENV_PATHS:
        return not value or _PATH_VALUE.match(value) is not None
    if ENV_ARCH_LIST.match(name):
        return _ARCH_VALUE.match(value) is not None
    return _SETTING_VALUE.match(value) is not None and not _TOKEN_RUN.search(value)


def shown_value(name: str, value: str) -> str:
    """``value`` as a file's text (a diff of an env file) may show the setting ``name``: an
    allowed variable's value when it looks right, another's unless its name or value looks like
    a credential; a URL's password is always hidden."""
    if env_allowed(name):
        return value if plausible_value(name, value) else REDACTED
    if any(marker in name.upper() for marker in ENV_SECRET_MARKERS) or _TOKEN_RUN.search(value):
        return REDACTED
    return hide_url_password(value)


def hide_url_password(text: str) -> str:
    """``text`` (a URL, a message, a line of a file) with every URL's password as URL_MASK."""
    return _URL.sub(lambda found: _masked_url(found.group()), text)


def _masked_url(url: str) -> str:
    scheme, _, rest = url.partition("://")
    end = min([i for i in map(rest.find, "/?#") if i >= 0] or [len(rest)])
    authority, tail = rest[:end], rest[end:]
    userinfo, at, hostport = authority.rpartition("@")
    if not at:
        # RFC 3986: the authority ends at the first '/', '?' or '#', so a password holding one
        # unencoded is no userinfo (pip and urllib read "user:pa" as host and port, and the URL
        # fails on its port). A port that is not digits with an '@' further on is such a
        # password: everything up to the last '@' is hidden.
        user, colon, port = authority.partition(":")
        last = tail.rfind("@")
        if not colon or authority.startswith("[") or port.isdigit() or last < 0:
            return url
        userinfo, hostport, tail = user + ":", "", tail[last + 1 :]
    user, colon, _ = userinfo.partition(":")
    shown = user + ":" + URL_MASK if colon else URL_MASK
    return "%s://%s@%s%s" % (scheme, shown, hostport, tail)


def allowlisted(environ: Dict[str, str]) -> Dict[str, str]:
    """The allowed variables of ``environ``; values that do not look right are REDACTED."""
    return {
        k: v if plausible_value(k, v) else REDACTED for k, v in environ.items() if env_allowed(k)
    }
