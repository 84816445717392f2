"""archgap recipe, checked against NVIDIA's rules written out here (not archgap's compat.py).

The rules (CUDA C++ Programming Guide, "Binary Compatibility", "Application Compatibility" and
Table 28 "Feature Set Compiler Targets"):
- a cubin for sm_XY runs on X.Z for Z >= Y, never on another major;
- sm_XYa runs on exactly X.Y;
- sm_XYf runs on the members of its family: 10.0f on {10.0, 10.3}, 12.0f on {12.0, 12.1};
- PTX compute_XY is JIT-compiled for any GPU of compute capability >= X.Y.
Toolkits (CUDA release notes): sm_90a needs 12.0, sm_100/sm_120(a) 12.8, sm_103(a)/sm_121(a) and
every 'f' target 12.9; CUDA 13.0 dropped sm_50 to sm_72 (so sm_70, V100).
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from archgap.analysis.recipe.recipe import Recipe, recipe
from archgap.analysis.verdicts.compat import resolve_gpu
from archgap.cli import main
from archgap.report.jsondoc import schema

FAMILIES = {(100, "f"): {(10, 0), (10, 3)}, (120, "f"): {(12, 0), (12, 1)}}


def runs(name: str, cc: tuple[int, int]) -> bool:
    """NVIDIA's rule for one target on one GPU, from the guide (see the module docstring)."""
    kind, _, rest = name.partition("_")
    variant = rest[-1] if rest[-1] in "af" else ""
    number = int(rest.rstrip("af"))
    major, minor = divmod(number, 10)
    if variant == "a":
        return cc == (major, minor)
    if variant == "f":
        return cc in FAMILIES[(number, "f")]
    if kind == "compute":
        return cc >= (major, minor)
    return cc[0] == major and cc[1] >= minor


def sass(r: Recipe) -> list[str]:
    return [t.name for t in r.targets if t.kind == "sass"]


def covers(r: Recipe, gpus: dict[str, tuple[int, int]]) -> None:
    """Every GPU has SASS that runs on it, and the recipe's own verdicts say so."""
    names = sass(r)
    for gpu, cc in gpus.items():
        assert any(runs(n, cc) for n in names), f"{gpu} {cc}: nothing in {names} runs natively"
    assert [p.verdict for p in r.gpus] == ["native"] * len(gpus)


def check_against_rules(r: Recipe, gpus: dict[str, tuple[int, int]]) -> None:
    """Covered, and no SASS target can be left out (minimal)."""
    covers(r, gpus)
    names = sass(r)
    for dropped in names:
        rest = [n for n in names if n != dropped]
        assert not all(any(runs(n, cc) for n in rest) for cc in gpus.values()), (
            f"{dropped} is not needed: {rest} already cover {gpus}"
        )


def make(names: list[str], toolkit: str | None = "13.0", arch_specific: bool = False) -> Recipe:
    return recipe([resolve_gpu(n) for n in names], toolkit, arch_specific)


def test_h100_rtx_pro_6000_gb10_plain() -> None:
    r = make(["H100", "RTX PRO 6000", "GB10"])
    check_against_rules(r, {"H100": (9, 0), "RTX PRO 6000": (12, 0), "GB10": (12, 1)})
    # One sm_120 cubin serves 12.0 and 12.1 (same major, higher minor); 9.0 is another major.
    assert [t.name for t in r.targets] == ["sm_90", "sm_120", "compute_120"]
    assert r.spellings == {
        "TORCH_CUDA_ARCH_LIST": "9.0;12.0+PTX",
        "FLASHINFER_CUDA_ARCH_LIST": "9.0a 12.0f",
        "CMAKE_CUDA_ARCHITECTURES": "90-real;120",
        "nvcc": "-gencode arch=compute_90,code=sm_90 -gencode arch=compute_120,code=sm_120 "
        "-gencode arch=compute_120,code=compute_120",
    }
    assert {t.name: t.min_toolkit for t in r.targets} == {
        "sm_90": "11.8",
        "sm_120": "12.8",
        "compute_120": "12.8",
    }
    assert r.builds_with == ("12.8", None)


def test_h100_rtx_pro_6000_gb10_arch_specific() -> None:
    r = make(["H100", "RTX PRO 6000", "GB10"], arch_specific=True)
    check_against_rules(r, {"H100": (9, 0), "RTX PRO 6000": (12, 0), "GB10": (12, 1)})
    # 9.0a is the only arch-specific target for 9.0; 12.0f covers both 12.x GPUs in one cubin.
    assert sass(r) == ["sm_90a", "sm_120f"]
    assert r.spellings["TORCH_CUDA_ARCH_LIST"] == "9.0a;12.0a;12.1a;12.0+PTX"  # torch has no 'f'
    assert r.spellings["CMAKE_CUDA_ARCHITECTURES"] == "90a-real;120f-real;120-virtual"
    assert r.builds_with == ("12.9", None)  # 'f' targets need CUDA 12.9


def test_arch_specific_with_cuda_12_8_falls_back_to_plain_for_gb10() -> None:
    # CUDA 12.8 has sm_120a (12.0 only) but neither 'f' targets nor sm_121a: the GB10 gets the
    # plain sm_120 cubin, which runs on 12.1.
    r = make(["RTX PRO 6000", "GB10"], toolkit="12.8", arch_specific=True)
    covers(r, {"RTX PRO 6000": (12, 0), "GB10": (12, 1)})
    assert sass(r) == ["sm_120", "sm_120a"]
    # FlashInfer gets no plain "12.0" (with nvcc 12.8 FlashInfer 0.6.x raises on it at import).
    assert r.spellings["FLASHINFER_CUDA_ARCH_LIST"] == "12.0a"
    assert any("FLASHINFER_CUDA_ARCH_LIST leaves out GB10 (12.1)" in n for n in r.notes)


def test_b200_b300() -> None:
    plain = make(["B200", "B300"])
    check_against_rules(plain, {"B200": (10, 0), "B300": (10, 3)})
    assert [t.name for t in plain.targets] == ["sm_100", "compute_100"]
    specific = make(["B200", "B300"], arch_specific=True)
    check_against_rules(specific, {"B200": (10, 0), "B300": (10, 3)})
    # sm_100a alone would fail on the B300 (vllm#56548); the family target covers both.
    assert sass(specific) == ["sm_100f"]
    assert specific.spellings["FLASHINFER_CUDA_ARCH_LIST"] == "10.0f"
    assert specific.alternative == ("sm_100", "compute_100")


def test_b200_b300_arch_specific_with_cuda_12_8() -> None:
    # 12.8 knows sm_100a but not sm_103a or sm_100f: B300 runs the plain sm_100 cubin.
    r = make(["B200", "B300"], toolkit="12.8", arch_specific=True)
    covers(r, {"B200": (10, 0), "B300": (10, 3)})
    assert sass(r) == ["sm_100", "sm_100a"]
    assert (
        "B300 (10.3): CUDA 12.8 has no arch-specific target for it (sm_103a needs CUDA >= 12.9)"
        in (" ".join(r.notes))
    )


def test_t4_a100_h100() -> None:
    r = make(["T4", "A100", "H100"])
    check_against_rules(r, {"T4": (7, 5), "A100": (8, 0), "H100": (9, 0)})
    assert [t.name for t in r.targets] == ["sm_75", "sm_80", "sm_90", "compute_90"]
    assert r.spellings["TORCH_CUDA_ARCH_LIST"] == "7.5;8.0;9.0+PTX"
    assert r.spellings["CMAKE_CUDA_ARCHITECTURES"] == "75-real;80-real;90"
    # FlashInfer gets 9.0a: its Hopper kernels use arch-specific instructions.
    assert r.spellings["FLASHINFER_CUDA_ARCH_LIST"] == "7.5 8.0 9.0a"


def test_a_dropped_target_is_a_gap_with_its_last_toolkit() -> None:
    r = make(["V100", "T4"], toolkit="13.0")
    v100, t4 = r.gpus
    assert (v100.gpu, v100.verdict, t4.verdict) == ("V100", "none", "native")
    assert v100.note is not None and "dropped sm_70" in v100.note and "12.9" in v100.note
    assert r.spellings["FLASHINFER_CUDA_ARCH_LIST"] == "7.5"  # FlashInfer requires sm75+
    assert not r.complete
    # Without --toolkit: the newest toolkit that still builds sm_70 (CUDA 12.9).
    default = make(["V100", "T4"], toolkit=None)
    assert default.toolkit == "12.9" and default.complete
    check_against_rules(default, {"V100": (7, 0), "T4": (7, 5)})
    assert sass(default) == ["sm_70"]  # sm_70 runs on 7.5 too (same major, higher minor)


def test_a_toolkit_too_old_leaves_only_ptx() -> None:
    # CUDA 12.6 knows nothing for 12.x; compute_90 PTX JIT-compiles for 12.1 (>= 9.0).
    r = make(["GB10"], toolkit="12.6")
    assert [t.name for t in r.targets] == ["compute_90"]
    (gb10,) = r.gpus
    assert gb10.verdict == "jit"
    assert gb10.note == "sm_121 needs CUDA >= 12.9; CUDA 12.6 cannot build code for 12.1"


@pytest.mark.parametrize("names", [["H100", "RTX PRO 6000", "GB10"], ["B200", "B300"]])
def test_no_ptx(names: list[str]) -> None:
    assert all(t.kind == "sass" for t in recipe([resolve_gpu(n) for n in names], ptx=False).targets)


def test_cli_from_fleet_documents(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Two hosts' probe documents (as `archgap probe` writes them): the recipe covers their GPUs.
    for host, name, cc in (("h1", "NVIDIA H100 80GB HBM3", "9.0"), ("h2", "NVIDIA GB10", "12.1")):
        gpu = {"index": 0, "name": name, "uuid": "GPU-0", "compute_capability": cc}
        facts = {"host": host, "sections": {"gpu": {"gpus": [{**gpu, "source": "nvidia-smi"}]}}}
        doc = {"schema_version": "1.0", "command": "probe", "facts": facts}
        (tmp_path / f"{host}.json").write_text(json.dumps(doc))
    assert main(["recipe", "--from", str(tmp_path), "--toolkit", "13.0", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, schema("recipe"))
    assert [(g["gpu"], g["verdict"]) for g in doc["gpus"]] == [
        ("NVIDIA H100 80GB HBM3", "native"),
        ("NVIDIA GB10", "native"),
    ]
    assert [t["name"] for t in doc["targets"]] == ["sm_90", "sm_121", "compute_121"]


def test_cli_text_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["recipe", "--gpu", "V100,T4", "--toolkit", "13.0"]) == 1  # V100: nothing
    text = capsys.readouterr().out
    assert "CUDA 13.0 dropped sm_70 (the last toolkit that builds it is 12.9)" in text
    assert 'TORCH_CUDA_ARCH_LIST="7.5+PTX"' in text
    assert "check the build: archgap kernels BUILD_OUTPUT --require V100 --require T4" in text
    assert main(["recipe", "--gpu", "H9000"]) == 2
    assert "unknown GPU 'H9000'" in capsys.readouterr().err
    assert main(["recipe", "--gpu", "H100", "--toolkit", "7.5"]) == 2  # before the table (8.0)
    assert main(["recipe"]) == 2
    assert "no GPU" in capsys.readouterr().err


@pytest.mark.parametrize("cc", ["10.1", "11.0"])
def test_thors_two_numbers_are_said(cc: str) -> None:
    # CUDA 12.8 and 12.9 build Thor as sm_101; CUDA 13.0 renamed it sm_110 (compute capability
    # 11.0) and dropped sm_101 (CUDA 13.0 release notes)
    notes = " ".join(make([cc]).notes)
    assert "10.1 is Jetson Thor's number in CUDA 12.8-12.9 (sm_101)" in notes
    assert "from CUDA 13.0 it is 11.0 (sm_110)" in notes


def test_no_renumbering_note_for_other_gpus() -> None:
    assert not any("Thor" in note for note in make(["H100", "GB10"]).notes)
