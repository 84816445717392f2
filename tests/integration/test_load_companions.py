"""Companion pins in the load model, on real metadata: a package whose Requires-Dist pins a native
companion at another version than the installed one does not load with it.

From the wheels' own METADATA (tests/.data/venv-jax-cuda12-mismatch, scripts/testdata):
jax-cuda12-plugin 0.4.38's METADATA says ``Requires-Dist: jax-cuda12-pjrt ==0.4.38`` (and its
CUDA wheels only under ``extra == 'with_cuda'``); jax-cuda12-pjrt 0.4.36 is installed beside it.
PEP 440: 0.4.36 does not match ==0.4.38; an extra's requirements are required only with the extra.
"""

from __future__ import annotations

import json
from typing import Any

from archgap.analysis.scan import report_from_facts
from archgap.analysis.verdicts.load import load_model
from archgap.probe.collect import collect
from archgap.probe.environment.system import System
from archgap.probe.facts import Distribution, ProbeResponse, PythonEnvironment
from tests.helpers import DATA, need_data

JAX = DATA / "venv-jax-cuda12-mismatch"


def jax_facts() -> dict[str, Any]:
    need_data(JAX.name)
    python = str(JAX / "bin" / "python")
    request = {"python": {"python": python}, "binaries": {"of_python": True, "deep": False}}
    facts = collect(request, System.local(environ={"PATH": "/usr/bin:/bin"}))
    sent: dict[str, Any] = json.loads(json.dumps(facts))  # as it travels
    return sent


def test_the_probe_sends_the_requires_dist_lines() -> None:
    dists = jax_facts()["sections"]["python"]["distributions"]
    plugin = next(d for d in dists if d["name"] == "jax-cuda12-plugin")
    assert "jax-cuda12-pjrt ==0.4.38" in plugin["requires"]
    assert "nvidia-nccl-cu12 >=2.18.1 ; extra == 'with_cuda'" in plugin["requires"]


def test_a_pjrt_of_another_version_than_the_plugin_pins_is_a_load_finding() -> None:
    report = report_from_facts(ProbeResponse(**jax_facts()), ["H100"], driver="580.95.05")
    (finding,) = [f for f in report.load if f.check == "companion"]
    assert finding.package == "jax-cuda12-plugin" and finding.status == "fails"
    assert "0.4.38" in finding.cause and "jax-cuda12-pjrt 0.4.36" in finding.cause
    assert finding.fix == "pip install jax-cuda12-pjrt==0.4.38"
    # the extra's CUDA wheels are not installed, and are not asked for by this rule
    assert not any("nvidia-nccl" in f.cause for f in report.load if f.check == "companion")
    assert {p.package: p.verdict for p in report.packages}["jax-cuda12-pjrt"] != "native"


def native(name: str, version: str, *requires: str) -> Distribution:
    return Distribution(name, version, f"/sp/{name}-{version}.dist-info",
                        (f"/sp/{name}/lib.so",), requires)  # fmt: skip


def companion_fixes(*dists: Distribution) -> list[str]:
    env = PythonEnvironment("python", "3.11.9", ("/sp",), dists, ())
    return [f.fix for f in load_model(env, [], [], None, "").findings if f.check == "companion"]


def test_a_range_pin_and_what_is_not_a_pin() -> None:
    # jax 0.4.38's METADATA: Requires-Dist: jaxlib <=0.4.38,>=0.4.38 (a range that is one version)
    jax = native("jax", "0.4.38", "jaxlib <=0.4.38,>=0.4.38")
    assert companion_fixes(jax, native("jaxlib", "0.4.35")) == [
        "pip install 'jaxlib<=0.4.38,>=0.4.38'"
    ]
    assert companion_fixes(jax, native("jaxlib", "0.4.38")) == []
    # an extra's requirement, a marker false on Python 3.11, a companion not installed, an
    # unparsable line: none is a requirement of this environment
    other = native("a", "1", "jaxlib ==9 ; extra == 'cuda'", "jaxlib ==9 ; python_version < '3.9'",
                   "absent ==1", "not a [requirement")  # fmt: skip
    assert companion_fixes(other, native("jaxlib", "0.4.35")) == []
