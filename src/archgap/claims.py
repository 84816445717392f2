"""The architectures a build claims (``archgap kernels PATH... --require claimed``).

Each syntax is read as its owner reads it:

- ``TORCH_CUDA_ARCH_LIST`` ("7.5;8.0;8.6+PTX;9.0a", names like "Ampere"): as
  ``torch.utils.cpp_extension._get_cuda_arch_flags`` (torch 2.14.1): spaces are separators, named
  architectures are replaced by their lists, each item must be a supported "X.Y[a]" with an
  optional "+PTX"; "X.Y" is ``-gencode=arch=compute_XY,code=sm_XY`` (SASS), "+PTX" adds
  ``code=compute_XY`` (PTX). Empty or "native" means the GPUs of the build machine: no claim.
- ``CMAKE_CUDA_ARCHITECTURES`` / ``CUDAARCHS`` / a ``CMakeCache.txt`` ("75;80;86-real;90a-virtual"):
  CMake's CUDA_ARCHITECTURES: "-real" is SASS only, "-virtual" PTX only, no suffix both; a false
  value (OFF) adds no flags; "all", "all-major" and "native" depend on the toolkit or the machine.
- a compile database (``compile_commands.json``): nvcc's ``-gencode arch=compute_XY,code=...``
  (``--generate-code``; a code list in brackets or quotes), and ``-arch``/``-code`` with nvcc's
  shorthand (``-arch=sm_XY`` alone is ``-arch=compute_XY -code=sm_XY,compute_XY``).
- ``[tool.archgap]``'s ``require`` (GPU names): each GPU must be served, as ``--require GPU``.

The files are data: they are parsed, never run; one found by looking around the current directory
is read only when it is the user's or root's (config.py's rule), a regular file and not too large.
Pure parsing apart from ``discover``, which reads the environment and those files.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from archgap.errors import UsageError

SASS, PTX, GPU = "sass", "ptx", "gpu"
MAX_BYTES = 64 << 20  # a compile database larger than this is not read
TORCH = "TORCH_CUDA_ARCH_LIST"
CMAKE = "CMAKE_CUDA_ARCHITECTURES"
CUDAARCHS = "CUDAARCHS"  # CMake's environment variable that initialises CMAKE_CUDA_ARCHITECTURES
ENVIRONMENT = (TORCH, CMAKE, CUDAARCHS)
PLACES = ("", "build")  # where CMakeCache.txt and compile_commands.json are looked for

# torch 2.14.1, torch/utils/cpp_extension.py, _get_cuda_arch_flags: combined names first (the
# replacement is textual, in this order), and the supported architectures.
TORCH_NAMED = (
    ("Kepler+Tesla", "3.7"),
    ("Kepler", "3.5+PTX"),
    ("Maxwell+Tegra", "5.3"),
    ("Maxwell", "5.0;5.2+PTX"),
    ("Pascal", "6.0;6.1+PTX"),
    ("Volta+Tegra", "7.2"),
    ("Volta", "7.0+PTX"),
    ("Turing", "7.5+PTX"),
    ("Ampere+Tegra", "8.7"),
    ("Ampere", "8.0;8.6+PTX"),
    ("Ada", "8.9+PTX"),
    ("Hopper", "9.0+PTX"),
    ("Blackwell+Tegra", "11.0"),
    ("Blackwell", "10.0;10.3;12.0;12.1+PTX"),
    ("Rubin", "10.7+PTX"),
)
TORCH_SUPPORTED = frozenset(
    (
        "3.5", "3.7", "5.0", "5.2", "5.3", "6.0", "6.1", "6.2", "7.0", "7.2", "7.5", "8.0", "8.6",
        "8.7", "8.9", "9.0", "9.0a", "10.0", "10.0a", "11.0", "11.0a", "10.3", "10.3a", "10.7",
        "10.7a", "12.0", "12.0a", "12.1", "12.1a",
    )
)  # fmt: skip
_CMAKE_ITEM = re.compile(r"^([0-9]+)([af]?)(-real|-virtual)?$")
_CMAKE_FALSE = frozenset({"0", "OFF", "NO", "FALSE", "N", "IGNORE", "NOTFOUND"})
_CMAKE_SPECIAL = frozenset({"all", "all-major", "native"})
_TARGET = re.compile(r"^(sm|compute|lto)_([0-9]+)([af]?)$")
_CACHE_LINE = re.compile(r'^(?:"([^"]*)"|([^:=]+))(?::[^=]*)?=(.*)$')


@dataclass(frozen=True)
class Claim:
    """One claimed target: SASS ``sm_XY[af]``, PTX ``compute_XY[af]``, or a GPU by name."""

    kind: str  # SASS, PTX or GPU
    arch: int  # the SM number (0 for a GPU)
    variant: str  # "", "a" or "f"
    name: str = ""  # the GPU's name (GPU claims)

    @property
    def target(self) -> str:
        if self.kind == GPU:
            return self.name
        return f"{'compute' if self.kind == PTX else 'sm'}_{self.arch}{self.variant}"


@dataclass(frozen=True)
class VariantClaims:
    """What one PEP 817 variant wheel declares (read by archgap.variant_claims): its label, its
    ``nvidia :: sm_arch`` values and the claims they make."""

    wheel: str  # the wheel's path as given
    label: str
    values: tuple[str, ...]  # "90_real", "120_virtual"
    claims: tuple[Claim, ...]

    @property
    def source(self) -> str:
        values = ", ".join(self.values)
        name = os.path.basename(self.wheel)
        return f"{name} variant {self.label} (variant.json: nvidia :: sm_arch :: {values})"


@dataclass(frozen=True)
class Claims:
    """What a build claims, and where that was read: ``source`` names the variable or file."""

    source: str  # "TORCH_CUDA_ARCH_LIST (environment)", "build/CMakeCache.txt (CMAKE_...)"
    value: str  # the text as given, shortened
    claims: tuple[Claim, ...]
    # the PEP 817 variant wheels among the paths: each wheel's own declaration (variant_claims)
    variants: tuple[VariantClaims, ...] = ()

    def describe(self) -> str:
        return f"{self.source}: {self.value}" if self.value else self.source


class NoClaim(UsageError):
    """A source that says nothing checkable (empty, "native", OFF): discovery goes on."""


def _unique(claims: Iterable[Claim]) -> tuple[Claim, ...]:
    return tuple(dict.fromkeys(claims))


def torch_arch_list(text: str) -> tuple[Claim, ...]:
    """``TORCH_CUDA_ARCH_LIST`` as torch 2.14.1's ``_get_cuda_arch_flags`` reads it."""
    if not text or text == "native":
        raise NoClaim(
            f"{TORCH}={text!r}: torch builds for the GPUs of the build machine (no claim)"
        )
    value = text.replace(" ", ";")
    for named, archs in TORCH_NAMED:
        value = value.replace(named, archs)
    claims: list[Claim] = []
    for item in value.split(";"):
        version, ptx = (item[:-4], True) if item.endswith("+PTX") else (item, False)
        if version not in TORCH_SUPPORTED:
            # torch's own words: "Unknown CUDA arch ({arch}) or GPU not supported"
            raise UsageError(f"{TORCH}: Unknown CUDA arch ({item}) or GPU not supported (torch)")
        major, minor = version.split(".")
        variant = minor[1:]
        arch = int(major + minor[:1])
        claims.append(Claim(SASS, arch, variant))
        if ptx:
            claims.append(Claim(PTX, arch, variant))
    return _unique(claims)


def cmake_architectures(text: str, name: str = CMAKE) -> tuple[Claim, ...]:
    """A CMake ``CUDA_ARCHITECTURES`` list: "-real" SASS, "-virtual" PTX, no suffix both."""
    value = text.strip()
    if not value or value.upper() in _CMAKE_FALSE or value.upper().endswith("-NOTFOUND"):
        raise NoClaim(f"{name}={text!r}: CMake adds no architecture flags (no claim)")
    if value in _CMAKE_SPECIAL:
        raise NoClaim(
            f"{name}={value}: which architectures depends on the toolkit or the machine CMake "
            "found (give the list with --claims-from)"
        )
    claims: list[Claim] = []
    for item in filter(None, value.split(";")):
        match = _CMAKE_ITEM.match(item.strip())
        if match is None:
            raise UsageError(f"{name}: {item!r} is not an architecture (CMake: 80, 86-real, 90a)")
        arch, variant, suffix = int(match.group(1)), match.group(2), match.group(3)
        if suffix != "-virtual":
            claims.append(Claim(SASS, arch, variant))
        if suffix != "-real":
            claims.append(Claim(PTX, arch, variant))
    return _unique(claims)


def _code(target: str) -> Claim | None:
    """``sm_80`` -> SASS, ``compute_80`` -> PTX; LTO-IR (``lto_80``) is neither: None."""
    match = _TARGET.match(target.strip().strip("\"'"))
    if match is None:
        raise UsageError(f"nvcc: {target!r} is not a GPU code (sm_XY, compute_XY)")
    kind, arch, variant = match.groups()
    return None if kind == "lto" else Claim(SASS if kind == "sm" else PTX, int(arch), variant)


def _codes(text: str) -> list[Claim]:
    items = text.strip().strip("\"'").strip("[]").split(",")
    return [c for c in (_code(i) for i in items if i.strip()) if c is not None]


def _gencode(spec: str) -> list[Claim]:
    """``arch=compute_80,code=[sm_80,compute_80]`` (``code`` absent: the arch itself)."""
    spec = spec.strip().strip("\"'")
    match = re.match(r"^arch=([^,]+)(?:,code=(.+))?$", spec)
    if match is None:
        raise UsageError(f"nvcc: -gencode {spec!r} is not arch=...,code=...")
    return _codes(match.group(2) or match.group(1))


def _value(args: Sequence[str], index: int, names: tuple[str, ...]) -> tuple[str, int] | None:
    """The value of option ``names`` at ``args[index]`` (``-o=V`` or ``-o V``), and the index
    after it; None when that argument is not the option."""
    arg = args[index]
    for name in names:
        if arg == name and index + 1 < len(args):
            return args[index + 1], index + 2
        if arg.startswith(name + "="):
            return arg[len(name) + 1 :], index + 1
    return None


def nvcc_flags(args: Sequence[str]) -> tuple[Claim, ...]:
    """The targets one nvcc command line asks for: each ``-gencode``; without one, ``-arch``
    with ``-code`` or its shorthand (``-arch=sm_XY``: SASS and PTX; ``compute_XY``: PTX)."""
    claims: list[Claim] = []
    arch = code = None
    index = 0
    while index < len(args):
        found = _value(args, index, ("-gencode", "--generate-code"))
        if found is not None:
            claims += _gencode(found[0])
            index = found[1]
            continue
        found = _value(args, index, ("-arch", "--gpu-architecture"))
        if found is None:
            found = _value(args, index, ("-code", "--gpu-code"))
            if found is not None:
                code = found[0]
        else:
            arch = found[0]
        index = found[1] if found is not None else index + 1
    if claims or arch is None:
        return _unique(claims)
    if arch in _CMAKE_SPECIAL:
        raise NoClaim(f"nvcc -arch={arch}: which architectures depends on the toolkit or machine")
    if code is not None:
        return _unique(_codes(code))
    first = _code(arch)
    if first is None:
        return ()
    if first.kind == PTX:
        return (first,)
    return (first, Claim(PTX, first.arch, first.variant))


def compile_database(data: bytes, path: str) -> tuple[Claim, ...]:
    """Every nvcc command's targets in a ``compile_commands.json`` (its ``arguments`` or its
    ``command`` split as a shell would)."""
    try:
        entries = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: not a compile database: {exc}") from None
    if not isinstance(entries, list):
        raise UsageError(f"{path}: not a compile database (a JSON list of commands)")
    claims: list[Claim] = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        args = entry.get("arguments")
        if not (isinstance(args, list) and all(isinstance(a, str) for a in args)):
            command = entry.get("command")
            try:
                args = shlex.split(command) if isinstance(command, str) else []
            except ValueError:
                args = []
        if args and "nvcc" in os.path.basename(args[0]):
            try:
                claims += nvcc_flags(args)
            except NoClaim:  # -arch=native: this command claims nothing checkable
                continue
    if not claims:
        raise NoClaim(f"{path}: no nvcc command with -gencode or -arch (no claim)")
    return _unique(claims)


def cmake_cache(data: bytes, path: str) -> str:
    """``CMAKE_CUDA_ARCHITECTURES``'s value in a CMakeCache.txt (``KEY:TYPE=VALUE`` lines)."""
    for line in data.decode("utf-8", "replace").splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "//")):
            continue
        match = _CACHE_LINE.match(line)
        if match and (match.group(1) or match.group(2) or "").strip() == CMAKE:
            return match.group(3)
    raise NoClaim(f"{path}: no {CMAKE} (no claim)")


def _read(path: str, named: bool) -> bytes | None:
    """The bytes of a regular file (None when absent). A file found by looking around (not
    ``named``) that is another user's is passed over, as config.py passes over configs."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except FileNotFoundError:
        if named:
            raise UsageError(f"--claims-from {path}: no such file or variable") from None
        return None
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"{path}: not a regular file")
        if not named and info.st_uid not in (0, os.geteuid()):
            raise NoClaim(f"{path}: owned by uid {info.st_uid} (not you or root): not read")
        data = handle.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise UsageError(f"{path}: over {MAX_BYTES >> 20} MiB: not read")
    return data


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 120 else text[:117] + "..."


def from_environment(name: str, value: str) -> Claims:
    parse = torch_arch_list if name == TORCH else lambda t: cmake_architectures(t, name)
    return Claims(f"{name} (environment)", _short(value), parse(value))


def from_file(path: str, named: bool = True) -> Claims | None:
    """A CMakeCache.txt, a compile database (.json) or a pyproject.toml's [tool.archgap]."""
    data = _read(path, named)
    if data is None:
        return None
    base = os.path.basename(path)
    if base.endswith("CMakeCache.txt"):
        value = cmake_cache(data, path)
        return Claims(f"{path} ({CMAKE})", _short(value), cmake_architectures(value))
    if base.endswith(".json"):
        return Claims(f"{path} (nvcc flags)", "", compile_database(data, path))
    if base.endswith(".toml"):
        from archgap.config import _toml

        table = _toml(data, path).get("tool", {}).get("archgap") or {}
        return from_require(table.get("require"), f"{path} [tool.archgap] require")
    raise UsageError(
        f"--claims-from {path}: not a CMakeCache.txt, compile_commands.json or pyproject.toml, "
        f"nor one of {', '.join(ENVIRONMENT)}"
    )


def from_require(names: object, source: str) -> Claims:
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names) or not names:
        raise NoClaim(f"{source}: no list of GPU names (no claim)")
    claims = _unique(Claim(GPU, 0, "", n) for n in names)
    return Claims(source, _short(", ".join(names)), claims)


def explicit(value: str, environ: Mapping[str, str]) -> Claims:
    """``--claims-from``: a variable's name (its value from the environment), ``NAME=VALUE``
    for one of them, or a file."""
    name, equals, given = value.partition("=")
    if equals and name in ENVIRONMENT:
        claims = from_environment(name, given).claims
        return Claims(f"{name} (--claims-from)", _short(given), claims)
    if value in ENVIRONMENT:
        if value not in environ:
            raise UsageError(f"--claims-from {value}: not set in the environment")
        return from_environment(value, environ[value])
    found = from_file(value)
    assert found is not None  # a named file that is absent is an error
    return found


def discover(
    claims_from: str | None = None,
    environ: Mapping[str, str] | None = None,
    cwd: str | None = None,
    config: bool = True,
) -> tuple[Claims, tuple[str, ...]]:
    """The first source that claims something, in order: ``claims_from``; else
    TORCH_CUDA_ARCH_LIST, CMAKE_CUDA_ARCHITECTURES, CUDAARCHS (environment); CMakeCache.txt, then
    compile_commands.json (in the current directory, then build/); [tool.archgap] require
    (``config``). With it, why each earlier place said nothing."""
    env = os.environ if environ is None else environ
    if claims_from:
        return explicit(claims_from, env), ()
    here = os.getcwd() if cwd is None else cwd
    passed: list[str] = []
    attempts: list[tuple[str, object]] = [(name, name) for name in ENVIRONMENT if env.get(name)]
    for base in ("CMakeCache.txt", "compile_commands.json"):
        attempts += [(base, os.path.join(here, place, base)) for place in PLACES]
    for kind, what in attempts:
        try:
            found = (
                from_environment(kind, env[kind]) if kind in ENVIRONMENT
                else from_file(str(what), named=False)
            )  # fmt: skip
        except NoClaim as why:
            passed.append(str(why))
            continue
        if found is not None:
            return found, tuple(passed)
    if config:
        found = _from_config(passed)
        if found is not None:
            return found, tuple(passed)
    looked = f" ({'; '.join(passed)})" if passed else ""
    raise UsageError(
        f"--require claimed: no claim found: set {TORCH} or {CMAKE}, build with CMake here "
        f"(CMakeCache.txt, compile_commands.json), add require to [tool.archgap], or name one "
        f"with --claims-from{looked}"
    )


def _from_config(passed: list[str]) -> Claims | None:
    from archgap.config import settings

    found, values = settings("kernels")
    if not values.get("require"):
        return None
    try:
        return from_require(values["require"], f"{found.path} [tool.archgap] require")
    except NoClaim as why:
        passed.append(str(why))
        return None


CLAIMED = "claimed"


def asks_claimed(require: Sequence[str]) -> bool:
    return any(r.strip().lower() == CLAIMED for r in require)


def requested(
    require: Sequence[str],
    claims_from: str | None = None,
    config: bool = True,
    variants: Sequence[VariantClaims] = (),
) -> Claims | None:
    """The claims ``--require claimed`` asks for (None when it is not asked for). ``claimed``
    stands alone: GPUs are a gate of their own (another run). The ``variants`` (PEP 817 variant
    wheels among the paths) add their own declarations; they alone are enough to check."""
    asked = [r for r in require if r.strip().lower() == CLAIMED]
    if not asked:
        if claims_from:
            raise UsageError("--claims-from needs --require claimed")
        return None
    if len(asked) != len(require):
        raise UsageError(
            "--require claimed checks what the build claims; name GPUs in another run "
            "(or list them in [tool.archgap] require and run --require claimed)"
        )
    try:
        found = discover(claims_from, config=config)[0]
    except UsageError:
        if claims_from or not variants:
            raise
        found = Claims("", "", ())
    return replace(found, variants=tuple(variants))
