"""Evidence: what a log itself states (the GPU, its compute capability, versions, settings).

Pure. Each (kind, gate, regex) of ``_EVIDENCE_PATTERNS`` runs only on lines that contain the
lowercase gate literal, and then only in windows around it (``_matches_near``), so each pattern
costs a bounded number of characters per line however long or repetitive the line is.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

MAX_EVIDENCE = 20  # distinct values kept per kind of evidence
# Evidence patterns run in windows around their gate literal (see _matches_near).
EVIDENCE_GATES_PER_LINE = 3
EVIDENCE_BEFORE = 64  # the longest text a pattern captures before its gate: (\S.{0,60}?)
EVIDENCE_AFTER = 120  # after it (a version, a GPU name) ...
SETTING_AFTER = 320  # ... or a setting's value (CUDA_HOME=\S{1,300})


@dataclass(frozen=True)
class Evidence:
    kind: str  # "gpu", "compute_capability", "torch", "flashinfer", "nvcc", "cuda_home", ...
    value: str
    line: int  # first line stating it
    text: str  # that line, trimmed


# Evidence: what the log itself states. Each (kind, gate, regex): the regex runs only on lines
# that contain the lowercase gate literal.
_EVIDENCE_PATTERNS: tuple[tuple[str, str, re.Pattern[str]], ...] = (
    (
        "gpu",
        "nvidia",
        re.compile(
            r"\b(NVIDIA(?: (?:GeForce|RTX|PRO|Tesla|Quadro|TITAN|[A-Z]{1,3}\d{1,4}[A-Za-z]{0,2}"
            r"|\d{3,4}(?: Ti| D)?|Blackwell|Ada|Server|Workstation|Max-Q|Edition|Generation"
            r"|SXM\d?-\d{2}GB|PCIE-\d{2}GB|[A-Z]\d{3,4}[A-Z]?(?:-\w{1,12})?))+)"
        ),
    ),
    ("gpu", "with cuda capability", re.compile(r"(\S.{0,60}?) with CUDA capability sm_\d")),
    ("gpu", "found gpu", re.compile(r"Found GPU ?\d{1,3} (\S.{0,60}?) which is of")),
    (
        "gpu",
        "gpu 0",
        re.compile(r"GPU \d{1,3}(?: \(CUDA order\))?\s*: (\S.{0,60}?)\s*(?:\||\(UUID|$)"),
    ),
    # The GPU's own capability, as torch, SGLang's check_env and sgl-kernel state it.
    ("gpu_cc", "with cuda capability", re.compile(r"with CUDA capability sm_(\d{2,3})\b")),
    (
        "gpu_cc",
        "capability",
        re.compile(
            r"(?:which is of (?:cuda|compute) capability(?: \(CC\))?|Compute [Cc]apability:"
            r"|your GPU has capability \()\s*(\d{1,2}(?:\.|, )\d)\b"
        ),
    ),
    *(
        ("gpu", gate, re.compile(r"\b((?:GeForce )?" + name + r")\b(?!\+)"))
        for gate, name in (
            ("rtx", r"RTX (?:PRO )?\d{4}(?: Ti| Ada)?"),
            ("gb10", r"GB10"),
            ("dgx spark", r"DGX Spark"),
            ("h100", r"H100"),
            ("h200", r"H200"),
            ("b200", r"G?B200"),
            ("b300", r"G?B300"),
            ("v100", r"V100"),
            ("a100", r"A100"),
            ("jetson", r"Jetson (?:AGX )?(?:Orin|Thor|Xavier)"),
            ("tesla", r"Tesla [A-Z]\d{1,3}[A-Za-z]?"),
            ("l40", r"L40S?"),
        )
    ),
    ("compute_capability", "sm_", re.compile(r"\bsm_(\d{2,3}[af]?)\b")),
    ("compute_capability", "capability", re.compile(r"capability (?:\(CC\) )?(\d{1,2}\.\d)\b")),
    ("compute_capability", "sm1", re.compile(r"\bSM(1\d{2})\b")),
    ("torch", "pytorch", re.compile(r"(?<!build )PyTorch(?: version)?\s*:\s*(\d[\w.+]{1,30})")),
    ("torch", "torch", re.compile(r"\btorch(?:==|\s{2,})(\d[\w.+]{1,30})")),
    # Versions named in prose ("flashinfer 0.2.5", "PyTorch 2.8.0+cu128", "nvcc 12.8").
    *(
        (kind, kind, re.compile(r"\b" + words + r"(?: version)? v?(\d+\.\d+\.\d+[\w.+]{0,20})"))
        for kind, words in (
            ("torch", r"(?:torch|PyTorch)"),
            ("flashinfer", r"flashinfer(?:[-_]python)?"),
            ("triton", r"triton"),
        )
    ),
    (
        "nvcc",
        "nvcc",
        re.compile(r"\b(?:nvcc|CUDA [Tt]oolkit)(?: version)?\s*:?\s*v?(\d{1,2}\.\d{1,2})\b"),
    ),
    (
        "torch_cuda",
        "cuda used to build",
        re.compile(r"CUDA used to build PyTorch\s*:\s*(\d[\w.]{0,10})"),
    ),
    (
        "flashinfer",
        "flashinfer",
        re.compile(r"\bflashinfer(?:[-_]python)?(?:==|\s*:\s*|\s{2,})v?(\d+\.\d+[\w.+]{0,30})"),
    ),
    (
        "flashinfer",
        "flashinfer/",
        re.compile(r"flashinfer/(?:autotune/)?(\d+\.\d+\.\d+[\w.]{0,10})/"),
    ),
    (
        "nvcc",
        "cuda compilation tools",
        re.compile(r"Cuda compilation tools, release (\d{1,2}\.\d{1,2})"),
    ),
    (
        "driver",
        "driver version",
        re.compile(r"Driver Version\s*:?\s*(\d{3}\.\d{1,3}(?:\.\d{1,3})?)"),
    ),
    ("driver_cuda", "cuda version:", re.compile(r"CUDA Version:\s*(\d{1,2}\.\d)")),
    ("vllm", "vllm version", re.compile(r"vLLM Version\s*:\s*(\d[\w.+]{0,30})")),
    ("sglang", "sglang", re.compile(r"\bsglang(?:==|:\s*|\s{2,})(\d+\.\d+[\w.+]{0,20})")),
    (
        "triton",
        "triton",
        re.compile(r"\b(?:pytorch-)?triton(?:==|:\s*|\s{2,})(\d+\.\d+[\w.+]{0,30})"),
    ),
    # Settings printed as NAME=value or NAME: value; the kind is the lowercase name.
    *(
        (name.lower(), name.lower(), re.compile(name + r"\s*[:=]\s*(" + value + ")"))
        for name, value in (
            ("FLASHINFER_CUDA_VERSION", r"\d[\w.]{0,10}"),
            ("CUDA_HOME", r"\S{1,300}"),
            ("CUDA_PATH", r"\S{1,300}"),
            ("FLASHINFER_CUDA_ARCH_LIST", r"\S.{0,80}"),
            ("TORCH_CUDA_ARCH_LIST", r"\S.{0,80}"),
        )
    ),
)
_GPU_NOISE = ("NVIDIA Corporation", "NVIDIA CUDA", "NVIDIA Driver")


def collect_evidence(
    number: int, text: str, seen: dict[tuple[str, str], Evidence], counts: dict[str, int]
) -> None:
    """Add what line ``number`` states to ``seen`` (at most MAX_EVIDENCE values per kind)."""
    lowered = text.lower()
    for kind, gate, pattern in _EVIDENCE_PATTERNS:
        if gate not in lowered or counts.get(kind, 0) >= MAX_EVIDENCE:
            continue
        after = SETTING_AFTER if "_" in gate else EVIDENCE_AFTER  # NAME=value settings
        for match in _matches_near(pattern, text, lowered, gate, after):
            value = match.group(1).strip().rstrip(".,;:)").replace(", ", ".")
            if kind == "gpu" and (value in _GPU_NOISE or value == "NVIDIA" or len(value) < 4):
                continue
            if kind == "gpu" and any(
                e.kind == "gpu" and e.line == number and value in e.value for e in seen.values()
            ):
                continue  # "RTX PRO 6000" inside "NVIDIA RTX PRO 6000 Blackwell ..." said once
            key = (kind, value)
            if key not in seen:
                seen[key] = Evidence(kind, value, number, text.strip()[:300])
                counts[kind] = counts.get(kind, 0) + 1


def _matches_near(
    pattern: re.Pattern[str], text: str, lowered: str, gate: str, after: int
) -> Iterator[re.Match[str]]:
    """The matches of ``pattern`` in windows around the first EVIDENCE_GATES_PER_LINE places
    of ``gate`` (EVIDENCE_BEFORE characters before, EVIDENCE_AFTER after): each pattern then
    costs at most a fixed number of characters per line, however the line repeats the gate
    (a lazy ``(\\S.{0,60}?) with ...`` over a whole 4 KB line cost 30 ms)."""
    if len(lowered) != len(text):  # lower() changed the length: offsets do not carry over
        yield from pattern.finditer(text)  # (the line is at most MAX_LINE characters)
        return
    end = 0
    at = lowered.find(gate)
    for _ in range(EVIDENCE_GATES_PER_LINE):
        if at < 0:
            return
        start = max(end, at - EVIDENCE_BEFORE)
        end = min(len(text), at + len(gate) + after)
        yield from pattern.finditer(text, start, end)
        at = lowered.find(gate, end)
