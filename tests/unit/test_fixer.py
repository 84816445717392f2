"""The fix program (probe/fixer.py) on real files: FlashInfer 0.6.8's released
compilation_context.py (the kb patch is for that file, by hash), a systemd-style env file and a
new drop-in. Safety is shown, not assumed: every file's bytes are compared with what it was or
what it was meant to become, after SIGKILLs at every durable step of apply and undo."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import random
import shutil
import signal
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from archgap.kb import load_json
from archgap.probe.actions import fixer
from tests.toolkit_stubs import site_packages

RELEASED = "flashinfer/compilation_context.py"


def released_file() -> Path:
    (site,) = site_packages("venv-flashinfer-python-0.6.8")  # skips without scripts/testdata
    return Path(site) / RELEASED


def sha(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


def patch_edit(path: Path) -> dict[str, Any]:
    (entry,) = load_json("patches.json")["patches"]
    return {
        "kind": "patch",
        "path": str(path),
        **{k: entry[k] for k in ("sha256", "sha256_after", "old", "new")},
    }


@pytest.fixture
def target(tmp_path: Path) -> dict[str, Any]:
    return make_target(tmp_path)


def make_target(tmp_path: Path) -> dict[str, Any]:
    """Three files: the released source (mode 0640), an env file, a drop-in that does not exist."""
    pkg = tmp_path / "site" / "flashinfer"
    pkg.mkdir(parents=True)
    source = pkg / "compilation_context.py"
    shutil.copyfile(released_file(), source)
    source.chmod(0o640)
    env = tmp_path / "etc" / "sglang.env"
    env.parent.mkdir()
    env.write_bytes(
        b"# sglang service\nexport CUDA_HOME=/usr/local/cuda-12.8\r\nPATH=/usr/bin:/bin"
    )
    dropin = tmp_path / "etc" / "sglang.service.d" / "archgap.conf"
    dropin.parent.mkdir()
    edits = [
        {"kind": "env-file", "path": str(env), "set": [["FLASHINFER_CUDA_ARCH_LIST", "12.0a"]]},
        {"kind": "file", "path": str(dropin), "content": "[Service]\nEnvironment=A=1\n"},
        patch_edit(source),
    ]
    files = [env, dropin, source]
    return {"state": str(tmp_path / "state"), "edits": edits, "files": files}


def call(op: str, t: dict[str, Any], **extra: Any) -> dict[str, Any]:
    result: dict[str, Any] = fixer.run(
        {"op": op, "edits": t["edits"], "state_dir": t["state"], **extra}
    )["fixer"]
    return result


def test_plan_writes_nothing_and_shows_each_diff(target: dict[str, Any]) -> None:
    before = [sha(f) for f in target["files"]]
    planned = call("plan", target)["planned"]
    assert [sha(f) for f in target["files"]] == before
    assert not os.path.exists(target["state"])
    env, dropin, patch = planned
    assert "+FLASHINFER_CUDA_ARCH_LIST=12.0a" in env["diff"]
    assert dropin["exists"] is False and dropin["diff"].startswith("--- /dev/null")
    assert '-                raise RuntimeError("SM 12.x requires CUDA >= 12.9")' in patch["diff"]
    assert patch["sha256_before"] == before[2]


def test_env_file_keeps_lines_and_replaces_a_value_in_place() -> None:
    text = "# c\nexport CUDA_HOME=/old\r\nPATH=/usr/bin\nX=1"
    new = fixer.edit_env_text(text, [("CUDA_HOME", "/usr/local/cuda-13.0"), ("Y", "a b")])
    assert new == '# c\nexport CUDA_HOME=/usr/local/cuda-13.0\r\nPATH=/usr/bin\nX=1\nY="a b"\n'


def test_apply_then_undo_is_byte_for_byte_with_mode(target: dict[str, Any]) -> None:
    originals = [f.read_bytes() if f.exists() else None for f in target["files"]]
    applied = call("apply", target)
    assert applied["error"] is None and len(applied["applied"]) == 3
    env, dropin, source = target["files"]
    assert env.read_text().endswith("PATH=/usr/bin:/bin\nFLASHINFER_CUDA_ARCH_LIST=12.0a\n")
    assert sha(source) == target["edits"][2]["sha256_after"]
    assert stat.S_IMODE(source.stat().st_mode) == 0o640
    assert call("apply", target)["applied"] == []  # already as intended: nothing journaled twice
    undone = call("undo", target)
    assert undone["error"] is None and [r["path"] for r in undone["restored"]] == [
        str(source),
        str(dropin),
        str(env),
    ]  # newest first
    assert [f.read_bytes() if f.exists() else None for f in target["files"]] == originals
    assert stat.S_IMODE(source.stat().st_mode) == 0o640
    # the journal's key stays (mode 0600): the next journal is signed with it
    assert sorted(os.listdir(target["state"])) == ["journal.json", "key", "lock"]
    assert stat.S_IMODE(os.stat(os.path.join(target["state"], "key")).st_mode) == 0o600


def test_undo_over_a_hand_edited_file_refuses_and_keeps_the_edit(target: dict[str, Any]) -> None:
    call("apply", target)
    env = target["files"][0]
    env.write_text(env.read_text() + "HAND=edited\n")
    edited = env.read_bytes()
    others = [sha(f) for f in target["files"][1:]]
    undone = call("undo", target)
    assert undone["restored"] == [] and [r["path"] for r in undone["refused"]] == [str(env)]
    assert "+HAND=edited" in undone["refused"][0]["diff"]
    assert env.read_bytes() == edited and [sha(f) for f in target["files"][1:]] == others
    forced = call("undo", target, force=True)
    assert len(forced["restored"]) == 3 and "HAND" not in env.read_text()


def test_a_file_changed_since_the_plan_is_refused(target: dict[str, Any]) -> None:
    source = target["files"][2]
    source.write_bytes(source.read_bytes() + b"# local change\n")
    before = [sha(f) for f in target["files"]]
    result = call("apply", target)
    assert "is not the released file the patch is for" in result["error"]
    assert [sha(f) for f in target["files"]] == before  # checked before anything is written


def test_a_file_changed_after_the_plan_was_shown_is_refused(target: dict[str, Any]) -> None:
    planned = call("plan", target)["planned"]
    for edit, answer in zip(target["edits"], planned, strict=True):
        edit["planned_sha256"] = answer["sha256_before"]
    env = target["files"][0]
    env.write_bytes(env.read_bytes() + b"\nLATE=1\n")  # between the plan and the apply
    before = [sha(f) for f in target["files"]]
    assert "changed since the plan" in call("apply", target)["error"]
    assert [sha(f) for f in target["files"]] == before


def test_owner_and_mode_are_kept_by_apply_and_undo(target: dict[str, Any]) -> None:
    # Only root can give a file to another user (elsewhere the owner stays ours).
    owner = (4242, 4343) if os.geteuid() == 0 else (os.geteuid(), os.getegid())
    source = target["files"][2]
    os.chown(source, *owner)
    source.chmod(0o604)
    call("apply", target)
    assert (source.stat().st_uid, source.stat().st_gid) == owner
    assert stat.S_IMODE(source.stat().st_mode) == 0o604
    call("undo", target)
    assert (source.stat().st_uid, source.stat().st_gid) == owner
    assert stat.S_IMODE(source.stat().st_mode) == 0o604


def test_bad_input_is_refused_with_a_reason(target: dict[str, Any], tmp_path: Path) -> None:
    missing = {"kind": "env-file", "path": str(tmp_path / "nope" / "x.env"), "set": [["A", "1"]]}
    request = {"op": "apply", "edits": [missing], "state_dir": target["state"]}
    assert "does not exist" in fixer.run(request)["fixer"]["error"]
    assert not (tmp_path / "nope").exists()
    before = [sha(f) for f in target["files"]]
    Path(target["state"], "journal.json").write_text("{not json")
    assert "is corrupt" in call("apply", target)["error"]
    assert "is corrupt" in call("undo", target)["error"]
    assert [sha(f) for f in target["files"]] == before
    assert Path(target["state"], "journal.json").read_text() == "{not json"


def test_read_only_file_system_is_refused_by_access(
    target: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # As root, a read-only site-packages is a read-only mount: os.access says so.
    site = str(target["files"][2].parent)
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, m: False if str(p) == site else real(p, m))
    before = [sha(f) for f in target["files"]]
    assert "read-only" in call("apply", target)["error"]
    assert [sha(f) for f in target["files"]] == before


def test_a_second_run_is_refused_while_one_holds_the_lock(target: dict[str, Any]) -> None:
    import fcntl

    os.makedirs(target["state"])
    ready, told = os.pipe()
    pid = os.fork()
    if pid == 0:  # the other run: holds the lock until killed
        fd = os.open(os.path.join(target["state"], "lock"), os.O_RDWR | os.O_CREAT)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(told, b"x")
        signal.pause()
    try:
        assert os.read(ready, 1) == b"x"
        before = [sha(f) for f in target["files"]]
        assert "another archgap fix is running" in call("apply", target)["error"]
        assert "another archgap fix is running" in call("undo", target)["error"]
        assert [sha(f) for f in target["files"]] == before
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(ready)
        os.close(told)


def _killed_at(step: int, body: Callable[[], None]) -> bool:
    """Run ``body`` in a forked child that SIGKILLs itself at durable step ``step``; whether it
    was killed (False: it finished first)."""
    pid = os.fork()
    if pid == 0:
        os.environ[fixer.CRASH_HOOK] = str(step)
        try:
            body()
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


def _run_op(op: str, target: dict[str, Any]) -> None:
    call(op, target)


def _no_stray_temp(files: list[Path]) -> bool:
    return not any(n.endswith(".archgap-tmp") for f in files for n in os.listdir(f.parent))


def test_kill_9_at_random_moments_of_apply_and_undo(tmp_path: Path) -> None:
    """120 trials: SIGKILL at a random durable step of apply (15 steps for these three edits) or
    of undo (11). After each kill every file is exactly its old bytes or its intended bytes (never
    torn); the next run completes or rolls back, and undo then restores every original byte.
    The files live on tmpfs when there is one: SIGKILL does not drop the page cache, so what a
    killed process leaves is the same there, and 1,500 fsyncs cost nothing (10 s on this disk)."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        tmp_path = Path(tempfile.mkdtemp(dir=shm, prefix="archgap-fix-"))
    try:
        _kill_trials(make_target(tmp_path))
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)


def _kill_trials(target: dict[str, Any]) -> None:
    files: list[Path] = target["files"]
    old = [sha(f) for f in files]
    call("apply", target)
    new = [sha(f) for f in files]
    call("undo", target)
    assert [sha(f) for f in files] == old
    rng = random.Random(16)
    kills = 0
    for trial in range(120):
        undoing = trial % 2 == 1
        if undoing:
            call("apply", target)
        step = rng.randint(1, 11 if undoing else 15)
        op = "undo" if undoing else "apply"
        kills += _killed_at(step, functools.partial(_run_op, op, target))
        now = [sha(f) for f in files]
        assert all(n in (o, w) for n, o, w in zip(now, old, new, strict=True)), (trial, step, now)
        # The next run finishes the job: apply completes (or rolls back, then applies) ...
        if not undoing:
            assert call("apply", target)["error"] is None
            assert [sha(f) for f in files] == new
        result = call("undo", target)
        assert result["error"] is None, result
        assert [sha(f) for f in files] == old, (trial, step)
        assert _no_stray_temp(files)
        journal = json.loads(Path(target["state"], "journal.json").read_text())
        assert journal["changes"] == []
    assert kills == 120  # every step named falls inside the run
