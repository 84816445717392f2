"""The local probe in a forked child while the caller works on (``transport.local``): the facts
and every progress message come back, and anything that stops the child means the probe runs
in this process instead."""

import os
import threading
from pathlib import Path
from typing import Any

import pytest

import archgap.probe.__main__ as probe_main
from archgap.transport.bootstrap import probe_input
from archgap.transport.local import interpreter_asked_ahead, local_facts

# A file name that is not UTF-8 (os.fsdecode gives a surrogate): it must come back unchanged.
ODD_NAME = os.fsdecode(b"/site/lib\xff.so")


def fake_probe(payload: Any, progress: Any = None) -> dict[str, Any]:
    """Stands in for ``probe.__main__.run``: tells three files and answers with its pid."""
    for done, name in enumerate(("/site/a.so", ODD_NAME, "/site/c.so"), 1):
        if progress is not None:
            progress(done, 3, name)
    return {"pid": os.getpid(), "tuple": (1, 2), "payload": payload}


def test_the_probe_runs_in_a_child_while_meanwhile_runs_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(probe_main, "run", fake_probe)
    told: list[tuple[int, int, str]] = []
    meanwhile_pids: list[int] = []
    facts = local_facts(
        {"request": {}},
        lambda done, total, path: told.append((done, total, path)),
        lambda: meanwhile_pids.append(os.getpid()),
    )
    assert facts["pid"] != os.getpid()  # collected by another process
    assert meanwhile_pids == [os.getpid()]  # the caller's work ran here, once
    assert told == [(1, 3, "/site/a.so"), (2, 3, ODD_NAME), (3, 3, "/site/c.so")]
    assert facts["tuple"] == [1, 2] and facts["payload"] == {"request": {}}  # JSON's shape


def test_without_meanwhile_the_probe_runs_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe_main, "run", fake_probe)
    told: list[int] = []
    facts = local_facts({}, lambda done, _total, _path: told.append(done))
    assert facts["pid"] == os.getpid() and told == [1, 2, 3]
    assert facts["tuple"] == [1, 2]  # the same shape as from a child


def test_a_child_that_dies_means_the_probe_runs_here(monkeypatch: pytest.MonkeyPatch) -> None:
    parent = os.getpid()

    def dies_in_the_child(payload: Any, progress: Any = None) -> dict[str, Any]:
        if os.getpid() != parent:
            progress(1, 3, "/site/a.so")  # heard, then the child is gone without its facts
            os._exit(3)
        return fake_probe(payload, progress)

    monkeypatch.setattr(probe_main, "run", dies_in_the_child)
    told: list[int] = []
    ran: list[int] = []
    facts = local_facts({}, lambda done, _t, _p: told.append(done), lambda: ran.append(1))
    assert facts["pid"] == parent
    assert ran == [1]  # meanwhile ran once, not again for the second try
    assert told == [1, 1, 2, 3]  # the child's one message, then the run here from the start


def test_a_process_with_threads_does_not_fork(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe_main, "run", fake_probe)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        ran: list[int] = []
        facts = local_facts({}, None, lambda: ran.append(1))
    finally:
        stop.set()
        other.join()
    assert facts["pid"] == os.getpid() and ran == [1]


def fake_interpreter(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(interpreter, its log, its site-packages): a script that answers the paths question as
    pyenv's script does (NUL-separated executable, version, site-packages) and logs the pid of
    whoever ran it."""
    site = tmp_path / "site-packages"
    site.mkdir()
    log = tmp_path / "asked-by"
    python = tmp_path / "python"
    answer = f'printf "%s\\0%s\\0%s\\n" "$0" 3.11.7 {site}'
    python.write_text(f"#!/bin/sh\necho $PPID >> {log}\n{answer}\n")
    python.chmod(0o755)
    return python, log, site


def test_the_interpreter_asked_ahead_answers_the_forked_probe(tmp_path: Path) -> None:
    # A local scan asks its interpreter for its paths while it builds the request: the probe,
    # forked after that, finds the answer and does not run the interpreter again (its python
    # and toolchains sections both need it).
    python, log, site = fake_interpreter(tmp_path)
    with interpreter_asked_ahead(str(python), "/", 30.0):
        pass  # the caller builds its request here
    assert threading.active_count() == 1  # the thread is over: the probe may fork
    request = {"python": {"python": str(python)}, "toolchains": {"python": str(python)}}
    facts = local_facts(probe_input(request, "/", None, 30.0), None, lambda: None)
    assert facts["sections"]["python"]["site_packages"] == [str(site)]
    assert log.read_text().split() == [str(os.getpid())]  # asked once, from this process


def test_a_scan_asks_its_interpreter_once_while_it_builds_its_request(tmp_path: Path) -> None:
    from archgap.api import scan

    python, log, site = fake_interpreter(tmp_path)
    report = scan(str(python))
    assert report.environment.site_packages == (str(site),)
    assert log.read_text().split() == [str(os.getpid())]
