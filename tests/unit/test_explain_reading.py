"""explain reads logs as they come: wrapped lines, JSON records, a build failure and the error it
left later, and a `next:` that is the first fix whenever the log settles the question.

The messages are the released sources' own (torch's capability warning as torch/cuda/__init__.py
words it, FlashInfer's JIT build and its CUDA check read from the FlashInfer 0.6.16 wheel in the
test data), formatted as their writers print them (Python's ``warnings.formatwarning``, Go's
``encoding/json``, ninja's output under FlashInfer's ``RuntimeError``). The expectations come
from NVIDIA's rules (SASS runs on a newer minor of its major; the first CUDA of each target,
/work/shared/reference/arch_kb.md from NVIDIA's release notes), never from archgap's output.
"""

from __future__ import annotations

import ast
import json
import textwrap
import warnings
from pathlib import Path

import pytest

from archgap.analysis.explain.diagnosis import Diagnosis, explain
from archgap.analysis.explain.logparse import parse_log
from archgap.analysis.explain.logwrap import Unwrapped
from archgap.kb.signatures import load_signatures
from archgap.report.explain import next_step
from tests.helpers import need_data

BLIND = Path(__file__).resolve().parents[1] / "fixtures" / "explain_blind"

# torch's warning, as torch/cuda/__init__.py (_check_capability, ``incompatible_device_warn``;
# the same text from 1.10 to 2.5: https://github.com/pytorch/pytorch/blob/v2.5.1/torch/cuda/
# __init__.py) formats it: the GPU's name, its sm_XY, torch's arch list, the name again.
TORCH_WARNING = """
{} with CUDA capability sm_{} is not compatible with the current PyTorch installation.
The current PyTorch install supports CUDA capabilities {}.
If you want to use the {} GPU with PyTorch, please check the instructions at https://pytorch.org/get-started/locally/
"""
# torch 1.12's cu113 wheels: the list its warning printed on an RTX 4090 (sm_89)
CU113_LIST = "sm_37 sm_50 sm_60 sm_70 sm_75 sm_80 sm_86"


def _explain(text: str) -> Diagnosis:
    return explain(parse_log(text), load_signatures())


def _torch_warning(gpu: str, sm: str, archs: str) -> str:
    """The warning as Python's warnings module prints it (file:line: UserWarning: message)."""
    message = TORCH_WARNING.format(gpu, sm, archs, gpu)
    path = "/opt/venv/lib/python3.10/site-packages/torch/cuda/__init__.py"
    return warnings.formatwarning(message, UserWarning, path, 173, line="")


def _hard_wrapped(text: str, width: int) -> str:
    """A terminal's wrap: every line cut every ``width`` characters, wherever that falls."""
    out = []
    for line in text.split("\n"):
        out += [line[i : i + width] for i in range(0, len(line), width)] or [""]
    return "\n".join(out)


def _soft_wrapped(text: str, width: int) -> str:
    """An editor's or a forum's wrap: at spaces, the rest of each line indented."""
    return "\n".join(
        textwrap.fill(line, width, subsequent_indent="    ") if line else ""
        for line in text.split("\n")
    )


# ---------------------------------------------------------------- wrapped lines


@pytest.mark.parametrize("wrap", [_hard_wrapped, _soft_wrapped], ids=["terminal", "editor"])
def test_a_wrapped_torch_warning_is_read_whole(wrap: object) -> None:
    # At 80 columns the list line is cut after "sm_70 s" (terminal) or "sm_70" (editor): read
    # as it stands, torch would seem built for nothing newer than sm_70, a gap on 8.9. Read
    # whole, the list has sm_86, whose SASS runs on 8.9 (same major, newer minor: CUDA C++
    # Programming Guide, binary compatibility), so the warning is harmless.
    log = _torch_warning("NVIDIA GeForce RTX 4090", "89", CU113_LIST)
    wrapped = wrap(log, 80)  # type: ignore[operator]
    assert "sm_86" not in next(x for x in wrapped.split("\n") if "supports CUDA" in x)
    d = _explain(wrapped)
    assert d.signature == "torch-sm-not-compatible"  # the first line's words, across the cut
    assert "no gap" in d.root_cause and "sm_86" in d.root_cause
    assert d.fixes == ()


def test_a_wrapped_torch_warning_on_a_gpu_newer_than_its_list() -> None:
    # sm_120 needs CUDA >= 12.8 (NVIDIA's CUDA 12.8 release notes; arch_kb.md); torch 2.5's
    # cu124 list ends at sm_90: the fix is a torch built with CUDA >= 12.8
    log = _torch_warning(
        "NVIDIA GeForce RTX 5090", "120", "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90"
    )
    d = _explain(_hard_wrapped(log, 80))
    assert d.signature == "torch-sm-not-compatible" and "sm_90" in d.root_cause
    assert next_step(d).startswith("install a torch built with CUDA >= 12.8")


def test_lines_that_are_not_wrapped_stay_apart() -> None:
    # a frame's code line, a short line and a line that ends a sentence are never joined
    text = (
        "Traceback (most recent call last):\n"
        '  File "/opt/venv/lib/python3.10/site-packages/pkg/mod.py", line 10, in a_long_function\n'
        "    result = compute_something_quite_long(argument_number_one, argument_two_long)\n"
        "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
    )
    log = parse_log(text)
    assert log.lines == 4
    (tb,) = log.tracebacks
    assert tb.frames[0].code.endswith("argument_two_long)")
    assert tb.exception_type == "RuntimeError"
    assert tb.message == "CUDA error: no kernel image is available for execution on the device"


def test_a_line_that_only_lacks_a_full_stop_is_not_wrapped() -> None:
    # torch's own two lines (c10/cuda/CUDAException.cpp's error and its note), the first
    # without a full stop, and two records of docker compose: no width explains a cut there
    text = (
        "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
        "CUDA kernel errors might be asynchronously reported at some other API call, so the "
        "stacktrace below might be incorrect.\n"
        'vllm-1  | ERROR 11-18 18:07:28 engine.py:366]   File "/usr/local/lib/python3.12/dist-'
        'packages/vllm/worker/worker.py", line 493, in raise_if_cache_size_invalid\n'
        'vllm-1  | ERROR 11-18 18:07:28 engine.py:366]     raise ValueError("No available")\n'
    )
    lines = [t for _, t in Unwrapped(enumerate(text.split("\n"), start=1)) if t]
    assert len(lines) == 4


# ---------------------------------------------------------------- JSON records


def _flashinfer_source(name: str) -> str:
    (venv,) = need_data("venv-flashinfer-python-0.6.16")
    return (venv / "lib/python3.11/site-packages/flashinfer" / name).read_text()


def _raised_strings(source: str) -> list[str]:
    """The string literals of ``raise RuntimeError("...")`` in a module."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            for arg in node.exc.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    found.append(arg.value)
    return found


def test_a_json_record_is_read_by_its_message_field() -> None:
    # A Go service's log (encoding/json escapes <, > and & as \u003c, \u003e, \u0026) holding
    # FlashInfer's own check: its ">=" is only there once the record is decoded.
    message = next(
        m for m in _raised_strings(_flashinfer_source("compilation_context.py")) if "SM 12" in m
    )
    record = {"level": "error", "ts": 1767225600.1, "caller": "engine/worker.go:88"}
    record["msg"] = f"worker exited: RuntimeError: {message}"
    line = json.dumps(record).replace(">", "\\u003e").replace("<", "\\u003c")
    assert ">=" not in line
    d = _explain(line + "\n")
    assert d.status == "diagnosed" and "12.9" in d.root_cause


# ---------------------------------------------------------------- connected errors


SITE = "/opt/venv/lib/python3.12/site-packages"
GPU_LINE = "GPU 0: NVIDIA RTX PRO 6000 Blackwell Workstation Edition (UUID: GPU-5a1c)\n"


def _jit_build_failure() -> str:
    """FlashInfer's JIT build refused by nvcc, as run_ninja (jit/cpp_ext.py) raises it: the
    CalledProcessError, then ``RuntimeError(msg) from e`` with the ninja output after its
    message."""
    source = _flashinfer_source("jit/cpp_ext.py")
    assert 'msg = "Ninja build failed."' in source and '" Ninja output:\\n"' in source
    cache = "/root/.cache/flashinfer/0.6.16/120/cached_ops"
    ninja = (
        f"ninja: Entering directory `{cache}'\n"
        f"[1/3] /usr/local/cuda/bin/nvcc -I{SITE}/flashinfer/data/include "
        "-gencode=arch=compute_120,code=sm_120 "
        f"-c {cache}/top_k/top_k.cu -o {cache}/top_k/top_k.cuda.o\n"
        f"FAILED: {cache}/top_k/top_k.cuda.o\n"
        "nvcc fatal   : Unsupported gpu architecture 'compute_120'\n"
        "ninja: build stopped: subcommand failed.\n"
    )
    return (
        "Traceback (most recent call last):\n"
        f'  File "{SITE}/flashinfer/jit/cpp_ext.py", line 369, in run_ninja\n'
        "    subprocess.run(\n"
        '  File "/usr/lib/python3.12/subprocess.py", line 571, in run\n'
        "    raise CalledProcessError(retcode, process.args,\n"
        f"subprocess.CalledProcessError: Command '['ninja', '-v', '-C', '{cache}']' returned "
        "non-zero exit status 1.\n\n"
        "The above exception was the direct cause of the following exception:\n\n"
        "Traceback (most recent call last):\n"
        f'  File "{SITE}/flashinfer/jit/core.py", line 305, in build_and_load\n'
        "    self.build(verbose)\n"
        f'  File "{SITE}/flashinfer/jit/cpp_ext.py", line 382, in run_ninja\n'
        "    raise RuntimeError(msg) from e\n"
        "RuntimeError: Ninja build failed. Ninja output:\n" + ninja + "\n"
    )


def _later(package_file: str, exception: str) -> str:
    return (
        "Traceback (most recent call last):\n"
        '  File "/srv/app/serve.py", line 40, in <module>\n'
        "    out = sample(logits)\n"
        f'  File "{package_file}", line 1450, in top_k\n'
        "    return module.top_k(x)\n"
        f"{exception}\n"
    )


def test_a_build_failure_explains_the_run_time_error_it_left() -> None:
    # The log ends with "no kernel image" in flashinfer; earlier flashinfer's JIT build failed
    # because nvcc did not know compute_120 (sm_120 needs CUDA >= 12.8: arch_kb.md). A build of
    # flashinfer "with sm_120" cannot come from that nvcc: the cause is the toolkit, said once.
    log = (
        GPU_LINE
        + _jit_build_failure()
        + _later(
            f"{SITE}/flashinfer/sampling.py",
            "RuntimeError: CUDA error: no kernel image is available for execution on the device",
        )
    )
    d = _explain(log)
    assert d.status == "diagnosed" and d.exit_code == 1
    assert d.signature == "cuda-no-kernel-image"  # the error the log ends with ...
    assert d.root_signature == "nvcc-unsupported-gpu-arch"  # ... and its cause, earlier
    assert "CUDA >= 12.8" in d.root_cause and "predates sm_120" in d.root_cause
    assert next_step(d).startswith("build with CUDA >= 12.8")
    assert any(
        s.text.startswith("Earlier in the log, the build of flashinfer failed") for s in d.steps
    )
    assert not any("contains sm_120" in f.text for f in d.fixes)  # no prebuilt build asked for


def test_an_unknown_error_after_the_build_is_linked_to_it() -> None:
    later = _later(
        f"{SITE}/flashinfer/sampling.py",
        "AttributeError: 'NoneType' object has no attribute 'top_k'",
    )
    d = _explain(GPU_LINE + _jit_build_failure() + later)
    assert d.root_signature == "nvcc-unsupported-gpu-arch" and "CUDA >= 12.8" in d.root_cause
    (then,) = [s for s in d.steps if s.text.startswith("Then, in flashinfer")]
    assert "AttributeError" in then.text and then.source.startswith("log line ")


def test_an_error_of_another_package_is_not_claimed_by_the_build() -> None:
    later = _later(f"{SITE}/othertool/run.py", "KeyError: 'top_k'")
    d = _explain(GPU_LINE + _jit_build_failure() + later)
    assert d.root_signature == "nvcc-unsupported-gpu-arch"
    assert not any(s.text.startswith("Then, in") for s in d.steps)
    assert any("KeyError" in n and "does not tie it" in n for n in d.notes)


# ---------------------------------------------------------------- next: the first fix


def test_next_is_the_fix_when_every_answer_to_the_question_gives_it() -> None:
    # sm_86 came with CUDA 11.1 and no release dropped it (arch_kb.md; CUDA 13 dropped sm_50 to
    # sm_72 only): an nvcc that rejects compute_86 is older than 11.1, whatever its version.
    d = _explain("nvcc fatal   : Unsupported gpu architecture 'compute_86'\n")
    assert next_step(d).startswith("build with CUDA >= 11.1")


def test_next_asks_when_the_answer_changes_the_fix() -> None:
    # sm_70: CUDA 9.0 added it, CUDA 13.0 dropped it; an nvcc older than 9.0 and one of 13.x
    # both reject it, and need opposite fixes: the nvcc's version decides the first step
    d = _explain("nvcc fatal   : Unsupported gpu architecture 'compute_70'\n")
    assert next_step(d).startswith("find out the CUDA version of nvcc")


def test_next_asks_for_the_gpu_the_log_does_not_name() -> None:
    # https://github.com/HPMLL/DTC-SpMM_ASPLOS24/issues/2: no GPU named; the fixes hold a
    # placeholder for its capability, and no fix is given as if for a GPU (issue 43)
    d = explain(
        parse_log((BLIND / "dtc-spmm-2-no-kernel-image-arch-list.log").read_text()),
        load_signatures(),
    )
    assert all("<CC>" in f.text or "<SM>" in f.text or "sm_" not in f.text for f in d.fixes)
    assert next_step(d).startswith("find out the GPU's compute capability")


# ---------------------------------------------------------------- not an architecture gap


@pytest.mark.parametrize(
    "name", ["basicsr-737-nccl-watchdog.log", "arctictraining-219-nccl-timeout.log"]
)
def test_an_nccl_watchdog_timeout_is_no_architecture_gap(name: str) -> None:
    # ProcessGroupNCCL's watchdog (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp: "Watchdog
    # caught collective operation timeout", "ProcessGroupNCCL's watchdog got stuck"): a
    # collective that did not finish in time (a hang, a slow or lost rank), no architecture: no
    # cause, no fix, and not the 0 of a healthy log (arctictraining's exited 0 before)
    d = _explain((BLIND / name).read_text())
    assert d.root_cause == "" and d.fixes == ()
    assert d.status == "not-architecture" and d.exit_code == 4
