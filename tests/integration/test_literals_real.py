"""Real libraries read with the one-pass search (Hyperscan) and with ``memmem`` give the same facts.

Each library is read twice, deeply (its data sections searched for containers and cubins) and
with its strings (dlopen names, loaders, run-time compilers, banner): once as archgap reads it,
once with the one-pass search switched off, so that every needle is found by libc's ``memmem``.
The two reads must agree on everything; the first must have used the one-pass search. cuFFT 12.0
keeps ~24,000 containers in ``.ldata`` and names ``libnvrtc.so.13``; CTranslate2 dlopens cuBLAS
by soname; warp bundles NVRTC; taichi's core holds LLVM's NVPTX backend (its target triple).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from archgap.probe.binary import literals
from archgap.probe.binary.fatbin import read_binary
from tests.helpers import need_data
from tests.unit.test_literals import need_hyperscan

SITE = "lib/python3.11/site-packages"
LIBRARIES = {
    "venv-nvidia-cufft-12.0.0.61": "nvidia/cu13/lib/libcufft.so.12",
    "venv-ctranslate2-4.8.5": "ctranslate2.libs/libctranslate2-a7a60d30.so.4.8.5",
    "venv-warp-lang-1.19.0": "warp/bin/warp.so",
    "venv-taichi-1.7.4": "taichi/_lib/core/taichi_python.cpython-311-x86_64-linux-gnu.so",
}


@pytest.mark.parametrize("venv", sorted(LIBRARIES))
def test_the_one_pass_search_finds_what_memmem_finds(
    venv: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root,) = need_data(venv)
    path = str(root / SITE / LIBRARIES[venv])
    need_hyperscan()
    scanned: list[int] = []
    places = literals.BlockIndex._places

    def counted(self: literals.BlockIndex, block: int) -> list[list[int]] | None:
        scanned.append(block)
        return places(self, block)

    monkeypatch.setattr(literals.BlockIndex, "_places", counted)
    one_pass = read_binary(path, deep=True)
    assert scanned, "the one-pass search was not used"
    monkeypatch.setattr(literals, "_hyperscan", False)
    assert read_binary(path, deep=True) == one_pass
    assert one_pass.error is None and (one_pass.dlopens or one_pass.compilers)
    assert Path(path).stat().st_size > 1 << 20
