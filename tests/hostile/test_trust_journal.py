"""Hostile corpus: what ``archgap fix`` believes (issue 37, items 1, 4 and 8).

The rules that decide the outcomes:

* **The fix journal is the user's own, and authenticated.** ``fix --undo`` and every run's
  recovery act only on a journal in a state directory owned by the effective user and writable by
  no one else, whose records carry an HMAC-SHA256 keyed by the 0600 ``key`` file beside it, and
  whose records each name the directory they were written under (``within``). Anything else (a
  journal written by hand, copied from another state directory, edited, its key gone or readable
  by others, a backup someone else may write) is refused with the reason, and then nothing at all
  is written: the victim keeps its bytes, mode and owner, no file is unlinked, no setuid file
  appears. A mode is only ever written as its permission bits (``& 0o777``).
* **The plan shows only what it changes, and only of an env file.** A file whose lines are not all
  ``[export ]KEY=value``, comments or blanks is refused by line number before any of it is shown;
  the diff of an env file has no context lines.
* **Redaction is for display only.** A value written to a file a service reads is never
  redacted: a path with a space is read whole and written double-quoted (``\\``, ``"``, ``$`` and
  a backquote escaped: what systemd's EnvironmentFile and a POSIX shell both read back as the
  value), and a value that still holds the redaction mark is left out or refused.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import stat
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from archgap.probe.actions import fixer
from tests.helpers import json_output, run_cli
from tests.toolkit_stubs import banner_toolkit, incident_copy

VICTIM = b"root:x:0:0:a file the forged journal aims at\n"
FORGED = b"#!/bin/sh\nexec /bin/sh -p\n"
ORIGINAL_ENV = b"# app\nCUDA_HOME=/usr/local/cuda-12.8\n"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- item 1: a forged fix journal --------------------------------------------------------------


@dataclass
class Site:
    """A victim file (0600) outside everything, an env file archgap changed for real (its
    journal in ``state``), and the state directory a forged journal is handed in (``forged``)."""

    root: Path

    def __post_init__(self) -> None:
        (self.root / "elsewhere").mkdir()
        self.victim = self.root / "elsewhere" / "victim"
        self.victim.write_bytes(VICTIM)
        self.victim.chmod(0o600)
        (self.root / "etc").mkdir()
        self.env = self.root / "etc" / "app.env"
        self.env.write_bytes(ORIGINAL_ENV)
        self.env.chmod(0o640)
        self.state = self.root / "state"
        self.forged = self.root / "forged"

    def edit(self) -> dict[str, Any]:
        return {"kind": "env-file", "path": str(self.env), "set": [["FLASHINFER_X", "1"]]}

    def apply(self, state: Path) -> None:
        result = call("apply", state, [self.edit()])
        assert result["error"] is None and len(result["applied"]) == 1, result

    def journal(self, state: Path) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads((state / "journal.json").read_text())
        return doc


def call(op: str, state: Path, edits: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    request = {"op": op, "edits": edits or [], "state_dir": str(state), "force": True}
    answer: dict[str, Any] = fixer.run(request)["fixer"]
    return answer


def unsigned(site: Site, records: list[dict[str, Any]], backups: dict[str, bytes]) -> None:
    """A journal written by hand (no key, no MAC), as archgap once wrote them."""
    site.forged.mkdir(mode=0o700)
    (site.forged / "journal.json").write_text(json.dumps({"version": 1, "changes": records}))
    for name, data in backups.items():
        (site.forged / name).write_bytes(data)


def restore_record(path: Path, **extra: Any) -> dict[str, Any]:
    record = {
        "id": "1-1-0", "path": str(path), "kind": "env-file", "before": sha(FORGED),
        "after": sha(VICTIM), "mode": 0o4755, "uid": 0, "gid": 0, "when": "2025-01-01T00:00:00Z",
        "state": "applied",
    }  # fmt: skip
    record.update(extra)
    return record


def forged_setuid(site: Site) -> None:
    """No ``within``, mode 4755, owner root: the victim would hold FORGED, setuid."""
    unsigned(site, [restore_record(site.victim)], {"1-1-0.orig": FORGED})


def forged_unlink(site: Site) -> None:
    """A record saying the victim did not exist before archgap: undo would unlink it."""
    unsigned(site, [restore_record(site.victim, before=None)], {})


def forged_undoing(site: Site) -> None:
    """An 'interrupted undo' with force: any run's recovery would complete it."""
    record = restore_record(site.victim, state="undoing", force=True)
    unsigned(site, [record], {"1-1-0.orig": FORGED})


def copied(site: Site) -> None:
    """The user's real journal (and backups) copied into another state directory of theirs,
    which has a key of its own."""
    other = site.root / "etc" / "other.env"
    other.write_bytes(ORIGINAL_ENV)
    call("apply", site.forged, [{"kind": "env-file", "path": str(other), "set": [["A", "1"]]}])
    call("undo", site.forged)  # an empty journal, a key of its own
    for entry in site.state.iterdir():
        if entry.name not in ("key", "lock"):
            shutil.copy2(entry, site.forged / entry.name)


def _real_copy(site: Site) -> dict[str, Any]:
    shutil.copytree(site.state, site.forged)
    return site.journal(site.forged)


def _write(site: Site, doc: dict[str, Any]) -> None:
    (site.forged / "journal.json").write_text(json.dumps(doc))


def edited_path(site: Site) -> None:
    """The real journal with its record pointed at the victim (the backup's hash still fits)."""
    doc = _real_copy(site)
    doc["changes"][0].update(path=str(site.victim), within=str(site.victim.parent))
    _write(site, doc)


def edited_mode(site: Site) -> None:
    doc = _real_copy(site)
    doc["changes"][0]["mode"] = 0o4755
    _write(site, doc)


def key_missing(site: Site) -> None:
    _real_copy(site)
    (site.forged / "key").unlink()


def chmod(name: str, mode: int) -> Callable[[Site], None]:
    def plant(site: Site) -> None:
        _real_copy(site)
        if name == ".":
            site.forged.chmod(mode)
        else:
            target = (
                name
                if name != "backup"
                else next(p.name for p in site.forged.iterdir() if p.suffix == ".orig")
            )
            (site.forged / target).chmod(mode)

    return plant


def _sign(site: Site, records: list[dict[str, Any]]) -> None:
    """Records signed with the state directory's own key (as if by someone holding it): what the
    containment check alone must stop."""
    key = bytes.fromhex((site.forged / "key").read_text().strip())
    body = {"version": 2, "changes": records}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    mac = hmac.new(key, canonical.encode(), "sha256").hexdigest()
    _write(site, {**body, "mac": mac})


def signed_without_within(site: Site) -> None:
    doc = _real_copy(site)
    record = doc["changes"][0]
    del record["within"]
    record["path"] = str(site.victim)
    _sign(site, doc["changes"])


def signed_outside_within(site: Site) -> None:
    doc = _real_copy(site)
    doc["changes"][0]["path"] = str(site.victim)  # within stays the env file's directory
    _sign(site, doc["changes"])


@dataclass(frozen=True)
class Forgery:
    plant: Callable[[Site], None]
    reason: str  # words of the one-line refusal
    op: str = "undo"  # the run handed the forged state directory (apply and status recover)


FORGERIES = [
    pytest.param(Forgery(forged_setuid, "has no key"), id="unsigned-restore-setuid"),
    pytest.param(Forgery(forged_unlink, "has no key"), id="unsigned-unlink"),
    pytest.param(Forgery(forged_undoing, "has no key", "apply"), id="unsigned-undoing-on-apply"),
    pytest.param(Forgery(forged_undoing, "has no key"), id="unsigned-undoing-on-undo"),
    pytest.param(Forgery(copied, "not authenticated"), id="copied-journal"),
    pytest.param(Forgery(edited_path, "not authenticated"), id="edited-path"),
    pytest.param(Forgery(edited_mode, "not authenticated"), id="edited-mode-setuid"),
    pytest.param(Forgery(key_missing, "has no key"), id="key-missing"),
    pytest.param(Forgery(chmod("key", 0o644), "readable or writable"), id="key-readable"),
    pytest.param(Forgery(chmod(".", 0o777), "writable by"), id="state-dir-world-writable"),
    pytest.param(Forgery(chmod(".", 0o770), "writable by"), id="state-dir-group-writable"),
    pytest.param(Forgery(chmod("journal.json", 0o666), "writable by"), id="journal-writable"),
    pytest.param(Forgery(chmod("backup", 0o646), "writable by"), id="backup-writable"),
    pytest.param(Forgery(signed_without_within, "carries no directory"), id="signed-no-within"),
    pytest.param(Forgery(signed_outside_within, "outside"), id="signed-outside-within"),
]


def _files(root: Path, skip: tuple[Path, ...]) -> dict[str, tuple[bytes, int, int, int]]:
    """Every regular file under ``root`` (but those under ``skip``): bytes, mode, owner."""
    found = {}
    for folder, _, names in os.walk(root):
        if any(Path(folder).is_relative_to(s) for s in skip):
            continue
        for name in names:
            path = Path(folder) / name
            info = path.lstat()
            data = path.read_bytes() if stat.S_ISREG(info.st_mode) else b""
            found[str(path)] = (data, info.st_mode, info.st_uid, info.st_gid)
    return found


def _no_setuid(root: Path) -> list[str]:
    special = stat.S_ISUID | stat.S_ISGID
    return [
        os.path.join(folder, n)
        for folder, _, names in os.walk(root)
        for n in names
        if os.lstat(os.path.join(folder, n)).st_mode & special
    ]


@pytest.mark.parametrize("forgery", FORGERIES)
def test_a_forged_journal_writes_nothing(forgery: Forgery, tmp_path: Path) -> None:
    site = Site(tmp_path)
    site.apply(site.state)  # the user's real change: the env file now has FLASHINFER_X
    forgery.plant(site)
    before = _files(tmp_path, (site.forged,))

    answer = call(forgery.op, site.forged)

    assert forgery.reason in (answer["error"] or ""), answer
    assert "\n" not in answer["error"]
    assert _files(tmp_path, (site.forged,)) == before  # bytes, mode, owner; nothing unlinked
    assert site.victim.read_bytes() == VICTIM
    assert stat.S_IMODE(site.victim.stat().st_mode) == 0o600
    assert _no_setuid(tmp_path) == []


@pytest.mark.parametrize("op", ["undo", "apply"])
def test_a_state_directory_of_another_user_is_refused(
    op: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The state directory (and journal) belong to a user other than the effective one (here:
    archgap runs as uid+1, which is what another user's files look like to it)."""
    site = Site(tmp_path)
    site.apply(site.state)
    before = _files(tmp_path, ())
    real = os.geteuid()
    monkeypatch.setattr(os, "geteuid", lambda: real + 1)
    answer = call(op, site.state)
    monkeypatch.undo()
    assert f"is owned by uid {real}, not by this user (uid {real + 1})" in answer["error"]
    assert _files(tmp_path, ()) == before


@pytest.mark.parametrize("bit", [stat.S_ISUID, stat.S_ISGID, stat.S_ISVTX], ids=oct)
def test_apply_and_undo_never_write_a_special_mode_bit(bit: int, tmp_path: Path) -> None:
    """A file that had setuid, setgid or sticky when archgap read it: its new and its restored
    file get the permission bits only (a record, even an authenticated one, grants no more)."""
    site = Site(tmp_path)
    os.chmod(site.env, 0o750 | bit)
    site.apply(site.state)
    assert stat.S_IMODE(site.env.stat().st_mode) == 0o750
    assert call("undo", site.state)["error"] is None
    assert site.env.read_bytes() == ORIGINAL_ENV
    assert stat.S_IMODE(site.env.stat().st_mode) == 0o750


# --- item 4: the plan prints what is not an env file ------------------------------------------

# (the file's text, its secret): none of these is an env file; the plan refuses each by line
# number and shows nothing of it (the old plan showed its last three lines as diff context).
NOT_ENV = [
    pytest.param(
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"
        "-----END OPENSSH PRIVATE KEY-----\n",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ",
        id="ssh-private-key",
    ),
    pytest.param(
        "[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\n"
        "aws_secret_access_key = wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY\n",
        "wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY",
        id="aws-credentials",
    ),
    pytest.param("machine db.example login svc password hunter2\n", "hunter2", id="netrc"),
    pytest.param(
        '{\n  "auths": {\n    "registry.example": {\n'
        '      "auth": "c3ZjOmh1bnRlcjI="\n    }\n  }\n}\n',
        "c3ZjOmh1bnRlcjI=",
        id="docker-config",
    ),
    pytest.param("ls\nmysql -uroot -phunter3 prod\n", "hunter3", id="shell-history"),
    pytest.param(
        "CUDA_HOME=/usr/local/cuda\ncurl -H 'Authorization: Bearer eyJhbGciOi.x.y' api\n",
        "eyJhbGciOi.x.y",
        id="bearer-after-an-env-line",
    ),
]


@pytest.mark.parametrize(("text", "secret"), NOT_ENV)
def test_a_file_that_is_not_an_env_file_is_refused_unshown(
    text: str, secret: str, tmp_path: Path
) -> None:
    path = tmp_path / "target"
    path.write_text(text)
    edits = [
        {"kind": "env-file", "path": str(path), "set": [["FLASHINFER_CUDA_ARCH_LIST", "12.0a"]]}
    ]
    (planned,) = call("plan", tmp_path / "state", edits)["planned"]
    assert "is not an env file: line" in (planned["error"] or ""), planned
    assert secret not in json.dumps(planned) and planned.get("diff") is None
    applied = call("apply", tmp_path / "state", edits)
    assert "is not an env file" in applied["error"] and secret not in json.dumps(applied)
    assert path.read_text() == text


@pytest.mark.parametrize(
    "lines",
    [
        pytest.param(["INTERNAL_HOST=db7.corp.example", "NOTE=kept private"], id="context-lines"),
        pytest.param(
            ["export DEPLOY_REF=rel-2025-07", "# owner: alice@example"], id="context-export"
        ),
    ],
)
def test_an_env_file_plan_shows_only_the_lines_it_adds(lines: list[str], tmp_path: Path) -> None:
    path = tmp_path / "app.env"
    path.write_text("\n".join(lines) + "\n")
    edits = [
        {"kind": "env-file", "path": str(path), "set": [["FLASHINFER_CUDA_ARCH_LIST", "12.0a"]]}
    ]
    (planned,) = call("plan", tmp_path / "state", edits)["planned"]
    body = planned["diff"].splitlines()[3:]  # after ---, +++ and the hunk header
    assert body == ["+FLASHINFER_CUDA_ARCH_LIST=12.0a"], planned["diff"]
    assert not any(line.split("=")[-1] in planned["diff"] for line in lines)


# --- item 8: redaction is for display only -----------------------------------------------------


@pytest.fixture(scope="module")
def spaced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The seed incident (FlashInfer 0.6.8, nvcc 12.8) with a CUDA 12.9 toolkit under a
    directory named with a space, as WSL's /mnt/c/Program Files."""
    root = incident_copy(tmp_path_factory.mktemp("spaced"))
    banner_toolkit(root / "Program Files", "12.9")
    return root


@pytest.fixture
def service(spaced: Path) -> Iterator[dict[str, Path]]:
    env = spaced / "etc" / "sglang.env"
    env.parent.mkdir(exist_ok=True)
    yield {"root": spaced, "env": env, "cuda": spaced / "Program Files" / "cuda-12.9"}
    shutil.rmtree(spaced / "state", ignore_errors=True)


def _fix(s: dict[str, Path], *extra: str) -> tuple[int, dict[str, Any]]:
    args = ["fix", "--python", str(s["root"] / "venv" / "bin" / "python"), "--gpu", "RTX PRO 6000"]
    args += ["--env-from", str(s["env"]), "--state-dir", str(s["root"] / "state"), "--json"]
    result = run_cli(*args, *extra, env={"CUDA_HOME": ""})
    return result.returncode, json_output(result, "fix")


def _shell_value(path: Path, name: str) -> str:
    """What a POSIX shell that sources ``path`` holds in ``name`` (the reference reader)."""
    script = f'set -a; . "$1"; printf %s "${name}"'
    out = subprocess.run(["sh", "-c", script, "sh", str(path)], capture_output=True, check=True)
    return out.stdout.decode()


def test_a_path_with_a_space_is_written_whole_and_quoted(service: dict[str, Path]) -> None:
    """The service's PATH holds a directory with a space and the toolkit is under 'Program
    Files': the toolkit fix writes CUDA_HOME as it is (never '<redacted>'), quoted, leaves the
    service's PATH line as it was (issue 43: an env file gets no PATH), and the new scan
    confirms the gap is gone."""
    old = service["root"] / "cuda-12.8"
    path = "/usr/bin:/bin:/mnt/c/Program Files/NVIDIA Corporation/NVSMI"
    service["env"].write_text(f'CUDA_HOME={old}\nPATH="{path}"\n')
    code, doc = _fix(service, "--write-env-file", str(service["env"]))
    (toolkit,) = [a for a in doc["actions"] if a["kind"] == "toolkit"]
    wanted = dict(toolkit["env"])  # the first toolkit >= 12.9 found (ours, or the machine's)
    assert "PATH" not in wanted and "<redacted>" not in json.dumps(doc)
    assert "PATH" not in toolkit["diff"], toolkit
    args = ("--write-env-file", str(service["env"]), "--apply", "--only", "toolkit")
    code, doc = _fix(service, *args)
    assert "<redacted>" not in service["env"].read_text()
    assert _shell_value(service["env"], "PATH") == path
    assert _shell_value(service["env"], "CUDA_HOME") == wanted["CUDA_HOME"]
    assert code == 0 and [v["status"] for v in doc["verified"]] == ["gone"], doc
    assert _fix(service, "--undo")[0] == 0


def test_a_cuda_home_with_a_space_is_read_whole(service: dict[str, Path]) -> None:
    """CUDA_HOME names the 12.9 toolkit under 'Program Files': scan finds it there (it was
    redacted, and the gap it closes reported as open)."""
    service["env"].write_text(f'CUDA_HOME="{service["cuda"]}"\nPATH=/usr/bin:/bin\n')
    result = run_cli(
        "scan", "--python", str(service["root"] / "venv" / "bin" / "python"),
        "--gpu", "RTX PRO 6000", "--env-from", str(service["env"]), "--json",
        env={"CUDA_HOME": ""},
    )  # fmt: skip
    doc = json_output(result, "scan")
    first = doc["toolchains"]["toolkits"][0]
    assert (first["found_by"], first["home"], first["version"]) == (
        "CUDA_HOME",
        str(service["cuda"]),
        "12.9",
    )
    assert [f["status"] for f in doc["jit"] if f["status"] == "fails"] == []


def test_a_service_value_still_redacted_is_left_out(service: dict[str, Path]) -> None:
    """A PATH entry that looks like a token is redacted when read: the PATH change that would
    embed it is left out with a note; nothing written or planned holds '<redacted>'."""
    token = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
    service["env"].write_text(f"CUDA_HOME={service['root'] / 'cuda-12.8'}\n")
    service["env"].write_text(
        service["env"].read_text() + f'PATH="{service["cuda"]}/bin:/usr/bin:{token}"\n'
    )
    _, doc = _fix(service, "--write-env-file", str(service["env"]))
    assert "<redacted>" not in json.dumps(doc["actions"]) and token not in json.dumps(doc)
    # the service's PATH (the token in it) is never copied into what is written (issue 43)
    assert not any(name == "PATH" for a in doc["actions"] for name, _ in a["env"]), doc


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("/usr/local/cuda-13.0/bin:<redacted>", id="redaction-mark"),
        pytest.param("/opt/a\nEVIL=1", id="newline"),
    ],
)
def test_the_fix_program_never_writes_a_redacted_or_multiline_value(
    value: str, tmp_path: Path
) -> None:
    env = tmp_path / "app.env"
    env.write_bytes(ORIGINAL_ENV)
    edits = [{"kind": "env-file", "path": str(env), "set": [["PATH", value]]}]
    answer = call("apply", tmp_path / "state", edits)
    assert "the value for PATH holds" in (answer["error"] or ""), answer
    assert env.read_bytes() == ORIGINAL_ENV


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("/mnt/c/Program Files/NVIDIA/bin", id="space"),
        pytest.param("/opt/$HOME/bin", id="dollar"),
        pytest.param("/opt/`id`/bin", id="backquote"),
        pytest.param('/opt/q"uote/bin', id="double-quote"),
        pytest.param("/opt/back\\slash/bin", id="backslash"),
    ],
)
def test_a_value_is_quoted_so_a_shell_reads_it_back_unchanged(value: str, tmp_path: Path) -> None:
    """systemd's EnvironmentFile reads ``"..."`` with the same four escapes as a POSIX shell
    (env-file.c, DOUBLE_QUOTE_VALUE_ESCAPE): the shell is the reference reader here."""
    env = tmp_path / "app.env"
    env.write_bytes(ORIGINAL_ENV)
    edits = [{"kind": "env-file", "path": str(env), "set": [["ODD_PATH", value]]}]
    assert call("apply", tmp_path / "state", edits)["error"] is None
    assert _shell_value(env, "ODD_PATH") == value
