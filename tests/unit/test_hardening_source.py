"""Hostile source trees: sizes are checked before reading, no FIFO blocks, symlinked directories
are not followed, the work per hit does not grow with the file, and signals reap the helper."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from archgap.probe.source.files import candidate_files
from archgap.probe.source.sourcefile import MAX_LINE_CHARS, SourceFile
from tests.hangs import GUARD, alive, gone, started
from tests.unit.test_hardening_binaries import within

MEASURE = textwrap.dedent(
    """
    import sys
    from archgap.probe.source.files import candidate_files
    def peak_kib():  # VmHWM; compared before and after the work (the child's start-up varies)
        return int(next(l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM:")))
    before = peak_kib()
    count, found, problems = candidate_files([sys.argv[1]], [b"NEEDLE"])
    print(len(found), repr([p.reason for p in problems]))
    print(peak_kib() - before)
    """
)


def test_a_huge_sparse_py_is_not_read(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    with (tree / "big.py").open("wb") as handle:
        handle.write(b"NEEDLE = 1\n")
        handle.truncate(3 << 30)
    run = subprocess.run(
        [sys.executable, "-c", MEASURE, str(tree)],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    found, growth_kib = run.stdout.strip().split("\n")
    assert found == "0 ['larger than 8 MiB: not read']"
    assert int(growth_kib) < 64 * 1024, f"peak RSS grew by {int(growth_kib) >> 10} MiB"


def test_a_fifo_named_py_is_skipped_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "real.py").write_text("NEEDLE = 1\n")
    _, found, problems = within(10, lambda: candidate_files([str(tmp_path)], [b"NEEDLE"]))
    assert [path for path, _ in found] == [str(tmp_path / "real.py")]
    assert [(p.subject, p.reason) for p in problems] == [
        (str(tmp_path / "pipe.py"), "not a regular file")
    ]


def test_symlinked_directories_are_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("NEEDLE = 1\n")
    root = tmp_path / "root"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text("x = 1\n")
    (root / "top_link").symlink_to(outside, target_is_directory=True)
    (root / "pkg" / "inner_link").symlink_to(outside, target_is_directory=True)
    count, found, _ = candidate_files([str(root)], [b"NEEDLE"])
    assert (count, found) == (1, [])


def test_hits_in_one_long_function_cost_linear_time() -> None:
    # 10,000 statements of one method, each a hit: every hit's piece is its own statement.
    body = "".join(f"        x{i} = FLAG  # {i}\n" for i in range(10_000))
    src = SourceFile("gen.py", "class C:\n    def f(self):\n" + body)
    hits = list(range(3, 10_003))
    pieces, error = within(20, lambda: src.statement_pieces(hits))
    assert error == "" and len(pieces) == 10_000
    stmts, scope, def_line = pieces[-1]
    assert (scope, def_line) == (("C", "f"), 2)
    assert stmts[0].lineno == 10_002  # line numbers as in the file


def test_a_quoted_source_line_is_cut() -> None:
    line = "x = " + " + ".join(f'os.environ["V{i}"]' for i in range(4000))
    src = SourceFile("min.py", line + "\n")
    assert len(line) > 60_000
    assert len(src.line(1)) <= MAX_LINE_CHARS + 4 and src.line(1).endswith(" ...")


HELPER = textwrap.dedent(
    """
    import os, signal, sys, time
    from archgap.probe.forked import in_two_processes
    # SIGHUP as a terminal session leaves it (nohup, which a CI runner may use, ignores it)
    signal.signal(signal.SIGHUP, signal.SIG_IGN if "ignore-hup" in sys.argv else signal.SIG_DFL)
    def child(_send):
        open(sys.argv[1], "w").write(str(os.getpid()))
        time.sleep(600)  # longer than hangs.GUARD: only a kill ends it while the test waits
        return b""
    in_two_processes(child, lambda: time.sleep(600))
    """
)


def test_sigterm_and_sighup_reap_the_forked_helper(tmp_path: Path) -> None:
    for signum in (signal.SIGTERM, signal.SIGHUP):
        pid_file = tmp_path / f"helper-{signum}"
        proc = subprocess.Popen([sys.executable, "-c", HELPER, str(pid_file)])
        helper = int(started(pid_file))
        proc.send_signal(signum)
        assert proc.wait(timeout=GUARD) == -signum
        assert gone(helper), f"the helper {helper} outlived its parent ({signum})"


def test_a_sighup_that_is_ignored_stays_ignored(tmp_path: Path) -> None:
    # Under nohup SIGHUP is ignored (its disposition is SIG_IGN): archgap goes on working. The
    # kernel drops an ignored signal when it is sent; one that a handler catches stays pending
    # until handled, and of two pending the lower number (SIGHUP) is handled first. So the
    # SIGTERM sent after it is what ends archgap only where SIGHUP stayed ignored.
    pid_file = tmp_path / "helper"
    proc = subprocess.Popen([sys.executable, "-c", HELPER, str(pid_file), "ignore-hup"])
    helper = int(started(pid_file))
    proc.send_signal(signal.SIGHUP)
    assert alive(helper)  # SIGHUP did not end the helper (nor, then, archgap: it reaps it)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=GUARD) == -signal.SIGTERM
    assert gone(helper), f"the helper {helper} outlived its parent"
