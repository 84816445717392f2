"""Text output off a terminal (pipes, files) and on a real terminal (tmux at 80 and 200 columns).

The environment: a real venv with the project's nvcc-built libraries under a long distribution
name and eight named GPUs, so the package table is wider than 80 columns. By build.sh, libmix.so
has SASS sm_75 sm_90 sm_90a sm_100a sm_103f sm_120 sm_120a and PTX compute_75/100f/120a, and
libcomp_default.so SASS sm_80 sm_120a and PTX compute_90; libptxonly.so PTX compute_80 only.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from markdown_it.token import Token

from archgap import api
from archgap.analysis.scan import ScanReport
from archgap.report import scan as scan_report
from tests.helpers import CUDA_BIN, install_fake_distribution, make_venv, run_cli

LONG = "nvidia-cuda-runtime-very-long-name-cu12"
GPUS = "RTX PRO 6000,V100,H100,B200,GB10,T4,A100,L4"
LABELS = GPUS.split(",")


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("outvenv") / "venv"
    site = make_venv(root)
    libs = {
        "fakekernels/libmix.so": "libmix.so",
        "fakekernels/libcomp_default.so": "libcomp_default.so",
    }
    install_fake_distribution(
        site, "fakekernels", "1.2.3", {k: CUDA_BIN / v for k, v in libs.items()}
    )
    install_fake_distribution(
        site,
        LONG,
        "12.8.93.post1",
        {"nvidia/cuda_runtime/lib/libptxonly.so.12": CUDA_BIN / "libptxonly.so"},
    )
    return root / "bin" / "python"


@pytest.fixture(scope="module")
def scanned(venv: Path) -> ScanReport:
    """The scan the renderers are given (in-process: what the CLI prints them from)."""
    return api.scan(str(venv), gpus=LABELS)


def expected(report: ScanReport) -> dict[str, list[str]]:
    """Each package's verdicts in GPU order, from the JSON document's body."""
    body = scan_report.body(report, 0.0)
    got = {(p.package, p.gpu): p.verdict for p in body["packages"]}
    return {name: [got[(name, g)] for g in LABELS] for name in ("fakekernels", LONG)}


def test_pipe_prints_full_rows(venv: Path, scanned: ScanReport) -> None:
    verdicts = expected(scanned)
    # By the build: libptxonly has PTX compute_80 only, so nothing for 7.0 and 7.5, JIT above;
    # and it is an x86-64 ELF, while GB10 systems are aarch64 (kb/gpus.json): its PTX would JIT
    # there, the host CPU stops it loading: blocked.
    assert verdicts[LONG] == ["jit", "none", "jit", "jit", "blocked", "none", "jit", "jit"]
    result = run_cli("scan", "--python", str(venv), "--gpu", GPUS, "--libs")
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert "…" not in result.stdout and "\x1b[" not in result.stdout
    header = next(line for line in lines if line.startswith("package"))
    assert header.split()[:2] == ["package", "version"] and all(g in header for g in LABELS)
    for name, row in verdicts.items():
        line = next(line for line in lines if line.startswith(name + " "))
        assert line.split()[2:] == row  # the whole row on one line, every verdict in GPU order
    # The library view: the path relative to site-packages, whole, on the row of its verdicts.
    lib = next(
        line for line in lines if line.startswith("nvidia/cuda_runtime/lib/libptxonly.so.12")
    )
    assert LONG in lib and lib.count("compute_80 PTX") == 6


def _tmux(columns: int, argv: list[str], tmp_path: Path) -> list[str]:
    """Run ``argv`` on a real terminal of ``columns`` columns (tmux) and read the screen back,
    wrapped lines joined (``capture-pane -J``): a joined line wider than the pane wrapped."""
    tmux = shutil.which("tmux")
    assert tmux, "tmux is missing: scripts/services installs it (apt-get install tmux)"
    socket = f"archgap-test-{os.getpid()}-{columns}"
    done = tmp_path / f"done-{columns}"
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR", "TMUX")}
    command = f"{shlex.join(argv)}; echo $? > {shlex.quote(str(done))}; sleep 60"
    base = [tmux, "-L", socket, "-f", "/dev/null"]
    start = [*base, "new-session", "-d", "-x", str(columns), "-y", "200", command]
    subprocess.run(start, check=True, env={**env, "TERM": "xterm-256color"}, timeout=30)
    try:
        deadline = time.monotonic() + 60
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert done.exists(), "the command did not finish on the terminal"
        capture = [*base, "capture-pane", "-p", "-J", "-S", "-", "-t", "0"]
        text = subprocess.run(
            capture, check=True, capture_output=True, text=True, timeout=30
        ).stdout
    finally:
        subprocess.run([*base, "kill-server"], check=False, timeout=30)
    return text.rstrip("\n").splitlines()


def _scan_argv(venv: Path, *more: str) -> list[str]:
    return [sys.executable, "-m", "archgap", "scan", "--python", str(venv), "--gpu", GPUS, *more]


@pytest.mark.parametrize("columns", [80, 200])
def test_terminal_fits_width_without_cutting_names(
    venv: Path, scanned: ScanReport, tmp_path: Path, columns: int
) -> None:
    verdicts = expected(scanned)
    lines = _tmux(columns, _scan_argv(venv), tmp_path)
    assert not any("…" in line for line in lines)
    headers = [i for i, line in enumerate(lines) if line.startswith("package ")]
    tables = [lines[i : i + 5] for i in headers]  # header, capability line, rule, two rows
    assert all(len(line) <= columns for t in tables for line in t), "\n".join(lines)
    # Every part repeats the package names whole; together the parts show every GPU in order.
    shown: dict[str, list[str]] = {name: [] for name in verdicts}
    labels: list[str] = []
    for table in tables:
        labels += table[0].split()[2:]
        for name in verdicts:
            row = next(line for line in table if line.startswith(name + " "))
            shown[name] += row.split()[2:]
    assert shown == verdicts
    assert " ".join(labels) == " ".join(LABELS)
    if columns == 200:
        assert len(tables) == 1
    else:
        assert len(tables) >= 2


def test_terminal_records_when_keys_do_not_fit(venv: Path, tmp_path: Path) -> None:
    # The library view at 80 columns: path + package + one verdict with its entry do not fit
    # (40 + 39 + 42 characters), so each library is a record: its name, then one line per GPU;
    # the path and the package name together are 81 characters, so the package gets its own line.
    lines = _tmux(80, _scan_argv(venv, "--libs"), tmp_path)
    start = lines.index("nvidia/cuda_runtime/lib/libptxonly.so.12")
    assert lines[start + 1] == "  " + LONG
    assert lines[start + 2].split() == ["role", "kernel", "library"]  # the file's role
    record = lines[start + 3 : start + 11]
    assert [line.split("(")[0].strip() for line in record] == LABELS
    assert record[1].split()[-1] == "none" and "jit compute_80 PTX (ISA 9.0)" in record[0]
    assert all(len(line) <= 80 for line in lines[start : start + 11])
    mix = lines.index("fakekernels/libmix.so  fakekernels")  # short enough for one line
    assert lines[mix + 1].split() == ["role", "kernel", "library"]
    assert lines[mix + 2].split() == [
        "RTX",
        "PRO",
        "6000",
        "(12.0)",
        *["native", "sm_120", "SASS", "in", ".nv_fatbin"],
    ]


def _table(tokens: list[Token], start: int) -> list[list[str]]:
    """The rows (header first) of the Markdown table that opens at tokens[start]."""
    rows: list[list[str]] = []
    for token in tokens[start:]:
        if token.type == "table_close":
            return rows
        if token.type == "tr_open":
            rows.append([])
        elif token.type == "inline":
            rows[-1].append(token.content)
    raise AssertionError("unclosed table")


def test_markdown_is_a_table_a_parser_reads(scanned: ScanReport) -> None:
    from markdown_it import MarkdownIt

    verdicts = expected(scanned)
    assert scanned.has_gap  # the CLI's exit 1
    tokens = MarkdownIt("commonmark").enable("table").parse(scan_report.markdown(scanned, False))
    heading = next(t for i, t in enumerate(tokens) if i and tokens[i - 1].type == "heading_open")
    assert heading.content == "archgap scan"
    items = [
        t.content
        for i, t in enumerate(tokens)
        if t.type == "inline" and tokens[i - 2].type == "list_item_open"
    ]
    assert any(i.startswith("archgap ") for i in items) and any(
        i.startswith("Python 3.") for i in items
    )
    tables = [i for i, t in enumerate(tokens) if t.type == "table_open"]
    assert len(tables) == 1
    header, *rows = _table(tokens, tables[0])
    # markdown-it gives the inline source: escapes such as \_ stay in it.
    assert header == [
        "package",
        "version",
        "RTX PRO 6000 (12.0)",
        "V100 (7.0)",
        "H100 (9.0)",
        "B200 (10.0)",
        "GB10 (12.1)",
        "T4 (7.5)",
        "A100 (8.0)",
        "L4 (8.9)",
    ]
    assert {r[0]: r[2:] for r in rows} == verdicts
    # Findings: every non-native verdict as a list item (16 - 3 native = 13).
    findings = [i for i in items if " on " in i and " — " in i]
    assert len(findings) == sum(v != "native" for row in verdicts.values() for v in row)


def test_csv_matches_the_json(scanned: ScanReport) -> None:
    import csv

    verdicts = expected(scanned)
    header, *rows = list(csv.reader(scan_report.csv(scanned, False).splitlines()))
    assert header[:2] == ["package", "version"] and header[2] == "RTX PRO 6000 (12.0)"
    assert {r[0]: r[2:] for r in rows} == verdicts
    libs = list(csv.reader(scan_report.csv(scanned, True).splitlines()))
    assert libs[0][:2] == ["library", "package"] and len(libs) == 4
    assert "nvidia/cuda_runtime/lib/libptxonly.so.12" in [r[0] for r in libs]
