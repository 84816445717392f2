"""Knowledge as data (issue 44 item 4): a pretend CUDA 14 and a pretend FlashInfer release,
added by editing the kb's JSON alone (the loader returns amended copies, every cached loader is
cleared), and the product answers from them. Where an answer stays the old one, the knowledge
it needed was in code."""

from __future__ import annotations

import copy
import functools
import sys
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest

import archgap.kb as kb_package
from archgap.analysis.fixes import engine
from archgap.analysis.verdicts import drivers
from archgap.analysis.verdicts.compat import ComputeCapability, GpuTarget
from archgap.analysis.versions import jit_verdict
from archgap.kb import load as kb_load
from archgap.kb import toolchain as kb

Edit = Callable[[Any], None]
SRC = "pretend (test_kb_pretend_release.py)"


def _clear_caches() -> None:
    for name, module in list(sys.modules.items()):
        if not name.startswith("archgap") or module is None:
            continue
        for value in list(vars(module).values()):
            clear = getattr(value, "cache_clear", None)
            if callable(clear) and getattr(value, "__module__", None) == name:
                clear()


def _amend(monkeypatch: pytest.MonkeyPatch, edits: dict[str, Edit]) -> None:
    loader = kb_package.load_json
    original = loader.__wrapped__

    @functools.cache
    def amended(name: str) -> Any:
        data = copy.deepcopy(original(name))
        if name in edits:
            edits[name](data)
        return data

    for name, module in list(sys.modules.items()):
        if name.startswith("archgap") and getattr(module, "load_json", None) is loader:
            monkeypatch.setattr(module, "load_json", amended)
    _clear_caches()


# --- the pretend CUDA 14: a toolkit with a new target, a PTX ISA, a GA driver and a window --


def _cuda14_toolkit(data: Any) -> None:
    data["toolkits"].append(
        {
            "cuda": "14.0",
            "targets_added": ["sm_130", "sm_130a", "sm_130f"],
            "targets_dropped": ["sm_75"],
            "ptx_isa": "10.0",
            "min_driver_linux": "650.10.01",
            "source": SRC,
        }
    )


def _cuda14_drivers(data: Any) -> None:
    data["minor_version_compat"].insert(
        0, {"runtime_major": 14, "driver_min": "650", "source": SRC}
    )


def _cuda14_numba(data: Any) -> None:
    for rule in data["driver_jit"]:
        rule["extras"]["14"] = f"{rule['package']}[cu14]"


# --- the pretend FlashInfer: an older first modelled release and a new release with an SM 13
# rule (13.x needs CUDA >= 14.0, a family target) ----------------------------------------------


def _flashinfer(data: Any) -> None:
    ranges = data["flashinfer"]["ranges"]
    older = copy.deepcopy(ranges[0])
    older.update({"min": "0.2.0", "max_excl": ranges[0]["min"], "source": SRC})
    newer = copy.deepcopy(ranges[-1])
    ranges[-1]["max_excl"] = "0.9.0"
    newer.update({"min": "0.9.0", "max_excl": None, "source": SRC})
    newer["normalise"].insert(
        0,
        {
            "major": 13,
            "needs": [{"cuda_min": "14.0", "suffix": "f"}],
            "raise": "SM 13.x requires CUDA >= 14.0",
        },
    )
    ranges.insert(0, older)
    ranges.append(newer)


@pytest.fixture
def pretend(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    _amend(
        monkeypatch,
        {
            "toolkits.json": _cuda14_toolkit,
            "drivers.json": _cuda14_drivers,
            "load.json": _cuda14_numba,
            "jit.json": _flashinfer,
        },
    )
    yield
    monkeypatch.undo()
    _clear_caches()


def _gpu(cc: str) -> GpuTarget:
    parsed = ComputeCapability.parse(cc)
    assert parsed is not None
    return GpuTarget(f"sm_{cc.replace('.', '')}", parsed, "named", "test")


def test_cuda14_toolkit_is_known_from_data(pretend: None) -> None:
    release = kb.toolkit_release("14.0")
    assert release is not None and release.ptx_isa == "10.0"
    assert kb.toolkit_can_target("14.0", "sm_130f")
    assert not kb.toolkit_can_target("14.0", "sm_75")  # dropped by the pretend release
    assert kb.toolkit_range_for("sm_75") == ("10.0", "13.5")
    assert kb.first_toolkit_for("compute_130a") == "14.0"


def test_cuda14_driver_floors_come_from_data(pretend: None) -> None:
    assert kb.driver_cuda_version("650.10.01") == "14.0"
    assert kb.max_ptx_isa_for_driver("650.10.01") == "10.0"
    runs, why = kb.driver_runs_runtime("650.0", "14.2")  # in the pretend 14.x window
    assert runs is True and "CUDA 14.x runs on driver >= 650" in why
    assert kb.driver_runs_runtime("595.1", "14.0")[0] is False
    # the fix engine's cap on a toolkit switch names the newest major the data know
    assert "cannot run CUDA 14.x" in engine._driver_cap("595.1")
    assert "CUDA 13.x at most" in engine._driver_cap("595.1")


def test_cuda14_numba_install_comes_from_data(
    pretend: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """numba-cuda's NVVM missing: the install is the extra of the newest CUDA major the driver
    runs, read from load.json, for a major the code never named."""
    monkeypatch.setattr(drivers, "_find_nvvm", lambda *args: None)
    rule = kb_load.driver_jit_rules()[0]
    loader = SimpleNamespace()
    gap = drivers._driver_jit_gap(rule, None, None, loader, None, "650.10.01")  # type: ignore[arg-type]
    assert gap is not None and gap[3] == "pip install 'numba-cuda[cu14]'"
    gap = drivers._driver_jit_gap(rule, None, None, loader, None, "590.44.01")  # type: ignore[arg-type]
    assert gap is not None and gap[3] == "pip install 'numba-cuda[cu13]'"


def test_new_flashinfer_release_gets_its_rule(pretend: None) -> None:
    rng = kb.flashinfer_range("0.9.1")
    assert rng is not None and rng.source == SRC
    verdict = jit_verdict("flashinfer-python", "0.9.1", _gpu("13.0"))
    assert verdict is not None
    assert "compute_130f" in verdict[1] and "CUDA >= 14.0" in verdict[1]


def test_first_modelled_flashinfer_release_comes_from_data(pretend: None) -> None:
    modelled = jit_verdict("flashinfer-python", "0.2.5", _gpu("9.0"))
    assert modelled is not None and "compute_90a" in modelled[1]
    older = jit_verdict("flashinfer-python", "0.1.6", _gpu("9.0"))
    assert older is not None and older[1].endswith("archgap models its rules from 0.2.0")


def _pretend_gpu(data: Any) -> None:
    data["gpus"].append(
        {
            "name": "NVIDIA Pretend 13",
            "compute_capability": "13.0",
            "architecture": "Pretend",
            "segment": "datacenter",
            "source": SRC,
        }
    )


def test_log_naming_a_new_major_from_data(pretend: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """FlashInfer's new per-major rule ("SM 13.x requires CUDA >= 14.0") names the major the way
    the data word it: each GPU of that major the data know is a case of its own."""
    from archgap.analysis.explain import diagnosis

    _amend(
        monkeypatch,
        {
            "toolkits.json": _cuda14_toolkit,
            "drivers.json": _cuda14_drivers,
            "jit.json": _flashinfer,
            "gpus.json": _pretend_gpu,
        },
    )
    log = SimpleNamespace(messages=[(3, "RuntimeError: SM 13.x requires CUDA >= 14.0")])
    assert [str(cc) for cc in diagnosis._major_only(log)] == ["13.0"]  # type: ignore[arg-type]


def test_install_names_for_cuda14_come_from_data(pretend: None) -> None:
    """CuPy's wheel and torch's index for a CUDA, per their install pages (load.json)."""
    names = kb_load.install_names()
    assert names.cupy("14.0") == "cupy-cuda14x"
    assert names.cupy("10.2") == "cupy-cuda102"  # one wheel per minor before CUDA 11
    assert names.torch_index_of("14.0") == ("cu140", "https://download.pytorch.org/whl/cu140")


# --- the pretend CUDA 14 moves the "long dropped" threshold and renumbers a GPU -------------


def _long_dropped_13(data: Any) -> None:  # over the 'pretend' fixture's toolkits.json
    data["long_dropped"]["before"] = "13.0"


def _pretend_renumbered(data: Any) -> None:
    _pretend_gpu(data)
    data["gpus"][-1].update({"compute_capability": "13.2", "host_cpu": "aarch64"})
    data["renumbered"].append(
        {"old": "13.1", "new": "13.2", "toolkit": "14.0", "source": SRC, "undocumented": ""}
    )


def test_long_dropped_threshold_comes_from_data(
    pretend: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the threshold at CUDA 13.0 (toolkits.json "long_dropped"), Maxwell's sm_52, whose
    last toolkit is 12.9, is one current builds leave out; Turing's sm_75, dropped by the
    pretend 14.0 after 13.5, is not."""
    from archgap.analysis.explain.rules.facts import LogFacts
    from archgap.analysis.explain.rules.kernel_image import no_kernel_image

    _amend(monkeypatch, {"toolkits.json": _long_dropped_13})
    maxwell = no_kernel_image(LogFacts("", None, ("5.2",), "", False, None, {}, (), None))
    assert maxwell is not None and "no longer ships sm_52" in maxwell.cause
    assert "CUDA 13.0 dropped it (the last toolkit that builds it is 12.9)" in maxwell.cause
    turing = no_kernel_image(LogFacts("", None, ("7.5",), "", False, None, {}, (), None))
    assert turing is not None and "no longer ships" not in turing.cause


def test_the_release_that_dropped_an_extension_target_comes_from_data(pretend: None) -> None:
    """TORCH_CUDA_ARCH_LIST's 7.5 with the pretend nvcc 14.0 (which dropped sm_75): the toolkit
    fix names the release that dropped it, from toolkits.json."""
    from archgap.analysis.jit.torch_ext import ArchEntry, drop_or_toolkit_fixes

    fixes = drop_or_toolkit_fixes([ArchEntry("7.5", 75, "", False)], "14.0")
    toolkit = [f for f in fixes if f.kind == "toolkit"]
    assert toolkit and toolkit[0].action.startswith("build with CUDA <= 13.5")
    assert "CUDA 14.0 dropped compute_75" in toolkit[0].tradeoff


def test_a_renumbered_capability_names_its_release_from_data(
    pretend: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from archgap.analysis.verdicts.compat import capability_host_cpu

    _amend(monkeypatch, {"gpus.json": _pretend_renumbered})
    host, why = capability_host_cpu(ComputeCapability(13, 1))
    assert host == "aarch64"
    assert "compute capability 13.2 (13.1 before CUDA 14.0) is only NVIDIA Pretend 13" in why


def _cuda14_family_only(data: Any) -> None:
    data["toolkits"].append(
        {
            "cuda": "14.0",
            "targets_added": ["sm_130", "sm_130f"],  # a family target and no 'a' one
            "targets_dropped": [],
            "ptx_isa": "10.0",
            "min_driver_linux": "650.10.01",
            "source": SRC,
        }
    )


def test_the_arch_list_fix_offers_the_family_target_an_nvcc_has(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """FlashInfer 0.7.4 builds 13.0 as 13.0a (jit.json: 'a' from major 10); a pretend nvcc 14.0
    with sm_130f and no sm_130a cannot build that, and FLASHINFER_CUDA_ARCH_LIST is used
    verbatim: 13.0f, which runs on 13.0 itself (its own family), is the fix."""
    _amend(monkeypatch, {"toolkits.json": _cuda14_family_only})  # not over the 'pretend' one
    try:
        case = engine.FlashinferCase("0.7.4", ComputeCapability(13, 0), "14.0")
        fixes = engine.flashinfer_fixes(case)
    finally:
        monkeypatch.undo()
        _clear_caches()
    assert fixes[0].env == (("FLASHINFER_CUDA_ARCH_LIST", "13.0f"),)
    assert "nvcc 14.0 can build compute_130f" in fixes[0].action
