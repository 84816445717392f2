"""The device code of binaries as rows: one per target (what cuobjdump lists, de-duplicated)
or one per entry; as text, Markdown and CSV."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from archgap.report.markup import escape
from archgap.report.table import Cell, Column, Table, csv_text, markdown_escape, markdown_lines

if TYPE_CHECKING:
    from archgap.analysis.recipe.gate import GateResult
    from archgap.index.deps import Chosen
    from archgap.probe.facts import BinaryFacts, KernelEntry
    from archgap.results import KernelsResult

KIND_ORDER = {"sass": 0, "ptx": 1, "ltoir": 2}
RIGHT_ALIGNED = ("stored", "unpacked", "n", "offset")
HEADER = ["target", "kind", "PTX", "compr.", "stored", "unpacked", "section"]


@dataclass(frozen=True)
class TargetRow:
    """Entries of one file that share kind, arch and variant (and whether cuobjdump lists them)."""

    kind: str
    target: str
    ptx_isa: str
    compression: str
    stored_size: int
    uncompressed_size: int
    sections: str
    count: int
    listed: bool


def target_rows(entries: Iterable[KernelEntry]) -> list[TargetRow]:
    """The de-duplicated view: nvcc's device-link step alone puts every target in twice.

    One pass over the entries (a deep read of a torch environment has 48,000)."""
    groups: dict[tuple[str, int, str, bool], _Group] = {}
    for entry in entries:
        key = (entry.kind, entry.arch, entry.variant, entry.listed)
        group = groups.get(key)
        if group is None:
            group = groups[key] = _Group(entry.target)
        group.ptx_isas.add(entry.ptx_isa or "")
        group.compressions.add(entry.compression)
        group.sections.add(entry.section or "(file)")
        group.stored += entry.stored_size
        group.unpacked += entry.uncompressed_size
        group.count += entry.count
    return [
        TargetRow(
            kind=kind,
            target=group.target,
            ptx_isa=_joined(group.ptx_isas),
            compression=_joined(group.compressions),
            stored_size=group.stored,
            uncompressed_size=group.unpacked,
            sections=_joined(group.sections),
            count=group.count,
            listed=listed,
        )
        for (kind, _arch, _variant, listed), group in sorted(
            groups.items(), key=lambda item: (KIND_ORDER.get(item[0][0], 9), *item[0][1:])
        )
    ]


class _Group:
    """What a TargetRow adds up, gathered entry by entry."""

    __slots__ = ("compressions", "count", "ptx_isas", "sections", "stored", "target", "unpacked")

    def __init__(self, target: str) -> None:
        self.target = target  # the first entry's name
        self.ptx_isas: set[str] = set()
        self.compressions: set[str] = set()
        self.sections: set[str] = set()
        self.stored = 0
        self.unpacked = 0
        self.count = 0


def _joined(values: Iterable[str]) -> str:
    return ", ".join(sorted({v for v in values if v}))


def size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n / 1048576:.1f} MiB"


def file_rows(
    facts: BinaryFacts, show_all: bool, human: bool = True
) -> tuple[list[str], list[tuple[list[str], bool]]]:
    """The column names and the rows of one file (cells, listed by cuobjdump); sizes in KiB/MiB
    when ``human``, else in bytes."""
    shown = size if human else str
    rows: list[tuple[list[str], bool]] = []
    if show_all:
        members = any(e.member for e in facts.entries)
        for e in facts.entries:
            cells = [
                e.target + (" (-G)" if e.debug else ""),
                e.kind,
                e.ptx_isa or "",
                e.compression,
                shown(e.stored_size),
                shown(e.uncompressed_size),
                e.section or "(file)",
                hex(e.offset),
            ]
            rows.append((cells + ([e.member or ""] if members else []), e.listed))
        return [*HEADER, "offset", *(["member"] if members else [])], rows
    for row in target_rows(facts.entries):
        cells = [
            row.target,
            row.kind,
            row.ptx_isa,
            row.compression,
            shown(row.stored_size),
            shown(row.uncompressed_size),
            row.sections,
            str(row.count),
        ]
        rows.append((cells, row.listed))
    return [*HEADER, "n"], rows


def _table(columns: Sequence[str], rows: Sequence[tuple[list[str], bool]], extra: bool) -> Table:
    """With ``extra``, a last column says whether cuobjdump lists the entry."""
    heads = [Column(h, align="right" if h in RIGHT_ALIGNED else "left") for h in columns]
    if extra:
        heads.append(Column("cuobjdump"))
    body = tuple(
        tuple(Cell(c) for c in cells)
        + ((Cell("listed" if listed else "not listed"),) if extra else ())
        for cells, listed in rows
    )
    return Table(tuple(heads), body, keys=0)


def markdown(
    files: Sequence[BinaryFacts],
    show_all: bool,
    summary: dict[str, Any],
    resolved: Sequence[Chosen] = (),
) -> str:
    """The wheels requirements resolved to (a table), then one table per file with device code
    (and a line per file that could not be read)."""
    from archgap import __version__

    lines = ["### archgap kernels", "", f"archgap {__version__}"]
    if resolved:
        lines += ["", f"Resolved {len(resolved)} wheel(s):", ""]
        lines += markdown_lines(_resolved_table(resolved))
    for facts in files:
        state = f" — {markdown_escape(facts.error)}" if facts.error else ""
        if not facts.entries:
            if facts.error or show_all:
                lines += ["", f"`{facts.path}` ({facts.format}, {size(facts.size)}){state}"]
            continue
        columns, rows = file_rows(facts, show_all)
        lines += ["", f"`{facts.path}` ({facts.format}, {size(facts.size)}){state}", ""]
        lines += markdown_lines(_table(columns, rows, bool(summary.get("deep"))))
    lines += [
        "",
        f"{summary['files']} files, {summary['entries']} entries, "
        f"{summary['unreadable']} not fully readable",
    ]
    return "\n".join(lines) + "\n"


def csv(
    files: Sequence[BinaryFacts],
    show_all: bool,
    summary: dict[str, Any],
    resolved: Sequence[Chosen] = (),
) -> str:
    """Every row of every file in one table, the file's path first, then whether cuobjdump
    lists the entry. Where requirements were resolved, still one table: three more columns
    after the path name the wheel each row came from (project, version, who required it), and
    a resolved wheel without device code is one row of its own, its target cells empty."""
    per_file = [(facts.path, *file_rows(facts, show_all, human=False)) for facts in files]
    columns = max((names for _, names, _ in per_file), key=len, default=[*HEADER, "n"])
    wheels = {c.file.url: c for c in resolved}
    shown: set[str] = set()
    body = []
    for path, _, rows in per_file:
        chosen = _wheel_of(path, wheels)
        for cells, listed in rows:
            padded = [*cells, *[""] * (len(columns) - len(cells))]
            origin = _origin(chosen, shown) if resolved else []
            body.append(tuple(Cell(c) for c in (path, *origin, *padded, _listed(listed))))
    for chosen in resolved:
        if chosen.file.url not in shown:
            row = (chosen.file.url, *_origin(chosen, shown), *[""] * (len(columns) + 1))
            body.append(tuple(Cell(c) for c in row))
    extra = [Column(c) for c in RESOLVED_CSV] if resolved else []
    heads = (Column("file"), *extra, *(Column(c) for c in columns), Column("cuobjdump"))
    return csv_text(Table(heads, tuple(body), keys=0))


RESOLVED_CSV = ("project", "version", "required by")


def _wheel_of(path: str, wheels: dict[str, Chosen]) -> Chosen | None:
    """The resolved wheel a file row's path is a member of (``URL/member``)."""
    head, sep, _ = path.partition(".whl/")
    return wheels.get(head + ".whl") if sep else None


def _origin(chosen: Chosen | None, shown: set[str]) -> list[str]:
    if chosen is None:
        return ["", "", ""]
    shown.add(chosen.file.url)
    return [_project(chosen), chosen.version, ", ".join(_why(chosen))]


def _project(chosen: Chosen) -> str:
    """The project with the extras asked for: "demo-app[full]"."""
    return chosen.name + (f"[{','.join(chosen.extras)}]" if chosen.extras else "")


def _why(chosen: Chosen) -> list[str]:
    """Who asked for a resolved wheel: "named" (on the command line), "demo-app 1.0"."""
    from archgap.index.deps import ROOT

    return ["named" if r == ROOT else r for r in chosen.required_by]


def _resolved_table(resolved: Sequence[Chosen]) -> Table:
    heads = ("project", "version", "wheel", "required by")
    body = tuple(
        (
            Cell(_project(c)),
            Cell(c.version),
            Cell(c.file.filename),
            Cell(", ".join(_why(c))),
        )
        for c in resolved
    )
    return Table(tuple(Column(h, code=h == "wheel") for h in heads), body, keys=0)


def _listed(listed: bool) -> str:
    return "listed" if listed else "not listed"


def summary(files: Sequence[BinaryFacts], deep: bool, elapsed: float) -> dict[str, Any]:
    """The counts under the table (and in the document): files, those with device code, entries
    (those cuobjdump lists), files not fully readable; whether data sections were searched."""
    unreadable = sum(1 for f in files if f.error or f.format == "unreadable")
    return {
        "files": len(files),
        "files_with_device_code": sum(1 for f in files if f.entries),
        "entries": sum(e.count for f in files for e in f.entries),
        "listed_entries": sum(e.count for f in files for e in f.entries if e.listed),
        "unreadable": unreadable,
        "deep": deep,
        "seconds": round(elapsed, 3),
    }


def body(
    files: Sequence[BinaryFacts],
    counts: dict[str, Any],
    gate: GateResult | None,
    resolved: Sequence[Chosen] = (),
    unverified: Sequence[str] = (),
) -> dict[str, Any]:
    """The body of the kernels document (schema/kernels.schema.json): every file, the counts,
    with --require the build gate's result, the wheels requirements resolved to, and the
    archives whose index sha256 was not checked."""
    from archgap.codec import encode

    data: dict[str, Any] = {"files": files, "summary": counts}
    if gate is not None:
        data["require"] = {**encode(gate), "passed": gate.passed}
    if resolved:
        data["resolved"] = [resolved_item(c) for c in resolved]
    if unverified:
        data["unverified"] = list(unverified)
    return data


def resolved_item(chosen: Chosen) -> dict[str, Any]:
    """One wheel a requirement resolved to: the project, its version, the file and where it is,
    the extras asked for and who required it."""
    return {
        "name": chosen.name,
        "version": chosen.version,
        "file": chosen.file.filename,
        "url": chosen.file.url,
        "index": chosen.index,
        "extras": list(chosen.extras),
        "required_by": list(chosen.required_by),
    }


def resolved_lines(resolved: Sequence[Chosen]) -> list[str]:
    """The text's lines for the resolved wheels: one per project (who required it)."""
    from archgap.index.deps import ROOT

    lines = [f"Resolved {len(resolved)} wheel(s)"]
    for c in resolved:
        others = [r for r in c.required_by if r != ROOT]
        why = ["named"] if ROOT in c.required_by else []
        why += [f"required by {', '.join(others)}"] if others else []
        lines.append(f"  {_project(c)} {c.version}  {c.file.filename}  ({'; '.join(why)})")
    return lines


# --- the kernels result (api.kernels), in each format ------------------------------------------


def counts(result: KernelsResult) -> dict[str, Any]:
    return summary(result.files, result.deep, result.seconds)


def document(result: KernelsResult) -> dict[str, Any]:
    """The kernels document (``archgap kernels --json``)."""
    from archgap.report.jsondoc import document as envelope

    found = body(result.files, counts(result), result.gate, result.resolved, result.unverified)
    return envelope("kernels", found)


def markdown_text(result: KernelsResult, show_all: bool) -> tuple[str, list[str]]:
    """The Markdown tables, and the unverified marks and build gate's lines after them
    (markup)."""
    text = markdown(result.files, show_all, counts(result), result.resolved)
    marks = unverified_lines(result.unverified)
    return text, marks + (gate_lines(result.gate) if result.gate is not None else [])


def csv_of(result: KernelsResult, show_all: bool) -> str:
    return csv(result.files, show_all, counts(result), result.resolved)


def text(result: KernelsResult, show_all: bool, colour: bool) -> list[str]:
    """Rich-markup lines: the resolved wheels, each file's entries aligned under a header (a
    missing path is the CLI's error line, not a file), the counts, and the build gate's
    result. Without ``colour`` rows cuobjdump does not list are marked with a *, else cyan."""
    lines = [escape(line) for line in resolved_lines(result.resolved)] if result.resolved else []
    lines += [""] if lines else []
    quiet = 0
    named = set(result.paths)
    for facts in result.files:
        if facts.path in result.missing:
            continue  # an error, said on stderr
        title = f"[bold]{escape(facts.path)}[/]  [dim]{facts.format}, {size(facts.size)}[/]"
        if facts.error:
            title += f"  [red]{escape(facts.error)}[/]"
        if not facts.entries:
            if facts.error or show_all or facts.path in named:
                lines.append(title + ("" if facts.error else "  [dim]no device code[/]"))
            else:
                quiet += 1
            continue
        lines.append(title)
        columns, rows = file_rows(facts, show_all)
        lines.extend(_aligned(columns, rows, colour))
        lines.append("")
    lines.append(_counts_line(counts(result), quiet, colour))
    lines += unverified_lines(result.unverified)
    return lines + (gate_lines(result.gate) if result.gate is not None else [])


def unverified_lines(archives: Sequence[str]) -> list[str]:
    """The mark scan shows too: archives read through range requests, unchecked."""
    if not archives:
        return []
    from archgap.targets import UNVERIFIED

    return [f"[yellow]! {escape(label)}: {escape(UNVERIFIED)}[/]" for label in archives]


def _counts_line(counted: dict[str, Any], quiet: int, colour: bool) -> str:
    line = (
        f"{counted['files']} files, {counted['files_with_device_code']} with device code, "
        f"{counted['entries']} entries"
    )
    if counted["deep"]:
        hidden = counted["entries"] - counted["listed_entries"]
        line += f" ({hidden} not listed by cuobjdump, {'in cyan' if colour else 'marked *'})"
    if quiet:
        line += f", {quiet} without device code not shown (--all shows them)"
    if counted["unreadable"]:
        line += f", [red]{counted['unreadable']} not fully readable[/]"
    return line + f" — {counted['seconds']:.2f} s"


def _aligned(
    header: Sequence[str], rows: Sequence[tuple[list[str], bool]], colour: bool
) -> list[str]:
    """Rows aligned under a header (numbers right-aligned); rows that cuobjdump skips in cyan,
    or marked with a * where there is no colour."""
    from archgap.report.table import text_lines

    columns = tuple(Column(h, align="right" if h in RIGHT_ALIGNED else "left") for h in header)
    table_rows = []
    for texts, listed in rows:
        if not listed and not colour:
            texts = [texts[0] + " *", *texts[1:]]
        table_rows.append(tuple(Cell(t, "" if listed else "cyan") for t in texts))
    return text_lines(Table(columns, tuple(table_rows), keys=0, indent="  "), None, styled=True)


def gate_lines(gate: GateResult) -> list[str]:
    """The build gate's result: pass, or each library that fails a required GPU, what the
    recipe for those GPUs expects, and the recipe's build line."""
    mode = " (strict: PTX only fails)" if gate.strict else ""
    gpus = escape(", ".join(gate.gpus))
    if gate.claims:
        return claimed_lines(gate, mode)
    if gate.passed:
        how = "" if gate.strict else " or through PTX"
        return [
            f"[green]require {gpus}{mode}: pass[/] — every one of {gate.libraries} libraries "
            f"with device code runs natively{how} on each"
        ]
    lines = [f"[red]require {gpus}{mode}: FAIL[/] ({len(gate.failures)} gap(s))"]
    for f in gate.failures:
        where = escape(f.path) if f.path else "(build output)"
        expected = " or ".join(f.expected) or "nothing the recipe can build"
        lines.append(f"  {where} on {escape(f.gpu)} ({f.compute_capability}): {f.verdict}")
        lines.append(f"    {escape(f.reason)}")
        lines.append(f"    expected from the recipe: {expected}")
    lines.append(f'  recipe: TORCH_CUDA_ARCH_LIST="{gate.recipe}"')
    lines.append(f"          nvcc {gate.recipe_nvcc}")
    return lines


def claimed_lines(gate: GateResult, mode: str) -> list[str]:
    """``--require claimed``: pass, or each claimed target a library lacks, and where the claim
    was read."""
    claims = escape(", ".join(gate.gpus))
    source = f"  claimed by {escape(gate.claimed_from)}"
    if gate.passed:
        return [
            f"[green]require claimed {claims}{mode}: pass[/] — every one of {gate.libraries} "
            "libraries with device code has each",
            source,
        ]
    lines = [f"[red]require claimed {claims}{mode}: FAIL[/] ({len(gate.failures)} gap(s))", source]
    for f in gate.failures:
        where = escape(f.path) if f.path else "(build output)"
        lines.append(f"  {where} lacks {f.claim} ({f.compute_capability}): {f.verdict}")
        lines.append(f"    {escape(f.reason)}")
    return lines
