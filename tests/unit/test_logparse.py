"""The log reader: prefixes, ANSI, interleaved workers, tracebacks, warnings, evidence, bounds."""

from __future__ import annotations

import time

from archgap.analysis.explain.logparse import MAX_LINE, parse_log, strip_line


def test_strip_prefixes_and_colours() -> None:
    assert strip_line("\x1b[33m[2026-11-27 09:14:09 TP3] hello\x1b[0m") == ("TP3", "", "hello")
    worker, level, text = strip_line(
        '(EngineCore_0 pid=9492) ERROR 09-06 23:28:45 [core.py:714]   File "x.py", line 3, in f'
    )
    assert (worker, level, text) == (
        "EngineCore_0 pid=9492",
        "ERROR",
        '  File "x.py", line 3, in f',
    )
    assert strip_line("E0303 11:40:42.533000 713 torch/x.py:533] boom")[::2] == ("pid 713", "boom")


INTERLEAVED = """\
[2026-11-27 09:14:33 TP3] Scheduler hit an exception: Traceback (most recent call last):
[2026-11-27 09:14:33 TP5] Scheduler hit an exception: Traceback (most recent call last):
[2026-11-27 09:14:33 TP3]   File "/a/site-packages/pkg/mod.py", line 10, in outer
[2026-11-27 09:14:33 TP5]   File "/a/site-packages/pkg/mod.py", line 10, in outer
[2026-11-27 09:14:33 TP3]     inner()
[2026-11-27 09:14:33 TP5]     inner()
[2026-11-27 09:14:33 TP3]   File "/a/site-packages/pkg/mod.py", line 20, in inner
[2026-11-27 09:14:33 TP5]   File "/a/site-packages/pkg/mod.py", line 20, in inner
[2026-11-27 09:14:33 TP3]     raise ValueError("bad")
[2026-11-27 09:14:33 TP5]     raise ValueError("bad")
[2026-11-27 09:14:33 TP3] ValueError: bad
[2026-11-27 09:14:33 TP5] ValueError: bad
[2026-11-27 09:14:34] GPU 0: NVIDIA RTX PRO 6000 Blackwell Server Edition
"""


def test_interleaved_workers_give_one_traceback_with_both_workers() -> None:
    log = parse_log(INTERLEAVED)
    assert len(log.tracebacks) == 1
    tb = log.tracebacks[0]
    assert tb.workers == ("TP3", "TP5")
    assert [(f.line, f.function, f.code) for f in tb.frames] == [
        (10, "outer", "inner()"),
        (20, "inner", 'raise ValueError("bad")'),
    ]
    assert (tb.exception_type, tb.message) == ("ValueError", "bad")
    assert [e.value for e in log.evidence_of("gpu")] == [
        "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    ]


def test_multiline_message_after_empty_first_line() -> None:
    text = (
        'Traceback (most recent call last):\n  File "/x/site-packages/t/c.py", line 5, in f\n'
        "    g()\nRuntimeError:\nThe detected CUDA version (12.4) mismatches the version that was "
        "used to compile\nPyTorch (11.8). Please make sure to use the same CUDA versions.\n\nnext\n"
    )
    tb = parse_log(text).tracebacks[0]
    # its second line continues the first (as one line, or joined as a wrapped one: logwrap)
    assert " ".join(tb.message.splitlines()) == (
        "The detected CUDA version (12.4) mismatches the version that was used to compile "
        "PyTorch (11.8). Please make sure to use the same CUDA versions."
    )


def test_warnings_counted_per_worker() -> None:
    text = "".join(
        f"[2026-11-27 09:14:09 TP{i}] Failed to get device capability: "
        "SM 12.x requires CUDA >= 12.9.\n"
        for i in range(8)
    )
    (warning,) = parse_log(text).warnings
    assert warning.count == 8 and warning.workers == tuple(f"TP{i}" for i in range(8))


def test_evidence_versions_and_paths() -> None:
    log = parse_log(
        "PyTorch version              : 2.9.1+cu128\nCUDA_HOME: /usr/local/cuda\n"
        "Cuda compilation tools, release 12.8, V12.8.93\nFLASHINFER_CUDA_VERSION: 12.8\n"
    )
    found = {(e.kind, e.value) for e in log.evidence}
    assert {
        ("torch", "2.9.1+cu128"),
        ("cuda_home", "/usr/local/cuda"),
        ("nvcc", "12.8"),
        ("flashinfer_cuda_version", "12.8"),
    } <= found


def test_ten_megabytes_and_a_five_megabyte_line_in_bounded_time() -> None:
    noise = (
        "[2026-11-27 09:14:09 TP1] Decode batch, #running-req: 3, #token: 1234, "
        "gen throughput (token/s): 99.1\n"
    )
    text = (
        noise * (10_000_000 // len(noise))
        + "(" * 5_000_000
        + "\nRuntimeError: FlashInfer requires GPUs with sm75 or higher\n"
    )
    # CPU time of this process, not wall time: the bound is on the work (about 1 s here), and
    # must not fail because other processes share the machine.
    started = time.process_time()
    log = parse_log(text)
    elapsed = time.process_time() - started
    assert elapsed < 10, elapsed
    assert log.truncated_lines == 1 and MAX_LINE < 5_000_000
    assert any("sm75" in t for _, t in log.messages)


def test_pathological_lines_do_not_backtrack() -> None:
    hostile = [
        'File "' + "a" * 200_000,
        "[" + "2026-11-27 09:14:09 " * 20_000,
        "NVIDIA " + "RTX " * 100_000,
        "(" + "x=" * 100_000,
        "\x1b[" + "1;" * 100_000,
    ]
    started = time.process_time()  # CPU time: a bound on the work, whatever else runs
    parse_log("\n".join(hostile * 5))
    assert time.process_time() - started < 10


def test_unprefixed_traceback_is_its_own_not_the_last_ranks() -> None:
    # TP3 logged last; the main process then prints its own traceback without a prefix.
    text = (
        "[2026-11-27 09:14:09 TP3] Load weight end.\n"
        "Traceback (most recent call last):\n"
        '  File "/app/launch.py", line 9, in <module>\n'
        "    main()\n"
        "RuntimeError: engine died\n"
    )
    log = parse_log(text)
    assert [(tb.exception_type, tb.workers) for tb in log.tracebacks] == [("RuntimeError", ("",))]


def test_prefixed_traceback_keeps_its_unprefixed_frames_and_chain() -> None:
    # Python logging with exc_info: the first line carries the prefix, the rest does not.
    text = (
        "[2026-11-27 09:14:09 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/app/a.py", line 1, in f\n'
        "    g()\n"
        "ValueError: first\n"
        "\n"
        "During handling of the above exception, another exception occurred:\n"
        "\n"
        "Traceback (most recent call last):\n"
        '  File "/app/b.py", line 2, in h\n'
        "    f()\n"
        "RuntimeError: second\n"
    )
    tbs = parse_log(text).tracebacks
    assert [(tb.exception_type, tb.workers) for tb in tbs] == [
        ("ValueError", ("TP0",)),
        ("RuntimeError", ("TP0",)),
    ]
    assert tbs[1].chained_from == 0


def test_frames_pasted_without_the_traceback_header_are_read() -> None:
    text = (
        '  File "/x/site-packages/flashinfer/jit/core.py", line 108, in check_cuda_arch\n'
        '    raise RuntimeError("FlashInfer requires GPUs with sm75 or higher")\n'
        "RuntimeError: FlashInfer requires GPUs with sm75 or higher\n"
    )
    (tb,) = parse_log(text).tracebacks
    assert [(f.line, f.function) for f in tb.frames] == [(108, "check_cuda_arch")]
    assert tb.message == "FlashInfer requires GPUs with sm75 or higher"
