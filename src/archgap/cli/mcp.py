"""archgap mcp: serve archgap's commands as tools to an assistant (Model Context Protocol, stdio).

Parsing only: the server is archgap.mcp.server, over archgap.api.
"""

from __future__ import annotations

import argparse

from archgap.cli import options as opt
from archgap.cli.common import EXIT_OK, Output, UsageError

HELP = "serve the read-only commands as MCP tools over stdio, for an assistant"
DESCRIPTION = (
    "Serve scan, explain, trace, gates, kernels, versions, recipe, gpus, probe, fleet and fix "
    "(as a plan) as Model Context Protocol tools over stdin/stdout; needs the mcp extra "
    "(pip install 'archgap[mcp]'). Applying and undoing fixes are separate tools (fix_apply, "
    "fix_undo), off unless --allow-fix."
)
OPTIONS = (
    opt.flag(
        "--allow-fix",
        "also offer fix_apply and fix_undo, which change the target (reversibly, like fix "
        "--apply and fix --undo)",
    ),
)


def run(args: argparse.Namespace, out: Output) -> int:
    try:
        from archgap.mcp.server import serve
    except ImportError as exc:
        why = f"archgap mcp needs the mcp extra: pip install 'archgap[mcp]' ({exc})"
        raise UsageError(why) from None
    serve(allow_fix=bool(args.allow_fix), redact_output=bool(args.redact))
    return EXIT_OK
