"""`archgap mcp` driven by the MCP SDK's own client session over stdio: the server is the real
`python -m archgap mcp` subprocess, one per module (one more with --allow-fix), and the client
validates every structured result against the output schema the tool lists (the command's
JSON Schema file).

The environments are the real flashinfer-python 0.6.8 release (test data, never imported) with
a CUDA_HOME whose nvcc prints the recorded CUDA 12.8 banner: FlashInfer 0.6.8 raises
"SM 12.x requires CUDA >= 12.9" for a 12.x GPU under nvcc 12.8 (compilation_context.py:56),
swallows it and rejects the GPU with "requires GPUs with sm75 or higher" (jit/core.py)."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import ClientSession, StdioServerParameters, stdio_client

from archgap import api
from archgap.report.jsondoc import schema
from tests.helpers import FIXTURES, run_cli
from tests.integration.test_remote_services import require, services
from tests.toolkit_stubs import banner_toolkit, venv_python

ROOT = Path(__file__).resolve().parents[2]
SEED_LOG = FIXTURES / "explain_corpus" / "sglang-incident-flashinfer-0.6.8.log"
FLASHINFER_068 = venv_python("venv-flashinfer-python-0.6.8")
CURAND = venv_python("venv-nvidia-curand-10.4.0.35")  # native libraries: progress per file
SM75 = "RuntimeError: FlashInfer requires GPUs with sm75 or higher"
# What an assistant may name a machine with, on every tool that reaches one.
TARGETS = {"host", "container", "pod", "via"}


@dataclass
class Client:
    """A connected ClientSession, called from the (synchronous) tests through a portal."""

    portal: BlockingPortal
    session: ClientSession

    def tools(self) -> dict[str, Any]:
        listed = self.portal.call(self.session.list_tools)
        return {t.name: t for t in listed.tools}

    def call(self, name: str, arguments: dict[str, Any], progress: Any = None) -> Any:
        async def call() -> Any:
            return await self.session.call_tool(name, arguments, progress_callback=progress)

        return self.portal.call(call)


@asynccontextmanager
async def _session(env: dict[str, str], args: list[str]) -> AsyncIterator[ClientSession]:
    # The SDK starts the server with a minimal environment (HOME, PATH...) and ``env`` on top;
    # coverage's settings travel too, so the server's lines count.
    env = {**{k: v for k, v in os.environ.items() if k.startswith("COVERAGE")}, **env}
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "archgap", "mcp", *args], env=env, cwd=str(ROOT)
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@contextmanager
def connected(env: dict[str, str], *args: str) -> Iterator[Client]:
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(_session(env, list(args))) as session,
    ):
        yield Client(portal, session)


def _server_env(tmp: Path) -> dict[str, str]:
    env = {"CUDA_HOME": str(banner_toolkit(tmp, "12.8"))}
    ssh = services().get("ssh") or {}
    if ssh.get("ok"):  # the remote test skips with the reason when the sshd could not start
        env["ARCHGAP_SSH_CONFIG"] = ssh["config"]
    return env


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    with connected(_server_env(tmp_path_factory.mktemp("mcp"))) as connection:
        yield connection


def _document(result: Any, command: str) -> dict[str, Any]:
    """The structured result, which is also the JSON text, of a successful call."""
    assert not result.is_error, result.content
    doc: dict[str, Any] = result.structured_content
    assert doc["command"] == command and doc["schema_version"]
    assert json.loads(result.content[1].text) == doc
    return doc


def _error(result: Any) -> str:
    assert result.is_error
    (text,) = [c.text for c in result.content]
    assert "\n" not in text and "Traceback" not in text
    return str(text)


def _needs(python: Path) -> None:
    if not python.exists():
        pytest.skip(f"scripts/testdata has not installed {python.parent.parent.name}")


def test_tools_take_the_api_keywords_under_the_same_names(client: Client) -> None:
    tools = client.tools()
    read_only = {"scan", "explain", "trace", "gates", "kernels", "versions", "fleet"}
    assert read_only <= set(tools) and "fix_apply" not in tools
    # Every read-only command the api has is a tool.
    commands = ("recipe", "gpus", "probe", "fix")
    assert {c for c in commands if c in tools} == {c for c in commands if hasattr(api, c)}
    for name, tool in tools.items():
        function = getattr(api, name)
        keywords = set(inspect.signature(function).parameters)
        properties = set(tool.input_schema["properties"])
        # Each property is one of the function's keywords, a field of a dataclass keyword
        # (explain's Where, fleet's FleetSource) or a way of naming the target.
        assert "root" not in properties and "progress" not in properties, name
        assert tool.output_schema == schema(name), name
        assert tool.annotations.read_only_hint is True
        if "target" in keywords:
            assert properties >= TARGETS, name
        plain = properties - TARGETS - {"python", "env_from", "timeout", "documents"}
        assert plain <= keywords, (name, plain - keywords)
    explain = tools["explain"].input_schema
    assert explain["required"] == ["log"] and explain["properties"]["log"]["type"] == "string"
    assert explain["properties"]["gpus"]["items"] == {"type": "string"}
    assert {"python", "env_from"} | TARGETS <= set(explain["properties"])  # Where's fields
    scan = tools["scan"].input_schema
    assert {"python", "gpus", "env_from", "driver", "strict"} <= set(scan["properties"])
    assert scan["additionalProperties"] is False
    assert set(tools["fleet"].input_schema["properties"]) == {"documents", "gpus"}


def test_explain_of_the_seed_log_names_nvcc_12_9(client: Client) -> None:
    _needs(FLASHINFER_068)
    log = SEED_LOG.read_text()
    result = client.call("explain", {"log": log, "gpus": ["sm_120"], "python": str(FLASHINFER_068)})
    found = _document(result, "explain")["explain"]
    assert found["status"] == "diagnosed" and found["confirmed"] is True
    assert found["root_signature"] == "flashinfer-sm12-needs-cuda129"
    assert "12.8" in found["root_cause"] and "12.9" in found["root_cause"]
    assert "12.9" in result.content[0].text  # the summary names the cause too
    # Without an environment named, the log alone: the server's own interpreter is not the one
    # that crashed. The log still pins the cause (its "SM 12.x requires CUDA >= 12.9" lines).
    alone = _document(client.call("explain", {"log": log}), "explain")["explain"]
    assert alone["environment"] == "" and alone["confirmed"] is False
    assert alone["root_signature"] == "flashinfer-sm12-needs-cuda129"


def _flashinfer_failure(doc: dict[str, Any]) -> dict[str, Any]:
    assert doc["gap"] is True
    (finding,) = [f for f in doc["jit"] if f["package"] == "flashinfer-python"]
    assert finding["status"] == "fails" and finding["compute_capability"] == "12.0"
    assert finding["error"] == SM75 and "SM 12.x requires CUDA >= 12.9" in finding["cause"]
    return dict(finding)


def test_scan_of_flashinfer_0_6_8_with_nvcc_12_8_finds_the_gap(client: Client) -> None:
    _needs(FLASHINFER_068)
    arguments = {"python": str(FLASHINFER_068), "gpus": ["RTX PRO 6000"]}
    result = client.call("scan", arguments)
    _flashinfer_failure(_document(result, "scan"))
    assert result.content[0].text.startswith("archgap scan: gap found")


def test_scan_reports_progress_as_native_files_are_read(client: Client) -> None:
    _needs(CURAND)
    told: list[tuple[float, float | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        told.append((done, total))

    result = client.call("scan", {"python": str(CURAND), "gpus": ["H100"]}, progress)
    doc = _document(result, "scan")
    # One step per native file read; the last says all of them were.
    assert doc["files_scanned"] > 0 and told
    assert told[-1] == (doc["files_scanned"], doc["files_scanned"])


def test_scan_over_ssh_reads_the_remote_environment() -> None:
    ssh = require("ssh")
    _needs(FLASHINFER_068)
    with connected({"ARCHGAP_SSH_CONFIG": ssh["config"]}) as remote:
        # alpha's sessions have CUDA_HOME at a 12.8 toolkit (scripts/services); this server's has
        # none, so the gap can only come from the remote environment.
        arguments = {"host": "alpha", "python": str(FLASHINFER_068), "gpus": ["RTX PRO 6000"]}
        finding = _flashinfer_failure(_document(remote.call("scan", arguments), "scan"))
    sources = {c["what"]: c["source"] for c in finding["chain"]}
    assert sources[f"CUDA_HOME={ssh['hosts']['alpha']['env']['CUDA_HOME']}"].startswith("env")


def test_fleet_from_a_probe_document_judges_each_host(client: Client, tmp_path: Path) -> None:
    _needs(FLASHINFER_068)
    # The document `archgap probe` prints where the service runs (CUDA_HOME at nvcc 12.8).
    env = {"CUDA_HOME": str(banner_toolkit(tmp_path, "12.8"))}
    probed = run_cli("probe", "--python", str(FLASHINFER_068), env=env)
    (tmp_path / "gpu01.json").write_text(probed.stdout)
    arguments = {"documents": [str(tmp_path / "gpu01.json")], "gpus": ["RTX PRO 6000"]}
    doc = _document(client.call("fleet", arguments), "fleet")
    assert doc["documents"] == 1 and doc["gap"] is True
    assert doc["jit_coverage"]["packages"] == ["flashinfer-python"]
    assert [r["statuses"] for r in doc["jit_coverage"]["rows"]] == [["fails"]]


def test_bad_arguments_are_tool_errors_and_the_server_goes_on(client: Client) -> None:
    assert "gpus" in _error(client.call("scan", {"gpus": "RTX PRO 6000"}))  # not a list
    assert "unknown GPU" in _error(client.call("scan", {"gpus": ["RTX 9999"]}))
    assert "colour" in _error(client.call("scan", {"colour": "red"}))
    assert "host and container" in _error(client.call("scan", {"host": "a", "container": "b"}))
    assert "required" in _error(client.call("explain", {}))
    unreachable = _error(client.call("trace", {"name": "X", "host": "nohost.invalid"}))
    assert "nohost.invalid" in unreachable
    assert "kind" in _error(client.call("gates", {"paths": [str(ROOT)], "kinds": ["no-such"]}))
    # ... and it still answers.
    assert _document(client.call("explain", {"log": SM75}), "explain")["explain"]["signature"]


def test_fix_apply_is_off_unless_the_server_allows_it(client: Client, tmp_path: Path) -> None:
    assert "fix_apply" not in client.tools()
    assert "--allow-fix" in _error(client.call("fix_apply", {}))
    with connected(_server_env(tmp_path), "--allow-fix") as allowed:
        tools = allowed.tools()
    # Applying is the api's fix with apply=True: listed with the flag wherever the api fixes.
    assert ("fix_apply" in tools) == hasattr(api, "fix")
    if "fix_apply" in tools:
        assert tools["fix_apply"].annotations.read_only_hint is False
        assert "apply" not in tools["fix"].input_schema["properties"]
        assert "apply" not in tools["fix_apply"].input_schema["properties"]


def test_without_the_sdk_the_command_says_which_extra_to_install() -> None:
    # An environment without the mcp distribution: importing it fails as it would there.
    code = (
        "import sys; sys.modules['mcp'] = None\n"
        "from archgap.cli import main; sys.exit(main(['mcp']))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 2 and result.stdout == ""
    assert "pip install 'archgap[mcp]'" in result.stderr
