"""What a scan's probe needs to search deeply only where hidden entries can matter.

The probe (probe/deep_plan.py) reads every file plainly, then searches deeply only the files
whose listed fatbin lacks a kernel cubin native to some GPU the scan judges. Which cubins are
native to which GPU is decided here, by the one implementation of the rules (``sass_compat``):
the plan lists, for every compute capability the scan may judge (the named ones, the default
matrix, every one kb/gpus.json knows, since any of them may be present), the SASS targets that
run on it. A target outside that table (an architecture no GPU has) counts as not native: the
file is then searched deeply, as it is without a plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from archgap.analysis.verdicts.compat import (
    ComputeCapability,
    matrix_targets,
    resolve_gpu,
    sass_compat,
)
from archgap.kb.gpus import known_capabilities

VARIANTS = ("", "a", "f")


def deep_search_plan(named: Sequence[str] = ()) -> dict[str, Any]:
    """The plan for a scan judging the GPUs ``named`` (names or compute capabilities, as
    ``--gpu`` takes them), the present ones and, when there are neither, the default matrix.
    Raises ``UnknownGpu`` for a name no table knows."""
    named_ccs = [resolve_gpu(name).compute_capability for name in named]
    default = [target.compute_capability for target in matrix_targets()]
    known = [ComputeCapability.parse(text) for text in known_capabilities()]
    universe = sorted({*named_ccs, *default, *(cc for cc in known if cc is not None)})
    archs = sorted({cc.sm for cc in universe})
    native = {
        str(cc): [
            f"sm_{arch}{variant}"
            for arch in archs
            for variant in VARIANTS
            if sass_compat(arch, variant, cc).runs is True
        ]
        for cc in universe
    }
    return {
        "native": native,
        "named": list(dict.fromkeys(str(cc) for cc in named_ccs)),
        "default": [str(cc) for cc in default],
    }
