"""A scan as one health-check line for Slurm, NHC and readiness probes: ``OK`` or a stable reason.

``archgap: <code>: <package> <version> on <gpu>: <short why>``, at most ``MAX_LINE`` characters,
one line, with no quote, backslash, ``$`` or backtick: NHC hands a check's message to
``eval $OFFLINE_NODE "'$HOSTNAME'" "'$*'"`` (mej/nhc 1.4.3, ``nhc`` lines 61 and 64), where a
single quote ends the quoting and the rest is shell syntax. The codes are a contract (drain
policies match them): never rename one, only add.

exit 1 (the node cannot run this stack; a drain policy may act on it):
  ``gpu-missing``   a ``--require``'d GPU is not present
  ``no-kernel``     a package has no kernel that can run on a present or named GPU
  ``blocked``       a package has kernels for such a GPU but cannot load there: the driver, a
                    library, the platform or a companion is missing (verdict ``blocked``; these
                    were ``no-kernel`` before the word existed); after ``no-kernel``, as
                    ``blocked`` ranks after ``none`` (analysis/verdicts/verdicts.py RANK)
  ``jit-fails``     a JIT compiler (FlashInfer, Triton, torch extensions) will fail on such a GPU
  ``gpu-fault``     nvidia-smi is installed but hung or failed and no GPU answered (a GPU that
                    fell off the bus, a driver that is not loaded): the node cannot run GPU jobs
exit 2 (archgap could not judge; not a reason to drain):
  ``probe-failed``  the facts could not be collected (unreachable target, bad --env-from ...)
  ``no-python``     the interpreter has no site-packages (it did not run, or is not Python)
  ``gpu-unknown``   a present GPU's compute capability is unknown (name it with --require)
  ``no-gpu``        no GPU is present and none was named: nothing to judge
  ``usage``         a bad argument (an unknown GPU name, --drain outside Slurm)

Pure: the report in, the line and the exit code out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from archgap.analysis.gpu_fault import gpu_fault

if TYPE_CHECKING:
    from archgap.analysis.scan import ScanReport
    from archgap.analysis.verdicts.compat import GpuTarget

MAX_LINE = 200
PREFIX = "archgap:"
GAP_CODES = ("gpu-fault", "gpu-missing", "no-kernel", "blocked", "jit-fails")
ERROR_CODES = ("probe-failed", "no-python", "gpu-unknown", "no-gpu", "usage")


@dataclass(frozen=True)
class Health:
    code: str  # "ok" or one of GAP_CODES / ERROR_CODES
    line: str  # what is printed (and given to scontrol as the drain reason)
    exit_code: int  # 0 OK, 1 a gap, 2 could not judge

    @property
    def drains(self) -> bool:
        """Whether a drain policy should take the node out: a gap, never a failure to judge."""
        return self.exit_code == 1


OK = Health("ok", "OK", 0)


# What a shell reads as syntax even inside NHC's single quotes (the quote itself), or as an
# expansion or escape wherever else the line is pasted: an apostrophe becomes a typographic one,
# the rest is dropped.
_SHELL_SYNTAX = str.maketrans({"'": "\u2019", '"': None, "`": None, "$": None, "\\": "/"})


def one_line(text: str) -> str:
    """Whitespace and control characters collapsed to single spaces, shell syntax dropped."""
    return re.sub(r"[\s\x00-\x1f\x7f]+", " ", text.translate(_SHELL_SYNTAX)).strip()


def reason_line(code: str, subject: str, why: str, more: int = 0) -> str:
    """``archgap: CODE: SUBJECT: WHY (+N more)``, cut to MAX_LINE characters (the why is cut)."""
    head = one_line(f"{PREFIX} {code}: {subject}: " if subject else f"{PREFIX} {code}: ") + " "
    tail = f" (+{more} more)" if more else ""
    why = one_line(why)
    room = MAX_LINE - len(head) - len(tail)
    if len(why) > room:
        why = why[: max(room - 1, 0)].rstrip() + "…"
    return (head + why + tail)[:MAX_LINE]


def failure(code: str, why: str) -> Health:
    """A health line for a run that could not judge (exit 2)."""
    return Health(code, reason_line(code, "", why), 2)


def _gpu_name(target: GpuTarget) -> str:
    """'12.0 (NVIDIA RTX PRO 6000 Blackwell)': the label without its '(GPU 0,1)' list."""
    label = re.sub(r"\s*\(GPU [^)]*\)$", "", target.label)
    cc = str(target.compute_capability)
    return cc if label in (cc, "") else f"{cc} ({label})"


def health(report: ScanReport, missing_required: Sequence[str] = ()) -> Health:
    """The first reason the node cannot run this stack, in the order of GAP_CODES, else OK.

    ``missing_required``: the --require'd GPUs that are not present ("sm_120 (compute capability
    12.0)"), computed by the caller from the same facts.
    """
    fault = gpu_fault(report.gpu_facts)
    if fault:  # before gpu-missing: the GPU is "missing" because it does not answer
        return Health("gpu-fault", reason_line("gpu-fault", "nvidia-smi", fault), 1)
    if missing_required:
        present = ", ".join(sorted({str(g.compute_capability) for g in report.gpus
                                    if g.role == "present"})) or "none"  # fmt: skip
        why = f"not present (GPUs present: {present})"
        more = len(missing_required) - 1
        return Health("gpu-missing", reason_line("gpu-missing", missing_required[0], why, more), 1)
    by_label = {g.label: g for g in report.gpus}
    # no kernel (and unknown) first, then what cannot load: the order of the verdicts' RANK
    gaps = sorted(report.gaps, key=lambda p: (p.verdict == "blocked", p.package.lower(), p.gpu))
    if gaps:
        first = gaps[0]
        code = "blocked" if first.verdict == "blocked" else "no-kernel"
        subject = f"{first.package} {first.version} on {_gpu_name(by_label[first.gpu])}"
        extra = len(gaps) - 1 + len(report.jit_gaps)
        return Health(code, reason_line(code, subject, first.reason, extra), 1)
    jit = sorted(report.jit_gaps, key=lambda f: (f.package.lower(), f.gpu or ""))
    if jit:
        f = jit[0]
        target = by_label.get(f.gpu or "")
        gpu = _gpu_name(target) if target else (f.compute_capability or "any GPU")
        subject = f"{f.package} {f.version} on {gpu}"
        return Health("jit-fails", reason_line("jit-fails", subject, f.cause, len(jit) - 1), 1)
    return _unjudged(report) or OK


def _unjudged(report: ScanReport) -> Health | None:
    """Why a report without a gap still cannot say OK, if it cannot."""
    if report.unread:
        executable = report.environment.executable or "the interpreter"
        return failure("no-python", f"{executable}: {report.unread}")
    from archgap.analysis.scan import unidentified_gpus

    unknown = unidentified_gpus(report.gpu_facts)
    if unknown:
        return failure("gpu-unknown", f"{unknown[0].subject}: {unknown[0].reason}")
    if not any(g.gates_exit_code for g in report.gpus):
        seen = next((f"{p.subject}: {p.reason}" for p in report.gpu_facts.problems), "")
        return failure("no-gpu", "no GPU found and none named" + (f" ({seen})" if seen else ""))
    return None


def missing_gpus(report: ScanReport, required: Sequence[str]) -> list[str]:
    """The ``required`` GPUs (names or compute capabilities) that are not present, by compute
    capability."""
    from archgap.analysis.verdicts.compat import resolve_gpu

    present = {g.compute_capability for g in report.gpus if g.role == "present"}
    return [text for text in required if resolve_gpu(text).compute_capability not in present]
