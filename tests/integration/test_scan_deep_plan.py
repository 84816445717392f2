"""`archgap scan` searches data sections only where hidden entries can change its verdicts, and
says exactly what a scan that searches every file says, locally and through a remote loader.

The environment holds three fixtures of tests/fixtures/cuda/build.sh (what cuobjdump 13.5 lists):
libmix.so (SASS sm_75, sm_90, sm_90a, sm_100a, sm_103f, sm_120, sm_120a, PTX compute_75,
compute_100f, compute_120a), libstub.so (one kernel-less sm_75 cubin), libhidden.so (nothing
listed; a fatbin with sm_86, sm_110f and compute_89 in .rodata, a bare sm_89 cubin in .data) and
libhidden_loads.so (the same, and it imports cuModuleLoadData: `nm -D --undefined-only`).
sm_90 runs on an H100 (9.0) and sm_120 on an RTX PRO 6000 (12.0); nothing in libmix.so's listed
fatbin runs natively on an A10 (8.6: sm_75 is another major). Only libhidden_loads.so can load
device code outside its listed fatbin: the others import only the runtime's
__cudaRegisterFatBinary family (libmix.so, libstub.so) or nothing CUDA (libhidden.so), and
neither need nor dlopen libcuda; so only it is searched, and libhidden.so, with nothing it can
load, is judged as a CPU-only file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from archgap.analysis.scan import report_from_facts
from archgap.api import scan
from archgap.probe.facts import ProbeResponse
from archgap.request import DEFAULT_SECTIONS, probe_request
from archgap.transport.run import run_probe
from archgap.transport.target import LOCAL, via_target
from tests.helpers import CUDA_BIN, install_fake_distribution, make_venv

FILES = ("libmix.so", "libhidden.so", "libhidden_loads.so", "libstub.so")


@pytest.fixture(scope="module")
def python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("deepplan")
    install_fake_distribution(
        make_venv(base / "venv"), "mixed", "1.0", {f"mixed/{n}": CUDA_BIN / n for n in FILES}
    )
    return base / "venv" / "bin" / "python"


@pytest.mark.parametrize(
    "gpus",
    [
        ["H100", "RTX PRO 6000"],
        ["A10"],  # no native cubin in libmix.so's listed fatbin: but it cannot load hidden ones
        [],  # the default matrix
    ],
)
def test_the_verdicts_are_those_of_searching_every_file(python: Path, gpus: list[str]) -> None:
    report = scan(str(python), gpus=gpus)
    facts = run_probe(LOCAL, probe_request(DEFAULT_SECTIONS, str(python)))
    assert isinstance(facts, ProbeResponse)
    everything = report_from_facts(facts, gpus)
    assert report.packages == everything.packages
    assert report.packages  # the package is judged on every GPU
    searched = {Path(b.path).name: b.deep for b in report.binaries}
    # Only the library that loads device code itself is searched (it lists nothing).
    assert searched == {
        "libmix.so": False,
        "libhidden.so": False,
        "libhidden_loads.so": True,
        "libstub.so": False,
    }
    hidden = next(b for b in report.binaries if b.path.endswith("libhidden_loads.so"))
    assert {e.target for e in hidden.entries} >= {"sm_86", "sm_89", "compute_89"}
    judged = {Path(lib.path).name for p in report.packages for lib in p.libraries}
    assert judged == {"libmix.so", "libhidden_loads.so", "libstub.so"}


def test_a_remote_probe_plans_the_same_in_its_one_run(python: Path) -> None:
    # Through the remote loader (the package sent on stdin), as over ssh: one probe run.
    remote = scan(str(python), gpus=["H100"], target=via_target("env", str(python)))
    local = scan(str(python), gpus=["H100"])
    assert remote.packages == local.packages
    assert {Path(b.path).name: b.deep for b in remote.binaries} == {
        "libmix.so": False,
        "libhidden.so": False,
        "libhidden_loads.so": True,
        "libstub.so": False,
    }
