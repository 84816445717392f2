"""The GPUs of NVIDIA's legacy CUDA table (https://developer.nvidia.com/cuda-legacy-gpus): named
with ``--gpu``, in ``archgap gpus`` and in a log's prose, with the compute capability the table
gives. Every expectation below is the table's row (NVIDIA's wording), never archgap's output; the
architecture follows from the major (2.x Fermi, 3.x Kepler, 5.x Maxwell, 6.x Pascal: the CUDA
Programming Guide's compute capability table)."""

from __future__ import annotations

from pathlib import Path

import pytest

from archgap.analysis.explain.diagnosis import explain
from archgap.analysis.explain.logparse import parse_log
from archgap.analysis.verdicts.compat import UnknownGpu, resolve_gpu
from archgap.kb.gpus import find_products, identify, mentioned_products
from archgap.kb.signatures import load_signatures

BLIND = Path(__file__).resolve().parents[1] / "fixtures" / "explain_blind"

# (what a user types, the table's name, its compute capability, the architecture of that major)
TABLE_ROWS = [
    ("GTX 950M", "GeForce GTX 950M", "5.0", "Maxwell"),  # 5.0 row, GeForce notebook
    ("GTX 770", "GeForce GTX 770", "3.0", "Kepler"),  # 3.0 row, GeForce
    ("GeForce GTX 550 Ti", "GeForce GTX 550 Ti", "2.1", "Fermi"),  # 2.1 row, GeForce
    ("GTX 480", "GeForce GTX 480", "2.0", "Fermi"),  # 2.0 row
    ("Tesla C2070", "Tesla C2070", "2.0", "Fermi"),  # "Tesla C2050/C2070": 2.0
    ("NVS 5400M", "NVS 5400M", "2.1", "Fermi"),  # NVS mobile
    ("Quadro K2000D", "Quadro K2000D", "3.0", "Kepler"),
    ("GTX TITAN Black", "GeForce GTX TITAN Black", "3.5", "Kepler"),
    ("GTX 980M", "GeForce GTX 980M", "5.2", "Maxwell"),
    ("Quadro M5500M", "Quadro M5500M", "5.2", "Maxwell"),  # 5.2 on NVIDIA's page (not 5.0)
    ("Quadro P5200", "Quadro P5200", "6.1", "Pascal"),
    ("GeForce 800M", "GeForce 800M", "2.1", "Fermi"),
]


@pytest.mark.parametrize(("query", "name", "cc", "arch"), TABLE_ROWS)
def test_gpu_names_the_legacy_tables_row(query: str, name: str, cc: str, arch: str) -> None:
    found = find_products(query)
    assert [(p.name, p.compute_capability, p.architecture) for p in found] == [(name, cc, arch)]
    assert "cuda-legacy-gpus" in found[0].source
    target = resolve_gpu(query)  # what --gpu does with it
    assert str(target.compute_capability) == cc


@pytest.mark.parametrize(
    ("device", "cc"),
    [  # as the driver prints them (nvidia-smi / cudaGetDeviceProperties: "NVIDIA " + the name)
        ("NVIDIA GeForce GTX 770", "3.0"),
        ("GeForce GTX 550 Ti", "2.1"),
        ("NVIDIA GeForce GTX 950M", "5.0"),
        ("Tesla C2070", "2.0"),
    ],
)
def test_a_driver_reported_legacy_name_is_identified(device: str, cc: str) -> None:
    product = identify(device)
    assert product is not None and product.compute_capability == cc


def test_a_name_two_parts_share_decides_nothing() -> None:
    # The table gives the GTX 860M as "3.0/5.0" (a Kepler and a Maxwell part), the GT 730 at 3.5
    # and as "GT 730 DDR3,128bit" at 2.1, the GT 640 (GDDR5) at 3.5 and (GDDR3) at 2.1: the bare
    # name does not say which, so --gpu asks and neither a driver name nor prose decides.
    for name, ccs in (
        ("GTX 860M", ("3.0", "5.0")),
        ("GT 730", ("2.1", "3.5")),
        ("GT 640", ("2.1", "3.5")),
    ):
        with pytest.raises(UnknownGpu, match="ambiguous") as raised:
            resolve_gpu(name)
        assert all(f"= {cc}" in str(raised.value) for cc in ccs)
        assert identify(f"NVIDIA GeForce {name}") is None
        assert mentioned_products(f"my GeForce {name} fails") == ()
    # the table's full names still name one part each
    assert str(resolve_gpu("GT 640 (GDDR3)").compute_capability) == "2.1"
    assert str(resolve_gpu("GTX 860M (Maxwell)").compute_capability) == "5.0"
    # cupy#1651's log: "GPU is GF108 [GeForce GT 730]" (GF108 is the Fermi part)
    assert mentioned_products("GPU is GF108 [GeForce GT 730]") == ()


def test_notebook_numbers_are_not_model_sizes() -> None:
    # "GeForce 410M", "800M", "940M" are notebook parts; "pythia-410m" and "800M parameters" are
    # model sizes: prose names the GPU only with its GeForce.
    assert mentioned_products("fine-tuning pythia-410m on one card") == ()
    assert mentioned_products("a 800M parameter model") == ()
    assert [p.name for p in mentioned_products("laptop with a GeForce 800M")] == ["GeForce 800M"]
    assert [p.name for p in mentioned_products("NVIDIA GeForce 940M, cc 5.0")] == ["GeForce 940M"]


@pytest.mark.parametrize(
    ("text", "name", "cc"),
    [  # the current table's GPUs keep their matches beside the legacy names
        ("my GTX 1080 Ti", "GeForce GTX 1080 Ti", "6.1"),
        ("on an RTX 3060", "GeForce RTX 3060", "8.6"),
        ("Quadro P5000 here", "Quadro P5000", "6.1"),
        ("GeForce GTX 980 Ti", "GeForce GTX 980 Ti", "5.2"),
        ("a GTX 650 Ti", "GeForce GTX 650 Ti", "3.0"),  # not the GTX 650 Ti BOOST
        ("GTX 650 Ti BOOST", "GeForce GTX 650 Ti BOOST", "3.0"),
        ("Tesla K40m", "Tesla K40m", "3.5"),
    ],
)
def test_current_gpus_keep_their_names(text: str, name: str, cc: str) -> None:
    assert [(p.name, p.compute_capability) for p in mentioned_products(text)] == [(name, cc)]


def test_a_geforce_by_its_model_number_after_the_vendor() -> None:
    # hashcat#2628: "run with NVIDIA 3080" is the RTX 3080 (8.6); three digits after the vendor
    # are a driver branch ("NVIDIA 570.86.10"), never the Fermi GTX 570
    assert [p.name for p in mentioned_products("run with NVIDIA 3080")] == ["GeForce RTX 3080"]
    assert [p.name for p in mentioned_products("NVIDIA 3080 Ti")] == ["GeForce RTX 3080 Ti"]
    assert mentioned_products("NVIDIA 570.86.10 driver") == ()
    assert mentioned_products("nvidia 580 installed") == ()


def _blind_root_cause(name: str) -> str:
    return explain(parse_log((BLIND / name).read_text()), load_signatures(), None, ()).root_cause


def test_explain_decides_with_the_legacy_gpus_capability() -> None:
    # https://github.com/SYSTRAN/faster-whisper/issues/806: "no kernel image" on a GTX 950M; the
    # table: 5.0, so the package lacks sm_50
    cause = _blind_root_cause("faster-whisper-806-gtx950m-ctranslate2.log")
    assert "sm_50" in cause and "GeForce GTX 950M, 5.0" in cause
    # https://github.com/cupy/cupy/issues/2853: "GPU NVIDIA GTX580"; the table: GTX 580 is 2.0
    cause = _blind_root_cause("cupy-2853-gtx580-compute20-cuda90.log")
    assert "sm_20" in cause and ", 2.0)" in cause
    # https://github.com/cupy/cupy/issues/1651: "GF108 [GeForce GT 730]": the name alone is the
    # 3.5 or the 2.1 part, so the answer must not claim 3.5
    cause = _blind_root_cause("cupy-1651-nvrtc-compute21-cuda91.log")
    assert "sm_21" in cause and "3.5" not in cause
