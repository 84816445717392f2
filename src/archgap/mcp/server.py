"""``archgap mcp``: the read-only commands as Model Context Protocol tools, served over stdio
with the official SDK (the ``archgap[mcp]`` extra).

Each call runs its api function in a worker thread, one call at a time (a local probe forks);
what the function tells its progress callback goes to the client as progress notifications
when the client asked for them (a progressToken). Every failure is the tool's error, in one
line: the server itself never stops on a call.
"""

from __future__ import annotations

import functools
import importlib
import json
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
import jsonschema
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

from archgap import __version__
from archgap.mcp.schema import ArgumentError, Derived, bind
from archgap.mcp.stdio import FRAME_CAP, capped_stdio
from archgap.mcp.tools import (
    ALLOW_FIX,
    CHANGING,
    READ_ONLY,
    ToolSpec,
    document,
    listed_schema,
    shown,
    summary,
)
from archgap.mcp.trust import Policy, root_paths
from archgap.report.console import redact

Tell = Callable[[int, int, str], None]
PROGRESS_INTERVAL = 0.1  # seconds between progress notifications (the last one always goes)


@dataclass(frozen=True)
class Tool:
    spec: ToolSpec
    function: Callable[..., Any]
    derived: Derived

    @functools.cached_property
    def validator(self) -> jsonschema.Draft202012Validator:
        return jsonschema.Draft202012Validator(self.derived.schema)


class Toolbox:
    """The tools the api offers (those that change the target only with ``allow_fix``), and
    their calls."""

    def __init__(self, allow_fix: bool = False, policy: Policy | None = None) -> None:
        api = importlib.import_module("archgap.api")
        self.policy = policy or Policy()
        self.tools: dict[str, Tool] = {}
        for spec in (*READ_ONLY, *(CHANGING if allow_fix else ())):
            function = getattr(api, spec.function, None)
            if callable(function):
                derived = spec.derived(function, self.policy.allow_via)
                self.tools[spec.name] = Tool(spec, function, derived)

    def listing(self) -> list[types.Tool]:
        return [
            types.Tool(
                name=name,
                description=tool.spec.purpose,
                input_schema=tool.derived.schema,
                output_schema=listed_schema(tool.spec.command),
                annotations=_annotations(tool, self.policy),
            )
            for name, tool in self.tools.items()
        ]

    def call(
        self,
        name: str,
        arguments: Mapping[str, Any],
        tell: Tell,
        roots: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        """The document of tool ``name`` for ``arguments``, reading only inside ``roots`` (the
        client's) and the policy's; a bad call raises ArgumentError, one the policy does not
        allow TrustError."""
        tool = self.tools.get(name)
        if tool is None:
            if name in {spec.name for spec in CHANGING}:
                raise ArgumentError(
                    f"{name} changes the target and is off: start the server with "
                    f"`archgap mcp {ALLOW_FIX}` to offer it"
                )
            raise ArgumentError(f"no tool {name!r}")
        self.policy.check_via(arguments)  # before the schema, which does not know it
        problem = jsonschema.exceptions.best_match(tool.validator.iter_errors(dict(arguments)))
        if problem is not None:
            where = ".".join(str(p) for p in problem.absolute_path)
            raise ArgumentError(f"{where + ': ' if where else ''}{problem.message}")
        self.policy.check(tool.spec.command, arguments, roots)
        keywords = bind(tool.derived, arguments)
        keywords.update({n: tell for n in tool.derived.supplied})
        keywords.update(tool.spec.fixed)
        started = time.monotonic()
        result = tool.function(**keywords)
        return document(tool.spec, result, arguments, time.monotonic() - started)


def _annotations(tool: Tool, policy: Policy) -> types.ToolAnnotations:
    """Hints for the client, as MCP defines them. A tool is read-only only if it changes
    nothing and runs no program an argument chooses: with --allow-via (a ``via`` input) or
    --allow-python (a ``python`` input) it may run one the user allowed, whose effects archgap
    cannot vouch for (destructive, not idempotent). fix_apply and fix_undo edit files, each
    backed up (destructive: they change existing files); undoing twice changes nothing more
    (idempotent). Open world: the tools that may reach another machine or an index."""
    spec, properties = tool.spec, tool.derived.properties
    runs = "via" in properties or ("python" in properties and bool(policy.allow_python))
    if not spec.changes and not runs:
        return types.ToolAnnotations(read_only_hint=True, open_world_hint=spec.open_world)
    return types.ToolAnnotations(
        read_only_hint=False,
        destructive_hint=True,
        idempotent_hint=bool(spec.changes and spec.fixed.get("undo")),
        open_world_hint=spec.open_world or runs,
    )


def one_line(exc: BaseException) -> str:
    """The error as the tool's one line: archgap's own errors (and bad values, unreadable
    files) by their message, anything else named as an internal error."""
    text = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    if isinstance(exc, ValueError | OSError) or type(exc).__module__.startswith("archgap."):
        return text or type(exc).__name__
    return f"internal error: {type(exc).__name__}: {text}"


# The first MCP revision with structured tool results (structuredContent, outputSchema). Its
# text says a tool returning structured content SHOULD also send it serialized as text "for
# backwards compatibility": for clients of earlier revisions only, which get it; a client that
# speaks this revision or later gets the document once, structured, with a one-line text.
STRUCTURED_SINCE = "2025-06-18"


def result_of(
    toolbox: Toolbox,
    name: str,
    arguments: Mapping[str, Any],
    tell: Tell,
    redact_host: str | None = None,
    roots: Sequence[str] | None = None,
    protocol_version: str = STRUCTURED_SINCE,
) -> Any:
    """The call's result, or its failure as a tool error (never raised to the SDK); with
    ``redact_host`` (``--redact``) user names in home paths and that host name hidden. The
    document at the call's ``detail`` is sent once, as structured content, beside its summary
    line (and as JSON text too for a client of a revision before ``STRUCTURED_SINCE``)."""
    spec = toolbox.tools[name].spec if name in toolbox.tools else None
    try:
        full = toolbox.call(name, arguments, tell, roots)
        assert spec is not None
        line = summary(spec, full)  # counted on the whole document
        doc = shown(spec, full, arguments)
    except Exception as exc:  # a tool error for the assistant to read, and the server goes on
        text = f"archgap {name}: {one_line(exc)}"
        text = text if redact_host is None else redact(text, redact_host)
        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
    if redact_host is not None:  # in every string of the document (paths hold no quotes)
        doc = json.loads(redact(json.dumps(doc), redact_host))
        line = redact(line, redact_host)
    content: list[types.ContentBlock] = [types.TextContent(text=line)]
    if protocol_version < STRUCTURED_SINCE:  # dates: compared as text
        content.append(types.TextContent(text=json.dumps(doc)))
    return types.CallToolResult(content=content, structured_content=doc)


class ClientRoots:
    """The roots the client declares (MCP ``roots``), asked with ``roots/list`` after
    ``initialize`` when the client has the capability, and again after it says they changed
    (``notifications/roots/list_changed``) or before the next call that needs them."""

    def __init__(self) -> None:
        self.paths: tuple[str, ...] = ()
        self.stale = True
        self.asking = anyio.Lock()

    async def current(self, ctx: ServerRequestContext[Any]) -> tuple[str, ...]:
        """The declared roots, asked first when stale (waiting for a question in flight)."""
        async with self.asking:
            if self.stale:
                await self._ask(ctx)
            return self.paths

    async def refresh(self, ctx: ServerRequestContext[Any]) -> None:
        self.stale = True
        await self.current(ctx)

    async def _ask(self, ctx: ServerRequestContext[Any]) -> None:
        capabilities = ctx.session.client_capabilities
        self.stale = False  # a change told while asking makes them stale again
        if capabilities is None or capabilities.roots is None:
            self.paths = ()
            return
        try:
            listed = await ctx.session.send_request(types.ListRootsRequest(), types.ListRootsResult)
        except Exception:  # no roots from a client that cannot list them
            self.paths = ()
            return
        self.paths = root_paths(str(root.uri) for root in listed.roots)


def build_server(
    allow_fix: bool = False, redact_output: bool = False, policy: Policy | None = None
) -> Server[Any]:
    toolbox = Toolbox(allow_fix, policy)
    host = socket.gethostname() if redact_output else None
    one_at_a_time = anyio.Lock()
    roots = ClientRoots()

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=toolbox.listing())

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        tell = _progress(ctx)
        declared = await roots.current(ctx)
        async with one_at_a_time:
            result: types.CallToolResult = await anyio.to_thread.run_sync(
                result_of, toolbox, params.name, params.arguments or {}, tell, host, declared,
                ctx.session.protocol_version,
            )  # fmt: skip
        return result

    async def initialized(ctx: ServerRequestContext[Any], params: Any) -> None:
        await roots.refresh(ctx)

    async def roots_changed(ctx: ServerRequestContext[Any], params: Any) -> None:
        await roots.refresh(ctx)

    server: Server[Any] = Server(
        "archgap",
        version=__version__,
        instructions="archgap answers whether a Python GPU stack runs on a GPU, and if not, why "
        "and how to fix it. Start with scan (an environment) or explain (a crash log); name a "
        "remote machine with host, container or pod. Files are read only inside the client's "
        "roots (and the directories the server was started with).",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    server.add_notification_handler(
        "notifications/initialized", types.NotificationParams, initialized
    )
    server.add_notification_handler(
        "notifications/roots/list_changed", types.NotificationParams, roots_changed
    )
    return server


def _progress(ctx: ServerRequestContext[Any]) -> Tell:
    """A callback for the worker thread that reports to the client, at most ten times a
    second; a no-op when the client sent no progressToken."""
    if not (ctx.meta or {}).get("progress_token"):
        return lambda _done, _total, _item: None
    session = ctx.session
    last = [0.0]

    def tell(done: int, total: int, item: str) -> None:
        now = time.monotonic()
        if now - last[0] < PROGRESS_INTERVAL and done < total:
            return
        last[0] = now
        anyio.from_thread.run(session.report_progress, float(done), float(total), item)

    return tell


def serve(
    allow_fix: bool = False,
    redact_output: bool = False,
    policy: Policy | None = None,
    frame_cap: int = FRAME_CAP,
) -> None:
    """Serve over stdin/stdout until the client closes them; a message over ``frame_cap``
    bytes is refused, never held whole."""
    server = build_server(allow_fix, redact_output, policy)

    async def main() -> None:
        async with capped_stdio(frame_cap) as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)
