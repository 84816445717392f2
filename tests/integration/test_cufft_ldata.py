"""cuFFT and cuSPARSE of CUDA 13, from the real wheels torch 2.14.1+cu130 pins (CI data).

nvidia-cufft 12.0.0.61 and nvidia-cusparse 12.6.3.3 (scripts/testdata: each in a venv of its
own, installed --no-deps, never imported). What they hold is stated here without archgap:

- an ELF walk written below (section and program headers, the fatbin container and entry
  headers of docs/reference/fatbin-format.md) finds the containers in each allocated data
  section that a PT_LOAD segment maps: device code in the library's memory once it is loaded;
- cuobjdump 13.5 lists the listed fatbin (``.nv_fatbin``) of the library, and, given the
  containers the walk found as one ``.fatbin`` file, lists and extracts their cubins, whose ELF
  type (``e_type``) says whether each is linked (ET_EXEC: what ``cuModuleLoadData`` /
  ``cuLibraryLoadData`` load as it is) or relocatable (ET_REL, ``nvcc -rdc`` output: it must be
  device-linked, by nvlink or nvJitLink, before anything can load it).

NVIDIA's rule (CUDA C++ Programming Guide, binary compatibility): SASS sm_XY runs on a GPU of
compute capability X.Z with Z >= Y. So a library runs natively on a GPU when its listed fatbin
or a linked cubin it keeps elsewhere has such SASS.

cuFFT 12.0 lists one sm_75 cubin; its kernels are ~24,000 containers in ``.ldata`` (cuFFT loads
them itself), linked cubins sm_75 ... sm_120: native on A100 (8.0), H100 (9.0), RTX PRO 6000
(12.0); nothing for V100 (7.0, dropped by CUDA 13). cuSPARSE 12.6's ``.rodata`` bundles hold
sm_70 cubins that are relocatable (nvJitLink inputs): V100 stays without a kernel.
"""

from __future__ import annotations

import mmap
import re
import struct
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import DATA, json_output, run_cli

CUOBJDUMP = next(
    iter(sorted(DATA.glob("venv-cuobjdump/lib/python*/site-packages/nvidia/*/bin/cuobjdump"))), None
)
CUFFT_VENV = DATA / "venv-nvidia-cufft-12.0.0.61"
CUSPARSE_VENV = DATA / "venv-nvidia-cusparse-12.6.3.3"
CUFFT = next(
    iter(sorted(CUFFT_VENV.glob("lib/python*/site-packages/nvidia/*/lib/libcufft.so.12"))), None
)
CUSPARSE = next(
    iter(sorted(CUSPARSE_VENV.glob("lib/python*/site-packages/nvidia/*/lib/libcusparse.so.12"))),
    None,
)

pytestmark = pytest.mark.skipif(
    CUOBJDUMP is None or CUFFT is None or CUSPARSE is None,
    reason="scripts/testdata installs cuobjdump and the nvidia-cufft/-cusparse wheels",
)

GPUS = {"V100": "7.0", "T4": "7.5", "A100": "8.0", "H100": "9.0", "RTX PRO 6000": "12.0"}
ET_REL, ET_EXEC = 1, 2
SHT_PROGBITS, SHF_ALLOC, SHF_EXECINSTR, PT_LOAD = 1, 0x2, 0x4, 1
# a fatbin container header: magic 0xBA55ED50, version 1, header size 16, then the entries' size
CONTAINER = struct.pack("<IHH", 0xBA55ED50, 1, 16)
ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")  # kind, version, header size, payload size, ... arch ...
SASS = 2


# --- the independent walk -------------------------------------------------------------------------


def loaded_data_sections(data: Any) -> dict[str, tuple[int, int]]:
    """Name -> (offset, end) of each allocated, non-code PROGBITS section that a PT_LOAD segment
    maps from the file (what the dynamic loader puts in memory)."""
    phoff, shoff = struct.unpack_from("<QQ", data, 0x20)
    phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from("<HHHHH", data, 0x36)
    loads = []
    for i in range(phnum):
        p_type, _, p_offset, _, _, p_filesz = struct.unpack_from(
            "<IIQQQQ", data, phoff + i * phentsize
        )
        if p_type == PT_LOAD:
            loads.append((p_offset, p_offset + p_filesz))
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = headers[shstrndx][4]
    found = {}
    for name_at, sh_type, flags, _, offset, size in headers:
        name = bytes(data[names + name_at : data.find(b"\0", names + name_at)]).decode()
        end = offset + size
        if (
            sh_type == SHT_PROGBITS
            and flags & SHF_ALLOC
            and not flags & SHF_EXECINSTR
            and any(start <= offset and end <= stop for start, stop in loads)
        ):
            found[name] = (offset, end)
    return found


def containers(data: Any, start: int, end: int) -> list[tuple[int, int, list[int]]]:
    """(offset, size in bytes, entry kinds) of each well-formed container in [start, end)."""
    found = []
    pos = data.find(CONTAINER, start, end)
    while pos >= 0:
        (size,) = struct.unpack_from("<Q", data, pos + 8)
        kinds, at, stop = [], pos + 16, pos + 16 + size
        while stop <= end and at + ENTRY.size <= stop:
            kind, _, header, payload = ENTRY.unpack_from(data, at)[:4]
            if kind not in (1, 2, 8) or header < ENTRY.size:
                break
            kinds.append(kind)
            at += header + payload
        if kinds and at == stop:
            found.append((pos, 16 + size, kinds))
            pos = data.find(CONTAINER, stop, end)
        else:
            pos = data.find(CONTAINER, pos + 1, end)
    return found


def sass_archs_by_section(path: Path) -> dict[str, Counter[int]]:
    """Each loaded data section's SASS entries (their arch field), counted."""
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        counted: dict[str, Counter[int]] = {}
        for name, (start, end) in loaded_data_sections(data).items():
            for pos, _, _ in containers(data, start, end):
                at = pos + 16
                while at + ENTRY.size <= pos + 16 + struct.unpack_from("<Q", data, pos + 8)[0]:
                    fields = ENTRY.unpack_from(data, at)
                    if fields[0] == SASS:
                        counted.setdefault(name, Counter())[fields[8]] += 1
                    at += fields[2] + fields[3]
        return counted


# --- cuobjdump ------------------------------------------------------------------------------------

CUBIN_NAME = re.compile(r"\.(sm_(\d+)([af]?))\.cubin$")


def cuobjdump(*args: str, cwd: Path | None = None) -> str:
    assert CUOBJDUMP is not None
    done = subprocess.run(
        [str(CUOBJDUMP), *args], capture_output=True, text=True, timeout=600, check=False, cwd=cwd
    )
    return done.stdout


def listed_targets(path: Path) -> Counter[str]:
    """The cubins cuobjdump --list-elf names in the library (its listed fatbin)."""
    out = cuobjdump("--list-elf", str(path))
    return Counter(m.group(1) for line in out.splitlines() if (m := CUBIN_NAME.search(line)))


def unlisted_cubins(path: Path, section: str, tmp: Path) -> Counter[tuple[str, int]]:
    """(target, e_type) of every cubin in ``section``'s containers that hold SASS, as cuobjdump
    lists and extracts them from those containers written out as one fatbin file."""
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        start, end = loaded_data_sections(data)[section]
        blob = bytearray()
        for pos, size, kinds in containers(data, start, end):
            if SASS in kinds:
                blob += data[pos : pos + size] + bytes(-size % 8)  # containers are 8-aligned
    fatbin = tmp / f"{section.strip('.')}.fatbin"
    fatbin.write_bytes(blob)
    listed = [
        m.group(1)
        for line in cuobjdump("--list-elf", str(fatbin)).splitlines()
        if (m := CUBIN_NAME.search(line))
    ]
    out = tmp / "extracted"
    out.mkdir()
    cuobjdump("--extract-elf", "all", str(fatbin), cwd=out)
    extracted: Counter[tuple[str, int]] = Counter()
    for cubin in out.iterdir():
        match = CUBIN_NAME.search(cubin.name)
        assert match is not None, cubin.name
        head = cubin.read_bytes()[:64]
        assert head[:4] == b"\x7fELF"
        extracted[(match.group(1), struct.unpack_from("<H", head, 16)[0])] += 1
    assert Counter(listed) == _targets(extracted)  # what it lists is what it extracts
    return extracted


def _targets(extracted: Counter[tuple[str, int]]) -> Counter[str]:
    counted: Counter[str] = Counter()
    for (target, _), n in extracted.items():
        counted[target] += n
    return counted


def runs(target: str, cc: str) -> bool:
    """NVIDIA's rule for SASS sm_XY: X.Z with Z >= Y; 'a' only on X.Y. (No integrated GPU,
    where SASS runs only on its exact X.Y, is judged here.)"""
    m = re.fullmatch(r"sm_(\d+)([af]?)", target)
    assert m is not None
    arch, variant = int(m.group(1)), m.group(2)
    major, minor = (int(x) for x in cc.split("."))
    if variant == "a":
        return arch == major * 10 + minor
    return arch // 10 == major and arch % 10 <= minor


# --- what the libraries hold ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def cufft_ldata(tmp_path_factory: pytest.TempPathFactory) -> Counter[tuple[str, int]]:
    assert CUFFT is not None
    return unlisted_cubins(CUFFT, ".ldata", tmp_path_factory.mktemp("cufft"))


@pytest.fixture(scope="module")
def cusparse_rodata(tmp_path_factory: pytest.TempPathFactory) -> Counter[tuple[str, int]]:
    assert CUSPARSE is not None
    return unlisted_cubins(CUSPARSE, ".rodata", tmp_path_factory.mktemp("cusparse"))


def test_cufft_lists_one_cubin_and_keeps_linked_kernels_for_sm75_to_sm120_in_ldata(
    cufft_ldata: Counter[tuple[str, int]],
) -> None:
    assert CUFFT is not None
    assert listed_targets(CUFFT) == Counter({"sm_75": 1})
    walked = sass_archs_by_section(CUFFT)
    assert set(walked) == {".nv_fatbin", ".ldata"}  # no other loaded section holds SASS
    assert walked[".nv_fatbin"] == Counter({75: 1})
    # the walk and cuobjdump agree, cubin by cubin, on the targets in .ldata
    assert Counter({int(t[3:]): n for t, n in _targets(cufft_ldata).items()}) == walked[".ldata"]
    assert {t for t, _ in cufft_ldata} == {
        "sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_100", "sm_110", "sm_120",
    }  # fmt: skip
    assert {e_type for _, e_type in cufft_ldata} == {ET_EXEC}  # every one linked: loadable
    assert sum(cufft_ldata.values()) > 3000


def test_cusparse_rodata_bundles_are_relocatable(cusparse_rodata: Counter[tuple[str, int]]) -> None:
    assert CUSPARSE is not None
    listed = listed_targets(CUSPARSE)
    assert "sm_70" not in listed and "sm_75" in listed and "sm_120" in listed
    assert ("sm_70", ET_REL) in cusparse_rodata
    assert {e_type for _, e_type in cusparse_rodata} == {ET_REL}  # device-link inputs only


# --- what archgap says ----------------------------------------------------------------------------


def expected(listed: Counter[str], unlisted: Counter[tuple[str, int]], cc: str) -> str:
    """native when the listed fatbin or a linked cubin elsewhere has SASS that runs on ``cc``."""
    loadable = set(listed) | {t for t, e_type in unlisted if e_type == ET_EXEC}
    return "native" if any(runs(t, cc) for t in loadable) else "none"


def test_kernels_deep_lists_what_the_walk_finds() -> None:
    assert CUFFT is not None
    result = run_cli("kernels", "--deep", "--json", str(CUFFT), timeout=600)
    doc = json_output(result, "kernels")
    counted: dict[str, Counter[int]] = {}
    for entry in doc["files"][0]["entries"]:
        if entry["kind"] == "sass":
            counted.setdefault(entry["section"], Counter())[entry["arch"]] += entry["count"]
    assert counted == sass_archs_by_section(CUFFT)
    ldata = [e for e in doc["files"][0]["entries"] if e["section"] == ".ldata"]
    assert not any(e["relocatable"] for e in ldata)  # none read as a device-link input


def test_cufft_verdicts_in_its_environment(cufft_ldata: Counter[tuple[str, int]]) -> None:
    assert CUFFT is not None
    args = [a for gpu in GPUS for a in ("--gpu", gpu)]
    result = run_cli(
        "scan", "--python", str(CUFFT_VENV / "bin" / "python"), *args, "--json", timeout=600
    )
    doc = json_output(result, "scan")
    listed = listed_targets(CUFFT)
    rows = {p["gpu"]: p for p in doc["packages"] if p["package"] == "nvidia-cufft"}
    want = {gpu: expected(listed, cufft_ldata, cc) for gpu, cc in GPUS.items()}
    assert {gpu: rows[gpu]["verdict"] for gpu in GPUS} == want
    assert want["A100"] == want["H100"] == want["RTX PRO 6000"] == "native"
    assert want["V100"] == "none"
    for gpu, target in (("A100", "sm_80"), ("H100", "sm_90"), ("RTX PRO 6000", "sm_120")):
        lib = next(x for x in rows[gpu]["libraries"] if x["path"].endswith("libcufft.so.12"))
        assert lib["deciding_entry"] == f"{target} SASS in .ldata"
        assert lib["from_deep_search"]


@pytest.mark.parametrize("gpu", ["A100", "H100", "RTX PRO 6000"])
def test_kernels_require_passes_cufft(gpu: str) -> None:
    assert CUFFT is not None
    assert run_cli("kernels", str(CUFFT), "--require", gpu).returncode == 0


def test_kernels_require_v100_fails_both(cusparse_rodata: Counter[tuple[str, int]]) -> None:
    assert CUFFT is not None and CUSPARSE is not None
    assert expected(listed_targets(CUSPARSE), cusparse_rodata, "7.0") == "none"
    assert run_cli("kernels", str(CUFFT), "--require", "V100").returncode == 1
    sparse = run_cli("kernels", str(CUSPARSE), "--require", "V100")
    assert sparse.returncode == 1
    assert "sm_70 SASS in .rodata is relocatable device code" in sparse.stdout
    assert run_cli("kernels", str(CUSPARSE), "--require", "H100").returncode == 0
