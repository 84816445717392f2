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
    "fix_undo), off unless --allow-fix. A tool call is data an assistant may have read anywhere: "
    "the tools read files only inside the client's roots and --allow-root directories, run a "
    "`python` only if it is an environment's interpreter (or --allow-python), and take `via` "
    "only with --allow-via."
)
OPTIONS = (
    opt.flag(
        "--allow-fix",
        "also offer fix_apply and fix_undo, which change the target (reversibly, like fix "
        "--apply and fix --undo)",
    ),
    opt.repeated(
        "--allow-via",
        "PREFIX",
        "offer the via input with exactly this command prefix ('ssh gpu1', 'docker exec -i "
        "box'); repeatable. Without it no tool runs a prefix an assistant names",
    ),
    opt.repeated(
        "--allow-python",
        "PATH",
        "an interpreter the tools may run though it is in no virtual or conda environment; "
        "repeatable",
    ),
    opt.repeated(
        "--allow-root",
        "DIR",
        "a directory the tools may read, besides the roots the client declares; repeatable. "
        "With neither, tools refuse every path",
    ),
)


def run(args: argparse.Namespace, out: Output) -> int:
    try:
        from archgap.mcp.server import serve
        from archgap.mcp.trust import Policy
    except ImportError as exc:
        why = f"archgap mcp needs the mcp extra: pip install 'archgap[mcp]' ({exc})"
        raise UsageError(why) from None
    policy = Policy.of(args.allow_via, args.allow_python, args.allow_root)
    serve(allow_fix=bool(args.allow_fix), redact_output=bool(args.redact), policy=policy)
    return EXIT_OK
