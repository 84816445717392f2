"""archgap gates on a hand-written module: which lines are architecture gates, grouped by
function, with their conditions and messages. Expectations are written by hand."""

from __future__ import annotations

import textwrap
from pathlib import Path

from archgap.probe.source.gates import gates

SOURCE = textwrap.dedent(
    """\
    import os
    import sys
    import warnings

    import torch


    def pick_arch(device):
        major, minor = torch.cuda.get_device_capability(device)
        if major >= 9:
            return "sm_90a"
        if (major, minor) < (7, 5):
            raise RuntimeError(f"sm{major}{minor} is not supported")
        return "sm_%d%d" % (major, minor)


    def arch_flags():
        archs = os.environ.get("MYPKG_CUDA_ARCH_LIST", "")
        if not archs:
            archs = ";".join(torch.cuda.get_arch_list())
        return archs


    class Checker:
        def check(self, version):
            if version < "12.8":
                warnings.warn("Blackwell needs CUDA 12.8 or newer")
            assert self.cc >= 80, "compute capability 8.0 or higher required"


    def unrelated(items):
        if sys.version_info.major < 3:
            raise RuntimeError("Python 3 needed")
        if len(items) > 3:
            raise ValueError("too many items")
        return items
    """
)


def test_gates_by_function(tmp_path: Path) -> None:
    path = tmp_path / "mypkg.py"
    path.write_text(SOURCE)
    target, problems = gates("mypkg", [str(tmp_path)])
    assert problems == []
    found = {f.function: [(g.line, g.kind) for g in f.gates] for f in target.functions}
    assert found == {
        "pick_arch": [
            (9, "capability-call"),
            (10, "comparison"),
            (12, "comparison"),
            (13, "raise"),
        ],
        "arch_flags": [(18, "arch-env"), (20, "arch-list-call")],
        "Checker.check": [(27, "warning"), (28, "assert"), (28, "comparison")],
    }
    by_line = {g.line: g for f in target.functions for g in f.gates}
    assert by_line[13].message == 'f"sm{major}{minor} is not supported"'
    assert by_line[13].condition == "if (major, minor) < (7, 5)"
    assert by_line[18].detail == "MYPKG_CUDA_ARCH_LIST"
    assert by_line[20].condition == "if not archs"
    assert by_line[27].message == "Blackwell needs CUDA 12.8 or newer"
    assert by_line[9].detail == "torch.cuda.get_device_capability"
    lines = {f.function: f.line for f in target.functions}
    assert lines == {"pick_arch": 8, "arch_flags": 17, "Checker.check": 25}


def test_a_file_without_trigger_words_is_not_parsed(tmp_path: Path) -> None:
    (tmp_path / "plain.py").write_text("def f(x):\n    return x + 1\n")
    (tmp_path / "broken.py").write_text("def f(:\n    pass\n")
    target, problems = gates("x", [str(tmp_path)])
    assert (target.files_scanned, target.candidate_files, target.functions) == (2, 0, ())
    assert problems == []


def test_shape_checks_are_not_architecture_gates(tmp_path: Path) -> None:
    # Lines copied from flashinfer 0.6.8 (gemm kernels, green_ctx): divisibility and counts that
    # happen to contain "major", "compute" or "sm"; beside them real gates that must stay.
    (tmp_path / "shapes.py").write_text(
        textwrap.dedent(
            """\
            def check(num_major_elements, num_contiguous_elements, sm_count, warp_idx, major):
                if num_major_elements % num_contiguous_elements == 0:
                    pass
                if sm_count <= 0:
                    pass
                if warp_idx % self.num_compute_warps == 0:
                    pass
                if major_mode_size >= 64:
                    pass
                if major * 10 + 0 >= 90:
                    pass
                if sm_major >= 10:
                    pass
            """
        )
    )
    target, _ = gates("x", [str(tmp_path)])
    (function,) = target.functions
    assert [(g.line, g.detail) for g in function.gates] == [
        (10, "major * 10 + 0 >= 90"),
        (12, "sm_major >= 10"),
    ]
