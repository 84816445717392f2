"""``archgap explain``: from an error log (file, stdin or a message) to the root cause and the fix.

Exit codes: 1 = an architecture-gap error was recognised and explained; 0 = no known
architecture-gap signature in the input (an error archgap does not know is printed as "unknown",
with what it recognised); 2 = usage error (no input, unreadable file, bad --gpu/--env-from).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from archgap.cli.common import (
    EXIT_GAP,
    EXIT_OK,
    Output,
    UsageError,
    add_environment_options,
    add_json_option,
)

if TYPE_CHECKING:
    from archgap.analysis.explain import Diagnosis, ExaminedEnvironment
    from archgap.probe.system import System

MAX_INPUT = 64 * 1024 * 1024  # bytes read from a log; the rest is ignored (and said so)


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "explain",
        help="explain a crash log: the chain of causes and the fixes",
        description="Read an error log (file, '-' for stdin, or --message) and explain the "
        "architecture-gap error in it, confirmed on an environment when one is given.",
    )
    parser.add_argument("logfile", nargs="?", help="log file, or - for stdin")
    parser.add_argument("--message", metavar="TEXT", help="a bare error message instead of a log")
    parser.add_argument(
        "--gpu", action="append", default=[], metavar="GPU", help="the GPU of the crashed host"
    )
    parser.add_argument(
        "--env-from", metavar="PID|FILE", help="the service's environment (process or env file)"
    )
    parser.add_argument(
        "--log-only", action="store_true", help="do not examine any environment; the log alone"
    )
    add_environment_options(parser)
    add_json_option(parser)
    parser.set_defaults(run=run)


def _read_input(args: argparse.Namespace) -> tuple[str, str]:
    if args.message and args.logfile:
        raise UsageError("give a LOGFILE or --message, not both")
    if args.message:
        return args.message, "--message"
    if not args.logfile:
        raise UsageError("give a LOGFILE, '-' for stdin, or --message TEXT")
    if args.logfile == "-":
        return sys.stdin.buffer.read(MAX_INPUT).decode("utf-8", "replace"), "stdin"
    try:
        with open(args.logfile, "rb") as f:
            return f.read(MAX_INPUT).decode("utf-8", "replace"), args.logfile
    except OSError as exc:
        raise UsageError(f"cannot read {args.logfile}: {exc.strerror or exc}") from exc


class _RecordSources(Mapping[str, str]):
    """The .py files a distribution's RECORD lists, read on first access (never imported)."""

    def __init__(self, site: str, relpaths: tuple[str, ...]) -> None:
        self._site = site
        self._relpaths = relpaths
        self._known = frozenset(relpaths)
        self._cache: dict[str, str] = {}

    def __getitem__(self, key: str) -> str:
        if key not in self._known:
            raise KeyError(key)
        if key not in self._cache:
            try:
                with open(os.path.join(self._site, key), "rb") as f:
                    self._cache[key] = f.read(4_000_000).decode("utf-8", "replace")
            except OSError:
                self._cache[key] = ""
        return self._cache[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._relpaths)

    def __len__(self) -> int:
        return len(self._relpaths)

    def __contains__(self, key: object) -> bool:
        return key in self._known


def _environment(args: argparse.Namespace) -> ExaminedEnvironment:
    from archgap.analysis.compat import UnknownGpu, resolve_gpu
    from archgap.analysis.explain import ExaminedEnvironment, GpuFact, InstalledDistribution
    from archgap.probe.pyenv import discover_environment, record_files
    from archgap.probe.system import System

    system = System.local(root=args.root)
    if args.env_from:
        from archgap.probe.envsource import system_with_env_from

        loaded, why = system_with_env_from(args.env_from, system)
        if loaded is None:
            raise UsageError(why or f"cannot read --env-from {args.env_from}")
        system = loaded
    gpus: list[GpuFact] = []
    for text in args.gpu:
        try:
            target = resolve_gpu(text)
        except UnknownGpu as exc:
            raise UsageError(str(exc)) from exc
        gpus.append(GpuFact(target.label, str(target.compute_capability), f"--gpu {text}"))
    env = discover_environment(system, args.python)
    dists: list[InstalledDistribution] = []
    for dist in env.distributions:
        site = os.path.dirname(dist.dist_info)
        try:
            files = record_files(dist.dist_info)
        except OSError:
            continue
        relpaths = tuple(
            os.path.relpath(p, site) for p in files if p.endswith(".py") and p.startswith(site)
        )
        dists.append(InstalledDistribution(dist.name, dist.version, _RecordSources(site, relpaths)))
    nvcc, toolkits = _toolchain(system)
    return ExaminedEnvironment(
        description=f"{env.executable} (Python {env.python_version})",
        env=system.environ,
        env_source=system.env_source,
        distributions=tuple(dists),
        gpus=tuple(gpus),
        nvcc=nvcc,
        toolkits=toolkits,
    )


def _toolchain(system: System) -> tuple[Any, tuple[Any, ...]]:
    """The nvcc FlashInfer resolves (CUDA_HOME -> CUDA_PATH -> which nvcc -> /usr/local/cuda)
    and the other toolkits on the machine (for fixes)."""
    import glob
    import re

    from archgap.analysis.explain import NvccFact, ToolkitOption

    def version_of(nvcc: str) -> tuple[str | None, str | None]:
        result = system.run([nvcc, "--version"], timeout=15)
        match = re.search(r"release (\d+\.\d+)", result.stdout)
        if match:
            return match.group(1), None
        return None, result.error or "no version in nvcc --version output"

    home, how = None, ""
    for name in ("CUDA_HOME", "CUDA_PATH"):
        value = system.getenv(name)
        if value:
            home, how = value, f"{name}={value} ({system.env_source})"
            break
    if home is None:
        found = system.which("nvcc")
        if found:
            home, how = os.path.dirname(os.path.dirname(found)), f"PATH ({found})"
        else:
            home, how = "/usr/local/cuda", "default /usr/local/cuda"
    nvcc_path = os.path.join(system.path(home), "bin", "nvcc")
    if os.path.exists(nvcc_path):
        version, error = version_of(nvcc_path)
    else:
        version, error = None, f"{nvcc_path} does not exist"
    fact = NvccFact(nvcc_path, version, how, error)
    toolkits = []
    for candidate in sorted(glob.glob(system.path("/usr/local/cuda-*"))):
        path = os.path.join(candidate, "bin", "nvcc")
        if os.path.exists(path):
            found_version, _ = version_of(path)
            if found_version:
                toolkits.append(ToolkitOption(candidate, found_version))
    return fact, tuple(toolkits)


def run(args: argparse.Namespace, out: Output) -> int:
    from archgap.analysis.explain import explain
    from archgap.analysis.logparse import parse_log
    from archgap.kb.signatures import load_signatures

    text, origin = _read_input(args)
    log = parse_log(text)
    environment = None if args.log_only else _environment(args)
    diagnosis = explain(log, load_signatures(), environment)
    if out.json_mode:
        out.emit("explain", _document(diagnosis, origin, log.lines, log.truncated_lines))
    else:
        _print(out, diagnosis, origin, log.lines)
    return EXIT_GAP if diagnosis.status == "diagnosed" else EXIT_OK


def _document(diagnosis: Diagnosis, origin: str, lines: int, truncated: int) -> dict[str, Any]:
    from archgap.model import to_json

    body = to_json(diagnosis)
    body["input"] = {"origin": origin, "lines": lines, "truncated_lines": truncated}
    return {"explain": body}


_STATUS_LABEL = {
    "confirmed": "[green]confirmed[/]",
    "from-log": "[cyan]from log[/]",
    "knowledge": "[yellow]knowledge base[/]",
    "unconfirmed": "[red]unconfirmed[/]",
}


def _print(out: Output, diagnosis: Diagnosis, origin: str, lines: int) -> None:
    from rich.markup import escape

    where = diagnosis.environment or "no environment (log only)"
    out.print(
        f"[bold]archgap explain[/] {escape(origin)} ({lines} lines) — examined: {escape(where)}"
    )
    if diagnosis.status != "diagnosed":
        label = "unknown error" if diagnosis.status == "unknown" else "no error found"
        out.print(f"\n[bold yellow]{label}[/]: no known architecture-gap signature matches.")
        rec = diagnosis.recognised
        if rec.error:
            out.print(f"  last error: {escape(rec.error)}")
        for label, values in (
            ("GPUs", rec.gpus),
            ("compute capabilities", rec.compute_capabilities),
            ("versions", tuple(f"{k} {v}" for k, v in rec.versions)),
            ("paths", tuple(f"{k}={v}" for k, v in rec.paths)),
            ("frames", rec.frames[-5:]),
        ):
            if values:
                out.print(f"  {label}: {escape(', '.join(values))}")
        return
    out.print(f"\n[bold red]error[/] {escape(diagnosis.error)}  [dim]({diagnosis.signature})[/]")
    out.print("\n[bold]chain[/]")
    for number, step in enumerate(diagnosis.steps, start=1):
        location = f" [bold]{escape(step.location)}[/]" if step.location else ""
        out.print(f" {number:>2}. {escape(step.text)}{location}  {_STATUS_LABEL[step.status]}")
        if step.fact:
            out.print(f"     [dim]{escape(step.fact)}[/]")
        out.print(f"     [dim]source: {escape(step.source)}[/]")
    for note in diagnosis.notes:
        out.print(f"\n[bold yellow]note[/] {escape(note)}")
    out.print(f"\n[bold]root cause[/] {escape(diagnosis.root_cause)}")
    if diagnosis.fixes:
        out.print("\n[bold]fixes[/] (least invasive first)")
        for number, fix in enumerate(diagnosis.fixes, start=1):
            out.print(f" {number}. {escape('[' + fix.kind + ']')} {escape(fix.text)}")
            out.print(f"    [dim]{escape(fix.source)}[/]")
