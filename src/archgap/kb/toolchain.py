"""Toolkits, drivers and JIT rules as typed data (toolkits.json, drivers.json, jit.json).

Helpers the verdicts call: ``toolkit_can_target("12.8", "sm_120a")`` and
``max_ptx_isa_for_driver("570.86.10")``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from archgap.kb import load_json

_TARGET = re.compile(r"^(?:sm|compute)_(\d{2,3})([af]?)$")


def version_tuple(text: str) -> tuple[int, ...] | None:
    """The numeric release: ``"12.8"`` -> (12, 8); ``"v0.6.8.post1"`` -> (0, 6, 8);
    ``"2.7.0+cu128"`` -> (2, 7, 0); junk -> None."""
    match = re.match(r"^\s*v?(\d+(?:\.\d+)*)", text or "")
    if not match:
        return None
    return tuple(int(p) for p in match.group(1).split("."))


def major_minor(text: str) -> tuple[int, int] | None:
    parts = version_tuple(text)
    if not parts:
        return None
    return (parts[0], parts[1] if len(parts) > 1 else 0)


@dataclass(frozen=True)
class ToolkitRelease:
    cuda: str  # "12.8"
    targets_added: tuple[str, ...]
    targets_dropped: tuple[str, ...]
    ptx_isa: str
    ptx_isa_inferred: bool
    min_driver_linux: str | None
    source: str


@dataclass(frozen=True)
class MinorVersionCompat:
    runtime_major: int
    driver_min: str  # a newer driver runs it too (backward compatibility): no upper bound
    source: str


@cache
def toolkit_releases() -> tuple[ToolkitRelease, ...]:
    releases = (
        ToolkitRelease(
            e["cuda"],
            tuple(e["targets_added"]),
            tuple(e["targets_dropped"]),
            e["ptx_isa"],
            bool(e.get("ptx_isa_inferred")),
            e.get("min_driver_linux"),
            e["source"],
        )
        for e in load_json("toolkits.json")["toolkits"]
    )
    return tuple(sorted(releases, key=lambda r: major_minor(r.cuda) or (0, 0)))


@cache
def minor_version_compat() -> tuple[MinorVersionCompat, ...]:
    return tuple(
        MinorVersionCompat(e["runtime_major"], e["driver_min"], e["source"])
        for e in load_json("drivers.json")["minor_version_compat"]
    )


def toolkit_release(cuda_version: str) -> ToolkitRelease | None:
    wanted = major_minor(cuda_version)
    return next((r for r in toolkit_releases() if major_minor(r.cuda) == wanted), None)


def targets_of(cuda_version: str) -> frozenset[str] | None:
    """``sm_*`` names nvcc ``cuda_version`` accepts; None for a version before the table."""
    wanted = major_minor(cuda_version)
    releases = toolkit_releases()
    if wanted is None or wanted < (major_minor(releases[0].cuda) or (0, 0)):
        return None
    names: set[str] = set()
    for release in releases:
        if (major_minor(release.cuda) or (0, 0)) > wanted:
            break  # a newer toolkit than the table knows keeps the newest known set
        names |= set(release.targets_added)
        names -= set(release.targets_dropped)
    return frozenset(names)


def toolkit_can_target(cuda_version: str, target: str) -> bool:
    """Whether nvcc/ptxas of ``cuda_version`` accepts ``target`` ("sm_120a", "compute_120f")."""
    match = _TARGET.match(target.strip())
    names = targets_of(cuda_version)
    if not match or names is None:
        return False
    return f"sm_{match.group(1)}{match.group(2)}" in names


def first_toolkit_for(target: str) -> str | None:
    """The first CUDA version whose nvcc accepts ``target`` (and has not dropped it since)."""
    for release in toolkit_releases():
        if toolkit_can_target(release.cuda, target):
            return release.cuda
    return None


def last_toolkit_for(target: str) -> str | None:
    """The last CUDA version whose nvcc accepts ``target`` when a later one dropped it; None when
    the newest known toolkit still accepts it (or none ever did)."""
    last = None
    for release in toolkit_releases():
        if toolkit_can_target(release.cuda, target):
            last = release.cuda
        elif last is not None:
            return last
    return None


def toolkit_range_for(target: str) -> tuple[str, str | None] | None:
    """(first, last) CUDA versions whose nvcc accepts ``target``; last is None while the newest
    known toolkit still does (CUDA 13.0 dropped sm_50-sm_72: compute_70 gives ("11.0", "12.9"))."""
    first = first_toolkit_for(target)
    return None if first is None else (first, last_toolkit_for(target))


def dropped_in(target: str) -> str | None:
    """The CUDA release that dropped ``target`` (the one after its last toolkit: 13.0 for
    compute_70); None while the newest known toolkit still builds it."""
    last = last_toolkit_for(target)
    releases = [r.cuda for r in toolkit_releases()]
    return releases[releases.index(last) + 1] if last in releases[:-1] else None


@cache
def long_dropped_before() -> tuple[int, int]:
    """toolkits.json "long_dropped": a target whose last toolkit is older than this release is
    long dropped (CUDA 12.0: Kepler's sm_35/sm_37 and older)."""
    return major_minor(load_json("toolkits.json")["long_dropped"]["before"]) or (0, 0)


def long_dropped(last: str | None) -> bool:
    """Whether a target whose last toolkit is ``last`` (None: not dropped) is long dropped:
    current toolkits and builds are taken as leaving it out (toolkits.json "long_dropped")."""
    return last is not None and (major_minor(last) or (0, 0)) < long_dropped_before()


# What a lone branch number stands for after its own: every release of the branch.
BRANCH_WIDE = 1 << 30


def driver_tuple(driver_version: str) -> tuple[int, ...] | None:
    """A driver version, as it is compared with the drivers NVIDIA documents as minimums:
    ``"570.124.06"`` -> (570, 124, 6). A lone branch (``--driver 570``: "an R570 driver")
    stands for the branch: above every minimum inside it (CUDA 12.8 GA's 570.26, 12.8 U1's
    570.124.06: R570 runs CUDA 12.8 and PTX ISA 8.7), below the next branch's. Read as
    570.0, a version no R570 driver has, it would fail the branch's own GPUs and PTX."""
    parts = version_tuple(driver_version)
    return (*parts, BRANCH_WIDE) if parts is not None and len(parts) == 1 else parts


def driver_cuda_version(driver_version: str) -> str | None:
    """The newest CUDA whose GA minimum Linux driver ``driver_version`` meets."""
    have = driver_tuple(driver_version)
    if not have:
        return None
    best: str | None = None
    for release in toolkit_releases():
        need = version_tuple(release.min_driver_linux or "")
        if need and have >= need:
            best = release.cuda
    return best


def max_ptx_isa_for_driver(driver_version: str) -> str | None:
    """The newest PTX ISA the driver can JIT: that of the newest toolkit whose minimum it meets."""
    cuda = driver_cuda_version(driver_version)
    release = toolkit_release(cuda) if cuda else None
    return release.ptx_isa if release else None


def driver_runs_runtime(driver_version: str, runtime_version: str) -> tuple[bool | None, str]:
    """(whether a CUDA runtime of ``runtime_version`` runs on the driver, the rule that decided)."""
    have = driver_tuple(driver_version)
    runtime = major_minor(runtime_version)
    if not have or not runtime:
        return None, "unparseable version"
    release = toolkit_release(runtime_version)
    if release is not None and release.min_driver_linux:
        need = version_tuple(release.min_driver_linux)
        if need and have >= need:
            return True, (
                f"driver {driver_version} >= {release.min_driver_linux} "
                f"(CUDA {release.cuda} GA minimum)"
            )
    for rule in minor_version_compat():
        if rule.runtime_major == runtime[0]:
            floor = version_tuple(rule.driver_min) or ()
            ok = have >= floor
            return ok, (
                f"minor-version compatibility: CUDA {runtime[0]}.x runs on driver >= "
                f"{rule.driver_min} ({rule.source})"
            )
    return None, f"no rule for CUDA {runtime_version}"


# --- JIT rules (jit.json) -----------------------------------------------------------------


@dataclass(frozen=True)
class NormaliseStep:
    major: int | None
    major_min: int | None
    minor: int | None
    suffix: str | None  # unconditional suffix
    needs: tuple[tuple[str, str, str | None], ...]  # (cuda_min, suffix, minor text), first met
    raises: str | None  # message when no ``needs`` is met


@dataclass(frozen=True)
class FlashinferRange:
    low: str
    high_excl: str | None
    normalise: tuple[NormaliseStep, ...]
    check_message: str
    warning: str
    source: str
    source_checks: tuple[dict[str, str], ...]
    arch_list_verbatim: bool = False  # FLASHINFER_CUDA_ARCH_LIST entries used as written
    sm107_to_100f: bool = False  # SM 10.7 built as compute_100f when nvcc lacks compute_107a
    sm107_not_all: str = ""  # the modules still built as compute_107a ("" when none)


@dataclass(frozen=True)
class FlashinferRules:
    package: str
    nvcc_lookup: tuple[str, ...]  # where get_cuda_path() looks, in order
    nvcc_lookup_source: str
    arch_env: str
    min_compute_capability: str
    min_compute_capability_source: str
    fixed_in: str  # the first release whose rules work where older ones raise
    fixed_in_source: str
    nvcc_unsupported_arch: str  # nvcc's message, with ``{target}``
    avoid_options: str  # the serving frameworks' switches that keep FlashInfer off
    ranges: tuple[FlashinferRange, ...]

    @property
    def first_modelled(self) -> str:
        """The oldest release whose rules jit.json models ("0.3.1"): before it, none apply."""
        return min((r.low for r in self.ranges), key=lambda v: version_tuple(v) or ())

    def major_raises(self) -> tuple[tuple[int, str], ...]:
        """(major, message) of each release's rule that raises for a whole major instead of
        building ("SM 12.x requires CUDA >= 12.9"): what a log naming only the major says."""
        found = (
            (step.major, step.raises)
            for r in self.ranges
            for step in r.normalise
            if step.major is not None and step.raises
        )
        return tuple(dict.fromkeys(found))


@dataclass(frozen=True)
class VersionedArchs:
    """Names torch accepts (or expands) in TORCH_CUDA_ARCH_LIST, for torch in [low, high_excl)."""

    low: str
    high_excl: str | None
    archs: tuple[str, ...]  # accepted entries (valid_archs)
    names: tuple[tuple[str, str], ...]  # (named architecture, what it expands to) (named_archs)
    source: str


@dataclass(frozen=True)
class TorchExtRules:
    arch_env: str
    unknown_arch_message: str  # with ``{arch}``
    valid_archs: tuple[VersionedArchs, ...]
    named_archs: tuple[VersionedArchs, ...]
    mismatch_message: str  # with ``{nvcc}`` and ``{torch}``
    mismatch_source: str
    cuda_home_lookup: tuple[str, ...]


@dataclass(frozen=True)
class TritonMinimum:
    supported: str
    refused_below: str
    below_supported: str  # what happens between the two
    refused_error: str  # with ``{gpu}`` and ``{cc}``
    source: str


@dataclass(frozen=True)
class TritonRules:
    suffix_a_from_cc: str
    arch_name_source: str
    blackwell_binary: str
    blackwell_from_major: int
    env: str
    env_blackwell: str
    ptxas_selection_source: str
    error: str  # with ``{target}``
    minimum: TritonMinimum
    ptxas_newer_than_driver_error: str
    # the lines the rules depend on, confirmed in the installed copy (cited with its lines)
    source_checks: tuple[dict[str, str], ...] = ()


@dataclass(frozen=True)
class JitRules:
    flashinfer: FlashinferRules
    torch_ext: TorchExtRules
    triton: TritonRules
    torch_driver_error: str


@cache
def jit_rules() -> JitRules:
    data: dict[str, Any] = load_json("jit.json")
    fi, ext, tr = data["flashinfer"], data["torch_ext"], data["triton"]
    sel = tr["ptxas_selection"]
    return JitRules(
        FlashinferRules(
            fi["package"],
            tuple(fi["nvcc_lookup"]),
            fi["nvcc_lookup_source"],
            fi["arch_env"],
            fi["min_compute_capability"],
            fi["min_compute_capability_source"],
            fi["fixed_in"],
            fi["fixed_in_source"],
            fi["nvcc_unsupported_arch"],
            fi["avoid_options"],
            tuple(_flashinfer_range(r) for r in fi["ranges"]),
        ),
        TorchExtRules(
            ext["arch_env"],
            ext["unknown_arch_message"],
            tuple(_versioned_archs(e) for e in ext["valid_archs"]),
            tuple(_versioned_archs(e) for e in ext["named_archs"]),
            ext["mismatch_message"],
            ext["mismatch_source"],
            tuple(ext["cuda_home_lookup"]),
        ),
        TritonRules(
            tr["arch_name"]["suffix_a_from_cc"],
            tr["arch_name"]["source"],
            sel["blackwell_binary"],
            int(sel["blackwell_from_major"]),
            sel["env"],
            sel["env_blackwell"],
            sel["source"],
            tr["error"],
            TritonMinimum(**tr["min_compute_capability"]),
            tr["ptxas_newer_than_driver"]["error"],
            tuple(tr["arch_name"].get("source_checks", ())),
        ),
        data["torch"]["driver_error"],
    )


def _versioned_archs(entry: dict[str, Any]) -> VersionedArchs:
    return VersionedArchs(
        entry["min"],
        entry["max_excl"],
        tuple(entry.get("archs", ())),
        tuple((name, archs) for name, archs in entry.get("names", ())),
        entry["source"],
    )


def version_in_range(version: str, low: str | None, high_excl: str | None) -> bool:
    have = version_tuple(version)
    if have is None:
        return False
    if low is not None and have < (version_tuple(low) or ()):
        return False
    return not (high_excl is not None and have >= (version_tuple(high_excl) or ()))


def flashinfer_ranges() -> tuple[FlashinferRange, ...]:
    return jit_rules().flashinfer.ranges


def _flashinfer_range(r: dict[str, Any]) -> FlashinferRange:
    steps = tuple(
        NormaliseStep(
            s.get("major"),
            s.get("major_min"),
            s.get("minor"),
            s.get("suffix"),
            tuple((n["cuda_min"], n["suffix"], n.get("minor_text")) for n in s.get("needs", ())),
            s.get("raise"),
        )
        for s in r["normalise"]
    )
    return FlashinferRange(
        r["min"],
        r["max_excl"],
        steps,
        r["check_message"],
        r["warning"],
        r["source"],
        tuple(r.get("source_checks", ())),
        bool(r.get("arch_list_verbatim")),
        bool(r.get("sm107_to_100f")),
        r.get("sm107_not_all", ""),
    )


def flashinfer_range(version: str) -> FlashinferRange | None:
    return next(
        (r for r in flashinfer_ranges() if version_in_range(version, r.low, r.high_excl)), None
    )


def all_source_checks() -> list[dict[str, str]]:
    """Every source line the JIT rules depend on, for the probe's "toolchains" request."""
    checks: list[dict[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for r in flashinfer_ranges():
        for c in r.source_checks:
            if (c["file"], c["needle"]) not in seen:
                seen.add((c["file"], c["needle"]))
                checks.append({"package": "flashinfer-python", **c})
    checks += [{"package": "triton", **c} for c in jit_rules().triton.source_checks]
    for patch in load_json("patches.json")["patches"]:  # archgap's own patch, by the file's hash
        added = [line.strip() for line in patch["new"].splitlines() if line not in patch["old"]]
        needle = next((line for line in added if line), patch["new"].strip())
        key = f"archgap-patch:{patch['id']}"
        file = patch["file"]
        checks.append(
            {
                "package": patch["package"],
                "key": key,
                "file": file,
                "needle": needle,
                "hash": "sha256",
            }
        )
    return checks
