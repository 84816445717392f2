"""Companions missing or out of range, on the real spconv-cu120 2.3.6 and cumm-cu120 0.6.3 wheels
(their dist-info and Python sources, unpacked by scripts/testdata; the native files their
RECORDs list are left out, and nothing here reads them).

Expectations, from the released files:
- spconv_cu120-2.3.6.dist-info/METADATA: Requires-Dist: pccm (>=0.4.0), ccimport (>=0.4.0),
  pybind11 (>=2.6.0), fire, numpy, cumm-cu120 (<0.5.0,>=0.4.5); no extras.
- spconv/__init__.py runs `from . import build as _build` first, then `from .core import
  ConvAlgo, AlgoHint`, at module level; spconv/build.py line 18 `import pccm`, line 20 `from
  ccimport.compat import InWindows`, line 21 `from .constants import ...`; spconv/constants.py
  line 19 `from cumm.gemm.constants import NVRTCMode` (core.py line 15 imports cumm again).
  The import system: a module-level import runs when the module is imported (a submodule when
  first imported, depth first), and a module no path entry holds raises ModuleNotFoundError.
  So `import spconv` without cumm-cu120 fails, at pccm first in a --no-deps install.
- cumm_cu120-0.6.3.dist-info/METADATA: Requires-Dist: pccm>=0.4.15, pybind11>=2.6.0, fire,
  numpy, contextvars; python_version == "3.6" (false on 3.11). PEP 440: 0.6.3 is not in
  <0.5.0,>=0.4.5. cumm/__init__.py line 17 `import pccm`; line 23 `from ccimport import compat`,
  a module its METADATA does not require: no requirement to name, no finding for it.
- pybind11, fire and numpy are required but not imported at module level by the modules
  `import spconv` runs: not findings (whether they are needed later is not the import's).
"""

from __future__ import annotations

import json
from typing import Any

from archgap.analysis.scan import report_from_facts
from archgap.probe.collect import collect
from archgap.probe.environment.system import System
from archgap.probe.facts import ProbeResponse
from tests.helpers import DATA, need_data


def report(name: str) -> Any:
    need_data(name)
    request = {"python": {"python": str(DATA / name / "bin" / "python")}}
    facts = collect(request, System.local(environ={"PATH": "/usr/bin:/bin"}))
    sent = json.loads(json.dumps(facts))  # as it travels
    return report_from_facts(ProbeResponse(**sent), ["H100"], driver="580.95.05")


def companions(name: str) -> dict[str, Any]:
    return {f.package: f for f in report(name).load if f.check == "companion"}


def test_spconv_without_cumm_cannot_be_imported() -> None:
    found = companions("venv-spconv-alone")
    spconv = found.pop("spconv-cu120")
    assert not found
    assert spconv.status == "fails" and spconv.gates_exit_code
    assert "ModuleNotFoundError: No module named 'pccm'" in spconv.cause
    assert "cumm (spconv/constants.py:19)" in spconv.cause
    assert "pccm (spconv/build.py:18)" in spconv.cause
    assert "ccimport (spconv/build.py:20)" in spconv.cause
    # in the order `import spconv` meets them: build.py 18, 20, then constants.py 19
    assert spconv.fix == "pip install 'pccm>=0.4.0' 'ccimport>=0.4.0' 'cumm-cu120<0.5.0,>=0.4.5'"
    assert not any(name in spconv.cause for name in ("numpy", "fire", "pybind11"))
    assert {p.rsplit("/", 1)[-1] for p in spconv.libraries} == {
        "core_cc.cpython-311-x86_64-linux-gnu.so",
        "libcudart-5a077122.so.12.0.107",
    }


def test_cumm_out_of_the_range_spconv_requires() -> None:
    found = companions("venv-spconv-cumm")
    spconv = found["spconv-cu120"]
    # the range: cumm-cu120 0.6.3 is installed, 2.3.6 needs <0.5.0,>=0.4.5
    assert "requires cumm-cu120<0.5.0,>=0.4.5, and cumm-cu120 0.6.3 is installed" in spconv.cause
    assert spconv.fix == "pip install 'cumm-cu120<0.5.0,>=0.4.5'"
    # cumm is installed now: spconv's import still needs pccm and ccimport, not cumm
    missing = [f for f in report("venv-spconv-cumm").load
               if f.check == "companion" and "cannot be imported" in f.cause]  # fmt: skip
    causes = {f.package: f.cause for f in missing}
    assert "cumm (" not in causes["spconv-cu120"]
    # cumm imports pccm (required: a finding) and ccimport (not required: none)
    assert "pccm (cumm/__init__.py:17)" in causes["cumm-cu120"]
    assert "ccimport" not in causes["cumm-cu120"]
