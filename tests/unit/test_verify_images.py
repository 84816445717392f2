"""The images verify hands the driver: one fatbin entry re-wrapped as a one-entry container.

The bytes must be the entry's own, header and (compressed) payload unchanged, so the fatbin reader
must read the wrapped image back as exactly the entry it came from.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from archgap.analysis.verify import NOT_LOADABLE, load_plan
from archgap.probe.actions.verify import (
    _relocatable,
    child_env,
    choose_devices,
    containers,
    image_bytes,
)
from archgap.probe.binary.fatbin import read_binary
from archgap.probe.environment.system import System
from tests.helpers import CUDA_BIN


@pytest.mark.parametrize(
    "name", ["libmix.so", "libcomp_speed.so", "libcomp_all.so", "libhidden.so", "k_sm90a.cubin"]
)
def test_each_image_reads_back_as_its_entry(name: str, tmp_path: Path) -> None:
    binary = read_binary(str(CUDA_BIN / name), deep=True)
    ((library,), _) = load_plan([binary])
    assert len(library["entries"]) == len([e for e in binary.entries if e.kind != "ltoir"])
    fd = os.open(binary.path, os.O_RDONLY)
    try:
        for entry, wanted in zip(library["entries"], binary.entries, strict=False):
            image, why = image_bytes(fd, entry)
            assert image is not None, why
            copy = tmp_path / "image"
            copy.write_bytes(image)
            (got,) = read_binary(str(copy)).entries
            assert (got.kind, got.arch, got.variant, got.compression, got.stored_size) == (
                wanted.kind, wanted.arch, wanted.variant, wanted.compression, wanted.stored_size,
            )  # fmt: skip
    finally:
        os.close(fd)


def test_a_changed_file_is_not_loaded(tmp_path: Path) -> None:
    binary = read_binary(str(CUDA_BIN / "libptxonly.so"))
    ((library,), _) = load_plan([binary])
    entry = dict(library["entries"][0], arch=75)  # the header at that offset says compute_80
    fd = os.open(binary.path, os.O_RDONLY)
    try:
        assert image_bytes(fd, entry) == (None, "the entry at 0x2058 changed since it was read")
    finally:
        os.close(fd)


def test_archives_and_objects_are_not_loaded() -> None:
    binaries = [read_binary(str(CUDA_BIN / n)) for n in ("librdc.a", "rdc_a.o", "libscript.so")]
    plan, skipped = load_plan(binaries)
    assert plan == []
    assert skipped == [
        (str(CUDA_BIN / "librdc.a"), NOT_LOADABLE),
        (str(CUDA_BIN / "rdc_a.o"), NOT_LOADABLE),
    ]


def test_one_gpu_of_each_model_unless_named() -> None:
    devices = [
        {"index": 0, "name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0"},
        {"index": 1, "name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0"},
        {"index": 2, "name": "NVIDIA B200", "compute_capability": "10.0"},
    ]
    assert [d["index"] for d in choose_devices(devices, None)[0]] == [0, 2]
    assert choose_devices(devices, [1, 4]) == ([devices[1]], [["GPU 4", "the driver has no GPU 4"]])


def test_relocatable_cubins_are_not_offered(tmp_path: Path) -> None:
    # An ET_REL cubin (e_type 1, like the ones CUPTI keeps in .data) is linked at run time.
    data = bytearray((CUDA_BIN / "k_sm86.cubin").read_bytes())
    assert data[16:18] == b"\x02\x00"  # nvcc -cubin writes ET_EXEC
    relocatable = tmp_path / "rel.cubin"
    data[16:18] = b"\x01\x00"
    relocatable.write_bytes(bytes(data))
    fd = os.open(relocatable, os.O_RDONLY)
    other = os.open(CUDA_BIN / "k_sm86.cubin", os.O_RDONLY)
    try:
        assert _relocatable(fd, {"offset": 0}) is True
        assert _relocatable(other, {"offset": 0}) is False
    finally:
        os.close(fd)
        os.close(other)


def test_the_child_sees_pci_order_eager_loading_and_no_jit_cache() -> None:
    env = child_env(System.local(environ={"PATH": "/usr/bin", "CUDA_MODULE_LOADING": "LAZY"}))
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"  # indices as nvidia-smi numbers GPUs
    assert env["CUDA_CACHE_DISABLE"] == "1"  # JIT timed from scratch, ~/.nv left alone
    assert env["CUDA_MODULE_LOADING"] == "EAGER"  # every kernel reaches the GPU at load time


@pytest.mark.parametrize(
    ("name", "sizes"),
    [
        # nvcc 13 links a device-link container (one stub cubin per SASS target) before the
        # kernels' container: libmix.so's 7 SASS targets, then 7 SASS + 3 PTX.
        ("libmix.so", [7, 10]),
        # -arch=sm_90 over two .cu files: the stub, then sm_90 + compute_90 per translation unit.
        ("exe_two", [1, 2, 2]),
        ("k.fatbin", [3]),
        # hidden.c: a fatbin (sm_86, sm_110f, compute_89) in .rodata and a bare sm_89 cubin.
        ("libhidden.so", [3, 1]),
    ],
)
def test_entries_grouped_by_container(name: str, sizes: list[int]) -> None:
    binary = read_binary(str(CUDA_BIN / name), deep=True)
    ((library,), _) = load_plan([binary])
    fd = os.open(binary.path, os.O_RDONLY)
    try:
        assert [len(group) for group in containers(fd, library["entries"])] == sizes
    finally:
        os.close(fd)
