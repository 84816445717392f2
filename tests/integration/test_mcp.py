"""`archgap mcp` driven by the MCP SDK's own client session over stdio: the server is the real
`python -m archgap mcp` subprocess, one per module (one more with --allow-fix), and the client
validates every structured result against the output schema the tool lists (the command's
JSON Schema file).

The environments are the real flashinfer-python 0.6.8 release (test data, never imported) with
a CUDA_HOME whose nvcc prints the recorded CUDA 12.8 banner: FlashInfer 0.6.8 raises
"SM 12.x requires CUDA >= 12.9" for a 12.x GPU under nvcc 12.8 (compilation_context.py:56),
swallows it and rejects the GPU with "requires GPUs with sm75 or higher" (jit/core.py:108).
A suffixed FLASHINFER_CUDA_ARCH_LIST is used verbatim (compilation_context.py:67-69), and nvcc
12.8 knows compute_120a: the fix sets FLASHINFER_CUDA_ARCH_LIST=12.0a. The fixes run on a
copy of the venv; tests/.data is never modified."""

from __future__ import annotations

import inspect
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import ClientSession, StdioServerParameters, stdio_client

from archgap import api
from archgap.mcp.tools import listed_schema
from archgap.report.jsondoc import schema
from tests.helpers import FIXTURES, run_cli, tree_hashes
from tests.integration.test_remote_services import require, services
from tests.toolkit_stubs import banner_toolkit, venv_python

ROOT = Path(__file__).resolve().parents[2]
SEED_LOG = FIXTURES / "explain_corpus" / "sglang-incident-flashinfer-0.6.8.log"
FLASHINFER_068 = venv_python("venv-flashinfer-python-0.6.8")
CURAND = venv_python("venv-nvidia-curand-10.4.0.35")  # native libraries: progress per file
SM75 = "RuntimeError: FlashInfer requires GPUs with sm75 or higher"
# What an assistant may name a machine with, on every tool that reaches one (via, a command
# prefix run here, only when the server is started with --allow-via).
TARGETS = {"host", "container", "pod"}
# Every command an assistant may ask; the tools that change the target only with --allow-fix.
READ_ONLY = {
    "scan", "health", "explain", "trace", "gates", "kernels", "versions", "recipe", "gpus",
    "probe", "fleet", "fix",
}  # fmt: skip
CHANGING = {"fix_apply", "fix_undo"}


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
    # The fix journal's default place is under XDG_STATE_HOME: here, never the user's.
    env = {"CUDA_HOME": str(banner_toolkit(tmp, "12.8")), "XDG_STATE_HOME": str(tmp / "state")}
    ssh = services().get("ssh") or {}
    if ssh.get("ok"):  # the remote test skips with the reason when the sshd could not start
        env["ARCHGAP_SSH_CONFIG"] = ssh["config"]
    return env


def _roots(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The directories the tools may read: the checkout (its test data) and the tests' own
    temporary files (this client declares no roots)."""
    return ["--allow-root", str(ROOT), "--allow-root", str(tmp_path_factory.getbasetemp())]


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    env = _server_env(tmp_path_factory.mktemp("mcp"))
    with connected(env, *_roots(tmp_path_factory)) as connection:
        yield connection


@pytest.fixture(scope="module")
def allowed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    """The server started with --allow-fix."""
    env = _server_env(tmp_path_factory.mktemp("mcp-fix"))
    with connected(env, "--allow-fix", *_roots(tmp_path_factory)) as connection:
        yield connection


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A copy of the flashinfer 0.6.8 venv (57 MB) and the EnvironmentFile of the service that
    runs it, with CUDA_HOME at nvcc 12.8; the fix journal outside the copy, not yet made."""
    _needs(FLASHINFER_068)
    root = tmp_path_factory.mktemp("service")
    shutil.copytree(FLASHINFER_068.parent.parent, root / "venv", symlinks=True)
    env_file = root / "etc" / "sglang.env"
    env_file.parent.mkdir()
    env_file.write_text(
        f"# sglang.service EnvironmentFile\nCUDA_HOME={banner_toolkit(root, '12.8')}\n"
    )
    state = tmp_path_factory.mktemp("journal") / "state"
    return {"root": root, "venv": root / "venv", "env": env_file, "state": state}


def _fix_arguments(service: dict[str, Path]) -> dict[str, Any]:
    """The incident's fix: the service's environment, its env file the place to change."""
    python, env = str(service["venv"] / "bin" / "python"), str(service["env"])
    return {"python": python, "gpus": ["RTX PRO 6000"], "env_from": env, "env_file": env}


def _document(result: Any, command: str) -> dict[str, Any]:
    """The structured result of a successful call, sent once: beside it one line of text, the
    summary (this client speaks a revision with structured results: no JSON text copy)."""
    assert not result.is_error, result.content
    doc: dict[str, Any] = result.structured_content
    assert doc["command"] == command and doc["schema_version"]
    (line,) = [c.text for c in result.content]
    assert line.startswith("archgap ") and "\n" not in line and len(line) < 1000
    jsonschema.validate(doc, schema(command))  # the schema file itself, prose and all
    return doc


def _error(result: Any) -> str:
    assert result.is_error
    (text,) = [c.text for c in result.content]
    assert "\n" not in text and "Traceback" not in text
    return str(text)


def _needs(python: Path) -> None:
    if not python.exists():
        pytest.skip(f"scripts/testdata has not installed {python.parent.parent.name}")


def _check_schemas(tools: dict[str, Any]) -> None:
    """Each tool takes its api function's keywords under the same names and lists its
    command's JSON Schema as its output schema."""
    for name, tool in tools.items():
        command = "fix" if name in CHANGING else name  # applying and undoing are api.fix
        keywords = set(inspect.signature(getattr(api, command)).parameters)
        properties = set(tool.input_schema["properties"])
        # Each property is one of the function's keywords, a field of a dataclass keyword
        # (explain's Where, fleet's FleetSource) or a way of naming the target.
        assert "root" not in properties and "progress" not in properties, name
        assert tool.input_schema["additionalProperties"] is False, name
        # the schema file's constraints, without its prose (a fifth of the tool list)
        assert tool.output_schema == listed_schema(command), name
        assert "description" not in tool.output_schema, name
        assert tool.annotations.read_only_hint is (name not in CHANGING), name
        if "target" in keywords:
            assert properties >= TARGETS, name
        plain = properties - TARGETS - {"python", "env_from", "timeout", "documents", "detail"}
        assert plain <= keywords, (name, plain - keywords)
        # What the tool itself decides is not an input: fix plans, fix_apply applies.
        assert not properties & {"apply", "undo"}, name


def test_tools_take_the_api_keywords_under_the_same_names(client: Client) -> None:
    tools = client.tools()
    assert set(tools) == READ_ONLY  # fix_apply and fix_undo only with --allow-fix
    _check_schemas(tools)
    explain = tools["explain"].input_schema
    assert explain["required"] == ["log"] and explain["properties"]["log"]["type"] == "string"
    assert explain["properties"]["gpus"]["items"] == {"type": "string"}
    assert {"python", "env_from"} | TARGETS <= set(explain["properties"])  # Where's fields
    scan = tools["scan"].input_schema
    assert {"python", "gpus", "env_from", "driver", "strict"} <= set(scan["properties"])
    assert set(tools["fleet"].input_schema["properties"]) == {"documents", "gpus"}
    assert set(tools["gpus"].input_schema["properties"]) == {"names"}
    recipe = set(tools["recipe"].input_schema["properties"])
    assert recipe == {"gpus", "from_paths", "toolkit", "arch_specific", "ptx"}
    assert {"sections", "require", "env_from"} <= set(tools["probe"].input_schema["properties"])
    # The plan takes where the fix would go, not how applying goes (force, only, the journal).
    fix = set(tools["fix"].input_schema["properties"])
    assert {"env_file", "systemd", "gpus"} <= fix and not fix & {"force", "only", "state_dir"}


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


def test_health_is_the_node_check_scan_health_makes(client: Client) -> None:
    # The same judgement as scan --health (api.health -> NodeHealth): FlashInfer 0.6.8's SM 12.x
    # rule needs CUDA >= 12.9 and the server's nvcc is 12.8, so its JIT fails on an RTX PRO 6000
    # (12.0): a gap, exit 1, a reason a drain policy may act on.
    _needs(FLASHINFER_068)
    arguments = {"python": str(FLASHINFER_068), "gpus": ["RTX PRO 6000"]}
    result = client.call("health", arguments)
    doc = _document(result, "health")
    assert (doc["code"], doc["exit_code"], doc["drains"]) == ("jit-fails", 1, True)
    assert doc["line"].startswith("archgap: jit-fails: flashinfer-python 0.6.8 on 12.0"), doc
    assert {"package": "flashinfer-python", "compute_capability": "12.0", "value": "fails"} in (
        doc["jit"]
    )
    assert result.content[0].text.startswith("archgap health: archgap: jit-fails: ")
    assert "unknown GPU" in _error(client.call("health", {"gpus": ["RTX 9999"]}))


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
        arguments["detail"] = "gaps"  # with each finding's chain of facts
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
    assert "RTX 9999" in _error(client.call("gpus", {"names": ["RTX 9999"]}))
    assert "no GPU" in _error(client.call("recipe", {}))
    assert "sections" in _error(client.call("probe", {"sections": ["no-such"]}))
    # An interpreter that does not exist is no environment, not one without a gap: here, where
    # only an environment's interpreter runs, the call is refused.
    missing = _error(client.call("scan", {"python": "/nonexistent/bin/python"}))
    assert "python /nonexistent/bin/python" in missing and "not an environment" in missing
    # ... and it still answers.
    assert _document(client.call("explain", {"log": SM75}), "explain")["explain"]["signature"]


def test_gpus_resolves_a_product_name(client: Client) -> None:
    # NVIDIA's CUDA GPUs list: the H100 (PCIe and SXM alike) is compute capability 9.0, Hopper,
    # whose SASS is sm_90.
    result = client.call("gpus", {"names": ["H100 PCIe"]})
    (gpu,) = _document(result, "gpus")["gpus"]
    assert "H100" in gpu["name"] and "PCIe" not in gpu["name"]
    assert (gpu["compute_capability"], gpu["architecture"], gpu["sm"]) == ("9.0", "Hopper", "sm_90")
    assert gpu["source"].startswith("https://")
    assert "H100 9.0 (Hopper)" in result.content[0].text


def test_recipe_for_hopper_and_blackwell_builds_one_sass_target_each(client: Client) -> None:
    # SASS sm_XY runs only on X.Z with Z >= Y of the same major: H100 (9.0) needs sm_90, the RTX
    # PRO 6000 (12.0) sm_120, neither covers the other. CUDA 12.8 is the first toolkit that
    # targets sm_120 (its release notes), so the build needs >= 12.8.
    gpus = ["H100", "RTX PRO 6000"]
    doc = _document(client.call("recipe", {"gpus": gpus}), "recipe")
    assert {t["name"] for t in doc["targets"] if t["kind"] == "sass"} == {"sm_90", "sm_120"}
    assert doc["builds_with"]["oldest"] == "12.8"
    torch_list = doc["spellings"]["TORCH_CUDA_ARCH_LIST"].replace("+PTX", "").split(";")
    assert sorted(torch_list) == ["12.0", "9.0"]
    # The inputs reach the api: sm_XYa runs only on exactly X.Y, and no PTX was asked for.
    exact = _document(
        client.call("recipe", {"gpus": gpus, "arch_specific": True, "ptx": False}), "recipe"
    )
    assert [(t["name"], t["kind"]) for t in exact["targets"]] == [
        ("sm_90a", "sass"),
        ("sm_120a", "sass"),
    ]


def test_probe_returns_the_facts_document(client: Client) -> None:
    _needs(FLASHINFER_068)
    arguments = {
        "python": str(FLASHINFER_068), "sections": ["gpu", "python"], "require": ["RTX PRO 6000"],
    }  # fmt: skip
    result = client.call("probe", arguments)
    doc = _document(result, "probe")
    assert doc["target"] == "local" and set(doc["facts"]["sections"]) == {"gpu", "python"}
    python = doc["facts"]["sections"]["python"]
    assert python["executable"] == str(FLASHINFER_068)
    assert ("flashinfer-python", "0.6.8") in [
        (d["name"], d["version"]) for d in python["distributions"]
    ]
    # An RTX PRO 6000 is compute capability 12.0: missing unless the facts show such a GPU.
    present = {g["compute_capability"] for g in doc["facts"]["sections"]["gpu"]["gpus"]}
    assert [m.split(" (")[0] for m in doc["missing"]] == (
        [] if "12.0" in present else ["RTX PRO 6000"]
    )
    assert result.content[0].text.startswith("archgap probe: facts of local")


def test_redact_hides_user_names_and_this_host_in_results_and_errors(
    client: Client, tmp_path: Path
) -> None:
    # --redact as every command takes it: home paths as /home/<user>, this machine as <host>.
    plain = _document(client.call("probe", {"sections": ["gpu"]}), "probe")
    assert plain["facts"]["host"] == socket.gethostname()
    with connected(_server_env(tmp_path), "--redact", "--allow-root", "/home") as redacted:
        doc = _document(redacted.call("probe", {"sections": ["gpu"]}), "probe")
        error = _error(redacted.call("trace", {"name": "X", "paths": ["/home/alice/lib/x.py"]}))
    assert doc["facts"]["host"] == "<host>"
    assert "no such file or directory: /home/<user>/lib/x.py" in error and "alice" not in error


def test_trace_names_the_writes_of_target_cuda_archs(client: Client) -> None:
    _needs(FLASHINFER_068)
    # Read off the released compilation_context.py by hand: `self.TARGET_CUDA_ARCHS = set()` at
    # 62, the FLASHINFER_CUDA_ARCH_LIST branch's adds at 70 and 72, auto-detection's at 79.
    arguments = {"name": "TARGET_CUDA_ARCHS", "python": str(FLASHINFER_068)}
    result = client.call("trace", {**arguments, "dists": ["flashinfer-python"]})
    found = _document(result, "trace")["trace"]
    writes = [
        (o["path"].split("site-packages/", 1)[1], o["line"])
        for o in found["occurrences"]
        if o["kind"] == "write"
    ]
    assert writes == [("flashinfer/compilation_context.py", n) for n in (62, 70, 72, 79)]
    assert "TARGET_CUDA_ARCHS: 4 write(s)" in result.content[0].text


def test_gates_finds_the_check_that_rejects_the_gpu(client: Client) -> None:
    _needs(FLASHINFER_068)
    (site,) = FLASHINFER_068.parent.parent.glob("lib/python*/site-packages")
    core = site / "flashinfer" / "jit" / "core.py"
    result = client.call("gates", {"python": str(FLASHINFER_068), "paths": [str(core)]})
    doc = _document(result, "gates")
    shown = sum(len(f["gates"]) for t in doc["gates"]["targets"] for f in t["functions"])
    assert result.content[0].text.startswith(f"archgap gates: {shown} gate(s) in ")  # counted
    (check,) = [
        f
        for t in doc["gates"]["targets"]
        for f in t["functions"]
        if f["function"] == "check_cuda_arch"
    ]
    # core.py:108, read by hand: raise RuntimeError("FlashInfer requires GPUs with sm75 or higher")
    raises = [(g["line"], g["message"]) for g in check["gates"] if g["kind"] == "raise"]
    assert raises == [(108, SM75.removeprefix("RuntimeError: "))]
    # With gpus, only what the GPU's compute capability leads to: line 108 sits under `if not
    # eligible:`, which the arch set decides, not the GPU; the other raise (291) sits under `if
    # os.environ.get("FLASHINFER_DISABLE_JIT"):` (290): no GPU in either.
    arguments = {"python": str(FLASHINFER_068), "paths": [str(core)], "gpus": ["T4"]}
    rejecting = _document(client.call("gates", arguments), "gates")
    assert not [f for t in rejecting["gates"]["targets"] for f in t["functions"]]


def test_fix_plans_the_change_and_modifies_nothing(
    client: Client, service: dict[str, Path]
) -> None:
    before = tree_hashes(service["root"])  # the venv, the env file and the toolkit
    result = client.call("fix", _fix_arguments(service))
    doc = _document(result, "fix")
    assert tree_hashes(service["root"]) == before and not service["state"].exists()
    assert doc["gap"] is True and doc["applied"] is None and doc["verified"] is None
    kinds = {a["kind"]: a for a in doc["actions"]}
    assert all(SM75 in a["removes"][0] for a in doc["actions"])
    assert "+FLASHINFER_CUDA_ARCH_LIST=12.0a" in kinds["env"]["diff"]
    assert "nothing changed" in result.content[0].text
    # Applying is not an input of the plan.
    assert "apply" in _error(client.call("fix", {**_fix_arguments(service), "apply": True}))
    assert tree_hashes(service["root"]) == before


def test_changing_tools_are_off_without_allow_fix(client: Client) -> None:
    for name in sorted(CHANGING):
        assert name not in client.tools()
        assert "archgap mcp --allow-fix" in _error(client.call(name, {}))


def test_with_allow_fix_fix_apply_applies_and_fix_undo_reverts(
    allowed: Client, service: dict[str, Path]
) -> None:
    tools = allowed.tools()
    assert set(tools) == READ_ONLY | CHANGING
    _check_schemas(tools)
    assert all(tools[name].annotations.destructive_hint for name in CHANGING)
    venv, env = tree_hashes(service["venv"]), service["env"].read_bytes()
    arguments = {**_fix_arguments(service), "only": "env", "state_dir": str(service["state"])}
    result = allowed.call("fix_apply", arguments)
    doc = _document(result, "fix")
    assert [c["path"] for c in doc["applied"]["changed"]] == [str(service["env"])]
    assert service["env"].read_bytes() == env + b"FLASHINFER_CUDA_ARCH_LIST=12.0a\n"
    assert [v["status"] for v in doc["verified"]] == ["gone"]  # the rescan: no failure left
    assert tree_hashes(service["venv"]) == venv
    undone = _document(allowed.call("fix_undo", {"state_dir": str(service["state"])}), "fix")
    assert [r["path"] for r in undone["undo"]["restored"]] == [str(service["env"])]
    assert service["env"].read_bytes() == env and tree_hashes(service["venv"]) == venv


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


JAX = venv_python("venv-jax-cuda12-mismatch")  # jax-cuda12-plugin 0.4.38, jax-cuda12-pjrt 0.4.36


def _size(doc: dict[str, Any]) -> int:
    """A document's size without its run time ("seconds": 0.4 and 0.42 differ by a character)."""
    return len(json.dumps({k: v for k, v in doc.items() if k != "seconds"}))


def test_scan_detail_levels_and_a_summary_that_counts_packages_and_gpus(client: Client) -> None:
    """Two distributions with native code judged on two GPUs: the summary line counts 2
    packages and 2 GPUs (not 4 "packages"), names the GPUs, and is the same at every detail;
    the summary document is the smallest and still follows the scan schema."""
    _needs(JAX)
    sizes, lines = {}, set()
    for level in ("summary", "gaps", "full"):
        arguments = {"python": str(JAX), "gpus": ["H100", "RTX PRO 6000"], "detail": level}
        result = client.call("scan", arguments)
        doc = _document(result, "scan")
        sizes[level] = _size(doc)
        lines.add(result.content[0].text)
        assert {p["package"] for p in doc["packages"]} <= {"jax-cuda12-plugin", "jax-cuda12-pjrt"}
        if level == "full":
            assert len(doc["packages"]) == 4  # one verdict per package and GPU
    (line,) = lines
    assert "2 package(s) with device code on 2 GPU(s) (H100, RTX PRO 6000)" in line, line
    assert " on None" not in line and "4 package(s)" not in line
    assert sizes["summary"] < sizes["gaps"] <= sizes["full"], sizes
    assert sizes["summary"] < 8000, sizes  # a few KB (measured 3,784 here)
    default = client.call("scan", {"python": str(JAX), "gpus": ["H100", "RTX PRO 6000"]})
    assert _size(_document(default, "scan")) == sizes["summary"]
    assert "detail" in _error(client.call("scan", {"python": str(JAX), "detail": "all"}))
