"""Hostile corpus: what an MCP tool call can make ``archgap mcp`` run and read. An assistant
reads untrusted text (the crash logs it is asked to explain), so a tool call's arguments are
data someone else may have written. Each class is such a call, sent by a client written here
that speaks JSON-RPC over the stdio of a real ``python -m archgap mcp`` subprocess.

The rules that decide the outcomes (docs/mcp.md, "What a tool call may do"):
- no argument makes a read-only tool run a program: ``via`` (a command prefix, executed here) is
  accepted only when the server was started with ``--allow-via`` naming exactly that prefix,
  and a ``python`` here must be the interpreter of a real environment (``pyvenv.cfg`` beside it
  or one directory up, or ``conda-meta``) whose final target is an executable owned by root or
  this user that no one else may write, or be given with ``--allow-python``;
- files are read only inside the roots the client declares (MCP ``roots``, asked with
  ``roots/list``) or ``--allow-root`` names, compared after resolving links;
- annotations say what a tool does (MCP: readOnlyHint, destructiveHint, idempotentHint,
  openWorldHint);
- a frame (one line) over 4 MiB is answered with a JSON-RPC error and never held whole.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from archgap.mcp.trust import interpreter_problem
from tests.hostile.conftest import Watch

ROOT = Path(__file__).resolve().parents[2]
CAP = 4 << 20  # the server's frame cap (archgap.mcp.stdio.FRAME_CAP)
ANSWER_SECONDS = 120  # a reply that never comes fails the class instead of hanging it
SECRET = "django-insecure-3x@mpl3-s3cr3t-k3y"


class Client:
    """A client of a real ``python -m archgap mcp`` over its stdin and stdout: it answers the
    server's ``roots/list`` from ``roots`` (when it declares the roots capability)."""

    def __init__(self, args: list[str], roots: list[Path] | None, cwd: Path) -> None:
        self.roots = roots
        self.process = subprocess.Popen(
            [sys.executable, "-m", "archgap", "mcp", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=cwd,
        )
        self.lock = threading.Lock()
        self.answers: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.asked_roots = 0
        threading.Thread(target=self._read, daemon=True).start()
        capabilities = {"roots": {"listChanged": True}} if roots is not None else {}
        self.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": capabilities,
                "clientInfo": {"name": "hostile", "version": "1"},
            },
            1,
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.next_id = 2

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            message = json.loads(line)
            if message.get("method") == "roots/list":
                self.asked_roots += 1
                roots = [{"uri": p.as_uri()} for p in self.roots or []]
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": {"roots": roots}})
            elif "id" in message and "method" not in message:
                self.answers.put(message)
        self.answers.put(None)

    def send(self, message: dict[str, Any]) -> None:
        self.write((json.dumps(message) + "\n").encode())

    def write(self, data: bytes) -> None:
        assert self.process.stdin is not None
        with self.lock:
            self.process.stdin.write(data)
            self.process.stdin.flush()

    def answer(self) -> dict[str, Any]:
        try:
            message = self.answers.get(timeout=ANSWER_SECONDS)
        except queue.Empty:
            raise AssertionError("the server did not answer") from None
        assert message is not None, "the server closed its stdout"
        return message

    def request(self, method: str, params: dict[str, Any], number: int | None = None) -> Any:
        number = number if number is not None else self.next_id
        self.next_id = number + 1
        self.send({"jsonrpc": "2.0", "id": number, "method": method, "params": params})
        message = self.answer()
        assert message.get("id") == number, message
        return message.get("result", message.get("error"))

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self.request("tools/call", {"name": name, "arguments": arguments})
        return result

    def tools(self) -> dict[str, Any]:
        return {t["name"]: t for t in self.request("tools/list", {})["tools"]}

    def roots_changed(self, roots: list[Path]) -> None:
        self.roots = roots
        self.send({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})

    def peak_kib(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
        raise AssertionError("no VmHWM")

    def close(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self.process.wait(timeout=ANSWER_SECONDS)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Client]]:
    started: list[Client] = []

    def start(*args: str, roots: list[Path] | None = None) -> Client:
        client = Client(list(args), roots, tmp_path)
        started.append(client)
        return client

    yield start
    for client in started:
        if client.process.poll() is None:
            client.process.kill()
        client.process.wait()


def _text(result: dict[str, Any]) -> str:
    return " ".join(c.get("text", "") for c in result.get("content") or [])


def _refused(result: dict[str, Any], *words: str) -> str:
    text = _text(result)
    assert result.get("isError") is True, text[:500]
    assert "\n" not in text and "Traceback" not in text
    for word in words:
        assert word in text, text
    return text


# --- 2. no argument runs a program ----------------------------------------------------------


@dataclass(frozen=True)
class World:
    """A root the client declares, a marker a program run would create, and interpreters."""

    root: Path
    marker: Path

    def script(self, where: Path, mode: int = 0o755) -> Path:
        """A shell script that creates the marker: what a hostile ``python`` names."""
        where.parent.mkdir(parents=True, exist_ok=True)
        where.write_text(f"#!/bin/sh\ntouch {self.marker}\n")
        where.chmod(mode)
        return where

    def venv(self, name: str) -> Path:
        """An environment's directory with its pyvenv.cfg (bin/ made, no interpreter yet)."""
        env = self.root / name
        (env / "bin").mkdir(parents=True)
        (env / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.11.0\n")
        return env


def _world(tmp_path: Path) -> World:
    root = tmp_path / "root"
    root.mkdir()
    return World(root, tmp_path / "ran")


def _plain_script(w: World) -> str:
    return str(w.script(w.root / "tools" / "python"))


def _writable_in_venv(w: World) -> str:
    return str(w.script(w.venv("env") / "bin" / "python", 0o757))  # others may write it


def _link_to_writable(w: World) -> str:
    # A venv's bin/python is a link to a system interpreter; here to a file anyone may write.
    evil = w.script(w.root / "drop" / "evil", 0o777)
    python = w.venv("env") / "bin" / "python"
    python.symlink_to(evil)
    return str(python)


def _in_writable_directory(w: World) -> str:
    env = w.venv("env")
    script = w.script(env / "bin" / "python")
    (env / "bin").chmod(0o777)  # anyone may replace it (no sticky bit)
    return str(script)


def _conda_lookalike(w: World) -> str:
    # conda-meta must be a directory in the environment's root: a file of that name is not.
    env = w.root / "conda"
    (env / "bin").mkdir(parents=True)
    (env / "conda-meta").write_text("")
    return str(w.script(env / "bin" / "python"))


PYTHONS: dict[str, Callable[[World], str]] = {
    "python-shell-script": _plain_script,
    "python-in-venv-writable-by-others": _writable_in_venv,
    "python-venv-link-to-writable-file": _link_to_writable,
    "python-in-writable-directory": _in_writable_directory,
    "python-conda-meta-not-a-directory": _conda_lookalike,
}
# Each tool that runs the target's interpreter, with what else it requires.
RUNNING: dict[str, dict[str, Any]] = {
    "scan": {},
    "probe": {},
    "explain": {"log": "RuntimeError: FlashInfer requires GPUs with sm75 or higher"},
    "trace": {"name": "TARGET_CUDA_ARCHS"},
    "gates": {},
    "fix": {},
    "kernels": {"paths": ["libx.so"]},
}


@pytest.mark.parametrize("make", list(PYTHONS.values()), ids=list(PYTHONS))
def test_a_python_that_is_no_safe_environment_interpreter_never_runs(
    make: Callable[[World], str], serve: Callable[..., Client], tmp_path: Path
) -> None:
    w = _world(tmp_path)
    python = make(w)
    client = serve(roots=[w.root])  # inside the roots: only the interpreter rule refuses it
    for tool in ("scan", "probe", "explain", "trace", "gates", "fix"):
        _refused(client.call(tool, {**RUNNING[tool], "python": python}), f"python {python}")
        assert not w.marker.exists(), f"{tool} ran {python}"


@pytest.mark.parametrize("tool", list(RUNNING))
def test_via_runs_nothing_without_allow_via(
    tool: str, serve: Callable[..., Client], tmp_path: Path
) -> None:
    w = _world(tmp_path)
    client = serve(roots=[w.root])
    via = f"sh -c 'touch {w.marker}'"
    assert "via" not in client.tools()[tool]["inputSchema"]["properties"]
    _refused(client.call(tool, {**RUNNING[tool], "via": via}), "--allow-via")
    assert not w.marker.exists()


@pytest.mark.parametrize(
    "via", ["sh -c 'touch {marker}'", "env sh -c 'touch {marker}'"], ids=["via-other", "via-longer"]
)
def test_only_an_allowed_via_prefix_runs(
    via: str, serve: Callable[..., Client], tmp_path: Path
) -> None:
    w = _world(tmp_path)
    client = serve("--allow-via", "env", roots=[w.root])
    schema = client.tools()["probe"]["inputSchema"]["properties"]["via"]
    assert schema["enum"] == ["env"]  # what may be sent is listed
    _refused(client.call("probe", {"via": via.format(marker=w.marker)}), "--allow-via")
    assert not w.marker.exists()
    # The allowed prefix itself is a transport: `env python3 -I -S -` runs the probe here.
    doc = client.call("probe", {"via": "env", "sections": ["gpu"]})
    assert not doc.get("isError"), _text(doc)[:500]
    assert doc["structuredContent"]["transport"] == "via"


@pytest.mark.parametrize("case", ["python-owned-by-another-user"])
def test_python_owned_by_another_user_is_refused(case: str, tmp_path: Path) -> None:
    """Judged in-process: the owner rule as
    ``interpreter_problem`` applies it, with this user as ``uid``."""
    w = _world(tmp_path)
    script = w.script(w.venv("env") / "bin" / "python")
    other = os.getuid() + 1 if os.getuid() else 65534
    if os.getuid() == 0:
        os.chown(script, 65534, 65534)  # neither root nor this user owns it
        why, _ = interpreter_problem(str(script))
    else:
        why, _ = interpreter_problem(str(script), uid=other)  # this user is not its owner
    assert "owned by uid" in why
    # ... while a venv whose interpreter links to this very interpreter is an environment.
    good = w.venv("good") / "bin" / "python"
    good.symlink_to(os.path.realpath(sys.executable))
    assert interpreter_problem(str(good)) == ("", str(good.parent.parent))


# --- 7. only the roots are read -----------------------------------------------------------------


@dataclass(frozen=True)
class Tree:
    root: Path  # declared by the client
    outside: Path  # a Django project beside it, with its SECRET_KEY


def _tree(tmp_path: Path) -> Tree:
    root, outside = tmp_path / "workspace", tmp_path / "other-project"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text("TARGET_CUDA_ARCHS = ['9.0']\n")
    (outside / "site").mkdir(parents=True)
    (outside / "site" / "settings.py").write_text(f'SECRET_KEY = "{SECRET}"\n')
    (outside / "probe.json").write_text(json.dumps({"secret": SECRET}))
    (outside / "service.env").write_text(f"SECRET_KEY={SECRET}\nCUDA_HOME=/usr/local/cuda\n")
    return Tree(root, outside)


def _link_out(t: Tree) -> str:
    (t.root / "site").symlink_to(t.outside / "site")
    return str(t.root / "site")


PATHS: dict[str, tuple[str, Callable[[Tree], dict[str, Any]]]] = {
    "trace-outside": ("trace", lambda t: {"name": "SECRET_KEY", "paths": [str(t.outside)]}),
    "trace-link-out-of-root": ("trace", lambda t: {"name": "SECRET_KEY", "paths": [_link_out(t)]}),
    "trace-dotdot": (
        "trace",
        lambda t: {"name": "SECRET_KEY", "paths": [f"{t.root}/../{t.outside.name}/site"]},
    ),
    "gates-outside": ("gates", lambda t: {"paths": [str(t.outside / "site" / "settings.py")]}),
    "kernels-outside": ("kernels", lambda t: {"paths": [str(t.outside)]}),
    "kernels-file-url": ("kernels", lambda t: {"paths": [(t.outside / "probe.json").as_uri()]}),
    "kernels-docker-archive": (
        "kernels",
        lambda t: {"paths": [f"docker-archive:{t.outside / 'probe.json'}"]},
    ),
    "fleet-documents-outside": ("fleet", lambda t: {"documents": [str(t.outside / "probe.json")]}),
    "recipe-from-paths-outside": (
        "recipe",
        lambda t: {"gpus": ["H100"], "from_paths": [str(t.outside / "probe.json")]},
    ),
    "scan-env-from-file-outside": (
        "scan",
        lambda t: {"env_from": str(t.outside / "service.env"), "gpus": ["H100"]},
    ),
    "fix-env-file-outside": (
        "fix",
        lambda t: {"env_file": str(t.outside / "service.env"), "gpus": ["RTX PRO 6000"]},
    ),
    "fix-systemd-unit-path": (
        "fix",
        lambda t: {"systemd": f"../../{t.outside.name}/x", "systemd_dir": str(t.root)},
    ),
    "python-environment-outside": ("scan", lambda t: {"python": _outside_venv(t)}),
}


def _outside_venv(t: Tree) -> str:
    env = t.outside / "venv"
    (env / "bin").mkdir(parents=True)
    (env / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (env / "bin" / "python").symlink_to(os.path.realpath(sys.executable))
    return str(env / "bin" / "python")


@pytest.mark.parametrize("tool, make", list(PATHS.values()), ids=list(PATHS))
def test_a_path_outside_the_roots_is_refused(
    tool: str,
    make: Callable[[Tree], dict[str, Any]],
    serve: Callable[..., Client],
    tmp_path: Path,
    watch: Watch,
) -> None:
    t = _tree(tmp_path)
    arguments = make(t)
    client = serve(roots=[t.root])
    result = watch.around(lambda: client.call(tool, arguments), arguments)
    # A unit name that climbs out of its directory is no unit; every other path is resolved.
    _refused(result, "not a path" if "systemd" in arguments else "outside the roots")
    assert SECRET not in json.dumps(result)
    assert client.asked_roots >= 1  # the roots came from the client, after initialize


@pytest.mark.parametrize("case", ["no-roots"])
def test_without_roots_every_path_is_refused(
    case: str, serve: Callable[..., Client], tmp_path: Path
) -> None:
    """A client without the roots capability and no --allow-root: nothing is read."""
    t = _tree(tmp_path)
    client = serve()
    result = client.call("trace", {"name": "TARGET_CUDA_ARCHS", "paths": [str(t.root)]})
    _refused(result, "--allow-root", "there is none")


@pytest.mark.parametrize("case", ["roots-list-changed"])
def test_roots_follow_the_client_and_allow_root(
    case: str, serve: Callable[..., Client], tmp_path: Path
) -> None:
    """Inside a declared root the tool reads; after the client says its
    roots changed, the old root is refused; --allow-root adds a directory of its own."""
    t = _tree(tmp_path)
    client = serve(roots=[t.root])
    arguments = {"name": "TARGET_CUDA_ARCHS", "paths": [str(t.root / "pkg")]}
    found = client.call("trace", arguments)
    assert not found.get("isError"), _text(found)
    assert found["structuredContent"]["trace"]["occurrences"]
    client.roots_changed([t.outside / "site"])
    _refused(client.call("trace", arguments), "outside the roots")
    allowed = serve("--allow-root", str(t.root))  # no roots capability: the allow-list alone
    assert not allowed.call("trace", arguments).get("isError")


# --- annotations ------------------------------------------------------------------------------

READ_ONLY = {"scan", "health", "explain", "trace", "gates", "kernels", "versions", "recipe", "gpus",
             "probe", "fleet", "fix"}  # fmt: skip
TARGETED = {"scan", "health", "explain", "trace", "gates", "kernels", "probe", "fix"}
CLOSED = {"recipe", "gpus", "fleet"}  # knowledge and local documents: no other machine, no index


@pytest.mark.parametrize(
    "args, runs",
    [((), set()), (("--allow-via", "env"), TARGETED), (("--allow-python", "/x/py"), TARGETED)],
    ids=["annotations-default", "annotations-allow-via", "annotations-allow-python"],
)
def test_annotations_tell_what_a_tool_may_do(
    args: tuple[str, ...], runs: set[str], serve: Callable[..., Client]
) -> None:
    tools = serve(*args).tools()
    assert set(tools) == READ_ONLY
    for name, tool in tools.items():
        hints = tool["annotations"]
        # readOnlyHint: the tool does not modify its environment. Running a program the user
        # allowed may (archgap cannot say what it does), so such a tool is not read-only.
        assert hints["readOnlyHint"] is (name not in runs), name
        if name in runs:
            assert hints.get("destructiveHint", True) is True, name  # MCP's default: may destroy
        assert hints.get("openWorldHint", True) is (name not in CLOSED), name
        offered = "--allow-via" in args and name in TARGETED
        assert ("via" in tool["inputSchema"]["properties"]) is offered, name


@pytest.mark.parametrize("case", ["annotations-allow-fix"])
def test_annotations_of_the_changing_tools(case: str, serve: Callable[..., Client]) -> None:
    """fix_apply edits existing files: destructive, and a second call
    may change more (not idempotent); fix_undo restores them: destructive, and undoing twice
    changes nothing more (idempotent)."""
    tools = serve("--allow-fix").tools()
    apply, undo = tools["fix_apply"]["annotations"], tools["fix_undo"]["annotations"]
    assert apply["readOnlyHint"] is False and apply["destructiveHint"] is True
    assert apply.get("idempotentHint", False) is False
    assert undo["readOnlyHint"] is False and undo["destructiveHint"] is True
    assert undo["idempotentHint"] is True


# --- 12. frames are capped ------------------------------------------------------------------


def _padded_ping(client: Client) -> None:
    # A valid request, padded with JSON whitespace past the cap: refused, not answered.
    ping = json.dumps({"jsonrpc": "2.0", "id": 77, "method": "ping"}).encode()
    client.write(ping[:-1] + b" " * (CAP + 1 - len(ping)) + b"}\n")


def _huge_line(client: Client) -> None:
    piece = b"x" * (1 << 20)
    for _ in range(64):  # 64 MiB, one line
        client.write(piece)
    client.write(b"\n")


def _trickled_then_request(client: Client) -> None:
    # Past the cap in small writes, the next message in the same write as the newline.
    for _ in range(CAP // 65536 + 2):
        client.write(b"[" * 65536)
    client.write(b'\n{"jsonrpc": "2.0", "id": 78, "method": "ping"}\n')


FRAMES: dict[str, Callable[[Client], None]] = {
    "frame-padded-request": _padded_ping,
    "frame-64mib-line": _huge_line,
    "frame-trickled-then-next": _trickled_then_request,
}


@pytest.mark.parametrize("send", list(FRAMES.values()), ids=list(FRAMES))
def test_a_frame_over_the_cap_is_refused_and_never_held(
    send: Callable[[Client], None], serve: Callable[..., Client]
) -> None:
    client = serve()
    before = client.peak_kib()
    send(client)
    refused = client.answer()
    assert refused["id"] is None and refused["error"]["code"] == -32600, refused
    assert str(CAP) in refused["error"]["message"]
    if send is _trickled_then_request:
        assert client.answer() == {"jsonrpc": "2.0", "id": 78, "result": {}}
    assert client.request("ping", {}) == {}  # the server goes on
    # It held at most the cap and a chunk of the frame: its peak grew by far less than the
    # 64 MiB a line read whole takes (as bytes, and again as text).
    assert client.peak_kib() - before < 24 << 10
    assert client.close() == 0


@pytest.mark.parametrize("case", ["frame-over-cap-at-eof"])
def test_a_frame_cut_by_the_end_of_the_stream(case: str, serve: Callable[..., Client]) -> None:
    """Past the cap with no newline before stdin closes: refused, and
    the server ends cleanly."""
    client = serve()
    client.write(b" " * (CAP + 2))
    refused = client.answer()
    assert refused["id"] is None and refused["error"]["code"] == -32600
    assert client.close() == 0


# --- 12. the kernels summary --------------------------------------------------------------------


@pytest.mark.parametrize("case", ["kernels-summary"])
def test_kernels_summary_counts_only_files_with_device_code(
    case: str, serve: Callable[..., Client], tmp_path: Path
) -> None:
    """A host library without a fatbin is read, not "with device code": the
    summary says how many of the files read carry device code, as the document counts them."""
    root = tmp_path / "build"
    root.mkdir()
    host = Path(os.path.realpath(sys.executable))  # an ELF executable with no device code
    shutil.copy(host, root / "libhost.so")
    (root / "libhost.so").chmod(stat.S_IRUSR | stat.S_IWUSR)
    client = serve(roots=[root])
    result = client.call("kernels", {"paths": [str(root)]})
    doc = result["structuredContent"]
    assert [f["entries"] for f in doc["files"]] == [[]]  # one file read, no device code in it
    assert doc["summary"]["files_with_device_code"] == 0
    assert _text(result).startswith("archgap kernels: 0 of 1 file(s) with device code")
