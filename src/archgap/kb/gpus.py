"""GPU products, compute capabilities, family-specific targets and the default GPU matrix."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache, lru_cache
from types import MappingProxyType

from archgap.kb import load_json


@dataclass(frozen=True)
class GpuProduct:
    name: str
    compute_capability: str  # "12.0"
    architecture: str
    source: str
    host_cpu: str | None = None  # "aarch64" where the product fixes the host CPU (GB10, Jetson)


@dataclass(frozen=True)
class MatrixEntry:
    label: str
    compute_capability: str


@cache
def products() -> tuple[GpuProduct, ...]:
    return tuple(
        GpuProduct(
            g["name"], g["compute_capability"], g["architecture"], g["source"], g.get("host_cpu")
        )
        for g in load_json("gpus.json")["gpus"]
    )


@cache
def known_capabilities() -> frozenset[str]:
    """Every compute capability a product in the table has ("7.5", "12.1" ...)."""
    return frozenset(p.compute_capability for p in products())


@cache
def families() -> tuple[tuple[str, ...], ...]:
    """The architecture families of the ``f`` targets: ("10.0", "10.3", "10.7"), ..."""
    return tuple(tuple(f["members"]) for f in load_json("gpus.json")["families"])


@cache  # asked for each family target and GPU the verdicts weigh (1,200 times for a scan's plan)
def family_members() -> Mapping[str, tuple[str, ...]]:
    """Family-specific target ("120f") -> the compute capabilities it runs on: the members of its
    family at or above it (``family_rule`` in gpus.json)."""
    out: dict[str, tuple[str, ...]] = {}
    for members in families():
        for first in members:
            runs = tuple(m for m in members if _cc_key(m) >= _cc_key(first))
            out[first.replace(".", "") + "f"] = runs
    return MappingProxyType(out)


def _cc_key(text: str) -> tuple[int, int]:
    major, _, minor = text.partition(".")
    return int(major), int(minor)


@dataclass(frozen=True)
class Renumbered:
    old: str  # "10.1"
    new: str  # "11.0"
    toolkit: str  # the CUDA release that renamed it
    source: str
    undocumented: str  # what NVIDIA does not say about old binaries on the new number


@cache
def integrated() -> dict[str, str]:
    """Integrated (Tegra) compute capabilities -> the product family name."""
    return {g["compute_capability"]: g["name"] for g in load_json("gpus.json")["integrated"]}


@cache
def integrated_rule() -> tuple[str, str]:
    rule = load_json("gpus.json")["integrated_rule"]
    return rule["rule"], rule["source"]


@cache
def renumbered() -> tuple[Renumbered, ...]:
    return tuple(
        Renumbered(r["old"], r["new"], r["toolkit"], r["source"], r["undocumented"])
        for r in load_json("gpus.json")["renumbered"]
    )


@cache
def default_matrix() -> tuple[MatrixEntry, ...]:
    return tuple(
        MatrixEntry(m["label"], m["compute_capability"])
        for m in load_json("gpus.json")["default_matrix"]
    )


@dataclass(frozen=True)
class OtherVendor:
    vendor: str  # "AMD"
    source: str


@cache
def _other_vendors() -> tuple[tuple[OtherVendor, frozenset[str], re.Pattern[str] | None], ...]:
    return tuple(
        (
            OtherVendor(v["vendor"], v["source"]),
            frozenset(v["words"]),
            re.compile(v["model_pattern"]) if v["model_pattern"] else None,
        )
        for v in load_json("gpus.json")["not_cuda"]["vendors"]
    )


def other_vendor(name: str) -> OtherVendor | None:
    """The vendor of a GPU name that is not NVIDIA's ("MI300X", "AMD Instinct MI250", "Intel Data
    Center GPU Max"): not a CUDA GPU (gpus.json ``not_cuda``)."""
    words = re.split(r"[\s\-_/()]+", name.lower())
    for vendor, names, model in _other_vendors():
        if any(w in names or (model is not None and model.match(w)) for w in words):
            return vendor
    return None


def _tokens(text: str) -> list[str]:
    words = re.split(r"[\s\-_/()]+", text.lower())
    return [w for w in words if w and w not in ("nvidia", "geforce", "tesla")]


def find_products(query: str) -> tuple[GpuProduct, ...]:
    """Products whose name holds every word of ``query`` ("RTX PRO 6000", "h100", "GB10").

    Whole words only, so "A10" does not match "A100"; an exact name match wins outright.
    """
    wanted = _tokens(query)
    if not wanted:
        return ()
    exact = tuple(p for p in products() if _tokens(p.name) == wanted)
    if exact and frozenset(wanted) - NAME_QUALIFIERS in {_core(p.name) for p in exact}:
        # with the parts sold under the same name ("GT 730" and "GT 730 (DDR3, 128-bit)")
        same = frozenset(wanted) - NAME_QUALIFIERS
        return exact + tuple(p for p in products() if p not in exact and _core(p.name) == same)
    if exact:
        return exact
    return tuple(p for p in products() if all(w in _tokens(p.name) for w in wanted))


def completions(truncated: str) -> tuple[GpuProduct, ...]:
    """Products whose name starts as a truncated one does ("GeForce RTX 208..." as nvidia-smi's
    table cuts it -> RTX 2080, 2080 SUPER, 2080 Ti)."""
    wanted = " ".join(_tokens(truncated.removesuffix("...")))
    if len(wanted) < 3:
        return ()
    return tuple(p for p in products() if " ".join(_tokens(p.name)).startswith(wanted))


def identify(device_name: str) -> GpuProduct | None:
    """The product a driver-reported name denotes ("Tesla V100-SXM2-32GB" -> NVIDIA V100).

    Takes the most specific product whose every name word appears in the device name; None when
    nothing matches or the best matches disagree on the compute capability.
    """
    words = set(_tokens(device_name)) - NAME_QUALIFIERS
    scored = [(len(core), p) for p in products() if (core := _core(p.name)) and core <= words]
    if not scored:
        return None
    most = max(n for n, _ in scored)
    best = [p for n, p in scored if n == most]
    return best[0] if len({p.compute_capability for p in best}) == 1 else None


# Words of driver-reported names that never change the chip: "RTX 4090 Laptop GPU" is an AD10x
# like the RTX 4090 (compute capability by architecture, https://developer.nvidia.com/cuda-gpus).
NAME_QUALIFIERS = frozenset(("laptop", "gpu", "mobile", "generation", "edition"))


def _core(name: str) -> frozenset[str]:
    """A product name's words without its parenthetical ("NVIDIA GB10 (DGX Spark)" -> gb10)."""
    return frozenset(_tokens(re.sub(r"\([^)]*\)", " ", name))) - NAME_QUALIFIERS


def close_names(query: str, n: int = 3) -> tuple[str, ...]:
    """Product names close to a name that matched nothing ("H10" -> "NVIDIA H100", "RTX PRO 600"
    -> "NVIDIA RTX PRO 6000 ..."): for a "did you mean" hint. A name is close when each word of
    the query is one of its words or close to one; failing that, whole names are compared."""
    import difflib

    by_words = {" ".join(_tokens(p.name)): p.name for p in products()}
    wanted = _tokens(query)
    words = {w for key in by_words for w in key.split()}
    options = [{w, *difflib.get_close_matches(w, words, 6, 0.6)} for w in wanted]
    close = [key for key in by_words if wanted and all(o & set(key.split()) for o in options)]
    text = " ".join(wanted)
    close.sort(key=lambda key: -difflib.SequenceMatcher(None, text, key).ratio())
    if not close:
        close = difflib.get_close_matches(text, list(by_words), n=n, cutoff=0.6)
    return tuple(by_words[key] for key in close[:n])


# A product's model words as a log writes them: case, spaces and hyphens vary ("RTX5090",
# "rtx 5090", "2080Ti"); the family word of GeForce model numbers is often left out ("1080 Ti").
_FAMILY_WORDS = frozenset(("rtx", "gtx", "gt"))
_RUN = re.compile(r"[a-z]+|[0-9]+")
MENTION_LINE_MAX = 2000  # longer lines are data, not prose naming a GPU
# A notebook part named by its number alone ("GeForce 800M", legacy table) reads in prose as a
# model's size ("800M parameters"): in prose it names the GPU only after "GeForce".
_BARE_NOTEBOOK = re.compile(r"[0-9]+ mx?")


def _runs(words: str) -> tuple[str, ...]:
    """Letter and digit runs: "A100" -> ("a", "100"), "RTX 5090 D" -> ("rtx", "5090", "d")."""
    return tuple(_RUN.findall(words.lower()))


@cache
def _spellings() -> dict[str, tuple[tuple[tuple[str, ...], GpuProduct], ...]]:
    """First run -> (runs, product), longest first, so "RTX 5090 D" wins over "RTX 5090"."""
    by_first: dict[str, list[tuple[tuple[str, ...], GpuProduct]]] = {}
    misnamed: list[tuple[tuple[str, ...], GpuProduct]] = []
    for product in products():
        words, runs = _name_runs(product.name)
        if words[0] in _FAMILY_WORDS:  # "GTX 3090": the model number says which GeForce
            misnamed += [((other, *runs[1:]), product) for other in _FAMILY_WORDS - {words[0]}]
        for form in _forms(words, runs):
            by_first.setdefault(form[0], []).append((form, product))
    named = {form for forms in by_first.values() for form, _ in forms}
    for form, product in misnamed:  # only where no product is called so
        if form not in named and sum(f == form for f, _ in misnamed) == 1:
            by_first.setdefault(form[0], []).append((form, product))
    return {k: tuple(sorted(v, key=lambda e: -len(e[0]))) for k, v in by_first.items()}


def _name_runs(name: str) -> tuple[list[str], tuple[str, ...]]:
    """A product name's words (no parenthesised part, no qualifier) and their runs; a bare
    notebook number keeps its "GeForce" ("GeForce 410M", never a model's "pythia-410m")."""
    words = [w for w in _tokens(re.sub(r"\([^)]*\)", " ", name)) if w not in NAME_QUALIFIERS]
    runs = _runs(" ".join(words))
    if _BARE_NOTEBOOK.fullmatch(" ".join(runs)) and "geforce" in name.lower():
        runs = ("geforce", *runs)
    return words, runs


def _forms(words: list[str], runs: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The spellings of one product's name: its runs, without its family word ("RTX A6000" as
    "A6000"), a Jetson board by its own name ("AGX Xavier", "T5000")."""
    forms = [runs]
    if len(words) > 2 and words[0] in _FAMILY_WORDS:
        forms.append(_runs(" ".join(words[1:])))
    if words[0] in _FAMILY_WORDS and len(runs) > 1 and len(runs[1]) == 4 and runs[1].isdigit():
        # "NVIDIA 3080": a GeForce by its four-digit model number after the vendor's name (three
        # digits after it are a driver branch: "NVIDIA 570" is no GTX 570)
        forms.append(("nvidia", *runs[1:]))
    rest = words[1:]
    if words[0] == "jetson" and (len(rest) > 1 or any(c.isdigit() for c in "".join(rest))):
        forms.append(_runs(" ".join(rest)))
    return forms


@cache
def _ambiguous_forms() -> frozenset[tuple[str, ...]]:
    """Spellings two products of different compute capabilities share: "GT 730" is a Kepler
    (3.5) and a Fermi (2.1) part, "GTX 860M" a Kepler and a Maxwell one (NVIDIA's legacy table).
    Prose naming one does not say which, so it names neither."""
    ccs: dict[tuple[str, ...], set[str]] = {}
    for forms in _spellings().values():
        for form, product in forms:
            ccs.setdefault(form, set()).add(product.compute_capability)
    return frozenset(form for form, found in ccs.items() if len(found) > 1)


@cache
def _name_words() -> frozenset[str]:
    """The letter words of product names long enough to be told apart from a typo of another
    ("xavier", "quadro", "jetson"): a word one edit from one of them is taken for it."""
    return frozenset(
        w
        for forms in _spellings().values()
        for form, _ in forms
        for w in form
        if w.isalpha() and len(w) >= TYPO_MIN_LETTERS
    )


@cache
def _letter_heads() -> frozenset[str]:
    """First words of names of two or more words written without digits ("jetson nano", "agx
    xavier"), which a line with no digit may still name (a one-word name needs a digit on the
    line, as before: "thor" alone in prose is too often something else)."""
    return frozenset(
        form[0]
        for forms in _spellings().values()
        for form, _ in forms
        if len(form) > 1 and all(w.isalpha() for w in form)
    )


TYPO_MIN_LETTERS = 5  # shorter words are too close to each other ("orin", "thor") to correct
# CUDA's own words one edit from a name word: nvcc's "--cubin" is not a typo of "Rubin"
NOT_TYPOS = frozenset(("cubin", "fatbin"))


def _one_edit(a: str, b: str) -> bool:
    """Whether ``a`` is one substitution, insertion, deletion or swap of neighbours from ``b``."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (
            len(diff) == 2
            and diff[1] == diff[0] + 1
            and a[diff[0]] == b[diff[1]]
            and a[diff[1]] == b[diff[0]]
        )
    short, long = sorted((a, b), key=len)
    return any(long[:i] + long[i + 1 :] == short for i in range(len(long)))


@lru_cache(maxsize=1 << 16)  # a log repeats its words: each is looked up once
def _spelled(word: str) -> str:
    """A name word as the table spells it: "axvier" -> "xavier" (one edit from exactly one)."""
    if not word.isalpha() or len(word) < TYPO_MIN_LETTERS or word in _name_words() | NOT_TYPOS:
        return word
    close = [w for w in _name_words() if _one_edit(word, w)]
    return close[0] if len(close) == 1 else word


def may_name_product(text: str) -> bool:
    """Cheap test before ``mentioned_products``: a model number, or a name word with no digit."""
    if text.isascii():  # one search (a log's flood of lines comes here)
        return _digit_or_head().search(text.lower()) is not None
    lowered = text.lower()
    return any(c.isdigit() for c in text) or any(h in lowered for h in _letter_heads())


@cache
def _digit_or_head() -> re.Pattern[str]:
    return re.compile("|".join(["[0-9]", *map(re.escape, sorted(_letter_heads()))]))


def _word_character(c: str) -> bool:
    return c.isascii() and (c.isalnum() or c == "_")


def may_mention(text: str) -> bool:
    """Whether ``mentioned_products`` can find anything in ``text``: a word of it starts a name
    (in one pass, no match objects: most lines of a log name nothing)."""
    if len(text) > MENTION_LINE_MAX:
        return False
    return not _spellings().keys().isdisjoint(map(_spelled, _RUN.findall(text.lower())))


def _standalone(lowered: str, runs: list[re.Match[str]], i: int, end: int) -> bool:
    """Whether runs[i:end] are a name of their own: not glued to Latin letters, digits or "_"
    (SM_VERSION_A100; Chinese or Japanese prose runs into it: "我用的4070ti显卡"), and its runs
    next to each other or a space or dash apart."""
    start, stop = runs[i].start(), runs[end - 1].end()
    glued_before = start > 0 and _word_character(lowered[start - 1])
    glued_after = stop < len(lowered) and _word_character(lowered[stop])
    return (
        not glued_before
        and not glued_after
        and all(
            re.fullmatch(r"[\s_-]*", lowered[runs[k].end() : runs[k + 1].start()])
            for k in range(i, end - 1)
        )
    )


def mentioned_products(text: str) -> tuple[GpuProduct, ...]:
    """The products a line of prose names, in any spelling ("my rtx5090", "2x 2080Ti", "Tesla
    K40c", "jetson axvier nx"): whole model words only, so "L4T" is not an L4 and "A100" not
    an A10; a long name word may carry one typo."""
    if not may_mention(text):  # (nor in a line longer than MENTION_LINE_MAX)
        return ()
    lowered = text.lower()
    spellings = _spellings()
    runs = list(_RUN.finditer(lowered))
    words = [_spelled(r.group()) for r in runs]
    found: list[GpuProduct] = []
    i = 0
    while i < len(runs):
        match = None
        for form, product in spellings.get(words[i], ()):
            end = i + len(form)
            if end > len(runs) or any(words[i + k] != w for k, w in enumerate(form)):
                continue
            if _standalone(lowered, runs, i, end):
                match = (end, product, form)
                break
        if match is None:
            i += 1
            continue
        i, product, form = match
        if form not in _ambiguous_forms() and product not in found:
            found.append(product)
    return tuple(found)
