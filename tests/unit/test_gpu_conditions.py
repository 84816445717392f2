"""Branch conditions evaluated for a compute capability (analysis.gpu_conditions): Python's own
semantics for the comparison, the package's spelling only as the hint of what a name holds."""

from __future__ import annotations

import pytest

from archgap.analysis.gpu_conditions import holds, reach, split_condition
from archgap.analysis.verdicts.compat import ComputeCapability

CC120, CC90, CC75 = ComputeCapability(12, 0), ComputeCapability(9, 0), ComputeCapability(7, 5)


@pytest.mark.parametrize(
    ("condition", "cc", "expected"),
    [
        ("major < 8", CC75, True),
        ("major < 8", CC90, False),
        ("major == 11 and minor == 0", CC120, False),
        ("sm_version < 80", CC75, True),  # 75 < 80
        ("sm in (90, 100)", CC90, True),
        ('device_arch != "90"', CC90, False),  # FlashInfer's text form, compared as text
        ('device_arch != "90"', CC120, True),
        ("device_arch != 80", CC120, True),  # the number form: 120 != 80
        ("torch.cuda.get_device_capability() < (8, 0)", CC75, True),
        ("get_compute_capability(dev)[0] in [12]", CC120, True),
        ("cc[0] < 10", CC90, True),
        ("not (major >= 9)", CC120, False),
        # anything the compute capability does not decide: cannot tell
        ('is_cuda_version_at_least("12.9")', CC120, None),
        ("backend == 'auto'", CC120, None),
        ("kspec.sm_mma <= kspec.sm", CC120, None),
        ("cc < 10", CC120, None),  # a tuple against a number: not what the code means
        ("major >=", CC120, None),  # not an expression
        # one decided operand settles and/or
        ('dtype == "fp8" and major < 9', CC120, False),
        ('dtype == "fp8" or major == 12', CC120, True),
        ('dtype == "fp8" and major == 12', CC120, None),
    ],
)
def test_holds(condition: str, cc: ComputeCapability, expected: bool | None) -> None:
    assert holds(condition, cc) is expected


def test_a_branch_path_is_reached_only_when_every_guard_allows_it() -> None:
    story = 'not (major == 9) / if major == 12 / not (is_cuda_version_at_least("12.9"))'
    guards = split_condition(story)
    assert guards == [
        ("not", "major == 9"),
        ("if", "major == 12"),
        ("not", 'is_cuda_version_at_least("12.9")'),
    ]
    assert reach(guards, CC120) == (None, ['not is_cuda_version_at_least("12.9")'])
    assert reach(guards, CC90) == (False, [])  # major == 9 returned before
    assert reach(split_condition("if major != 10"), CC120) == (True, [])
    # a loop or a handler is never decided; with nothing decided the path is not about the GPU
    assert reach(split_condition("for x in y / except Exception"), CC120)[0] is None
