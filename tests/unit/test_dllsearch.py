"""The DLL search rule on hand-made facts (analysis.verdicts.dllsearch is pure): what an
installed Windows environment gives, where the modules of a package were not read.

The rule (What's New In Python 3.8; Microsoft's "Dynamic-link library search order"): an
imported DLL is found in the importing module's directory, a directory added with
``os.add_dll_directory``, or the system; Windows file names are not case-sensitive. Not found
with every requirement judged and read: fails; with a requirement whose modules were not read
(an installed environment the probe reads no source of): unknown, never fails.
"""

from __future__ import annotations

from archgap.analysis.verdicts.dllsearch import dll_search
from archgap.probe.facts import BinaryFacts, Distribution, KernelEntry, PythonEnvironment

SITE = "C:/venv/Lib/site-packages"
SASS_86 = KernelEntry("sass", 86, "", None, "none", 100, 100, ".nv_fatbin", 0, False, True)


def image(path: str, *needed: str) -> BinaryFacts:
    return BinaryFacts(path, 1000, "pe", (SASS_86,), False, None, "x86-64", needed)


def judge(torch_dirs: tuple[str, ...] | None, torch_files: tuple[str, ...]) -> list[str]:
    bnb = image(f"{SITE}/bitsandbytes/libbitsandbytes_cuda121.dll", "CUDART64_12.DLL",
                "KERNEL32.dll", "nvcuda.dll")  # fmt: skip
    dists = (
        Distribution(
            "bitsandbytes",
            "0.50.2",
            f"{SITE}/b.dist-info",
            (bnb.path,),
            ("torch>=2.4", "pandas; extra == 'benchmark'"),
            (),
            (),
            (),
        ),
        Distribution("torch", "2.9.0", f"{SITE}/t.dist-info", torch_files, (), (), torch_dirs),
    )
    env = PythonEnvironment("python.exe", "3.12", (SITE,), dists, ())
    blocked: dict[tuple[str, str], str] = {}
    owner = {bnb.path: "bitsandbytes"}
    findings = dll_search(env, [bnb], owner, blocked, gating=True)
    return [f"{f.status}: {f.cause}" for f in findings] + [
        f"blocked: {v}" for v in blocked.values()
    ]


def test_torch_lib_added_by_torch_provides_cudart() -> None:
    assert judge((f"{SITE}/torch/lib",), (f"{SITE}/torch/lib/cudart64_12.dll",)) == []


def test_torch_modules_not_read_is_unknown_never_fails() -> None:
    (finding,) = judge(None, (f"{SITE}/torch/lib/cudart64_12.dll",))
    assert finding.startswith("unknown: libbitsandbytes_cuda121.dll of bitsandbytes imports "
                              "CUDART64_12.DLL")  # fmt: skip
    assert "what torch adds to the DLL search path was not read" in finding


def test_torch_adds_nothing_and_the_file_lies_unsearched_fails() -> None:
    """torch read, adding no folder; its torch/lib holds the DLL, which is not searched: the
    import fails, and the library is blocked (an extra's requirement, pandas, is no
    requirement)."""
    found = judge((), (f"{SITE}/torch/lib/cudart64_12.dll",))
    assert found[0].startswith("fails: ")
    assert f"lies in {SITE.lower()}/torch/lib, which is not added" in found[0]
    assert found[1] == "blocked: CUDART64_12.DLL is not found by the DLL search order"
