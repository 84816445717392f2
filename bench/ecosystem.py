"""Benchmark: archgap against invariants from outside it, on the newest releases of GPU packages.

Installs (pip --no-deps --no-compile, --upgrade) into two cache venvs outside the repository
(default ~/.cache/archgap-ecosystem/{cu12,cu13}, reused between runs) every nvidia-* library that
the newest torch of each CUDA flavour (cu126, cu128, cu130) pins -- read from the torch wheels'
METADATA by range reads through archgap's index code -- and the serving, training and data
packages of bench/ecosystem.json (CUDA 12 builds with the cu12 pins, CUDA 13 builds with the cu13
ones: the two builds of a package install the same paths). Then checks, for every ELF library:

  listing     `archgap kernels --json` lists (names and order) what cuobjdump --list-elf and
              --list-ptx list; where cuobjdump cannot read a file, what this file's own fatbin
              walk finds in .nv_fatbin (the walk never imports archgap's reader)
  documented  every NVIDIA library is `native` or `jit` on each GPU its documentation lists
              (bench/ecosystem.json, a source per entry), with a driver new enough
  cuda13      a CUDA 13 library (by package, PTX ISA >= 9.0 or a 'release 13.' banner) never
              loads (native, jit, partial) with --driver below 580
  covered     no library is `none` on a GPU its own containers cover (SASS for that arch or a
              compatible one, or PTX <= its arch, per NVIDIA's compatibility rules), with a
              driver new enough; containers in .nv_fatbin or data sections (not __nv_relfatbin)

Prints each violation, the bytes downloaded and installed, the time and the load average.
Exits 1 when there is a violation (0 with --report-only).

Usage: nice .venv/bin/python bench/ecosystem.py [--cache DIR] [--offline] [--report-only]
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import re
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = json.loads((ROOT / "bench" / "ecosystem.json").read_text())
# archgap of this tree, with its bytecode (as a pip-installed tool has it)
ARCHGAP = [sys.executable, "-m", "archgap"]
ENV = {
    **{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
    "PYTHONPATH": str(ROOT / "src"),
}

# ---------------------------------------------------------------------------------------------
# The independent fatbin walk (from the container format: /work/shared/reference/fatbin_format.md,
# n-eiling/cuda-fatbin-decompression's fatbin-decompress.h). Nothing of archgap is imported here.

FATBIN_MAGIC = 0xBA55ED50
KIND_PTX, KIND_ELF = 1, 2
FLAG_ARCH_SPECIFIC, FLAG_FAMILY = 0x100000, 0x200000
SHT_NOBITS = 8
SHF_EXECINSTR = 0x4
LISTED = ".nv_fatbin"
NOT_LOADED = ("__nv_relfatbin",)  # relocatable per-TU fatbins: device-link input, never launched


@dataclass(frozen=True)
class Entry:
    kind: str  # "sass" or "ptx" (other kinds, e.g. LTO-IR, are kept as "other")
    arch: int
    variant: str  # "", "a" or "f"
    isa: tuple[int, int] | None  # PTX ISA (major, minor) for PTX
    section: str

    def cuobjdump_name(self) -> str:
        """cuobjdump --list-elf drops the family 'f' from SASS names; --list-ptx keeps it."""
        keep = self.variant if self.kind == "ptx" or self.variant == "a" else ""
        return f"sm_{self.arch}{keep}"


@dataclass
class Walk:
    entries: list[Entry] = field(default_factory=list)
    problem: str = ""
    cuda13_banner: bool = False

    def listed(self, kind: str) -> list[str]:
        return [e.cuobjdump_name() for e in self.entries if e.section == LISTED and e.kind == kind]


def sections(buf: Any) -> Iterator[tuple[str, int, int, int, int]]:
    """(name, type, flags, offset, size) of each section of an ELF64 little-endian file."""
    if buf[:4] != b"\x7fELF" or buf[4] != 2 or buf[5] != 1:
        raise ValueError("not an ELF64 little-endian file")
    (shoff,) = struct.unpack_from("<Q", buf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", buf, 0x3A)
    if shoff == 0:
        return
    if shnum == 0:  # extended numbering: the count is in section 0's sh_size
        shnum = struct.unpack_from("<Q", buf, shoff + 0x20)[0]
    if shstrndx == 0xFFFF:
        shstrndx = struct.unpack_from("<I", buf, shoff + 0x28)[0]
    headers = [struct.unpack_from("<IIQQQQ", buf, shoff + i * shentsize) for i in range(shnum)]
    strtab_off, strtab_size = headers[shstrndx][4], headers[shstrndx][5]
    for name_off, sh_type, flags, _addr, offset, size in headers:
        start = strtab_off + name_off
        end = buf.find(b"\0", start, strtab_off + strtab_size)
        yield buf[start:end].decode("latin-1"), sh_type, flags, offset, size


def containers(buf: Any, start: int, end: int, section: str, into: list[Entry]) -> None:
    """The entries of every valid container between start and end (back to back in .nv_fatbin;
    searched by magic elsewhere, a hit kept only if its header and sizes hold)."""
    magic = struct.pack("<I", FATBIN_MAGIC)
    pos = buf.find(magic, start, end)
    while pos != -1 and pos + 16 <= end:
        _, version, header_size, fat_size = struct.unpack_from("<IHHQ", buf, pos)
        stop = pos + header_size + fat_size
        if version != 1 or header_size != 16 or stop > end:
            pos = buf.find(magic, pos + 4, end)
            continue
        found, ok = entries(buf, pos + header_size, stop, section)
        if ok:
            into.extend(found)
            pos = buf.find(magic, stop, end)
        else:
            pos = buf.find(magic, pos + 4, end)


def entries(buf: Any, pos: int, stop: int, section: str) -> tuple[list[Entry], bool]:
    found: list[Entry] = []
    while pos + 64 <= stop:
        kind, _ver, hsize, payload = struct.unpack_from("<HHIQ", buf, pos)
        minor, major, arch = struct.unpack_from("<HHI", buf, pos + 0x18)
        (flags,) = struct.unpack_from("<Q", buf, pos + 0x28)
        if hsize < 64 or pos + hsize + payload > stop:
            return found, False
        name = {KIND_ELF: "sass", KIND_PTX: "ptx"}.get(kind, "other")
        variant = "a" if flags & FLAG_ARCH_SPECIFIC else "f" if flags & FLAG_FAMILY else ""
        isa = (major, minor) if kind == KIND_PTX else None
        found.append(Entry(name, arch, variant, isa, section))
        pos += hsize + payload
    return found, True


BANNER = re.compile(rb"Cuda compilation tools, release (\d+)\.")


def walk(path: str) -> Walk:
    """Every container of the file: .nv_fatbin walked, data sections searched; never raises."""
    result = Walk()
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size < 64:
                result.problem = "too small for ELF"
                return result
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                for name, sh_type, flags, offset, length in list(sections(buf)):
                    if sh_type == SHT_NOBITS or flags & SHF_EXECINSTR or name in NOT_LOADED:
                        continue
                    if offset + length > size:
                        continue
                    if name == LISTED or (length >= 80 and name not in (".dynstr", ".symtab")):
                        containers(buf, offset, offset + length, name, result.entries)
                result.cuda13_banner = any(m.group(1) == b"13" for m in BANNER.finditer(buf))
    except (OSError, ValueError, struct.error) as exc:
        result.problem = str(exc)
    return result


def covers(entry: Entry, cc: str) -> bool:
    """NVIDIA's rules (CUDA Programming Guide 1.3.4.1/1.3.4.2, Table 28 for families)."""
    major, minor = (int(x) for x in cc.split("."))
    here = major * 10 + minor
    if entry.kind not in ("sass", "ptx"):
        return False
    if entry.variant == "a":
        return entry.arch == here
    if entry.variant == "f":
        return cc in DATA["families"]["members"].get(str(entry.arch), [])
    if entry.kind == "ptx":
        return entry.arch <= here
    return entry.arch // 10 == major and entry.arch % 10 <= minor


# ---------------------------------------------------------------------------------------------
# Installing the packages


def torch_pins(flavours: dict[str, str]) -> tuple[dict[str, str], dict[str, list[str]]]:
    """The newest torch release of each flavour and the nvidia-* names it pins (METADATA by
    range reads: archgap's index code, PEP 658 files where the index has them)."""
    sys.path.insert(0, str(ROOT / "src"))
    from packaging.requirements import Requirement
    from packaging.utils import parse_wheel_filename
    from packaging.version import Version

    from archgap.index.deps import requires_dist
    from archgap.index.resolve import PYPI, project_files

    def wheel_for(name: str, version: str | None = None) -> dict[Version, Any]:
        found: dict[Version, Any] = {}
        for f in project_files(PYPI, name):
            if not f.filename.endswith(".whl") or f.yanked:
                continue
            _, v, _, tags = parse_wheel_filename(f.filename)
            ok = any(
                t.interpreter in ("cp311", "py3")
                and (("manylinux" in t.platform and "x86_64" in t.platform) or t.platform == "any")
                for t in tags
            )
            if ok and not v.is_prerelease and (version is None or str(v) == version):
                found.setdefault(v, f)
        return found

    releases: dict[str, str] = {}
    pins: dict[str, list[str]] = {}
    torch = wheel_for("torch")
    for version in sorted(torch, reverse=True):
        if len(releases) == len(flavours):
            break
        reqs = [Requirement(r) for r in requires_dist(torch[version])]
        names = [r.name for r in reqs if r.name.startswith("nvidia-")]
        runtime = ""
        for r in reqs:
            spec = str(r.specifier).removeprefix("==")
            if r.name in ("nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime", "cuda-toolkit"):
                runtime = spec
            if r.name == "cuda-toolkit":  # a meta package: its extras name the libraries
                toolkit = list(wheel_for("cuda-toolkit", spec).values())
                print(f"torch {version}: cuda-toolkit {spec} ({len(toolkit)} wheel)", flush=True)
                for sub in map(Requirement, requires_dist(toolkit[0]) if toolkit else []):
                    marker = str(sub.marker or "")
                    wanted = any(f'extra == "{x}"' in marker for x in r.extras)
                    if wanted and sub.name.startswith("nvidia-"):
                        names.append(sub.name)
        for flavour, prefix in flavours.items():
            if flavour not in releases and runtime.startswith(prefix):
                releases[flavour] = str(version)
                pins[flavour] = sorted(set(names))
    return releases, pins


DOWNLOADING = re.compile(r"Downloading \S+ \(([\d.]+) (kB|MB|GB)\)")
UNITS = {"kB": 1e3, "MB": 1e6, "GB": 1e9}


def install(venv: Path, names: list[str], offline: bool) -> tuple[dict[str, str], int, list[str]]:
    """pip install --upgrade --no-deps each package; returns versions, bytes downloaded, errors."""
    if not (venv / "bin" / "python").exists():
        subprocess.run(["python3.11", "-m", "venv", "--without-pip", str(venv)], check=True)
    downloaded, problems = 0, []
    # the newest releases, whatever a machine-wide pip constraint caps
    env = {**os.environ, "PIP_CONSTRAINT": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    for name in names if not offline else []:
        argv = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
                "--upgrade", "--no-deps", "--no-compile", "--no-cache-dir", "--progress-bar",
                "off", "--only-binary", ":all:", name]  # fmt: skip
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        for m in DOWNLOADING.finditer(proc.stdout):
            downloaded += int(float(m.group(1)) * UNITS[m.group(2)])
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["?"])[-1]
            problems.append(f"{name}: pip install failed: {last}")
        print(f"  {name}: {'ok' if proc.returncode == 0 else 'FAILED'}", flush=True)
    versions = {}
    for site in venv.glob("lib/python*/site-packages"):
        for meta in site.glob("*.dist-info/METADATA"):
            head = meta.read_text(errors="replace").split("\n\n", 1)[0]
            fields = dict(line.split(": ", 1) for line in head.splitlines() if ": " in line)
            versions[fields.get("Name", meta.parent.name).lower()] = fields.get("Version", "?")
    return versions, downloaded, problems


def owners(site: Path, problems: list[str]) -> dict[str, str]:
    """The installed package that owns each library (its RECORD), by resolved path; a path two
    packages install is a problem of the environment (the later install overwrote it)."""
    owned: dict[str, str] = {}
    for record in sorted(site.glob("*.dist-info/RECORD")):
        name = record.parent.name.split("-")[0].replace("_", "-").lower()
        for line in record.read_text(errors="replace").splitlines():
            rel = line.split(",", 1)[0]
            if re.search(r"\.so(\.|$)", rel):
                real = str((site / rel).resolve())
                if owned.get(real, name) != name:
                    problems.append(f"{real} is installed by {owned[real]} and {name}")
                owned[real] = name
    return owned


def libraries(site: Path) -> list[str]:
    found = []
    for path in sorted(site.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        if not re.search(r"\.so(\.|$)", path.name):
            continue
        with open(path, "rb") as handle:
            if handle.read(4) == b"\x7fELF":
                found.append(str(path))
    return found


# ---------------------------------------------------------------------------------------------
# archgap and cuobjdump


def archgap_json(argv: list[str]) -> dict[str, Any]:
    proc = subprocess.run([*ARCHGAP, *argv], capture_output=True, env=ENV, check=False)
    if proc.returncode not in (0, 1):
        sys.exit(
            f"archgap {' '.join(argv[:3])} ... exited {proc.returncode}: {proc.stderr[-400:]!r}"
        )
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def archgap_listed(paths: list[str]) -> dict[str, dict[str, list[str]]]:
    listed: dict[str, dict[str, list[str]]] = {}
    for start in range(0, len(paths), 200):
        doc = archgap_json(["kernels", "--json", *paths[start : start + 200]])
        for facts in doc["files"]:
            lists: dict[str, list[str]] = {"sass": [], "ptx": []}
            for e in facts["entries"]:
                if e["listed"] and e["kind"] in lists:
                    keep = e["variant"] if e["kind"] == "ptx" or e["variant"] == "a" else ""
                    lists[e["kind"]] += [f"sm_{e['arch']}{keep}"] * int(e.get("count") or 1)
            listed[str(Path(facts["path"]).resolve())] = lists
    return listed


CUOBJDUMP_LINE = re.compile(r"^(ELF|PTX) file\s+\d+: .*\.(sm_\d+[af]?)\.(cubin|ptx)$")


def cuobjdump_lists(cuobjdump: Path, path: str) -> dict[str, list[str]] | None:
    """cuobjdump's own lists; None where it does not read the file (exit status, error)."""
    lists: dict[str, list[str]] = {}
    for option, kind in (("--list-elf", "sass"), ("--list-ptx", "ptx")):
        proc = subprocess.run([str(cuobjdump), option, path], capture_output=True, text=True,
                              check=False)  # fmt: skip
        if proc.returncode != 0:
            if "does not contain device code" in proc.stderr:
                lists[kind] = []
                continue
            return None
        lists[kind] = [m.group(2) for m in map(CUOBJDUMP_LINE.match, proc.stdout.splitlines())
                       if m]  # fmt: skip
    return lists


def find_cuobjdump() -> Path | None:
    for venv in (
        ROOT / "tests" / ".data" / "venv-cuobjdump",
        ROOT / "bench" / ".data" / "venv-cuobjdump",
    ):
        hits = sorted(venv.glob("lib/python*/site-packages/nvidia/*/bin/cuobjdump"))
        if hits:
            return hits[0]
    return None


def verdicts(python: Path, gpus: list[str], driver: str) -> dict[tuple[str, str], tuple[str, str]]:
    """(resolved library path, GPU label) -> (verdict, reason) from `archgap scan --libs`."""
    doc = archgap_json(["scan", "--python", str(python), "--gpu", ",".join(gpus), "--libs",
                        "--driver", driver, "--json", "--no-config"])  # fmt: skip
    found: dict[tuple[str, str], tuple[str, str]] = {}
    for package in doc["packages"]:
        for lib in package.get("libraries") or []:
            key = (str(Path(lib["path"]).resolve()), lib["gpu"])
            found[key] = (lib["verdict"], lib.get("reason", ""))
    return found


# ---------------------------------------------------------------------------------------------


@dataclass
class Env:
    """What the checks read: the libraries, their owners, the two walks and the verdicts."""

    libs: list[str]
    owned: dict[str, str]
    walks: dict[str, Walk]
    cuda13_pins: set[str]
    new: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    old: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    checked: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def with_code(self) -> list[str]:
        return [p for p, w in self.walks.items() if w.entries]

    def name(self, real: str) -> str:
        return f"{self.owned.get(real, '?')} {Path(real).name}"


GPUS: dict[str, str] = DATA["gpus"]["list"]
LABEL = {cc: label for label, cc in GPUS.items()}


def check_listing(env: Env, cuobjdump: Path | None) -> list[str]:
    """archgap's listed entries against cuobjdump, or the walk where cuobjdump cannot read."""
    found: list[str] = []
    ours = archgap_listed(env.libs)
    env.checked["cuobjdump"] = env.checked["walk"] = 0
    for path in env.libs:
        real = str(Path(path).resolve())
        w = env.walks[real]
        mine = ours.get(real, {"sass": [], "ptx": []})
        walked = {"sass": w.listed("sass"), "ptx": w.listed("ptx")}
        theirs = None
        if cuobjdump and (w.entries or mine["sass"] or mine["ptx"]):
            theirs = cuobjdump_lists(cuobjdump, path)
        oracle = "cuobjdump" if theirs is not None else "walk"
        if theirs is None and cuobjdump and (w.entries or mine["sass"] or mine["ptx"]):
            env.notes.append(f"cuobjdump cannot read {real}: the walk is the oracle there")
        env.checked[oracle] += 1
        if theirs is None:
            theirs = walked
        elif walked != theirs:  # the oracle of last resort disagrees with the first one
            found.append(
                f"listing {real}: the bench's walk {counts(walked)} differs from cuobjdump "
                f"{counts(theirs)} (a defect of the bench)"
            )
        if mine != theirs:
            found.append(f"listing {real}: archgap {counts(mine)} vs {oracle} {counts(theirs)}")
    return found


def check_documented(env: Env) -> list[str]:
    """Each NVIDIA library native or jit on every GPU its documentation lists."""
    found: list[str] = []
    env.checked["documented"] = 0
    for rule in DATA["documented"]["entries"]:
        for real in env.with_code:
            package = env.owned.get(real, "?")
            if not (
                re.search(rule["package"], package) and re.search(rule["file"], Path(real).name)
            ):
                continue
            for label in rule["gpus"]:
                env.checked["documented"] += 1
                verdict, reason = env.new.get((real, GPUS[label]), ("(no verdict)", ""))
                if verdict not in ("native", "jit"):
                    found.append(
                        f"documented {env.name(real)} on {label}: archgap {verdict} ({reason}); "
                        f"NVIDIA lists {label}: {rule['source']}"
                    )
    return found


def cuda13_signs(env: Env, real: str) -> list[str]:
    """Why a library is a CUDA 13 build: its package, its PTX ISA, its banner."""
    package, w = env.owned.get(real, "?"), env.walks[real]
    signs = []
    if package in env.cuda13_pins or re.search(DATA["cuda13"]["package_name_pattern"], package):
        signs.append(f"package {package}")
    top = max((e.isa for e in w.entries if e.isa), default=None)
    if top and top[0] >= 9:
        signs.append(f"PTX ISA {top[0]}.{top[1]}")
    if w.cuda13_banner:
        signs.append("'release 13.' banner")
    return signs


def check_cuda13(env: Env) -> list[str]:
    """A CUDA 13 library never loads (native, jit, partial) on a driver below 580."""
    found: list[str] = []
    env.checked["cuda13"] = 0
    below, floor = DATA["cuda13"]["below"], DATA["cuda13"]["min_driver"]
    for real in env.with_code:
        signs = cuda13_signs(env, real)
        if not signs:
            continue
        env.checked["cuda13"] += 1
        for cc in GPUS.values():
            verdict, _ = env.old.get((real, cc), ("", ""))
            if verdict in ("native", "jit", "partial"):
                found.append(
                    f"cuda13 {env.name(real)} on {LABEL[cc]}: archgap {verdict} with --driver "
                    f"{below}; CUDA 13 ({', '.join(signs)}) needs >= {floor}"
                )
    return found


def check_covered(env: Env) -> list[str]:
    """No library `none` on a GPU its own containers cover (a driver new enough)."""
    found: list[str] = []
    env.checked["covered"] = 0
    for real in env.with_code:
        for cc in GPUS.values():
            hits = [e for e in env.walks[real].entries if covers(e, cc)]
            verdict, reason = env.new.get((real, cc), ("", ""))
            if not hits or not verdict:
                continue
            env.checked["covered"] += 1
            if verdict == "none":
                where = sorted({f"{e.kind} {e.cuobjdump_name()} in {e.section}" for e in hits})
                more = " ..." if len(where) > 4 else ""
                found.append(
                    f"covered {env.name(real)} on {LABEL[cc]}: archgap none ({reason}); its "
                    f"containers hold {', '.join(where[:4])}{more}"
                )
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "archgap-ecosystem")
    parser.add_argument("--offline", action="store_true", help="no pip: check what is installed")
    parser.add_argument("--report-only", action="store_true", help="exit 0 on violations")
    args = parser.parse_args()
    started = time.perf_counter()
    args.cache.mkdir(parents=True, exist_ok=True)

    pins_file = args.cache / "torch-pins.json"
    if args.offline and pins_file.exists():
        releases, pins = json.loads(pins_file.read_text())
    else:
        releases, pins = torch_pins(DATA["torch"]["flavours"])
        pins_file.write_text(json.dumps([releases, pins]))
    for flavour, version in releases.items():
        print(f"torch {version} ({flavour}) pins {len(pins[flavour])}: {' '.join(pins[flavour])}")
    nvidia = sorted({n for names in pins.values() for n in names})
    worlds: dict[str, Any] = DATA["packages"]["worlds"]
    wanted: dict[str, list[str]] = {}
    for world, spec in worlds.items():
        pinned = {n for flavour in spec["torch_flavours"] for n in pins.get(flavour, [])}
        wanted[world] = list(dict.fromkeys([*sorted(pinned), *spec["names"]]))
    downloaded, problems, versions, sites = 0, [], {}, {}
    for world, names in wanted.items():
        venv = args.cache / world
        print(f"{world}: {len(names)} packages into {venv} (newest, --no-deps)", flush=True)
        found, got, failed = install(venv, names, args.offline)
        downloaded += got
        problems += failed
        versions.update({f"{world}:{k}": v for k, v in found.items()})
        sites[world] = sorted(venv.glob("lib/python*/site-packages"))[0]
    installed = sum(
        p.stat().st_size
        for site in sites.values()
        for p in site.rglob("*")
        if p.is_file() and not p.is_symlink()
    )
    install_s = time.perf_counter() - started
    for key, version in sorted(versions.items()):
        print(f"  {key} {version}")

    libs = [lib for site in sites.values() for lib in libraries(site)]
    conflicts: list[str] = []
    owned = {k: v for site in sites.values() for k, v in owners(site, conflicts).items()}
    env = Env(libs, owned, {str(Path(p).resolve()): walk(p) for p in libs}, set())
    env.cuda13_pins = set(pins.get("cu130", []))
    print(
        f"{len(versions)} packages installed, {len(libs)} ELF libraries, {len(env.with_code)} with "
        f"device code (the bench's walk)",
        flush=True,
    )
    for line in conflicts:
        print(f"  bench: {line}")
    violations = [f"install: {p}" for p in problems]
    violations += check_listing(env, find_cuobjdump())
    for world in wanted:
        python = args.cache / world / "bin" / "python"
        env.new.update(verdicts(python, list(GPUS.values()), DATA["cuda13"]["above"]))
        env.old.update(verdicts(python, list(GPUS.values()), DATA["cuda13"]["below"]))
    violations += check_documented(env)
    violations += check_cuda13(env)
    violations += check_covered(env)
    judged = {path for path, _ in env.new}
    unjudged = [p for p in env.with_code if p not in judged]

    elapsed = time.perf_counter() - started
    print(f"\n{len(violations)} violation(s):")
    for line in violations:
        print("  " + line)
    for line in env.notes:
        print("  note: " + line)
    flavours = ", ".join(f"{k} {v}" for k, v in releases.items())
    print(
        f"\npackages: {sum(map(len, wanted.values()))} asked, {len(versions)} installed (in "
        f"{len(wanted)} environments); torch {flavours}; {len(nvidia)} nvidia-* pinned"
    )
    c = env.checked
    print(
        f"libraries: {len(libs)} ELF, {len(env.with_code)} with device code, "
        f"{len(env.with_code) - len(unjudged)} judged by scan; listing: {c['cuobjdump']} against "
        f"cuobjdump, {c['walk']} against the walk; documented: {c['documented']} cells; cuda13: "
        f"{c['cuda13']} libraries x {len(GPUS)} GPUs; covered: {c['covered']} cells"
    )
    print(
        f"bytes: downloaded {downloaded / 1e9:.2f} GB this run, installed {installed / 1e9:.2f} GB"
    )
    one, five, fifteen = os.getloadavg()
    print(
        f"time: {elapsed:.0f} s ({install_s:.0f} s resolving and installing); load {one:.2f} "
        f"{five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"
    )
    return 1 if violations and not args.report_only else 0


def counts(lists: dict[str, list[str]]) -> str:
    return f"{len(lists['sass'])} SASS + {len(lists['ptx'])} PTX"


if __name__ == "__main__":
    sys.exit(main())
