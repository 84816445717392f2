"""Which real libraries can load device code outside their listed fatbin, from their content.

Real wheels of tests/.data (scripts/testdata; installed --no-deps, never imported). What each
holds, from binutils and not from archgap:

- nvidia-cufft 12.0.0.61's libcufft.so.12 (torch 2.14.1+cu130's pin; kernels in ``.ldata``):
  ``readelf -d`` needs no libcuda or libcudart; ``nm -D --undefined-only`` imports ``dlopen``
  and no ``cu*`` function; ``strings -a`` finds ``libcuda.so.1``, ``cuModuleLoadData`` and
  ``cuModuleLoadDataEx``: its statically linked CUDA runtime opens the driver itself.
- jax-cuda12-plugin 0.4.38's ``_triton.so`` (loads the cubins Triton compiles): imports ``dlopen``
  and no ``cu*`` function, no ``libcuda`` string (XLA's stub builds the name at run time), but
  keeps ``cuModuleLoadData`` and ``cuLibraryLoadData`` in ``.rodata`` (``strings -a``), which it
  resolves by name.
- its ``_prng.so`` (listed kernels; registered through XLA's runtime stub): no ``cu*`` import,
  no ``libcuda`` string, no ``LoadData`` string: it has no way to load device code it does not
  list.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from archgap.analysis.deep_plan import deep_search_plan
from archgap.probe.binary.deep_plan import judged_native_sets, loads_device_code, needs_deep_search
from archgap.probe.binary.fatbin import read_binary
from tests.helpers import need_data

CUFFT = "venv-nvidia-cufft-12.0.0.61"
JAX = "venv-jax-cuda12-mismatch"


def _one(venv: Path, pattern: str) -> str:
    found = sorted(venv.glob(f"lib/python*/site-packages/{pattern}"))
    assert len(found) == 1, found
    return str(found[0])


def test_cufft_opens_the_driver_itself_and_is_searched() -> None:
    (venv,) = need_data(CUFFT)
    facts = read_binary(_one(venv, "nvidia/*/lib/libcufft.so.12"), deep=False)
    assert facts.loader_imports == ()
    assert facts.loader_names == ("cuModuleLoadData",)  # ...DataEx ends past the mark's name
    assert facts.dlopens is not None and "libcuda.so.1" in facts.dlopens
    assert loads_device_code(facts) == "dlopens libcuda.so.1"
    # its listed fatbin holds one sm_75 cubin: every other GPU of the matrix needs .ldata
    judged = judged_native_sets(deep_search_plan(), None)
    assert judged is not None and needs_deep_search(facts, judged)


@pytest.mark.parametrize(
    ("member", "names", "sign"),
    [
        ("_triton.so", ("cuLibraryLoadData", "cuModuleLoadData"), "names cuLibraryLoadData"),
        ("_prng.so", (), ""),
    ],
)
def test_a_loader_resolved_by_name_is_read_from_the_strings(
    member: str, names: tuple[str, ...], sign: str
) -> None:
    (venv,) = need_data(JAX)
    facts = read_binary(_one(venv, f"jax_cuda12_plugin/{member}"), deep=False)
    assert facts.loader_imports == ()
    assert facts.loader_names == names
    assert not any(n.startswith("libcuda.so") for n in facts.dlopens or ())
    assert loads_device_code(facts) == sign
