"""archgap fix: show, apply, verify and undo the fixes ``scan`` proposes, on the target.

Exit codes: 0 no gap (dry run) or every applied fix confirmed by a new scan, or undo done;
1 a gap is planned for (dry run) or remains / is not confirmed after --apply; 2 usage or probe
error; 3 refused (a file changed since the plan, a read-only directory, a corrupt journal,
another fix running, undo over a hand-edited file), nothing changed.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from archgap.cli import options as opt
from archgap.cli.common import Output, emit_text, target_from_args

if TYPE_CHECKING:
    pass

HELP = "show the fixes scan proposes as exact changes; --apply makes them, --undo reverts"
DESCRIPTION = (
    "Plan (default), apply (--apply), verify and undo (--undo) the fixes for the JIT gaps scan "
    "finds, on the target. Exit: 0 no gap / confirmed / undone, 1 gap planned or not confirmed, "
    "2 usage or probe error, 3 refused (nothing changed)."
)
WRITE_ENV_FILE = opt.option(
    "--write-env-file",
    dest="env_file",
    metavar="FILE",
    help="write the variables to this env file (KEY=VALUE lines: systemd's EnvironmentFile=, "
    "docker --env-file); --env-from only reads one",
)
OPTIONS = (
    opt.ENVIRONMENT,
    opt.gpu_option("as in scan"),
    opt.env_from_option(
        "read the service's environment (a process id, an env file or `docker inspect` JSON) "
        "instead of the shell's; it is not written to: see --write-env-file"
    ),
    opt.option(
        "--driver",
        metavar="VERSION",
        help="judge against this NVIDIA driver (570.124.06, or a branch: 570) instead of the "
        "detected one: a toolkit switch it cannot run (CUDA 13 needs >= 580) says so and is not "
        "first",
    ),
    opt.flag("--apply", "make the changes (default: show)"),
    opt.option(
        "--only",
        choices=("env", "toolkit", "upgrade", "patch"),
        help="apply only this kind; upgrade and patch are applied only when named here",
    ),
    opt.one_of(
        WRITE_ENV_FILE,
        opt.deprecated("--env-file", WRITE_ENV_FILE),
        opt.option("--systemd", metavar="UNIT", help="write variables to a drop-in of UNIT"),
    ),
    opt.hidden("--systemd-dir", default="/etc/systemd/system"),
    opt.flag(
        "--undo",
        "revert archgap's changes, newest first: those in the site-packages of --python, the "
        "--write-env-file and the --systemd drop-in named (none named: every change)",
    ),
    opt.flag("--force", "--undo over files edited since"),
    opt.option(
        "--state-dir",
        metavar="DIR",
        help="the fix journal and its backups on the target (default: "
        "$XDG_STATE_HOME/archgap/fix of the target's user); --undo reads the same one",
    ),
    opt.output(),
    opt.TARGET,
)


def run(args: argparse.Namespace, out: Output) -> int:
    from archgap.api import fix
    from archgap.report.fix import body, plan_lines, undo_lines

    # --undo takes back the changes of the environment --python names; none named: every one
    named = getattr(args, "python_source", "") == "--python"
    python = args.python if named or not args.undo else None
    result = fix(
        python, gpus=args.gpu, target=target_from_args(args), env_from=args.env_from,
        env_file=args.env_file, systemd=args.systemd, systemd_dir=args.systemd_dir,
        state_dir=args.state_dir, apply=bool(args.apply), only=args.only, undo=bool(args.undo),
        force=bool(args.force), root=args.root, timeout=args.timeout, driver=args.driver,
    )  # fmt: skip
    if out.json_mode:
        out.emit("fix", body(result))
    else:
        lines = undo_lines(result.undo) if result.undo is not None else plan_lines(body(result))
        emit_text(lines, out)
    return result.exit_code
