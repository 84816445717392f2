"""explain's rules: causes and fixes decided from the log's facts and the knowledge base.

The inputs are real messages, each cited (most are frozen in tests/fixtures/explain_blind with
their source). The expectations come from the rule that decides each case (the targets each
CUDA release adds and drops, the PTX ISA of each release and its minimum driver, TensorRT's SM
support, SASS compatibility within a major, Tegra's own builds), never from archgap's output.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from archgap.analysis.explain.diagnosis import Diagnosis, explain
from archgap.analysis.explain.logparse import parse_log
from archgap.analysis.verdicts.compat import resolve_gpu
from archgap.kb import toolchain as kb
from archgap.kb.gpus import mentioned_products
from archgap.kb.signatures import load_signatures

BLIND = Path(__file__).resolve().parents[1] / "fixtures" / "explain_blind"


def _explain(text: str, gpus: tuple[str, ...] = ()) -> Diagnosis:
    named = tuple(resolve_gpu(g) for g in gpus)
    return explain(parse_log(text), load_signatures(), None, named)


def _blind(name: str) -> Diagnosis:
    return _explain((BLIND / name).read_text())


def _fixes(d: Diagnosis) -> str:
    return " | ".join(f.text for f in d.fixes)


# ---------------------------------------------------------------- direction, from the toolkit data


def _plain_targets() -> list[str]:
    seen: dict[str, None] = {}
    for release in kb.toolkit_releases():
        seen.update({t: None for t in release.targets_added if t[-1].isdigit()})
    return list(seen)


def _release_before(cuda: str) -> str | None:
    names = [r.cuda for r in kb.toolkit_releases()]
    at = names.index(cuda)
    return names[at - 1] if at else None


def _release_after(cuda: str) -> str | None:
    names = [r.cuda for r in kb.toolkit_releases()]
    at = names.index(cuda)
    return names[at + 1] if at + 1 < len(names) else None


TOO_OLD = [
    (t, older)
    for t in _plain_targets()
    if (span := kb.toolkit_range_for(t)) and (older := _release_before(span[0]))
]
TOO_NEW = [
    (t, newer, span[1])
    for t in _plain_targets()
    if (span := kb.toolkit_range_for(t)) and span[1] and (newer := _release_after(span[1]))
]


def test_the_toolkit_data_has_gaps_both_ways() -> None:
    assert len(TOO_OLD) >= 10 and len(TOO_NEW) >= 10  # e.g. sm_75 on 9.2, sm_30 on 11.0


@pytest.mark.parametrize(("target", "cuda"), TOO_OLD)
def test_a_toolkit_older_than_the_target(target: str, cuda: str) -> None:
    first = kb.first_toolkit_for(target)
    arch = target.replace("sm_", "compute_")
    d = _explain(
        f"Cuda compilation tools, release {cuda}, V{cuda}.1\n"
        f"nvcc fatal   : Unsupported gpu architecture '{arch}'\n"
    )
    assert d.cause_status == "determined"
    assert f"older than {target}" in d.root_cause and "dropped" not in d.root_cause
    assert f"CUDA >= {first}" in _fixes(d)


@pytest.mark.parametrize(("target", "cuda", "last"), TOO_NEW)
def test_a_toolkit_newer_than_the_release_that_dropped_the_target(
    target: str, cuda: str, last: str
) -> None:
    arch = target.replace("sm_", "compute_")
    d = _explain(
        f"Cuda compilation tools, release {cuda}, V{cuda}.1\n"
        f"nvcc fatal   : Unsupported gpu architecture '{arch}'\n"
    )
    assert d.cause_status == "determined"
    assert f"newer than {target}" in d.root_cause and f"dropped {target}" in d.root_cause
    assert f"CUDA <= {last}" in _fixes(d) and f"remove {target}" in _fixes(d)


def _value_not_defined(cuda: str, arch: str) -> Diagnosis:
    """nvcc's other wording of the same refusal, printed for -arch=compute_XX (pycuda, Jittor:
    https://github.com/Jittor/jittor/issues/252 is nvcc 10.1 asked for compute_86)."""
    return _explain(
        f"Cuda compilation tools, release {cuda}, V{cuda}.1\n"
        f"nvcc fatal   : Value '{arch}' is not defined for option 'gpu-architecture'\n"
    )


@pytest.mark.parametrize(("target", "cuda"), TOO_OLD)
def test_a_virtual_target_not_defined_for_an_older_toolkit(target: str, cuda: str) -> None:
    d = _value_not_defined(cuda, target.replace("sm_", "compute_"))
    assert d.signature == "nvcc-unsupported-gpu-arch" and d.cause_status == "determined"
    assert f"older than {target}" in d.root_cause and "dropped" not in d.root_cause
    assert f"CUDA >= {kb.first_toolkit_for(target)}" in _fixes(d)


@pytest.mark.parametrize(("target", "cuda", "last"), TOO_NEW)
def test_a_virtual_target_not_defined_for_a_newer_toolkit(
    target: str, cuda: str, last: str
) -> None:
    d = _value_not_defined(cuda, target.replace("sm_", "compute_"))
    assert d.signature == "nvcc-unsupported-gpu-arch" and d.cause_status == "determined"
    assert f"newer than {target}" in d.root_cause and f"dropped {target}" in d.root_cause
    assert f"CUDA <= {last}" in _fixes(d)


def test_an_unknown_toolkit_is_the_fact_that_decides() -> None:
    # compute_70: too old before CUDA 9.0, dropped by 13.0; the log does not say which nvcc ran
    d = _explain("nvcc fatal   : Unsupported gpu architecture 'compute_70'\n")
    assert d.cause_status == "conditional"
    assert "either" in d.root_cause and any("nvcc --version" in x for x in d.decide)
    assert "CUDA <= 12.9" in _fixes(d) and "CUDA >= 9.0" in _fixes(d)


# ---------------------------------------------------------------- class 1: which tool


def test_cmake_default_sm30_under_cuda_11_is_dropped_and_the_fix_is_the_gpus_own_arch() -> None:
    # https://github.com/utcs-scea/altis/issues/19: GTX 1650 (7.5), CUDA 11.6, nvcc's ptxas
    d = _blind("altis-19-ptxas-sm30-cuda116.log")
    assert "CUDA 11.0 dropped sm_30" in d.root_cause
    assert "CMAKE_CUDA_ARCHITECTURES=75" in _fixes(d)
    assert "TRITON_PTXAS_PATH" not in _fixes(d)  # nvcc ran, not Triton


def test_xla_ptxas_gets_a_path_fix_not_a_triton_one() -> None:
    # https://github.com/tensorflow/serving/issues/1821: sm_86 needs a ptxas of CUDA >= 11.1
    d = _blind("tf-serving-1821-xla-ptxas-sm86.log")
    assert "XLA's ptxas" in d.root_cause and "CUDA >= 11.1" in d.root_cause
    assert "PATH" in _fixes(d) and "TRITON_PTXAS_PATH" not in _fixes(d)


def test_an_old_ptxas_under_xla_is_the_ptxas_not_the_driver() -> None:
    # https://github.com/jax-ml/jax/issues/6799: ptxas 8.x knows PTX 5.0, jaxlib wrote 6.0 (9.0)
    d = _blind("jax-6799-xla-ptxas-version.log")
    assert "ptxas in use is older" in d.root_cause and "CUDA 9.0" in d.root_cause
    assert "driver" not in _fixes(d).lower()


# ---------------------------------------------------------------- class 2: the driver's PTX ISA


def test_ptx_newer_than_the_drivers_jit_is_the_driver() -> None:
    # https://github.com/numba/numba/issues/7006: PTX 8.4 (CUDA 12.4) on a driver that knows 8.2
    d = _blind("numba-7006-ptx-version-84-82.log")
    assert "driver is older" in d.root_cause and "CUDA 12.4" in d.root_cause
    minimum = kb.toolkit_release("12.4")
    assert minimum is not None and f">= {minimum.min_driver_linux}" in _fixes(d)
    assert "CUDA 12.2" in _fixes(d)  # or the toolchain of the driver's PTX ISA 8.2
    assert "TRITON_PTXAS_PATH" not in _fixes(d)


# ---------------------------------------------------------------- class 3: NVRTC


def test_nvrtc_of_cuda_13_dropped_pascal() -> None:
    # https://github.com/cupy/cupy/issues/9475: GTX 1080 (6.1), NVRTC (13, 0)
    d = _blind("cupy-9475-nvrtc-gtx1080-cuda13.log")
    assert d.signature == "nvrtc-invalid-arch"
    assert "CUDA 13.0 dropped sm_61" in d.root_cause
    assert "CUDA 12.9 NVRTC" in _fixes(d)


def test_a_torch_wheel_compiles_with_the_nvrtc_of_its_own_cuda() -> None:
    # https://github.com/pytorch/pytorch/issues/87595: "pytorch 1.14+cu117 nightly" beside a
    # system "cuda 11.8". A torch wheel loads the NVRTC of its +cu117 build (jiterator), so the
    # NVRTC is CUDA 11.7's. Without the GPU settled (an RTX 3090 works, an RTX 4090 fails), both
    # cases: newer than sm_87 (11.7's newest) needs CUDA >= 11.8; older than sm_35 (its oldest)
    # needs CUDA 10.2, the last release before CUDA 11.0 dropped sm_30/sm_32.
    d = _blind("pytorch-87595-rtx4090-nightly-cu117-nvrtc.log")
    assert "NVRTC of CUDA 11.7" in d.root_cause
    fixes = " | ".join(fix for case in d.cases for fix in case.fixes)
    assert "CUDA >= 11.8" in fixes and "CUDA 10.2 NVRTC" in fixes


def test_nvrtc_of_cuda_8_predates_volta() -> None:
    # https://github.com/cupy/cupy/issues/2087: Tesla V100 (7.0), CUDA 8.0
    d = _blind("cupy-2087-nvrtc-v100-cuda80.log")
    assert "older than sm_70" in d.root_cause and "CUDA >= 9.0" in _fixes(d)


# ---------------------------------------------------------------- class 4: TensorRT


def test_tensorrt_older_than_ada() -> None:
    # https://github.com/NVIDIA/TensorRT/issues/2727: 'Unsupported SM: 0x809' on TensorRT 8.4.1.5
    d = _blind("tensorrt-2727-trt84-rtx4080.log")
    assert "predates SM 8.9" in d.root_cause and "TensorRT >= 8.5" in _fixes(d)


def test_tensorrt_10_dropped_pascal() -> None:
    # https://github.com/NVIDIA/TensorRT/issues/3826: 'Unsupported SM: 0x601' on TensorRT 10.0.1
    d = _blind("tensorrt-3826-trt10-gtx1080ti.log")
    assert "dropped SM 6.1" in d.root_cause and "TensorRT <= 9.1" in _fixes(d)


def test_tensorrt_10_builds_sm_7_0_and_up_only() -> None:
    # TensorRT 10.1's support matrix: compiled for SM 7.0 or higher, so a P100 (6.0) needs 8.6
    # (ArgoHA/D-FINE-seg#20: 'Target GPU SM 60 is not supported by this TensorRT release').
    d = _blind("d-fine-seg-20-p100-trt-sm60.log")
    assert "dropped SM 6.0" in d.root_cause and "TensorRT <= 8.6" in _fixes(d)


def test_tensorrt_10_5_dropped_volta() -> None:
    # TensorRT 10.5.0's release notes: Volta (7.0) support removed starting with 10.5, so the
    # last release that builds SM 7.0 engines is 10.4 (yuvraj108c/ComfyUI-Upscaler-Tensorrt#49).
    d = _blind("comfyui-upscaler-trt-49-sm70-trt105.log")
    assert "dropped SM 7.0" in d.root_cause and "TensorRT <= 10.4" in _fixes(d)


# ---------------------------------------------------------------- class 5: 12.1


def test_torch_built_for_sm120_runs_on_gb10() -> None:
    # https://github.com/eugr/spark-vllm-docker/issues/15: 12.1 against torch's (8.0) - (12.0);
    # sm_120 SASS runs on 12.1 (same major, newer minor): the maintainer says ignore it
    d = _blind("spark-vllm-docker-15-gb10-torch-warning.log")
    assert d.root_cause.startswith("no gap") and d.fixes == ()


def test_log_only_gpu_gb10_on_sm_12x_offers_only_12_1_fixes() -> None:
    # FlashInfer's swallowed error names only the major; --gpu GB10 (12.1) settles the minor, and
    # a 12.0a cubin does not run on 12.1 (arch-specific SASS runs on exactly its capability)
    text = (
        "[2026-05-12 10:00:01 TP0] Failed to get device capability: "
        "SM 12.x requires CUDA >= 12.9.\n"
        "RuntimeError: FlashInfer requires GPUs with sm75 or higher\n"
    )
    # the log alone: the 12.x GPUs' own fixes as one case each, none as if that GPU were there
    alone = _explain(text)
    cases = {c.when.split(" (")[0]: " | ".join(c.fixes) for c in alone.cases}
    assert "12.0a" in cases["if the GPU is 12.0"] and "12.1a" in cases["if the GPU is 12.1"]
    assert "12.0a" not in _fixes(alone) and "12.1a" not in _fixes(alone)
    named = _fixes(_explain(text, ("GB10",)))
    assert "12.1a" in named and "12.0a" not in named and "<CC>" not in named


# ---------------------------------------------------------------- class 6: words, Jetson


def test_gpu_names_in_any_spelling_through_the_gpu_table() -> None:
    def ccs(text: str) -> list[str]:
        return [p.compute_capability for p in mentioned_products(text)]

    assert ccs("I'm using gtx1650 on my computer") == ["7.5"]
    assert ccs("GPU name 2080Ti") == ["7.5"]
    assert ccs("TensorRT 10.0.1 on 1080ti") == ["6.1"]
    assert ccs("a Tesla K80 and two Tesla K40c cards") == ["3.7", "3.5"]
    assert ccs("RTX 5090 D") == ["12.0"]  # the most specific name, once
    assert ccs("L4T R35.4.1") == [] and ccs("SM_VERSION_A100") == []  # not an L4, not an A100
    # Chinese prose has no spaces around a model number; the legacy table's mobile Kepler
    assert ccs("我用的4070ti super显卡") == ["8.9"] and ccs("CUDA 10.1 with gt650m") == ["3.0"]
    # the wrong GeForce family word: the model number decides (there is no GTX 3090)
    assert ccs("GTX 3090") == ["8.6"] and ccs("RTX 1080") == ["6.1"] and ccs("GTX 650Ti") == ["3.0"]


def test_jetson_gets_jetpack_builds_not_a_desktop_index() -> None:
    # https://github.com/pytorch/pytorch/issues/145560: Orin, torch from the nightly cu124 index
    d = _blind("pytorch-145560-orin-nightly-cu124.log")
    assert "Jetson" in d.root_cause
    assert "JetPack build" in _fixes(d) and "download.pytorch.org" not in _fixes(d)


# ---------------------------------------------------------------- class 7: the package named


def test_no_kernel_image_names_the_package_and_the_gpu() -> None:
    # https://github.com/microsoft/onnxruntime/issues/26245: RTX PRO 4500 Blackwell (12.0)
    d = _blind("ort-26245-cuda-ep-rtx-pro-4500.log")
    assert "onnxruntime was built without sm_120" in d.root_cause
    assert "onnxruntime" in _fixes(d) and "<CC>" not in _fixes(d)


@pytest.mark.parametrize(
    ("name", "package", "switch"),
    [
        # https://github.com/ollama/ollama/issues/11270: ollama's ggml built without 61 (CMake)
        ("ollama-11270-gtx1060-selfbuilt-no-sm61.log", "ggml", "CMAKE_CUDA_ARCHITECTURES=61"),
        # https://github.com/OpenNMT/CTranslate2/issues/1765: a GTX 960M (5.0); CT2's own CMake
        ("ctranslate2-1765-gtx960m-cc50.log", "ctranslate2", '-DCUDA_ARCH_LIST="5.0"'),
        # https://github.com/apache/mxnet/issues/11052: MXNet built on a TX2 (6.2), config.mk
        ("mxnet-11052-jetson-tx2-no-kernel.log", "mxnet", "arch=compute_62,code=sm_62"),
    ],
)
def test_a_package_with_its_own_build_is_rebuilt_with_its_own_switch(
    name: str, package: str, switch: str
) -> None:
    # torch's extension builder alone reads TORCH_CUDA_ARCH_LIST; these build with CMake or make
    d = _blind(name)
    assert d.root_cause.startswith(package) and switch in _fixes(d)
    assert "TORCH_CUDA_ARCH_LIST" not in _fixes(d)


def test_ggmls_device_line_states_the_gpus_capability() -> None:
    # ggml_cuda_init's format (llama.cpp ggml-cuda.cu): "  Device %d: %s, compute capability
    # %d.%d, VMM: %s"; a GTX 1080 is 6.1 (NVIDIA's CUDA GPUs list)
    d = _explain(
        "  Device 0: NVIDIA GeForce GTX 1080, compute capability 6.1, VMM: yes\n"
        "ggml_cuda_compute_forward: ADD failed\n"
        "CUDA error: no kernel image is available for execution on the device\n"
    )
    assert "ggml was built without sm_61" in d.root_cause
    assert "CMAKE_CUDA_ARCHITECTURES=61" in _fixes(d) and "<CC>" not in _fixes(d)
    # the same words in a 940MX's older start-up line (https://github.com/ggml-org/ggml/issues/465)
    d = _blind("ggml-465-940mx-cc50-archs-52-61.log")
    assert "sm_50" in d.root_cause and "<CC>" not in _fixes(d)


def test_an_old_gpu_current_builds_dropped_needs_an_old_release() -> None:
    # https://github.com/NVIDIA/DeepLearningExamples/issues/695: GeForce GT 710 (Kepler 3.5)
    d = _blind("dle-695-gt710-no-kernel-image.log")
    assert "no longer ships sm_35" in d.root_cause and "CUDA <= 11.8" in _fixes(d)


# ---------------------------------------------------------------- class 9: a gate the GPU settles


def test_a_kernel_written_for_one_arch_is_not_a_rebuild() -> None:
    # https://github.com/NVIDIA/TensorRT-LLM/issues/6892: attention sinks only on SM90, RTX 5090
    d = _blind("trtllm-6892-attention-sinks-sm90-rtx5090.log")
    assert "for 9.0 only" in d.root_cause and "rebuilding for 12.0 does not add it" in d.root_cause
    assert "TORCH_CUDA_ARCH_LIST" not in _fixes(d)


# ---------------------------------------------------------------- not architecture


@pytest.mark.parametrize(
    "name",
    ["hallo-143-oom.log", "vllm-13939-illegal-memory-access.log", "mgfn-35-oom.log"],
)
def test_other_errors_get_no_architecture_cause(name: str) -> None:
    d = _blind(name)
    assert d.status == "not-architecture" and d.root_cause == "" and d.fixes == ()


# ---------------------------------------------------------------- on-call wording


def test_the_first_lines_say_what_to_do_and_which_tool_failed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from archgap.cli import main

    main(["explain", "--log-only", str(BLIND / "altis-19-ptxas-sm30-cuda116.log")])
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("next: build for the GPU itself") and "=75" in lines[1]
    assert "raised by nvcc" in "\n".join(lines[:6])


def test_the_placeholder_legend_is_said_once() -> None:
    # https://github.com/HPMLL/DTC-SpMM_ASPLOS24/issues/2: no GPU named, so the fixes need it
    d = _blind("dtc-spmm-2-no-kernel-image-arch-list.log")
    assert "<CC>" in _fixes(d) and "H100/H200" not in _fixes(d)
    assert sum("<CC> = the GPU's compute capability" in n for n in d.notes) == 1
    assert any("compute_cap" in x for x in d.decide)  # the fact that settles the fixes


def test_a_conditional_cause_is_one_case_per_value_of_the_deciding_fact(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # compute_70: too old before the first CUDA that builds it, dropped after the last one
    first, last = kb.toolkit_range_for("sm_70") or ("", None)
    d = _explain("nvcc fatal   : Unsupported gpu architecture 'compute_70'\n")
    assert [c.when for c in d.cases] == [f"if nvcc is CUDA > {last}", f"if nvcc is CUDA < {first}"]
    assert f"CUDA <= {last}" in " ".join(d.cases[0].fixes)
    assert f"CUDA >= {first}" in " ".join(d.cases[1].fixes)
    from archgap.cli import main

    log = tmp_path / "c70.log"  # not in the checkout: it may be read-only to this user
    log.write_text("nvcc fatal   : Unsupported gpu architecture 'compute_70'\n")
    main(["explain", "--log-only", str(log)])
    out = capsys.readouterr().out
    assert f"  - if nvcc is CUDA > {last}: " in out and f"  - if nvcc is CUDA < {first}: " in out


# ---------------------------------------------------------------- several GPUs in one log


def test_several_gpus_named_are_judged_each() -> None:
    # https://github.com/pytorch/pytorch/issues/31319: a K80 (3.7) and two K40c (3.5) in one box;
    # which one ran the kernel decides, and each gets the fix for its own target
    d = _blind("pytorch-31319-k40c-torch131.log")
    assert d.cause_status == "conditional" and any("which GPU" in x for x in d.decide)
    by_cc = {c.when: c for c in d.cases}
    assert set(by_cc) == {"if it ran on the Tesla K80 (3.7)", "if it ran on the Tesla K40c (3.5)"}
    for cc, target in (("3.7", "sm_37"), ("3.5", "sm_35")):
        case = next(c for c in d.cases if f"({cc})" in c.when)
        assert target in case.cause and f"CUDA <= {kb.last_toolkit_for(target)}" in case.fixes[0]
    assert "<CC>" not in _fixes(d)


# ---------------------------------------------------------------- CuPy's own wordings


def test_cupy_no_binary_for_gpu_is_its_nvrtc_against_the_gpu() -> None:
    # https://github.com/cupy/cupy/issues/9106: CUDA_ERROR_NO_BINARY_FOR_GPU on an RTX 5080
    d = _blind("cupy-9106-no-binary-5080.log")
    assert d.signature == "cuda-no-kernel-image" and "NVRTC" in d.root_cause
    assert f"CUDA >= {kb.first_toolkit_for('sm_120')}" in _fixes(d)
    assert "TRITON_PTXAS_PATH" not in _fixes(d) and "<CC>" not in _fixes(d)


def test_cupy_invalid_kernel_image_is_not_read_as_tritons() -> None:
    # https://github.com/cupy/cupy/issues/8045: CUDA_ERROR_INVALID_SOURCE on an RTX 4080 (8.9),
    # a process that never runs Triton
    d = _blind("cupy-8045-invalid-source-4080.log")
    assert "CuPy" in d.root_cause and "sm_89" in d.root_cause
    assert "TRITON_PTXAS_PATH" not in _fixes(d)
    assert f"CUDA >= {kb.first_toolkit_for('sm_89')}" in _fixes(d)


def test_cupy_nvrtc_invalid_arch_with_a_gpu_name_nvidia_smi_truncated() -> None:
    # https://github.com/motokimura/spacenet_building_detection/issues/4: nvidia-smi's table cuts
    # "GeForce RTX 2080 ..." to "GeForce RTX 208..."; every product it can be is 7.5
    d = _blind("spacenet-4-nvrtc-rtx2080-cuda80.log")
    assert d.recognised.compute_capabilities == ("7.5",)
    assert f"CUDA >= {kb.first_toolkit_for('sm_75')}" in _fixes(d)
    assert "cupy-cudax" not in _fixes(d)  # CuPy's wheels before CUDA 11 are per minor


# ---------------------------------------------------------------- 12.1 / Thor


def test_thor_ptxas_rejecting_sm_110a_under_cuda_13_is_another_ptxas() -> None:
    # https://github.com/vllm-project/vllm/issues/34470: torch built with CUDA 13.0, which builds
    # sm_110a; the ptxas that rejected it is an older, bundled one (Triton's in vLLM)
    assert kb.toolkit_can_target("13.0", "sm_110")
    d = _blind("vllm-34470-thor-ptxas-sm110a.log")
    assert d.cause_status == "determined" and "another" in d.root_cause
    assert "TRITON_PTXAS_PATH to the ptxas of CUDA 13.0" in _fixes(d)


def test_no_kernel_image_on_12_1_names_the_sass_that_runs_on_it() -> None:
    # sm_120 SASS runs on 12.1 (same major, newer minor): a build with either serves a GB10
    d = _explain(
        "GPU 0: NVIDIA GB10\n"
        "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
    )
    assert "sm_121 (or sm_120" in _fixes(d)


# ---------------------------------------------------------------- the GPU named in words


def test_jetson_boards_by_their_own_names_and_with_a_typo() -> None:
    def ccs(text: str) -> list[str]:
        return [p.compute_capability for p in mentioned_products(text)]

    # https://github.com/microsoft/onnxruntime/issues/5282 ("jetson axvier nx") and
    # https://github.com/dusty-nv/jetson-inference/issues/812 ("AGX xavier", no "Jetson")
    assert ccs("- GPU model and memory: jetson axvier nx") == ["7.2"]
    assert ccs("when training the model with AGX xavier:") == ["7.2"]
    assert ccs("flashed my Orin NX 16GB") == ["8.7"]
    # one edit only, on a long name word; a word alone with no digit is not a one-word name
    assert ccs("jetson xvaeir nx") == [] and ccs("nano editor") == []
    assert not parse_log("the author of thor\n").evidence_of("gpu")


def test_nvccs_cubin_flag_is_not_a_gpu_named_with_a_typo() -> None:
    # "--cubin" (nvcc's output type) is one edit from "Rubin": pycuda's command line names no GPU
    # (https://github.com/zju3dv/NeuralRecon/issues/119); sm_86 needs CUDA 11.1 (its release notes)
    assert mentioned_products("[command: nvcc --cubin -arch sm_86 kernel.cu]") == ()
    d = _blind("neuralrecon-119-pycuda-nvcc110-sm86.log")
    assert "older than sm_86" in d.root_cause and "CUDA >= 11.1" in _fixes(d)
    assert "Rubin" not in d.root_cause and "sm_107" not in _fixes(d)


def test_a_jetson_named_in_words_gets_the_jetpack_build() -> None:
    d = _blind("jetson-inference-812-agx-xavier.log")
    assert "sm_72" in d.root_cause and "JetPack" in _fixes(d)
    assert "download.pytorch.org" not in _fixes(d)


# ---------------------------------------------------------------- torch's warning, no arch list


def test_torch_warning_without_its_arch_list_is_decided_by_the_cuda_torch_was_built_with() -> None:
    # https://github.com/MRzzm/DINet/issues/100: torch 1.7.1+cu101 on an RTX 3090 (sm_86)
    first = kb.first_toolkit_for("sm_86") or ""
    assert kb.major_minor("10.1") < kb.major_minor(first)  # type: ignore[operator]
    d = _blind("dinet-100-3090-torch171-cu101.log")
    assert d.cause_status == "determined" and "CUDA 10.1" in d.root_cause
    assert f"cu{first.replace('.', '')}" in _fixes(d) and "Blackwell" not in _fixes(d)


def test_torch_warning_with_neither_list_nor_cuda_says_which_fact_decides() -> None:
    # the same message with no torch version: the arch list decides, one case per direction
    d = _explain(
        "NVIDIA GeForce RTX 3090 with CUDA capability sm_86 is not compatible with the current "
        "PyTorch installation.\n"
    )
    assert d.cause_status == "conditional" and any("get_arch_list" in x for x in d.decide)
    assert len(d.cases) == 2 and "Blackwell" not in _fixes(d)


# ---------------------------------------------------------------- gates the GPU settles


def test_xformers_gate_names_the_gpu_it_runs_on() -> None:
    # https://github.com/huggingface/diffusers/issues/4144: "Sm86 does not have enough
    # shared-memory" is the GPU; flash needs == 8.0 for that head size
    d = _blind("diffusers-4144-xformers-sm86-shared-memory.log")
    assert "8.0 only" in d.root_cause and "8.6" in d.root_cause and "xformers" in _fixes(d)


def test_a_gate_raised_in_frames_pasted_without_line_numbers_names_its_package() -> None:
    # https://github.com/sgl-project/sglang/issues/32933: the frame has no ", line N"
    d = _blind("sglang-32933-pdmux-cc120.log")
    assert "sglang" in _fixes(d) and "pdmux_context" in _fixes(d)


def test_thor_renumbering_both_ways_from_the_gpu_table() -> None:
    # kb/gpus.json: CUDA 13.0 renumbered Thor's sm_101 as sm_110 (the CUDA 13.0 release notes)
    from archgap.kb.gpus import renumbered

    r = next(x for x in renumbered() if x.new == "11.0")
    old, new = f"sm_{r.old.replace('.', '')}", f"sm_{r.new.replace('.', '')}"
    before = _release_before(r.toolkit) or ""
    dropped = _explain(
        f"Cuda compilation tools, release {r.toolkit}, V{r.toolkit}.48\n"
        f"nvcc fatal   : Unsupported gpu architecture 'compute_{old[3:]}'\n"
    )
    assert f"build for {new} instead of {old}" in _fixes(dropped)
    early = _explain(
        f"Cuda compilation tools, release {before}, V{before}.41\n"
        f"nvcc fatal   : Unsupported gpu architecture 'compute_{new[3:]}'\n"
    )
    assert f"CUDA >= {r.toolkit}" in _fixes(early) and f"build for {old} instead" in _fixes(early)


def test_a_gate_for_one_family_member_on_another_depends_on_the_sass() -> None:
    # flashinfer gemm/kernels/dense_blockscaled_gemm_sm120.py, listed for SM121 in
    # https://github.com/flashinfer-ai/flashinfer/issues/3170: sm_120 plain/family SASS runs on
    # 12.1, sm_120a does not; which one the kernel is decides
    d = _explain("ValueError: dense_gemm launch only supports sm_120, got sm_121\n")
    assert d.cause_status == "conditional" and len(d.cases) == 2
    assert "sm_120f" in d.cases[0].when and "sm_120a" in d.cases[1].when
    assert any("archgap scan --gpu 12.1" in x for x in d.decide)


def test_compute_capability_in_prose_is_the_gpu_but_a_requirement_is_not() -> None:
    def stated(text: str) -> tuple[str, ...]:
        return tuple(e.value for e in parse_log(text).evidence_of("gpu_cc"))

    # https://github.com/cupy/cupy/issues/8045 (a maintainer's answer)
    assert stated("NVIDIA GeForce RTX 4080 is compute capability 8.9. Please use CuPy v11\n") == (
        "8.9",
    )
    assert stated("my card has compute capability 8.6 and I get an error\n") == ("8.6",)
    assert stated("the GPU must have compute capability 7.0 or higher\n") == ()


# ---------------------------------------------------------------- real-world manglings and facts


@pytest.mark.parametrize(
    "line",
    [
        # https://github.com/JeanLucPons/Kangaroo/issues/87: lower case, no colon
        "nvcc fatal unsupported gpu architecture 'compute_20'",
        # https://github.com/ucbdrive/few-shot-object-detection/issues/11: closing quote lost
        "nvcc fatal   : Unsupported gpu architecture 'compute_20",
        # the same without 'fatal'
        "nvcc : Unsupported gpu architecture 'compute_20'",
    ],
)
def test_nvcc_wordings_as_pasted_are_recognised(line: str) -> None:
    # CUDA 9.0 dropped sm_20 (kb/toolkits.json): the nvcc in use is newer than it
    last = kb.last_toolkit_for("sm_20")
    d = _explain(line + "\n")
    assert d.signature == "nvcc-unsupported-gpu-arch"
    assert f"dropped sm_20 (the last toolkit that builds it is {last})" in d.root_cause


def test_ptxas_gpu_name_without_its_closing_quote() -> None:
    # https://github.com/triton-lang/triton/issues/8539 wording, pasted with the quote lost
    first = kb.first_toolkit_for("sm_121")
    d = _explain("ptxas fatal   : Value 'sm_121 is not defined for option 'gpu-name'\n")
    assert d.signature == "ptxas-unknown-gpu-name"
    assert f"CUDA >= {first}" in d.root_cause + _fixes(d)


def test_nvcc_rejecting_a_target_the_stated_cuda_builds_is_another_nvcc() -> None:
    # https://github.com/AlexeyAB/darknet/issues/471: CUDA 9.1 builds sm_61 (8.0 <= 9.1 <= last),
    # so the nvcc that failed is another toolkit's (the maintainer: an old one still on PATH)
    first = kb.first_toolkit_for("sm_61")
    d = _blind("darknet-471-compute61-gtx1060-cuda91.log")
    assert d.cause_status == "determined"
    assert "CUDA 9.1 builds sm_61" in d.root_cause and f"CUDA < {first}" in d.root_cause
    assert "dropped" not in d.root_cause and "PATH=/usr/local/cuda-9.1/bin" in _fixes(d)
    assert "TRITON_PTXAS_PATH" not in _fixes(d)


@pytest.mark.parametrize(
    "name",
    [
        # https://github.com/NVIDIA/numba-cuda/issues/120: cuLinkAddData, no ptxas line
        "numba-cuda-120-colab-ptx85-driver124.log",
        # https://github.com/apache/arrow/issues/40677: numba's CudaAPIError [222]
        "arrow-40677-numba-unsupported-ptx-cc80.log",
    ],
)
def test_unsupported_ptx_version_on_its_own_is_a_driver_older_than_the_ptx(name: str) -> None:
    # CUDA_ERROR_UNSUPPORTED_PTX_VERSION (222): the driver's JIT does not know the PTX's ISA
    d = _blind(name)
    assert d.signature == "cuda-unsupported-ptx-toolchain"
    assert "driver is older than the toolchain" in d.root_cause
    assert "upgrade the NVIDIA driver" in _fixes(d) and "matching the driver" in _fixes(d)
    assert "TRITON_PTXAS_PATH" not in _fixes(d)


def test_tensorrt_in_lower_case_is_its_sm_gate() -> None:
    # https://github.com/ShufflePerson/AimAhead/issues/3: GTX 1050 Ti (6.1); TensorRT 10 dropped
    # SM 6.1 (kb/tensorrt.json: last 9.1)
    last = "9.1"
    d = _blind("aimahead-3-trt-sm61-gtx1050ti.log")
    assert d.signature == "tensorrt-unsupported-sm"
    assert "dropped SM 6.1" in d.root_cause and f"TensorRT <= {last}" in _fixes(d)


def test_tensorrt_without_a_jetsons_sm_is_not_the_jetpack_one() -> None:
    # https://github.com/NVIDIA-ISAAC-ROS/isaac-ros-cli/issues/22: a container's TensorRT 10.13.3
    # on a Jetson Orin (8.7; TensorRT supports it since 8.4): the build is another platform's
    d = _blind("isaac-ros-cli-22-trt1013-orin-sm87.log")
    assert "predates" not in d.root_cause and "JetPack" in d.root_cause
    assert "TensorRT of the board's JetPack" in _fixes(d)


def test_torchs_supported_list_on_its_own_with_the_gpu_named() -> None:
    # https://github.com/fedbiomed/fedbiomed/issues/464: RTX A6000 (8.6) and a list up to sm_70;
    # sm_86 needs CUDA >= 11.1 (kb/toolkits.json)
    first = kb.first_toolkit_for("sm_86")
    d = _blind("fedbiomed-464-a6000-torch-sm70.log")
    assert d.signature == "torch-supported-archs"
    assert first == "11.1" and f"cu{first.replace('.', '')}" in _fixes(d)
