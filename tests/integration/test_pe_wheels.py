"""Windows wheels and DLLs: ``kernels`` and ``scan`` on real ``win_amd64``/``win_arm64`` wheels
(scripts/testdata: tests/.data/wheels-win), read from Linux, never installed nor imported.

Expectations, from oracles archgap does not write:
- the section table, the machine and the import/delay-load tables from Microsoft's PE format
  specification, parsed field by field in ``tests.pe_build`` (its offsets, not the reader's);
- the fatbin containers by an independent walk written here: the ``__fatBinC_Wrapper_t`` records
  of ``.nvFatBinSegment`` (``.nvFatBi`` in an image: 24 bytes, magic 0x466243B1, version, the
  container's address) say which containers the runtime registers; those in ``.nv_fatbin``
  (``.nv_fatb``: an image keeps 8 bytes of a section name) are the ones cuobjdump lists on Linux.
  Each container (magic 0xBA55ED50, version 1, 16-byte header, u64 size of its entries) and its
  entries (u16 kind 1 PTX / 2 SASS, u32 header size at +4, u64 payload size at +8, u32 arch at
  +28) are walked here;
- the expected architectures, written by hand from that walk, agree with the Linux builds of
  the same releases (bitsandbytes 0.50.2's libbitsandbytes_cuda*.so: the same targets).
"""

from __future__ import annotations

import io
import struct
import zipfile
from collections import Counter
from pathlib import Path

import pytest

from archgap.archives.wheel import read_wheel
from archgap.probe.binary.fatbin import read_bytes
from tests.helpers import DATA, json_output, run_cli
from tests.pe_build import spec_imports, spec_machine, spec_sections

WHEELS = DATA / "wheels-win"
BNB = WHEELS / "bitsandbytes-0.50.2-py3-none-win_amd64.whl"
BNB_ARM = WHEELS / "bitsandbytes-0.50.2-py3-none-win_arm64.whl"
CURAND = WHEELS / "nvidia_curand-10.4.0.35-py3-none-win_amd64.whl"
CUPTI = WHEELS / "nvidia_cuda_cupti-13.0.85-py3-none-win_amd64.whl"
RUNTIME = WHEELS / "nvidia_cuda_runtime-13.0.96-py3-none-win_amd64.whl"
pytestmark = pytest.mark.skipif(not WHEELS.exists(), reason="scripts/testdata downloads them")

WRAPPER_MAGIC = 0x466243B1
CONTAINER_MAGIC = 0xBA55ED50
KINDS = {1: "ptx", 2: "sass"}

# By hand, from the independent walk (and the Linux .so of the same release for bitsandbytes).
CUDA_11_12 = {("sass", a) for a in (60, 70, 75, 80, 86, 89, 90)}
CUDA_128 = {("sass", a) for a in (70, 75, 80, 86, 89, 90, 100, 120)}
CUDA_13 = {("sass", a) for a in (75, 80, 86, 89, 90, 100, 120)}
EXPECTED: dict[tuple[Path, str], set[tuple[str, int]]] = {
    (BNB, "bitsandbytes/libbitsandbytes_cuda118.dll"): CUDA_11_12,
    (BNB, "bitsandbytes/libbitsandbytes_cuda121.dll"): CUDA_11_12,
    (BNB, "bitsandbytes/libbitsandbytes_cuda126.dll"): CUDA_11_12,
    (BNB, "bitsandbytes/libbitsandbytes_cuda128.dll"): CUDA_128,
    (BNB, "bitsandbytes/libbitsandbytes_cuda130.dll"): CUDA_13,
    (BNB, "bitsandbytes/libbitsandbytes_cuda132.dll"): CUDA_13,
    (BNB_ARM, "bitsandbytes/libbitsandbytes_cuda134.dll"): {("sass", 121)},
    (CURAND, "nvidia/cu13/bin/x86_64/curand64_10.dll"): {
        *(("sass", a) for a in (75, 80, 86, 89, 90, 100, 103, 120, 121)),
        ("ptx", 121),
    },
}


def member(wheel: Path, name: str) -> bytes:
    with zipfile.ZipFile(wheel) as zf:
        return zf.read(name)


def registered_listed(data: bytes) -> Counter[tuple[str, int]]:
    """(kind, arch) of every entry of the containers that the wrapper records point at inside
    ``.nv_fatb``: the independent walk."""
    sections = spec_sections(data)
    at = struct.unpack_from("<I", data, 0x3C)[0]
    image_base = struct.unpack_from("<Q", data, at + 24 + 24)[0]

    def section_of(rva: int) -> tuple[str, int]:
        for s in sections:
            if s["va"] <= rva < s["va"] + s["raw_size"]:
                return s["name"], s["raw"] + rva - s["va"]
        raise AssertionError(f"RVA 0x{rva:x} in no section")

    found: Counter[tuple[str, int]] = Counter()
    wrappers = [s for s in sections if s["name"] == ".nvFatBi"]
    assert len(wrappers) == 1
    start = wrappers[0]["raw"]
    for pos in range(start, start + wrappers[0]["virtual_size"] - 23, 8):
        magic, _, address = struct.unpack_from("<IIQ", data, pos)
        if magic != WRAPPER_MAGIC:
            continue
        name, container = section_of(address - image_base)
        if name != ".nv_fatb":
            continue  # an -rdc build's relocatable copy (__nv_rel): linked, not loaded
        head_magic, version, header, size = struct.unpack_from("<IHHQ", data, container)
        assert (head_magic, version, header) == (CONTAINER_MAGIC, 1, 16)
        entry, end = container + 16, container + 16 + size
        while entry + 64 <= end:
            kind, _, entry_header, payload = struct.unpack_from("<HHIQ", data, entry)
            if kind == 0:
                break
            found[(KINDS.get(kind, str(kind)), struct.unpack_from("<I", data, entry + 28)[0])] += 1
            entry += entry_header + payload
    return found


def _key(item: tuple[Path, str]) -> tuple[str, str]:
    return item[0].name, item[1]


WALKED = sorted(EXPECTED, key=_key)


@pytest.mark.parametrize(("wheel", "name"), WALKED, ids=str)
def test_kernels_of_a_dll_agree_with_the_independent_walk(wheel: Path, name: str) -> None:
    data = member(wheel, name)
    facts = read_bytes(name, data)
    walked = registered_listed(data)
    listed = Counter((e.kind, e.arch) for e in facts.entries if e.listed for _ in range(e.count))
    assert facts.format == "pe" and facts.error is None
    assert listed == walked
    assert set(walked) == EXPECTED[(wheel, name)]
    assert {e.section for e in facts.entries if e.listed} == {".nv_fatbin"}


@pytest.mark.parametrize(
    ("wheel", "name"),
    [
        (BNB, "bitsandbytes/libbitsandbytes_cuda121.dll"),
        (BNB, "bitsandbytes/libbitsandbytes_cuda130.dll"),
        (BNB_ARM, "bitsandbytes/libbitsandbytes_cuda134.dll"),
        (CURAND, "nvidia/cu13/bin/x86_64/curand64_10.dll"),
        (RUNTIME, "nvidia/cu13/bin/x86_64/cudart64_13.dll"),
        (CUPTI, "nvidia/cu13/bin/x86_64/cupti64_2025.3.1.dll"),
    ],
    ids=lambda v: str(v).rsplit("/", 1)[-1],
)
def test_machine_and_imports_as_the_specification_reads_them(wheel: Path, name: str) -> None:
    data = member(wheel, name)
    facts = read_bytes(name, data)
    imports, delayed = spec_imports(data)
    machine = {0x8664: "x86-64", 0xAA64: "aarch64"}[spec_machine(data)]
    assert facts.machine == machine
    assert facts.needed == tuple(dict.fromkeys(imports + delayed))
    assert facts.runpath == ()


def test_what_the_dlls_import_says_their_cuda() -> None:
    """By hand: bitsandbytes' CUDA 12.1 build imports CUDA 12's runtime and cuBLAS; its CUDA 13
    builds link the runtime statically and import CUDA 13's cuBLAS; the ARM64 build is ARM64."""
    cuda121 = read_bytes("x", member(BNB, "bitsandbytes/libbitsandbytes_cuda121.dll"))
    cuda130 = read_bytes("x", member(BNB, "bitsandbytes/libbitsandbytes_cuda130.dll"))
    arm = read_bytes("x", member(BNB_ARM, "bitsandbytes/libbitsandbytes_cuda134.dll"))
    assert cuda121.needed is not None and cuda130.needed is not None
    assert {"cudart64_12.dll", "cublas64_12.dll", "cublasLt64_12.dll"} <= set(cuda121.needed)
    assert {"cublas64_13.dll", "cublasLt64_13.dll"} <= set(cuda130.needed)
    assert not any(n.lower().startswith("cudart64") for n in cuda130.needed)
    assert arm.machine == "aarch64"


def test_a_deep_read_finds_the_profiler_cubins_in_data_sections() -> None:
    """CUPTI keeps containers in .rdata (the test finds the container magic there itself): a
    plain read lists nothing, a deep one finds SASS there, never in code."""
    data = member(CUPTI, "nvidia/cu13/bin/x86_64/cupti64_2025.3.1.dll")
    rdata = next(s for s in spec_sections(data) if s["name"] == ".rdata")
    magic = struct.pack("<I", CONTAINER_MAGIC)
    assert data.count(magic, rdata["raw"], rdata["raw"] + rdata["raw_size"]) > 0
    plain = read_bytes("cupti", data, deep=False)
    deep = read_bytes("cupti", data, deep=True)
    assert plain.entries == ()
    assert deep.entries and {e.section for e in deep.entries} <= {".rdata", ".data"}
    assert not any(e.listed for e in deep.entries)


def test_the_wheel_reads_as_its_members_do() -> None:
    found = read_wheel(str(CURAND))
    (dll,) = [b for b in found.binaries if b.path.endswith(".dll")]
    alone = read_bytes(dll.path, member(CURAND, "nvidia/cu13/bin/x86_64/curand64_10.dll"))
    assert (dll.format, dll.entries, dll.machine) == ("pe", alone.entries, "x86-64")
    assert found.distributions[0].name == "nvidia-curand"
    assert dll.path in found.distributions[0].native_files
    notes = [p.reason for p in found.problems]
    assert notes == [
        "a Windows wheel (win_amd64): judged for its device code; it cannot be installed on "
        "this Linux host"
    ]


def test_kernels_on_a_dll_file(tmp_path: Path) -> None:
    dll = tmp_path / "libbitsandbytes_cuda134.dll"
    dll.write_bytes(member(BNB_ARM, "bitsandbytes/libbitsandbytes_cuda134.dll"))
    doc = json_output(run_cli("kernels", str(dll), "--json"), "kernels")
    (row,) = doc["files"]
    assert (row["format"], row["machine"]) == ("pe", "aarch64")
    assert {(e["kind"], e["arch"]) for e in row["entries"]} == {("sass", 121)}


def test_scan_judges_a_windows_wheel_per_gpu() -> None:
    """curand's CUDA 13 build holds sm_75 SASS: native on a T4 (7.5). It holds sm_121 SASS too,
    but it is x86-64 and sm_121 systems (GB10) are aarch64 (kb/gpus.json host_cpu): blocked there,
    while bitsandbytes' win_arm64 build (ARM64, sm_121 SASS) is native. A driver below R580
    cannot run CUDA 13 (NVIDIA's minor-version compatibility table): curand's CUDA major is 13
    from its PTX ISA. The wheel is named as a Windows wheel judged on Linux."""
    doc = json_output(run_cli("scan", str(CURAND), "--gpu", "sm_121,sm_75", "--json"), "scan")
    arm = json_output(run_cli("scan", str(BNB_ARM), "--gpu", "sm_121", "--json"), "scan")
    verdicts = {(v["package"], v["gpu"]): v for v in doc["packages"] + arm["packages"]}
    assert verdicts[("nvidia-curand", "sm_75")]["verdict"] == "native"
    x86 = verdicts[("nvidia-curand", "sm_121")]
    assert x86["verdict"] == "blocked"
    assert "it is x86-64 and sm_121 systems are aarch64" in x86["reason"]
    assert verdicts[("bitsandbytes", "sm_121")]["verdict"] == "native"
    assert {p["reason"] for p in doc["problems"] + arm["problems"]} >= {
        "a Windows wheel (win_amd64): judged for its device code; it cannot be installed on "
        "this Linux host",
        "a Windows wheel (win_arm64): judged for its device code; it cannot be installed on "
        "this Linux host",
    }
    old = run_cli("scan", str(CURAND), "--gpu", "sm_75", "--driver", "570.86.10")
    assert "needs driver >= 580 (CUDA 13" in old.stdout


def test_raw_member_bytes_match_a_file_read(tmp_path: Path) -> None:
    """The same DLL read from memory (a wheel's member) and from a file: one answer."""
    data = member(BNB, "bitsandbytes/libbitsandbytes_cuda128.dll")
    path = tmp_path / "b.dll"
    path.write_bytes(data)
    from archgap.probe.binary.fatbin import read_binary

    for deep in (False, True):
        assert read_binary(str(path), deep).entries == read_bytes(str(path), data, deep).entries
    assert io.BytesIO(data).read(2) == b"MZ"
