"""Hostile corpus: what ``archgap fix`` writes. Each class is a state someone who can write the
environment's directory, the env file's directory or the state directory could plant, built here
by a generator (nothing large is committed), with its expected outcome: applied or refused with a
named reason. For every class a victim file outside the environment keeps its bytes and mode,
nothing is written unless the edit can be made safely, and ``--undo`` still restores what an
earlier run changed.

The rules that decide the outcomes: ``rename`` replaces a directory entry and never follows a
link, but ``open(O_CREAT|O_TRUNC)`` and ``chmod`` do; so a temp file must be a new, uniquely named
file (``O_EXCL|O_NOFOLLOW``), a target that is a link is refused (replacing it would not change the
file it names), and a patched file must stay inside its site-packages.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import stat
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from archgap.kb import load_json
from archgap.probe.actions import fixer
from tests.helpers import json_output, run_cli
from tests.toolkit_stubs import incident_copy, site_packages

VENV = "venv-flashinfer-python-0.6.8"
RELEASED = "flashinfer/compilation_context.py"
VICTIM = b"root:x:0:0:the file a planted link points at\n"
LEGACY_TMP = ".%s.archgap-tmp"  # the fixed temp name archgap once used: the obvious plant
TEMP = re.compile(r"\.[0-9a-f]{12}\.archgap-tmp$")


def released_file() -> Path:
    found = [Path(p) / RELEASED for p in site_packages(VENV)]
    if not found or not found[0].exists():
        pytest.skip("scripts/testdata has not installed flashinfer-python 0.6.8")
    return found[0]


@dataclass
class World:
    """A site-packages with FlashInfer's released file, an env file, a systemd drop-in directory,
    the fix state directory, and a victim file elsewhere (mode 0600)."""

    root: Path
    site: Path = field(init=False)
    source: Path = field(init=False)
    env: Path = field(init=False)
    dropin: Path = field(init=False)
    unit: Path = field(init=False)  # a drop-in the hostile run writes (etc/ is the unit directory)
    state: Path = field(init=False)
    victim: Path = field(init=False)
    outside: Path = field(init=False)

    def __post_init__(self) -> None:
        self.site = self.root / "venv" / "site-packages"
        self.source = self.site / RELEASED
        self.source.parent.mkdir(parents=True)
        shutil.copyfile(released_file(), self.source)
        self.source.chmod(0o640)
        self.env = self.root / "etc" / "sglang.env"
        self.env.parent.mkdir()
        self.env.write_bytes(b"# sglang\nCUDA_HOME=/usr/local/cuda-12.8\n")
        self.dropin = self.root / "etc" / "sglang.service.d" / "50-archgap.conf"
        self.dropin.parent.mkdir()
        self.unit = self.root / "etc" / "vllm.service.d" / "50-archgap.conf"
        self.unit.parent.mkdir()
        self.state = self.root / "state"
        self.outside = self.root / "elsewhere"
        self.outside.mkdir()
        self.victim = self.outside / "victim"
        self.victim.write_bytes(VICTIM)
        self.victim.chmod(0o600)

    def edits(self) -> list[dict[str, Any]]:
        (entry,) = load_json("patches.json")["patches"]
        patch = {k: entry[k] for k in ("sha256", "sha256_after", "old", "new")}
        return [
            {
                "kind": "env-file",
                "path": str(self.env),
                "set": [["FLASHINFER_CUDA_ARCH_LIST", "12.0a"]],
            },
            {"kind": "patch", "path": str(self.source), "within": str(self.site), **patch},
            {
                "kind": "file",
                "path": str(self.unit),
                "content": "[Service]\n",
                "within": str(self.env.parent),
            },
        ]

    def dropin_edit(self) -> dict[str, Any]:
        return {"kind": "file", "path": str(self.dropin), "content": "[Service]\nEnvironment=A=1\n"}

    def call(self, op: str, edits: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        request = {"op": op, "edits": edits or [], "state_dir": str(self.state)}
        result: dict[str, Any] = fixer.run(request)["fixer"]
        return result


def entry(path: Path) -> tuple[str, bytes | None]:
    """What a name is, without following it: ('file', bytes), ('link', target), or the kind."""
    if path.is_symlink():
        return "link", os.readlink(path).encode()
    if not path.exists():
        return "none", None
    if path.is_file() and path.stat().st_size > 1 << 20:  # the sparse huge one: never read
        found = path.stat()
        return "file", f"{found.st_ino} {found.st_size} {found.st_mtime_ns}".encode()
    if path.is_file():
        return "file", path.read_bytes()
    return stat.filemode(path.lstat().st_mode)[0], None


def victim_state(w: World) -> tuple[bytes, int]:
    return w.victim.read_bytes(), stat.S_IMODE(w.victim.lstat().st_mode)


# --- the classes -------------------------------------------------------------------------------


def link(path: Path, to: Path) -> None:
    path.unlink(missing_ok=True)
    path.symlink_to(to)


def legacy_tmp(path: Path) -> Path:
    return path.parent / (LEGACY_TMP % path.name)


def fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def unix_socket(path: Path) -> None:
    path.unlink()
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    sock.close()


def directory(path: Path) -> None:
    path.unlink()
    path.mkdir()


def patched_dir_out(w: World) -> None:
    """site-packages/flashinfer is a link to a copy of the package outside the environment."""
    copy = w.outside / "flashinfer"
    shutil.copytree(w.source.parent, copy)
    shutil.rmtree(w.source.parent)
    w.source.parent.symlink_to(copy)


def patched_dir_inside(w: World) -> None:
    """site-packages/flashinfer is a link to another directory of the same site-packages."""
    real = w.site / "flashinfer-real"
    w.source.parent.rename(real)
    w.source.parent.symlink_to(real.name)


def site_packages_is_link(w: World) -> None:
    """The environment's own layout (/root/venv -> /data/venv): links above site-packages."""
    real = w.root / "data-venv"
    w.site.parent.rename(real)
    w.site.parent.symlink_to(real)


def hardlinked_target(w: World) -> None:
    """The patched file is a hard link of the victim, which holds the released bytes: a rename
    gives the environment its own new file, the victim's name keeps the released bytes."""
    w.victim.write_bytes(w.source.read_bytes())
    w.victim.chmod(0o600)
    w.source.unlink()
    os.link(w.victim, w.source)


def unit_dir_out(w: World) -> None:
    """The drop-in directory vllm.service.d is a link to a directory outside the unit directory."""
    (w.outside / "vllm.service.d").mkdir()
    w.unit.parent.rmdir()
    w.unit.parent.symlink_to(w.outside / "vllm.service.d")


def unit_dir_inside(w: World) -> None:
    real = w.env.parent / "vllm-real.d"
    w.unit.parent.rename(real)
    w.unit.parent.symlink_to(real.name)


def env_hardlink(w: World) -> None:
    """The env file is a hard link of the victim: the edit gives the env file a new inode."""
    w.victim.write_bytes(w.env.read_bytes())
    w.victim.chmod(0o600)
    w.env.unlink()
    os.link(w.victim, w.env)


def backup_name_links(w: World) -> None:
    """Links named like backups a killed run left (id.orig, id.new): swept, never followed."""
    for suffix in ("orig", "new"):
        (w.state / f"1-{os.getpid()}-7.{suffix}").symlink_to(w.victim)


def journal_link(w: World) -> None:
    (w.state / "journal.json").rename(w.outside / "journal.json")
    w.victim.write_bytes((w.outside / "journal.json").read_bytes())
    link(w.state / "journal.json", w.victim)


def huge_env(w: World) -> None:
    with w.env.open("r+b") as handle:  # sparse: costs no disk, and is refused unread
        handle.truncate(64 << 30)


def env_changed(w: World) -> None:
    w.env.write_bytes(w.env.read_bytes() + b"LATE=1\n")


def env_swapped_for_link_to_same_bytes(w: World) -> None:
    """The env file replaced by a link to a file with the very bytes that were planned."""
    w.victim.write_bytes(w.env.read_bytes())
    w.victim.chmod(0o600)
    link(w.env, w.victim)


def odd_bytes_env(w: World) -> None:
    w.env.write_bytes(b"# \xff\xfe not UTF-8\r\nA=\x00\x1b[2J\nCUDA_HOME=/usr/local/cuda-12.8")


@dataclass(frozen=True)
class Case:
    plant: Callable[[World], None]  # made after the plan, before --apply
    refused: str | None  # words of the reason, or None: applied (safely)
    undo_refused: str | None = None  # a plant in the state directory refuses undo as well
    early: bool = False  # planted before the plan


CASES = [
    pytest.param(Case(lambda w: link(legacy_tmp(w.env), w.victim), None), id="tmp-link-env"),
    pytest.param(Case(lambda w: link(legacy_tmp(w.source), w.victim), None), id="tmp-link-patch"),
    pytest.param(
        Case(lambda w: link(legacy_tmp(w.state / "journal.json"), w.victim), None),
        id="tmp-link-journal",
    ),
    pytest.param(
        Case(lambda w: link(legacy_tmp(w.env), w.outside / "created-by-root"), None),
        id="tmp-dangling-link",
    ),
    pytest.param(Case(lambda w: legacy_tmp(w.env).mkdir(), None), id="tmp-is-directory"),
    pytest.param(Case(lambda w: os.mkfifo(legacy_tmp(w.source)), None), id="tmp-is-fifo"),
    pytest.param(Case(backup_name_links, None), id="backup-name-links"),
    pytest.param(Case(env_hardlink, None, early=True), id="env-hardlink-of-victim"),
    pytest.param(Case(lambda w: link(w.env, w.victim), "is a symbolic link"), id="env-is-link"),
    pytest.param(
        Case(lambda w: link(w.env, Path("/dev/null")), "is a symbolic link"), id="env-link-devnull"
    ),
    pytest.param(
        Case(lambda w: link(w.env, w.outside / "nothing"), "is a symbolic link"),
        id="env-dangling-link",
    ),
    pytest.param(
        Case(env_swapped_for_link_to_same_bytes, "is a symbolic link"), id="env-link-same-bytes"
    ),
    pytest.param(Case(lambda w: fifo(w.env), "is not a regular file"), id="env-is-fifo"),
    pytest.param(Case(lambda w: unix_socket(w.env), "is not a regular file"), id="env-is-socket"),
    pytest.param(Case(lambda w: directory(w.env), "is not a regular file"), id="env-is-directory"),
    pytest.param(Case(huge_env, "larger than 64 MiB"), id="env-huge"),
    pytest.param(Case(env_changed, "changed since the plan"), id="env-changed-since-plan"),
    pytest.param(Case(odd_bytes_env, None, early=True), id="env-odd-bytes"),
    pytest.param(
        Case(lambda w: link(w.source, w.outside / "cc.py"), "is a symbolic link"),
        id="patch-target-link",
    ),
    pytest.param(Case(patched_dir_out, "symbolic link out of"), id="patch-dir-link-out"),
    pytest.param(Case(site_packages_is_link, None), id="site-packages-behind-link"),
    pytest.param(Case(patched_dir_inside, None), id="patch-dir-link-inside"),
    pytest.param(Case(unit_dir_out, "symbolic link out of"), id="dropin-dir-link-out"),
    pytest.param(Case(unit_dir_inside, None), id="dropin-dir-link-inside"),
    pytest.param(Case(hardlinked_target, None), id="patch-hardlink-of-victim"),
    pytest.param(
        Case(journal_link, "is a symbolic link", "is a symbolic link"), id="journal-is-link"
    ),
    pytest.param(
        Case(
            lambda w: link(w.state / "lock", w.victim),
            "archgap's state is never reached through one",
            "archgap's state is never reached through one",
        ),
        id="lock-is-link",
    ),
]


@pytest.mark.parametrize("case", CASES)
def test_a_planted_state_is_refused_or_harmless(case: Case, tmp_path: Path) -> None:
    w = World(tmp_path)
    earlier = w.call("apply", [w.dropin_edit()])  # what --undo must still restore
    assert earlier["error"] is None and len(earlier["applied"]) == 1
    if case.early:
        case.plant(w)
    edits = w.edits()
    for edit, answer in zip(edits, w.call("plan", edits)["planned"], strict=True):
        edit["planned_sha256"] = answer["sha256_before"]
    if not case.early:
        case.plant(w)
    watched = [w.env, w.source, w.unit, w.env.parent, w.source.parent, w.unit.parent]
    planted = {p: entry(p) for p in watched}
    victim = victim_state(w)
    mode = stat.S_IMODE(w.source.stat().st_mode) if w.source.exists() else None

    result = w.call("apply", edits)

    assert victim_state(w) == victim  # bytes and mode
    assert not (w.outside / "created-by-root").exists()
    if case.refused is None:
        assert result["error"] is None, result
        assert w.env.read_bytes().endswith(b"FLASHINFER_CUDA_ARCH_LIST=12.0a\n")
        assert hashlib.sha256(w.source.read_bytes()).hexdigest() == edits[1]["sha256_after"]
        assert stat.S_IMODE(w.source.stat().st_mode) == mode  # the original's
        assert w.unit.read_text() == "[Service]\n"
    else:
        assert case.refused in (result["error"] or ""), result
        assert {p: entry(p) for p in watched} == planted  # nothing written
    undone = w.call("undo")
    if case.undo_refused:
        assert case.undo_refused in undone["error"]
        for name in ("lock", "journal.json"):  # the plant taken away, undo works again
            if (w.state / name).is_symlink():
                (w.state / name).unlink()
        if (w.outside / "journal.json").exists():
            shutil.copyfile(w.outside / "journal.json", w.state / "journal.json")
        undone = w.call("undo")
    assert undone["error"] is None, undone
    assert not w.dropin.exists()  # the earlier change, undone
    assert victim_state(w) == victim
    if case.refused is None:
        assert {p: entry(p) for p in watched} == planted
    for place in (w.env.parent, w.source.parent, w.state):
        assert not [n for n in os.listdir(place) if TEMP.search(n)]  # no temp file left


# --- the real command ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def venv_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return incident_copy(tmp_path_factory.mktemp("hostile-fix"))


@pytest.fixture
def installed(venv_copy: Path) -> Iterator[dict[str, Path]]:
    env = venv_copy / "etc" / "sglang.env"
    env.parent.mkdir(exist_ok=True)
    env.write_text(f"CUDA_HOME={venv_copy / 'cuda-12.8'}\n")
    context = next((venv_copy / "venv").glob(f"lib/python*/site-packages/{RELEASED}"))
    victim = venv_copy / "victim"
    victim.write_bytes(VICTIM)
    victim.chmod(0o600)
    yield {"root": venv_copy, "env": env, "context": context, "victim": victim}
    for name in (context, env):
        legacy_tmp(name).unlink(missing_ok=True)
    shutil.rmtree(venv_copy / "state", ignore_errors=True)


def archgap_fix(s: dict[str, Path], *extra: str) -> tuple[int, dict[str, Any]]:
    args = ["fix", "--python", str(s["root"] / "venv" / "bin" / "python"), "--gpu", "RTX PRO 6000"]
    args += ["--env-from", str(s["env"]), "--state-dir", str(s["root"] / "state"), "--json"]
    result = run_cli(*args, *extra, env={"CUDA_HOME": ""})
    return result.returncode, json_output(result, "fix")


@pytest.mark.parametrize(
    ("planted", "options"),
    [
        pytest.param("context", ("--apply", "--only", "patch"), id="cli-tmp-link-patch"),
        pytest.param("env", ("--apply", "--only", "env"), id="cli-tmp-link-env-file"),
    ],
)
def test_archgap_fix_apply_never_writes_through_a_planted_temp_link(
    installed: dict[str, Path], planted: str, options: tuple[str, ...]
) -> None:
    link(legacy_tmp(installed[planted]), installed["victim"])
    before = installed[planted].read_bytes()
    code, doc = archgap_fix(installed, "--env-file", str(installed["env"]), *options)
    assert doc["applied"]["error"] is None, doc
    assert installed["victim"].read_bytes() == VICTIM
    assert stat.S_IMODE(installed["victim"].stat().st_mode) == 0o600
    assert not installed[planted].is_symlink() and installed[planted].read_bytes() != before
    code, doc = archgap_fix(installed, "--undo", "--write-env-file", str(installed["env"]))
    assert code == 0 and doc["undo"]["error"] is None
    assert installed[planted].read_bytes() == before
    assert installed["victim"].read_bytes() == VICTIM


# --- secrets in what fix shows -----------------------------------------------------------------

# (a line of the env file, the secret in it, how the diff must show the line): a value is hidden
# when its name says it is a credential, when it looks like a key (a long run mixing letters and
# digits), when an allowed variable holds something that is not what it holds, and a URL's
# password always.
SECRETS = [
    pytest.param("HF_TOKEN=hf_kPqWzYxBvLmN", "hf_kPqWzYxBvLmN", "HF_TOKEN=<redacted>", id="token"),
    pytest.param("DB_PASSWORD=hunter2", "hunter2", "DB_PASSWORD=<redacted>", id="password"),
    pytest.param("MYSQL_PWD=hunter3", "hunter3", "MYSQL_PWD=<redacted>", id="pwd"),
    pytest.param(
        'export AWS_SECRET_ACCESS_KEY="wJalrXUtnFEMI/K7MDENG"',
        "wJalrXUtnFEMI",
        "export AWS_SECRET_ACCESS_KEY=<redacted>",
        id="export-quoted-key",
    ),
    pytest.param(
        "GOOGLE_APPLICATION_CREDENTIALS=/run/sa.json",
        "/run/sa.json",
        "GOOGLE_APPLICATION_CREDENTIALS=<redacted>",
        id="credentials",
    ),
    pytest.param(
        "PROXY_AUTH=Basic YWxpY2U6czNjcmV0", "YWxpY2U6czNjcmV0", "PROXY_AUTH=<redacted>", id="auth"
    ),
    pytest.param(
        "PIP_EXTRA=https://alice:s3cr3t@pypi.example/simple",
        "s3cr3t",
        "PIP_EXTRA=https://alice:****@pypi.example/simple",
        id="url-userinfo",
    ),
    pytest.param(
        "DATABASE=postgres://svc:p%40ss@db:5432/x  # note",
        "p%40ss",
        "DATABASE=postgres://svc:****@db:5432/x  # note",
        id="url-userinfo-encoded",
    ),
    pytest.param(  # a lone user name is a token (pip shows it as ****)
        "PIP_FIND=https://t0k3n@pypi.example/simple",
        "t0k3n",
        "PIP_FIND=https://****@pypi.example/simple",
        id="url-token",
    ),
    pytest.param(  # RFC 3986 ends the authority at '/': all up to the last '@' is hidden
        "PIP_MIRROR=https://alice:ab/cd@pypi.example/simple",
        "ab/cd",
        "PIP_MIRROR=https://alice:****@pypi.example/simple",
        id="url-password-unencoded-slash",
    ),
    pytest.param(
        "WANDB_MODE_X=0a1b2c3d4e5f60718293a4b5c6d7e8f9",
        "0a1b2c3d4e5f60718293a4b5c6d7e8f9",
        "WANDB_MODE_X=<redacted>",
        id="key-like-value",
    ),
    pytest.param(
        "CUDA_HOME=ghp_16C7e42F292c6912E7710c838347Ae178B4a",
        "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
        "CUDA_HOME=<redacted>",
        id="allowed-name-odd-value",
    ),
]


@pytest.mark.parametrize(("line", "secret", "shown"), SECRETS)
def test_the_plan_and_undo_diffs_never_show_a_secret(
    line: str, secret: str, shown: str, tmp_path: Path
) -> None:
    w = World(tmp_path)
    w.env.write_text(f"{line}\nCUDA_HOME=/usr/local/cuda-12.8\n")
    planned = w.call("plan", w.edits())["planned"][0]
    assert secret not in planned["diff"]
    # an env file's plan shows only the lines it adds: no line around them (issue 37 item 4)
    assert [d[:1] for d in planned["diff"].splitlines()[3:]] == ["+"], planned["diff"]
    assert w.call("apply", w.edits()[:1])["error"] is None
    with w.env.open("a") as handle:  # a hand edit after archgap's: undo shows it and refuses
        handle.write(line.replace("=", "_NEW=", 1) + "\n")
    refused = w.call("undo")["refused"]
    assert secret not in refused[0]["diff"]
    assert "+" + shown.replace("=", "_NEW=", 1) in refused[0]["diff"]


def test_archgap_fix_text_and_json_show_no_secret_of_the_env_file(
    installed: dict[str, Path],
) -> None:
    lines = [str(p.values[0]) for p in SECRETS if "CUDA_HOME" not in str(p.values[0])]
    installed["env"].write_text(installed["env"].read_text() + "\n".join(lines) + "\n")
    base = ["fix", "--python", str(installed["root"] / "venv" / "bin" / "python")]
    base += ["--gpu", "RTX PRO 6000", "--env-from", str(installed["env"])]
    base += ["--env-file", str(installed["env"]), "--state-dir", str(installed["root"] / "state")]
    for extra in ((), ("--json",), ("-vv",)):
        result = run_cli(*base, *extra, env={"CUDA_HOME": ""})
        assert "+FLASHINFER_CUDA_ARCH_LIST=12.0a" in result.stdout, result.stderr
        for p in SECRETS:
            assert str(p.values[1]) not in result.stdout + result.stderr, (extra, p.id)


def test_archgap_fix_text_shows_an_env_file_line_escaped(installed: dict[str, Path]) -> None:
    """A line of the env file with ESC sequences and a bidi override: the plan shows only the
    lines it adds, so not this one (issue 37 item 4); a hand edit that adds it after --apply is
    shown by the refused --undo as visible escapes. Neither sends it to the terminal."""
    note = "NOTE=\x1b]0;t\x07\x1b[2J\u202eab\n"
    installed["env"].write_text(installed["env"].read_text() + note)
    base = ["fix", "--python", str(installed["root"] / "venv" / "bin" / "python")]
    base += ["--gpu", "RTX PRO 6000", "--env-from", str(installed["env"])]
    base += ["--state-dir", str(installed["root"] / "state")]
    result = run_cli(*base, "--env-file", str(installed["env"]), env={"CUDA_HOME": ""})
    assert "+FLASHINFER_CUDA_ARCH_LIST=12.0a" in result.stdout, result.stdout
    assert "NOTE=" not in result.stdout
    assert not {"\x1b", "\x07", "\u202e"} & set(result.stdout + result.stderr)
    applied = run_cli(*base, "--env-file", str(installed["env"]), "--apply", env={"CUDA_HOME": ""})
    assert "changed" in applied.stdout, applied.stdout + applied.stderr
    installed["env"].write_text(installed["env"].read_text() + note.replace("NOTE", "NOTE2"))
    undo = run_cli("fix", "--undo", "--state-dir", str(installed["root"] / "state"))
    assert undo.returncode == 3, undo.stdout + undo.stderr
    assert "+NOTE2=\\x1b]0;t\\x07\\x1b[2J\\u202eab" in undo.stdout, undo.stdout
    assert not {"\x1b", "\x07", "\u202e"} & set(undo.stdout + undo.stderr)


def test_an_unreadable_env_file_is_refused_with_a_reason() -> None:
    """As a user who may not read the env file (root runs the fixer as nobody for this: root
    reads everything): plan and apply say so by the file's full name, nothing is written."""
    base = Path(tempfile.mkdtemp(prefix="archgap-hostile-"))
    try:
        base.chmod(0o777)  # writable: the refusal must come from the file, not its directory
        env = base / "sglang.env"
        env.write_bytes(b"A=1\n")
        env.chmod(0)
        edits = [{"kind": "env-file", "path": str(env), "set": [["B", "2"]]}]
        ready, told = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            try:
                if os.geteuid() == 0:
                    os.setgid(65534)
                    os.setuid(65534)
                state = str(base / "state")
                answers = [fixer.run({"op": op, "edits": edits, "state_dir": state})["fixer"]
                           for op in ("plan", "apply")]  # fmt: skip
                os.write(told, json.dumps(answers).encode())
            finally:
                os._exit(0)
        os.close(told)
        with os.fdopen(ready, "rb") as handle:
            plan, applied = json.loads(handle.read())
        os.waitpid(pid, 0)
        reason = f"{env} is not readable by this user"
        assert reason in plan["planned"][0]["error"] and reason in applied["error"]
        assert env.read_bytes() == b"A=1\n" and stat.S_IMODE(env.stat().st_mode) == 0
        assert sorted(p.name for p in base.iterdir() if p.name != "state") == ["sglang.env"]
    finally:
        shutil.rmtree(base)
