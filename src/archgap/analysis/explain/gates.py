"""The rules for capability gates in frameworks' own words (``kb/gates.json``).

Pure. A gate's message carries facts (the minimum it needs, the GPU's capability, the compiler's
targets, the build's architectures, the driver's CUDA); the GPU's capability comes from the
message, else from the rest of the log. One rule per kind of gate, each decided as NVIDIA's
numbering does:

- minimum: a GPU below a framework's minimum runs no build of it (the fix is another backend, an
  older release that still served it, or another GPU);
- toolkit-minimum: a GPU below a compiler's lowest target needs an older toolkit;
- no-code-below: a build with no code at or below the GPU was built for newer GPUs only;
- family: kernels for named architectures only (sm_90a's wgmma, sm_100's tcgen05) run on those
  alone, so a GPU outside the family, older or newer, cannot run them: another path;
- built-for: a build's architecture list against the GPU: SASS for sm_XY runs on X.Z with Z >= Y
  only, so a GPU whose major the list lacks needs a build that lists it (a toolkit that targets
  it), and one older than every entry needs an older build;
- driver-minimum: a driver whose CUDA is older than the build's runs none of it: a newer driver,
  or a build for the driver's CUDA;
- toolkit-version: a build script that needs a newer CUDA toolkit (its own check of nvcc -V)
  fails whatever the GPU: a newer toolkit (one that still targets the GPU), or a prebuilt wheel;
- ptx-minimum: each target needs the PTX ISA version that introduced it (NVIDIA's PTX ISA
  release notes; LLVM's own error names that minimum), so PTX asked for an older ISA cannot
  name it: the caller's PTX version, not the GPU, is the gap;
- build-list-minimum: a build's configure step checks its own arch list (OpenCV's CUDA_ARCH_BIN)
  against a minimum: targets below it are a build setting to remove, whatever the GPU;
- release-predates: a release whose own check says the GPU is not supported *yet* predates it:
  a later release of it (its support matrix) serves it, no setting of this one does.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from archgap.analysis.explain.causes import HOW_CC, dotted
from archgap.analysis.explain.rules import CONDITIONAL, DETERMINED, LogFacts, Ruling, raiser
from archgap.analysis.fixes.engine import AVOID, ENV, TOOLKIT, UPGRADE, Fix, worded
from archgap.kb import toolchain as kb
from archgap.kb.gates import Gate

_TOKEN = re.compile(r"(?:sm_|compute_)?(\d{1,2}\.\d|\d{2,4})[af]?\b")
_SM_WORD = re.compile(r"\bSM ?\d{2,3}", re.IGNORECASE)


def gate_ruling(gate: Gate, error: str, facts: LogFacts) -> Ruling | None:
    """The ruling for ``error``, a message of ``gate``; None when the message does not carry
    what the rule needs or states a GPU that meets the gate (then it is not this gap)."""
    found = gate.pattern.search(error)
    if found is None:
        return None
    got = {k: v for k, v in found.groupdict().items() if v}
    who = _who(gate, facts)
    if gate.rule == "ptx-minimum":
        return _ptx_minimum(gate, who, got)
    of_versions = _VERSION_RULES.get(gate.rule)  # rules the GPU plays no part in
    if of_versions is not None:
        return of_versions(gate, who, got, facts)
    cc = _cc(got) or (facts.ccs[0] if len(facts.ccs) == 1 else None)
    listed = _listed(got.get("list", ""))
    if gate.rule == "built-for":
        return _built_for(gate, who, cc, listed, facts)
    if gate.rule == "release-predates":
        return _release_predates(gate, who, cc, facts)
    if gate.rule == "family":
        return _family(gate, who, cc, got, listed, facts)
    return _minimum(gate, who, cc, got, listed, facts)


def _minimum(
    gate: Gate, who: str, cc: str | None, got: dict[str, str], listed: list[str], facts: LogFacts
) -> Ruling | None:
    """The minimum rules (minimum, toolkit-minimum, no-code-below): a GPU below the minimum the
    message, the gate or the build's list names; None where the GPU meets it."""
    need = _need(got) or gate.need or (listed[0] if listed else None)
    if cc is None:
        return _unknown_gpu(gate, who, need)
    if need is not None and _key(cc) >= _key(need):
        return None  # the message's own facts say the GPU is not below it
    gpu = _gpu(facts, cc)
    if gate.rule == "toolkit-minimum":
        return _toolkit_minimum(gate, who, got, cc, need, gpu)
    cause = _below_cause(gate, who, cc, need, gpu)
    return Ruling("framework-gate", cause, DETERMINED, _fixes(gate, who, cc, need))


def _below_cause(gate: Gate, who: str, cc: str, need: str | None, gpu: str) -> str:
    """Why a GPU below the minimum fails: a build with no code at or below it, or a framework
    (or one path of it, where the framework names another) that needs a newer GPU."""
    if gate.rule == "no-code-below":
        return (
            f"{who}'s build carries no code for compute capability {cc} or below: the "
            f"GPU{gpu} is older than every target it was built for"
            + (f"; {who} supports {need} and newer" if need else "")
        )
    return f"{who} needs compute capability >= {need}; the GPU{gpu} is older, so " + (
        "this path of it does not run there (the framework names another)"
        if gate.instead
        else "no build or setting of it runs there"
    )


def _fixes(gate: Gate, who: str, cc: str, need: str | None) -> tuple[Fix, ...]:
    fixes = _instead(gate)
    fixes.append(worded("gate-minimum-run-without", kind=AVOID, framework=who))
    older = gate.older
    if older is not None and _key(cc) >= _key(older.serves_from):
        fixes.append(
            worded(
                "gate-minimum-older-release", kind=UPGRADE,
                release=older.release, serves_from=older.serves_from, source=older.source,
            )
        )  # fmt: skip
    if need is not None:
        fixes.append(
            worded(
                "gate-minimum-newer-gpu", kind=AVOID, min_cc=need, framework=who, source=gate.source
            )
        )
    return tuple(fixes)


def _instead(gate: Gate) -> list[Fix]:
    """What the framework's own message says to do instead (a setting that avoids the gate)."""
    if not gate.instead:
        return []
    return [
        worded(
            "gate-instead", kind=AVOID,
            instead=gate.instead, framework=gate.framework, source=gate.source,
        )
    ]  # fmt: skip


def _toolkit_minimum(
    gate: Gate, who: str, got: dict[str, str], cc: str, need: str | None, gpu: str
) -> Ruling | None:
    """A compiler whose lowest target is above the GPU (``tool``), or a CUDA release the message
    says does not support it (``cuda``: "not supported on CUDA 13+")."""
    target = "sm_" + cc.replace(".", "")
    last = kb.last_toolkit_for(target)
    dropped = f" (CUDA dropped {target} after {last})" if last else ""
    cuda = got.get("cuda")
    if cuda:
        if last is None or _key(last) >= _key(cuda):
            return None  # that release still targets the GPU (NVIDIA's notes): not this gap
        cause = f"CUDA {cuda} does not support compute capability {cc}, the GPU{gpu}{dropped}"
    else:
        tool = got.get("tool", "")
        compiler = f"{who} {tool}".strip() if tool else who
        cause = (
            f"{compiler} cannot compile for compute capability {cc}: its lowest target is "
            f"{need or 'newer'}, and the GPU{gpu} is older{dropped}"
        )
    fixes = (
        *_instead(gate),
        worded("gate-toolkit-minimum-last-cuda", kind=TOOLKIT, target=target, last_cuda=last)
        if last
        else worded("gate-toolkit-minimum-older-cuda", kind=TOOLKIT, target=target),
    )
    return Ruling("framework-gate", cause, DETERMINED, fixes)


def _family(
    gate: Gate, who: str, cc: str | None, got: dict[str, str], listed: list[str], facts: LogFacts
) -> Ruling | None:
    """Kernels for named architectures only: a GPU outside them cannot run them."""
    accepts = list(gate.accepts) or [_family_of(c, got) for c in listed]
    exact = _need(got)
    if exact and not accepts:
        accepts = [exact]
    if not accepts:
        return None
    named = ", ".join(accepts)
    if cc is None:
        cause = f"{who} runs only on compute capability {named}; the log does not say the GPU's"
        decide = (f"the GPU's compute capability: {HOW_CC}",)
        return Ruling("framework-gate", cause, CONDITIONAL, _family_fixes(gate, who, named), decide)
    if any(_in_family(cc, a) for a in accepts):
        return None  # the GPU is one the message accepts: not this gap
    if all(_key(cc) < _key(a.replace(".x", ".0")) for a in accepts):
        side = "older than each of them"
    elif all(_key(cc) > _key(a.replace(".x", ".9")) for a in accepts):
        side = "newer than each of them"
    else:
        side = "none of them"
    cause = (
        f"{who} runs only on compute capability {named}: its kernels use instructions of those "
        f"architectures alone, and the GPU{_gpu(facts, cc)} is {side}, so no build or setting "
        "of it runs there"
    )
    return Ruling("framework-gate", cause, DETERMINED, _family_fixes(gate, who, named))


def _family_fixes(gate: Gate, who: str, named: str) -> tuple[Fix, ...]:
    return (
        *_instead(gate),
        worded("gate-family-another-path", kind=AVOID, framework=who),
        worded("gate-family-gpu", kind=AVOID, accepts=named, framework=who, source=gate.source),
    )


def _built_for(
    gate: Gate, who: str, cc: str | None, listed: list[str], facts: LogFacts
) -> Ruling | None:
    """A build's architecture list against the GPU, by NVIDIA's binary compatibility rule."""
    if not listed and gate.builds:
        return _shipped(gate, who, cc, facts)
    built = " ".join(listed)
    if cc is None:
        if not listed:
            return None
        cause = f"{who} was built for compute capability {built}; the log does not say the GPU's"
        decide = (f"the GPU's compute capability: {HOW_CC}",)
        return Ruling("framework-gate", cause, CONDITIONAL, (), decide)
    if any(_sass_runs(t, cc) for t in listed):
        return None  # an entry of the list runs on this GPU: not this gap
    target = "sm_" + cc.replace(".", "")
    gpu = _gpu(facts, cc)
    if listed and _key(cc) < _key(listed[0]):
        cause = (
            f"{who} was built for compute capability {built}: the GPU{gpu} is older than every "
            "target of the build, so none of its code runs there"
        )
    elif not listed:
        cause = f"{who}'s build has no code for the GPU{gpu}: {target} is not among its targets"
    else:
        cause = (
            f"{who} was built for compute capability {built}: none of it is code for the "
            f"GPU{gpu} (code for sm_XY runs only on X.Z with Z >= Y), so {target} is missing"
        )
    fixes = [
        worded("gate-built-for-listing-build", kind=UPGRADE, framework=who, target=target),
        _from_source(target),
    ]
    older = gate.older
    if older is not None and _key(cc) >= _key(older.serves_from):
        fixes.insert(
            0,
            worded(
                "gate-built-for-older-release", kind=UPGRADE,
                release=older.release, source=older.source,
            ),
        )  # fmt: skip
    return Ruling("framework-gate", cause, DETERMINED, tuple(fixes))


def _release_predates(gate: Gate, who: str, cc: str | None, facts: LogFacts) -> Ruling:
    """A release that says the GPU is not supported yet predates it: a later release of it
    serves the GPU, whichever it is (where the log does not name it, its capability is what to
    look up in the release notes)."""
    release = f" ({gate.release})" if gate.release else ""
    gpu = f"compute capability {cc}" if cc else "the GPU"
    cause = (
        f"{who}{release} predates the GPU{_gpu(facts, cc) if cc else ''}: its own check does not "
        "list it yet, so this release refuses it whatever the settings"
    )
    fixes = (
        worded(
            "gate-release-predates-newer", kind=UPGRADE, framework=who, gpu=gpu, source=gate.source
        ),
        *_instead(gate),
    )
    if cc is None:
        decide = (f"the GPU's compute capability, to find the release that lists it: {HOW_CC}",)
        return Ruling("framework-gate", cause, CONDITIONAL, fixes, decide)
    return Ruling("framework-gate", cause, DETERMINED, fixes)


def _from_source(target: str) -> Fix:
    """A build from source for ``target``, with the toolkits that target it (first to last)."""
    first, last = kb.first_toolkit_for(target), kb.last_toolkit_for(target)
    if first and last:
        return worded(
            "gate-built-for-from-source-between", kind=TOOLKIT,
            target=target, first_cuda=first, last_cuda=last,
        )  # fmt: skip
    if last:
        return worded(
            "gate-built-for-from-source-until", kind=TOOLKIT, target=target, last_cuda=last
        )
    if first:
        return worded(
            "gate-built-for-from-source-since", kind=TOOLKIT, target=target, first_cuda=first
        )
    return worded("gate-built-for-from-source", kind=TOOLKIT, target=target)


def _shipped(gate: Gate, who: str, cc: str | None, facts: LogFacts) -> Ruling | None:
    """A message without the build's list, of a release whose libraries' lists are known: which
    of them runs on the GPU (SASS for sm_XY runs on X.Z with Z >= Y), and its switch."""
    shipped = "; ".join(f"{b.libraries}: {' '.join(_listed(b.archs))}" for b in gate.builds)
    if cc is None:
        cause = f"{who}'s libraries ({gate.release}) are built for: {shipped}; the log does not "
        decide = (f"the GPU's compute capability: {HOW_CC}",)
        return Ruling("framework-gate", cause + "say the GPU's", CONDITIONAL, (), decide)
    runs = [b for b in gate.builds if any(_sass_runs(t, cc) for t in _listed(b.archs))]
    target, gpu = "sm_" + cc_int(cc), _gpu(facts, cc)
    if len(runs) == len(gate.builds):  # every library of that release runs on this GPU
        cause = (
            f"every library of {gate.release} has code for the GPU{gpu}; an older release of "
            f"{who}, or a build of one's own, may lack {target}"
        )
        decide = (
            f"the {who} version (`pip show {who}`), and the arch list of a build of one's own",
        )
        upgrade = worded(
            "gate-shipped-release-or-newer", kind=UPGRADE, release=gate.release, target=target
        )
        return Ruling("framework-gate", cause, CONDITIONAL, (upgrade,), decide)
    if not runs:
        cause = f"no library of {who} ({gate.release}) has code for the GPU{gpu}: {shipped}"
        fixes: tuple[Fix, ...] = (
            worded(
                "gate-shipped-run-without", kind=AVOID,
                framework=who, release=gate.release, target=target,
            ),
        )  # fmt: skip
        return Ruling("framework-gate", cause, DETERMINED, fixes)
    cause = (
        f"{who} loaded a library without code for the GPU{gpu}: in {gate.release} only "
        f"{', '.join(b.libraries for b in runs)} carry {target} or an older minor of it ({shipped})"
    )
    fixes = tuple(
        worded(
            "gate-shipped-load-library", kind=ENV,
            libraries=b.libraries, switch=b.switch, release=gate.release, source=gate.source,
        )
        for b in runs
    )  # fmt: skip
    return Ruling("framework-gate", cause, DETERMINED, fixes)


def _driver_minimum(gate: Gate, who: str, got: dict[str, str], facts: LogFacts) -> Ruling | None:
    """A driver whose CUDA is older than the CUDA the build was made with."""
    found = _cuda(got.get("found", ""))
    if found is None:
        return None
    built = _cuda(got.get("built", "")) or _cuda(facts.torch_cuda or "")
    if built is not None and _key(found) >= _key(built):
        return None  # the driver's CUDA is not older than the build's: not this gap
    release = kb.toolkit_release(built) if built else None
    min_driver = release.min_driver_linux if release else None
    fixes = (
        worded(
            "gate-driver-minimum-upgrade-to", kind=UPGRADE, min_driver=min_driver, build_cuda=built
        )
        if min_driver
        else worded("gate-driver-minimum-upgrade", kind=UPGRADE),
        worded(
            "gate-driver-minimum-older-build", kind=UPGRADE,
            framework=who, driver_cuda=found, source=gate.source,
        ),
    )  # fmt: skip
    if built is None:
        cause = f"the NVIDIA driver runs CUDA up to {found}, older than {who}'s build needs"
        decide = (f"the CUDA version {who} was built with (e.g. torch.version.cuda)",)
        return Ruling("driver-gate", cause, CONDITIONAL, fixes, decide)
    cause = (
        f"the NVIDIA driver runs CUDA up to {found}, but {who} was built with CUDA {built}: "
        "the driver is older than the build, so no CUDA code of it runs"
    )
    return Ruling("driver-gate", cause, DETERMINED, fixes)


def _toolkit_version(gate: Gate, who: str, got: dict[str, str], facts: LogFacts) -> Ruling | None:
    """A build script's own check of the CUDA toolkit (nvcc -V) below its minimum: the GPU plays
    no part, so the fix is a newer toolkit (still one that targets the GPU) or a prebuilt wheel."""
    need = _cuda(got.get("need", "")) or _cuda(gate.need or "")
    if need is None:
        return None
    stated = _cuda(facts.toolkit or "")
    found = _cuda(got.get("found", "")) or (stated if stated != need else None)  # not its own
    if found is not None and _key(found) >= _key(need):
        return None  # the toolkit the log states is new enough: not this gap
    have = f" (the log's nvcc is CUDA {found})" if found else ""
    cause = (
        f"{who}'s build needs a CUDA toolkit >= {need} and the nvcc it found is older{have}: "
        "its setup checks nvcc -V before compiling anything, whatever the GPU"
    )
    fixes = (
        _newer_toolkit(gate, who, need, facts),
        worded("gate-toolkit-version-prebuilt-wheel", kind=UPGRADE, framework=who),
    )
    return Ruling("toolkit-gate", cause, DETERMINED, fixes)


def _newer_toolkit(gate: Gate, who: str, need: str, facts: LogFacts) -> Fix:
    """CUDA ``need`` or newer; where the log names one GPU, no newer than the last CUDA for it."""
    cc = facts.ccs[0] if len(facts.ccs) == 1 else None
    last = kb.last_toolkit_for("sm_" + cc_int(cc)) if cc else None
    if cc and last:
        return worded(
            "gate-toolkit-version-newer-until", kind=TOOLKIT,
            min_cuda=need, last_cuda=last, sm=cc_int(cc), framework=who, source=gate.source,
        )  # fmt: skip
    return worded(
        "gate-toolkit-version-newer", kind=TOOLKIT, min_cuda=need, framework=who, source=gate.source
    )


def _ptx_minimum(gate: Gate, who: str, got: dict[str, str]) -> Ruling | None:
    """PTX asked for an ISA older than the one that introduced the target."""
    asked, cc = got.get("found"), _cc(got)
    if not asked or cc is None:
        return None
    target = "sm_" + cc_int(cc)
    need = got.get("need") or _first_isa(target)  # older LLVM words name no minimum
    if need is None or _key(asked) >= _key(need):
        return None
    first = next((r for r in kb.toolkit_releases() if _key(r.ptx_isa) >= _key(need)), None)
    ships = f" (CUDA {first.cuda}'s PTX ISA)" if first else ""
    cause = (
        f"{who} was asked for PTX ISA {asked}, but {target} exists only from PTX ISA {need}"
        f"{ships}: PTX of an older ISA cannot name a newer target. The PTX version comes from the "
        "program that drives the compiler (its own CUDA-to-PTX table), not from the GPU"
    )
    fixes = (
        worded(
            "gate-ptx-minimum-program", kind=UPGRADE,
            ptx_isa=need, target=target, framework=who, source=gate.source,
        ),
        worded(
            "gate-ptx-minimum-assembler-cuda", kind=UPGRADE, ptx_isa=need, first_cuda=first.cuda
        )
        if first
        else worded("gate-ptx-minimum-assembler", kind=UPGRADE, ptx_isa=need),
    )  # fmt: skip
    return Ruling("ptx-gate", cause, DETERMINED, fixes)


def _build_list_minimum(
    gate: Gate, who: str, got: dict[str, str], facts: LogFacts
) -> Ruling | None:
    """A configure step that rejects its own arch list: the list names targets below the
    minimum, a setting of the build; the GPU decides only which list to give instead."""
    need = _need(got) or gate.need
    if need is None:
        return None
    cc = facts.ccs[0] if len(facts.ccs) == 1 else None
    cause = (
        f"{who}'s build configuration lists architectures below compute capability {need} "
        f"(CUDA_ARCH_BIN), and its configure step refuses any target under that minimum: the "
        "build's own arch list, not the GPU, stops it"
    )
    remove = (
        worded(
            "gate-arch-list-remove-for-gpu", kind=ENV,
            min_cc=need, cc=cc, gpu=_gpu_words(facts, cc), framework=who, source=gate.source,
        )
        if cc and _key(cc) >= _key(need)
        else worded(
            "gate-arch-list-remove", kind=ENV, min_cc=need, framework=who, source=gate.source
        )
    )  # fmt: skip
    fixes = [remove, *_instead(gate)]
    if cc and _key(cc) < _key(need):  # no arch list makes that part run on this GPU
        cause += f"; the GPU{_gpu(facts, cc)} is itself below {need}, so it needs the other way"
        fixes = fixes[1:] or fixes
    return Ruling("build-gate", cause, DETERMINED, tuple(fixes))


# The rules decided by versions or by the build's own list, not by the GPU's capability.
_VERSION_RULES: dict[str, Callable[[Gate, str, dict[str, str], LogFacts], Ruling | None]] = {
    "driver-minimum": _driver_minimum,
    "toolkit-version": _toolkit_version,
    "build-list-minimum": _build_list_minimum,
}


def _first_isa(target: str) -> str | None:
    """The PTX ISA of the first toolkit that targets ``target`` (the ISA that introduced it)."""
    first = kb.first_toolkit_for(target)
    release = kb.toolkit_release(first) if first else None
    return release.ptx_isa if release else None


def cc_int(cc: str) -> str:
    """ "12.0" -> "120", "10.7" -> "107"."""
    return cc.replace(".", "")


def _unknown_gpu(gate: Gate, who: str, need: str | None) -> Ruling | None:
    """The message names the minimum but the log names no GPU: which GPU decides."""
    if need is None:
        return None
    cause = f"{who} needs compute capability >= {need}; the log does not say the GPU's"
    decide = (f"the GPU's compute capability: {HOW_CC}",)
    return Ruling("framework-gate", cause, CONDITIONAL, _fixes(gate, who, need, need), decide)


def _who(gate: Gate, facts: LogFacts) -> str:
    if gate.framework != "any":
        return gate.framework
    package, _ = raiser(facts.frames)
    return package or next(iter(facts.stated.get("package", ())), "") or "the package"


def _gpu(facts: LogFacts, cc: str) -> str:
    """The GPU as a cause names it after "the GPU": " (Tesla T4, 7.5)", or " (7.5)"."""
    return f" ({_gpu_words(facts, cc)})"


def _gpu_words(facts: LogFacts, cc: str) -> str:
    named = facts.gpu_name and not _SM_WORD.search(facts.gpu_name)  # "NVIDIA SM100+" is no GPU
    return f"{facts.gpu_name}, {cc}" if named else cc


def _cc(got: dict[str, str]) -> str | None:
    """The GPU's capability: "7.5", "75", "sm_75", or a major and minor apart ("(7, 5)")."""
    if "cc" in got:
        return dotted(got["cc"])
    if "cc_major" in got:
        return f"{int(got['cc_major'])}.{int(got.get('cc_minor', '0'))}"
    return None


def _need(got: dict[str, str]) -> str | None:
    """The minimum: "8.0", "80", "sm80", or a bare major ("requires compute capability >= 8")."""
    if "need" in got:
        return dotted(got["need"])
    if "need_major" in got:
        return f"{int(got['need_major'])}.{int(got.get('need_minor', '0'))}"
    return None


def _listed(text: str) -> list[str]:
    """A list of capabilities in any spelling ("60 61 70", "7.5, 8.0", "sm_80 sm_90"), sorted;
    __CUDA_ARCH__ numbers ("520", "1200") are kept as they are, for ``_arch_numbers``."""
    found = {_arch_token(m.group(1)) for m in _TOKEN.finditer(text.replace("x", "0"))}
    # "0.0" is no architecture: a __CUDA_ARCH__ of 0 is a test kernel that did not run (Kokkos)
    return sorted((c for c in found if c and c != "0.0"), key=_key)


def _arch_token(token: str) -> str | None:
    """ "75" and "120" are capabilities (7.5, 12.0); "520", "890", "1200" are __CUDA_ARCH__
    values (major * 100 + minor * 10: 5.2, 8.9, 12.0). Three digits from 300 up can only be the
    latter (no capability 30.0 exists); three from 100 to 199 only the former (1.x is long gone)."""
    if token.isdigit() and (len(token) == 4 or (len(token) == 3 and token[0] != "1")):
        return f"{int(token) // 100}.{int(token) % 100 // 10}"
    return dotted(token)


def _family_of(cc: str, got: dict[str, str]) -> str:
    """A listed capability as the message means it: "8.x" lists a major's family."""
    spelled = f"{cc.split('.')[0]}.x"
    return spelled if spelled in got.get("list", "") else cc


def _in_family(cc: str, family: str) -> bool:
    if family.endswith(".x"):
        return cc.split(".")[0] == family.split(".")[0]
    return _key(cc) == _key(family)


def _sass_runs(target: str, cc: str) -> bool:
    """SASS for sm_XY runs on X.Z with Z >= Y (NVIDIA's binary compatibility rule)."""
    (tmaj, tmin), (gmaj, gmin) = _key(target), _key(cc)
    return tmaj == gmaj and tmin <= gmin


def _cuda(value: str) -> str | None:
    """A CUDA version: "12.8", or the driver API's integer ("11000" is 11.0, "12080" 12.8)."""
    value = value.strip()
    if value.isdigit() and len(value) in (4, 5):
        number = int(value)
        return f"{number // 1000}.{number % 1000 // 10}"
    parts = kb.major_minor(value) if "." in value else None
    return f"{parts[0]}.{parts[1]}" if parts else None


def _key(cc: str) -> tuple[int, int]:
    major, _, minor = cc.partition(".")
    return int(major), int(minor or 0)
