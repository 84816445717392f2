"""Benchmark: `archgap trace NAME` against `rg -n -w NAME` and `grep -rnw --include='*.py' NAME`.

Input: bench/.data/site-packages (bench/setup_trace_bench.sh: torch 2.13.0, vllm, sglang,
flashinfer-python, transformers, triton installed --no-deps: over ten thousand .py files).
Every tool runs as a whole process, interleaved, several times; medians are compared. archgap
keeps no on-disk cache; each run still gets a fresh empty XDG_CACHE_HOME so it is cold by
construction (archgap's own .pyc files may exist, as for any installed tool). Targets (issue 4):
<= 2x ripgrep on a rare name, <= 4x on a common one, faster than grep on the rare one.

Completeness check: every rg hit in a .py file that is code (not inside a comment or a docstring,
decided independently here with tokenize + ast on the whole file) must be a line of archgap's
answer. Exit status 1 when a code hit is missing.

    python bench/trace_vs_rg.py [--runs N] [NAME ...]
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / ".data" / "site-packages"
ARCHGAP = ROOT / ".venv" / "bin" / "archgap"
NAMES = {"TARGET_CUDA_ARCHS": ("rare", 1.5), "get_device_capability": ("common", 3.0)}


def timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, str]:
    started = time.perf_counter()
    result = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    elapsed = time.perf_counter() - started
    if result.returncode not in (0, 1):  # rg/grep answer 1 for "no match"
        raise SystemExit(f"{argv[0]} failed ({result.returncode}): {result.stderr[-500:]}")
    return elapsed, result.stdout


def cold_env() -> dict[str, str]:
    """A fresh, empty cache home for every archgap run. Python may write archgap's own bytecode
    (as any installed tool has it); that is not a cache of the inspected tree."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "XDG_CACHE_HOME": tempfile.mkdtemp(prefix="archgap-cold-")}


def docstring_lines(tree: ast.AST) -> set[int]:
    """Lines of string-expression statements (docstrings and bare strings used as comments)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for stmt in body:
            if (
                isinstance(stmt, ast.Expr)
                and isinstance(stmt.value, ast.Constant)
                and isinstance(stmt.value.value, str)
            ):
                lines.update(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
    return lines


def code_lines(path: str, name: str) -> set[int] | None:
    """Lines where ``name`` occurs in a token that is neither a comment nor a docstring."""
    try:
        with tokenize.open(path) as f:
            text = f.read()
        tree = ast.parse(text)
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (SyntaxError, UnicodeDecodeError, ValueError, tokenize.TokenError):
        return None
    docs = docstring_lines(tree)
    word = re.compile(r"(?<!\w)" + re.escape(name) + r"(?!\w)")
    found: set[int] = set()
    for token in tokens:
        if token.type == tokenize.COMMENT or not word.search(token.string):
            continue
        first = token.start[0]
        if token.type == tokenize.STRING and first in docs:
            continue
        for offset, line in enumerate(token.string.split("\n")):
            if word.search(line):
                found.add(first + offset)
    return found


def rg_hits(output: str) -> dict[str, set[int]]:
    hits: dict[str, set[int]] = {}
    for line in output.splitlines():
        path, number, _ = line.split(":", 2)
        hits.setdefault(path, set()).add(int(number))
    return hits


def check_completeness(name: str, rg_output: str) -> tuple[int, int, int, list[str]]:
    """(code hits, non-code hits, files skipped, missing) comparing rg with archgap --json."""
    result = subprocess.run(
        [str(ARCHGAP), "trace", name, str(DATA), "--all", "--json"],
        capture_output=True,
        text=True,
        env=cold_env(),
        check=True,
    )
    answer = {(o["path"], o["line"]) for o in json.loads(result.stdout)["trace"]["occurrences"]}
    code = non_code = skipped = 0
    missing: list[str] = []
    for path, lines in sorted(rg_hits(rg_output).items()):
        if not path.endswith(".py"):
            continue
        code_at = code_lines(path, name)
        if code_at is None:
            skipped += 1
            continue
        for line in sorted(lines):
            if line in code_at:
                code += 1
                if (path, line) not in answer:
                    missing.append(f"{path}:{line}")
            else:
                non_code += 1
    return code, non_code, skipped, missing


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", default=list(NAMES))
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    if not (DATA / ".complete").exists():
        subprocess.run([str(ROOT / "bench" / "setup_trace_bench.sh")], check=True)
    rg, grep = shutil.which("rg"), shutil.which("grep")
    if rg is None or grep is None:
        raise SystemExit("needs rg and grep (bench/setup_trace_bench.sh installs ripgrep)")
    files = sum(1 for _ in DATA.rglob("*.py"))
    subprocess.run(
        [str(ARCHGAP), "trace", "x", str(ROOT / "bench")],
        env=cold_env(),
        check=True,
        capture_output=True,
    )  # compiles archgap's own bytecode once
    print(f"input: {DATA} ({files} .py files); {args.runs} interleaved runs, medians", flush=True)
    failed = False
    for name in args.names:
        kind, limit = NAMES.get(name, ("other", 4.0))
        commands = {
            # --all: rg and grep also search the test/vendored trees trace leaves out by default.
            "archgap": [str(ARCHGAP), "trace", name, str(DATA), "--all"],
            "rg": [rg, "-n", "-w", name, str(DATA)],
            "grep": [grep, "-rnw", "--include=*.py", name, str(DATA)],
        }
        tools = list(commands)
        times: dict[str, list[float]] = {tool: [] for tool in tools}
        outputs: dict[str, str] = {}
        for _ in range(args.runs):
            for tool, argv in commands.items():
                env = cold_env() if tool == "archgap" else None
                elapsed, outputs[tool] = timed(argv, env)
                times[tool].append(elapsed)
        median = {tool: statistics.median(values) for tool, values in times.items()}
        hits = len(outputs["rg"].splitlines())
        print(f"\n{name} ({kind}: {hits} rg hits)")
        for tool in tools:
            spread = ", ".join(f"{t:.2f}" for t in times[tool])
            print(f"  {tool:8} median {median[tool]:6.2f} s   runs: {spread}")
        to_rg = median["archgap"] / median["rg"]
        to_grep = median["archgap"] / median["grep"]
        verdict = "met" if to_rg <= limit else "NOT met"
        print(f"  archgap/rg   {to_rg:5.2f}x  (target <= {limit:g}x: {verdict})")
        if kind == "rare":
            verdict = "met" if to_grep < 1 else "NOT met"
            print(f"  archgap/grep {to_grep:5.2f}x  (target < 1x: {verdict})")
        else:
            print(f"  archgap/grep {to_grep:5.2f}x")
        code, non_code, skipped, missing = check_completeness(name, outputs["rg"])
        print(
            f"  completeness: {code} rg hits in .py code, {len(missing)} missing from archgap; "
            f"{non_code} in comments/docstrings; {skipped} files Python 3.11 cannot parse"
        )
        for item in missing[:20]:
            print(f"    missing: {item}")
        failed = failed or bool(missing)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
