"""Boundaries of the load model: the driver against the GPU, a package's torch gate, the build a
loader picks. Expectations from the rules' owners, not from archgap's output:
- NVIDIA's CUDA Toolkit, Driver and Architecture Matrix: Volta (7.0) is run from CUDA 9.0's
  driver 384.81, and R580 is the last branch for Maxwell, Pascal and Volta; Blackwell (10.0,
  12.0) from CUDA 12.8's 570.26.
- PTX ISA release history: ISA 9.0 is CUDA 13.0's, 8.x CUDA 12's; a library carries the highest
  ISA its toolkit emits, so its highest ISA says its CUDA.
- torchao 0.18.0 torchao/__init__.py: its _C*.so load only with torch >= 2.11.0, and
  ``TORCHAO_FORCE_SKIP_LOADING_SO_FILES == "1"`` skips them (any other value does not).
- bitsandbytes 0.50.2 cextension.py: BNB_CUDA_VERSION names the build
  (libbitsandbytes_cuda<value>.so, the last digit the minor: "92" is CUDA 9.2, "128" 12.8), with
  no fallback; without it torch.version.cuda's build, else the highest of the same major below,
  else the lowest of the same major above, never another major.
"""

from __future__ import annotations

import pytest

from archgap.analysis.verdicts.compat import resolve_gpu
from archgap.analysis.verdicts.drivers import cuda_majors, driver_gpu
from archgap.analysis.verdicts.load import _select, _wanted_version, load_model
from archgap.kb import load as kb
from archgap.probe.facts import (
    BinaryFacts,
    Distribution,
    EnvVar,
    KernelEntry,
    LoaderFacts,
    PythonEnvironment,
    ToolchainFacts,
    TorchBuild,
)


def gpu_findings(gpu: str, driver: str) -> list[str]:
    blocked: dict[tuple[str, str], str] = {}
    return [f.cause for f in driver_gpu([resolve_gpu(gpu)], driver, "--driver", blocked)]


@pytest.mark.parametrize(
    ("gpu", "driver", "fails"),
    [
        ("7.0", "384.81", False),  # exactly Volta's first driver
        ("7.0", "384.80", True),
        ("12.0", "570.26", False),  # exactly Blackwell's first driver
        ("12.0", "570.25.99", True),
        ("7.0", "580.95.05", False),  # R580: Volta's last branch
        ("7.0", "590.44.01", True),  # a branch after it
    ],
)
def test_the_driver_against_the_gpus_architecture(gpu: str, driver: str, fails: bool) -> None:
    assert bool(gpu_findings(gpu, driver)) is fails


def ptx(isa: str) -> KernelEntry:
    return KernelEntry("ptx", 80, "", isa, "none", 10, 10, ".nv_fatbin", 0, False, True)


def test_the_highest_ptx_isa_says_the_cuda_major() -> None:
    lib = BinaryFacts("/sp/pkg/libk.so", 1, "elf", (ptx("9.0"), ptx("8.7")), False, needed=())
    assert set(cuda_majors(lib, "pkg")) == {13}


TORCHAO = Distribution(
    "torchao", "0.18.0", "/sp/torchao-0.18.0.dist-info", ("/sp/torchao/_C.abi3.so",)
)


def toolchains(torch: str | None, env: tuple[EnvVar, ...] = ()) -> ToolchainFacts:
    build = TorchBuild(torch, "12.8", "/sp/torch/version.py") if torch else None
    return ToolchainFacts("shell", env, None, (), (), build, (), ("/sp",))


def gate(torch: str | None, env: tuple[EnvVar, ...] = ()) -> list[tuple[str, str]]:
    environment = PythonEnvironment("python", "3.11", ("/sp",), (TORCHAO,), ())
    model = load_model(
        environment, [], [resolve_gpu("H100")], None, "", None, toolchains(torch, env)
    )
    return [(f.status, f.cause) for f in model.findings if f.check == "extension-gate"]


def test_torch_exactly_at_the_gates_minimum_loads_the_extensions() -> None:
    assert gate("2.11.0+cu128") == []
    assert [s for s, _ in gate("2.10.0+cu128")] == ["fails"]


def test_without_the_toolchain_facts_the_gate_is_not_known() -> None:
    # torch's version decides (torchao/__init__.py): not collected, it is not known either way
    environment = PythonEnvironment("python", "3.11", ("/sp",), (TORCHAO,), ())
    model = load_model(environment, [], [resolve_gpu("H100")], None, "", None, None)
    assert [f.status for f in model.findings if f.check == "extension-gate"] == ["unknown"]


@pytest.mark.parametrize(("value", "skips"), [("1", True), ("0", False), ("", False)])
def test_torchaos_skip_variable_skips_only_when_1(value: str, skips: bool) -> None:
    skip = EnvVar("TORCHAO_FORCE_SKIP_LOADING_SO_FILES", value, "shell")
    found = gate("2.11.0+cu128", (skip,))
    assert bool(found) is skips
    if skips:
        assert "TORCHAO_FORCE_SKIP_LOADING_SO_FILES=1" in found[0][1]


BNB = kb.loader_rules()["bitsandbytes"]


@pytest.mark.parametrize(
    ("value", "wanted"), [("92", (9, 2)), ("128", (12, 8)), ("130", (13, 0)), ("8", None)]
)
def test_bnb_cuda_version_names_the_build(value: str, wanted: tuple[int, int] | None) -> None:
    facts = toolchains("2.9.0+cu128", (EnvVar("BNB_CUDA_VERSION", value, "shell"),))
    got, _, overridden = _wanted_version(BNB, facts)
    assert got == wanted and overridden


BUILDS = {(12, 1): "a", (12, 4): "b", (12, 8): "c", (13, 0): "d"}


@pytest.mark.parametrize(
    ("wanted", "overridden", "picked"),
    [
        ((12, 8), False, (12, 8)),  # the exact build
        ((12, 6), False, (12, 4)),  # the highest below of the same major
        ((12, 0), False, (12, 1)),  # none below: the lowest above
        ((11, 8), False, None),  # never another major
        ((12, 6), True, None),  # BNB_CUDA_VERSION has no fallback
    ],
)
def test_the_build_bitsandbytes_loads(
    wanted: tuple[int, int], overridden: bool, picked: tuple[int, int] | None
) -> None:
    assert _select(BUILDS, wanted, overridden) == picked


# -- a DT_NEEDED library not found. ld.so(8): a library's DT_RUNPATH directories are searched
# before the cache and the trusted directories. The loader's names were read and lack
# libcublas.so.12: not found, unless the library's RUNPATH names a directory nobody read (it may
# be there: unknown, blocking nothing). A /usr/local/cuda directory the loader section did not
# list does not exist.


def needed_status(
    runpath: tuple[str, ...], there: tuple[str, ...] | None = None
) -> list[tuple[str, str]]:
    lib = BinaryFacts(
        "/sp/pkg/libk.so", 1, "elf", (ptx("8.7"),), False, needed=("libcublas.so.12",),
        runpath=runpath, runpath_found=there,
    )  # fmt: skip
    dist = Distribution("pkg", "1.0", "/sp/pkg-1.0.dist-info", (lib.path,))
    environment = PythonEnvironment("python", "3.11", ("/sp",), (dist,), ())
    loader = LoaderFacts(("libc.so.6",), ("/etc/ld.so.cache",))
    model = load_model(environment, [lib], [resolve_gpu("H100")], None, "", loader)
    found = [f for f in model.findings if f.check == "needed-library"]
    return [(f.status, ", ".join(f.libraries)) for f in found]


def test_a_library_the_loader_does_not_find_fails() -> None:
    assert needed_status(()) == [("fails", "/sp/pkg/libk.so")]
    assert needed_status(("/usr/local/cuda-12.8/lib64",)) == [("fails", "/sp/pkg/libk.so")]


def test_a_library_whose_runpath_names_an_unread_directory_is_unknown() -> None:
    assert needed_status(("/opt/mytoolkit/lib64",)) == [("unknown", "/sp/pkg/libk.so")]


# The probe looked the RUNPATH directories up on the target (probe.binary.runpath): a directory
# of the build machine that the target does not have holds nothing (ld.so goes on to the next,
# then fails), and a name found there loads.
def test_a_runpath_directory_looked_up_on_the_target_decides() -> None:
    assert needed_status(("/opt/mytoolkit/lib64",), ()) == [("fails", "/sp/pkg/libk.so")]
    assert needed_status(("/opt/mytoolkit/lib64",), ("libcublas.so.12",)) == []
