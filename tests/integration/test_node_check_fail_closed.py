"""deploy/slurm/archgap-node-check fails closed, under the real slurmd of scripts/services.

What the wrapper is held to comes from the engines themselves:

- slurm.conf(5): a Prolog (or Epilog) that exits non-zero drains the node and requeues the job,
  and slurmctld keeps the reason of a node already drained (a failed Prolog's "Prolog error" does
  not replace it: test_engines_slurm shows archgap's reason surviving). A HealthCheckProgram's
  exit status is ignored: the program must drain the node itself; slurmd kills it after 60 s.
- LBNL NHC's own GPU check (scripts/lbnl_nv.nhc, check_nv_healthmon) fails the node for a helper
  that is not found (127), killed by a signal or returning any failure code, and NHC's watchdog
  fails a node whose checks time out ("Script timed out"): a check that cannot judge never passes.
- POSIX: a command not found is status 127, one found but not executable 126.

So only archgap's 0 (no gap) may leave the node in service. Each way the old wrapper turned into
a 0 (status 127, 126, 2, a killing signal, a hang that slurmd killed at 60 s, a quoted GPU name
split into a usage error, a config that could not be read) must drain the node, as the Prolog and
as the HealthCheckProgram, with a reason of its own, ``archgap: unjudged: WHY`` (an ``archgap:``
reason, which archgap's ``--drain`` lifts once the node is judged OK, as NHC lifts its own notes).
Verdicts: libptxonly.so has only compute_80 PTX (no kernel on a T4, 7.5); libmix.so has sm_75.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.hangs import Sleeper, started
from tests.helpers import good_and_old_venvs
from tests.integration.test_engines_nhc import CHECK as NHC_CHECK
from tests.integration.test_engines_nhc import HARNESS, RECORDER
from tests.integration.test_engines_slurm import (
    hook,
    job,
    responding,
    scontrol,
    state,
    wait_for,
)
from tests.integration.test_remote_services import require

ROOT = Path(__file__).resolve().parents[2]
NODE_CHECK = ROOT / "deploy" / "slurm" / "archgap-node-check"
UNJUDGED = "archgap: unjudged: "
GAP_T4 = "archgap: no-kernel: ptxkernels 0.1 on 7.5 (T4): "
GAP_TESLA_T4 = "archgap: no-kernel: ptxkernels 0.1 on 7.5 (Tesla T4): "

Cluster = tuple[dict[str, str], str, Path]


@pytest.fixture(scope="module")
def venvs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return good_and_old_venvs(tmp_path_factory.mktemp("failclosed"))


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    """The test Slurm: (env, node, hooks); the node idle before and after, no hook left."""
    info = require("slurm")
    env = {**os.environ, "SLURM_CONF": str(info["conf"])}
    node, hooks = str(info["node"]), Path(str(info["hooks"]))
    if "DRAIN" in state(env, node)[0]:  # left by a test that failed before its cleanup
        scontrol(env, "update", f"NodeName={node}", "State=RESUME")
    responding(env, node)
    try:
        yield env, node, hooks
    finally:
        for name in hooks.iterdir():
            name.unlink()
        subprocess.run(["scancel", "--full", "--user=root"], env=env, timeout=20, check=False)
        if "DRAIN" in state(env, node)[0]:
            scontrol(env, "update", f"NodeName={node}", "State=RESUME")


def shim(tmp_path: Path, mode: int = 0o755) -> Path:
    """An archgap that runs this checkout's archgap."""
    path = tmp_path / "archgap"
    path.write_text(f'#!/bin/sh\nexec {sys.executable} -m archgap "$@"\n')
    path.chmod(mode)
    return path


def wrapper(tmp_path: Path, env: dict[str, str], conf: Path, after: Path | None = None) -> str:
    """The hook that runs the wrapper with ``conf`` as its node-check.conf, as slurmd runs it (no
    PATH; SLURM_CONF given here, the test Slurm's configuration not being in the default place);
    ``after``: a file the hook appends the wrapper's exit status to once it has returned."""
    run = (f"SLURM_CONF={env['SLURM_CONF']} ARCHGAP_STATE_DIR={tmp_path / 'state'} "
           f"ARCHGAP_NODE_CHECK_CONF={conf} {NODE_CHECK}")  # fmt: skip
    if after is None:
        return f"#!/bin/sh\n{run}\n"
    return f"#!/bin/sh\n{run}\necho $? >> {after}\n"


def write_conf(tmp_path: Path, text: str) -> Path:
    conf = tmp_path / "node-check.conf"
    conf.write_text(text)
    conf.chmod(0o644)
    return conf


@dataclass(frozen=True)
class Case:
    """A way the old wrapper left a node in service: the node-check.conf that makes it, and
    what the node's drain reason must then say."""

    conf: Callable[[Path, dict[str, Path]], Path]
    reason: Callable[[str], bool]


def conf_for(tmp_path: Path, archgap: Path | str, args: str, extra: str = "") -> Path:
    """A node-check.conf: ARCHGAP, ARCHGAP_ARGS written as given (an array or a string). The
    cases that are not about the arguments use the old string form, which the old wrapper read
    too: it failed them for their own cause, not for a config it could not parse."""
    return write_conf(tmp_path, f"ARCHGAP={archgap}\nARCHGAP_ARGS={args}\n{extra}")


def _not_found(tmp_path: Path, venvs: dict[str, Path]) -> Path:
    return conf_for(
        tmp_path, tmp_path / "nonexistent" / "archgap", f'"--python {venvs["good"]} --gpu T4"'
    )


def _not_executable(tmp_path: Path, venvs: dict[str, Path]) -> Path:
    return conf_for(tmp_path, shim(tmp_path, 0o644), f'"--python {venvs["good"]} --gpu T4"')


def _usage(tmp_path: Path, venvs: dict[str, Path]) -> Path:
    return conf_for(tmp_path, shim(tmp_path), f'"--python {venvs["good"]} --gpu NOSUCHGPU"')


def _argparse_usage(tmp_path: Path, venvs: dict[str, Path]) -> Path:
    """A usage error argparse reports itself (no health line: the reason is its stderr)."""
    return conf_for(tmp_path, shim(tmp_path), f'"--python {venvs["good"]} --no-such-option"')


def _quoted_name(tmp_path: Path, venvs: dict[str, Path]) -> Path:
    """The old documented form, a string, with a quoted GPU name: split at blanks it is
    ``--gpu "'Tesla" "T4'"``, a usage error (exit 2), and the old wrapper passed the gap venv."""
    return conf_for(tmp_path, shim(tmp_path), f"\"--python {venvs['old']} --gpu 'Tesla T4'\"")


def _name_in_array(tmp_path: Path, venvs: dict[str, Path]) -> Path:
    """The array form: the name with a space is one argument, so the gap is judged."""
    return conf_for(tmp_path, shim(tmp_path), f'(--python {venvs["old"]} --gpu "Tesla T4")')


def _hang(tmp_path: Path, venvs: dict[str, Path]) -> Path:
    """An archgap that never ends (a sleeper: its pids and the marker it would leave on waking
    are checked). archgap's own time 1 s, the wrapper's grace 1 s: far below slurmd's 60 s."""
    sleeper = Sleeper(tmp_path / "hang").script(tmp_path / "hang" / "archgap")
    return conf_for(tmp_path, sleeper, f"\"--python {venvs['good']} --gpu T4\"",
                    "ARCHGAP_TIMEOUT=1\nARCHGAP_GRACE=1\n")  # fmt: skip


def _signal(tmp_path: Path, venvs: dict[str, Path]) -> Path:
    """An archgap killed by a signal (SIGUSR1 ends a process; status 128+10)."""
    killed = tmp_path / "killed-archgap"
    killed.write_text("#!/bin/sh\nkill -USR1 $$\nsleep 5\n")
    killed.chmod(0o755)
    return conf_for(tmp_path, killed, f'"--python {venvs["good"]} --gpu T4"')


def _no_python(tmp_path: Path, venvs: dict[str, Path]) -> Path:
    return conf_for(tmp_path, shim(tmp_path), '"--python /nonexistent/python --gpu T4"')


def _conf_missing(tmp_path: Path, venvs: dict[str, Path]) -> Path:
    return tmp_path / "nonexistent" / "node-check.conf"


def _conf_writable(tmp_path: Path, venvs: dict[str, Path]) -> Path:
    """A config others may change (root sources it): not read, though what it says is healthy."""
    conf = conf_for(tmp_path, shim(tmp_path), f'"--python {venvs["good"]} --gpu T4"')
    conf.chmod(0o666)
    return conf


CASES = {
    "not-found-127": Case(_not_found, lambda r: r.startswith(UNJUDGED) and
                          "nonexistent/archgap cannot be run: not found (exit 127)" in r),
    "not-executable-126": Case(_not_executable, lambda r: r.startswith(UNJUDGED) and
                               "archgap cannot be run: not executable (exit 126)" in r),
    "usage-2": Case(_usage, lambda r: r.startswith(UNJUDGED + "usage: unknown GPU")),
    "argparse-usage-2": Case(_argparse_usage, lambda r: r.startswith(UNJUDGED) and
                             "unrecognized arguments: --no-such-option" in r),
    "no-python-2": Case(_no_python, lambda r: r.startswith(UNJUDGED + "no-python: ")),
    "quoted-gpu-name-string": Case(_quoted_name, lambda r: r.startswith(UNJUDGED + "ARCHGAP_ARGS")),
    "gpu-name-in-array": Case(_name_in_array, lambda r: r.startswith(GAP_TESLA_T4)),
    "hang": Case(_hang, lambda r: r.startswith(UNJUDGED) and "did not finish within 2 s" in r),
    "signal": Case(_signal, lambda r: r.startswith(UNJUDGED) and "killed by signal 10" in r),
    "conf-missing": Case(_conf_missing, lambda r: r.startswith(UNJUDGED + "no ")),
    "conf-writable-by-others": Case(_conf_writable,
                                    lambda r: r.startswith(UNJUDGED) and "not read" in r),
}  # fmt: skip


@pytest.mark.parametrize("mode", ["prolog", "healthcheck"])
@pytest.mark.parametrize("name", list(CASES))
def test_a_node_that_cannot_be_judged_is_drained_with_its_reason(
    cluster: Cluster, tmp_path: Path, venvs: dict[str, Path], name: str, mode: str
) -> None:
    """As the Prolog the job is refused (non-zero) and the node drained with the wrapper's reason,
    not slurmd's "Prolog error"; as the HealthCheckProgram (status ignored) the wrapper drains."""
    env, node, hooks = cluster
    case = CASES[name]
    hook(hooks, mode, wrapper(tmp_path, env, case.conf(tmp_path, venvs)))
    if mode == "prolog":
        done = job(env, node)
        assert done.returncode != 0, f"the job ran: {done.stderr}"
        flags, reason = state(env, node)
    else:
        flags, reason = wait_for(env, node, drained=True)
    assert "DRAIN" in flags, (flags, reason)
    assert case.reason(reason), reason
    if name == "hang":  # stopped by the wrapper, not left behind, not ended by itself
        hooks.joinpath(mode).unlink()
        Sleeper(tmp_path / "hang").assert_cut_short()


def test_an_unjudged_drain_is_lifted_once_archgap_finds_the_node_ok(
    cluster: Cluster, tmp_path: Path, venvs: dict[str, Path]
) -> None:
    """The wrapper's drain is archgap's own (an archgap: reason, and it forgets the record that
    the node was left clear), so a healthy check afterwards resumes the node; a gap then drains
    it with archgap's line."""
    env, node, hooks = cluster
    archgap = shim(tmp_path)
    hook(hooks, "healthcheck", wrapper(tmp_path, env, _not_found(tmp_path, venvs)))
    flags, reason = wait_for(env, node, drained=True)
    assert reason.startswith(UNJUDGED), (flags, reason)
    conf = conf_for(tmp_path, archgap, f"(--python {venvs['good']} --gpu T4)")
    hook(hooks, "healthcheck", wrapper(tmp_path, env, conf))
    flags, reason = wait_for(env, node, drained=False)
    assert "DRAIN" not in flags, (flags, reason)
    conf = conf_for(tmp_path, archgap, f"(--python {venvs['old']} --gpu T4)")
    hook(hooks, "healthcheck", wrapper(tmp_path, env, conf))
    flags, reason = wait_for(env, node, drained=True)
    assert reason.startswith(GAP_T4), (flags, reason)


def test_someone_else_s_drain_keeps_its_reason(
    cluster: Cluster, tmp_path: Path, venvs: dict[str, Path]
) -> None:
    """Like NHC's node-mark-offline, a note it did not set is kept: the wrapper ran (its exit
    status 2 recorded by the hook) and the operator's reason is still the node's."""
    env, node, hooks = cluster
    scontrol(env, "update", f"NodeName={node}", "State=DRAIN", "Reason=ops: disk swap")
    done = tmp_path / "wrapper.status"
    hook(hooks, "healthcheck", wrapper(tmp_path, env, _not_found(tmp_path, venvs), after=done))
    assert started(done).split()[0] == "2"
    assert state(env, node)[1] == "ops: disk swap"


def test_a_node_marked_off_is_not_checked(cluster: Cluster, tmp_path: Path) -> None:
    """ARCHGAP_NODE_CHECK=off (a node without GPUs) is the one way to pass without a judgement:
    said in the node's own config, and logged."""
    env, node, hooks = cluster
    conf = write_conf(tmp_path, f"ARCHGAP_NODE_CHECK=off\nARCHGAP={tmp_path}/nonexistent\n")
    hook(hooks, "prolog", wrapper(tmp_path, env, conf))
    done = job(env, node)
    assert done.returncode == 0, done.stderr
    assert "DRAIN" not in state(env, node)[0]


def test_a_gpu_name_with_spaces_reaches_archgap_whole(tmp_path: Path) -> None:
    """Without slurmd: an array element arrives as one argument; a string holding a quote is
    refused before archgap runs (status 2, archgap never started)."""
    record = tmp_path / "argv"
    fake = tmp_path / "fake-archgap"
    fake.write_text(f"#!{sys.executable}\nimport json, pathlib, sys\n"
                    f"pathlib.Path({str(record)!r}).write_text(json.dumps(sys.argv[1:]))\n"
                    "print('OK')\n")  # fmt: skip
    fake.chmod(0o755)
    env = {"SLURMD_NODENAME": "node07", "ARCHGAP_STATE_DIR": str(tmp_path / "state"),
           "SLURM_CONF": "/dev/null"}  # fmt: skip

    def run(args: str) -> subprocess.CompletedProcess[str]:
        conf = conf_for(tmp_path, fake, args)
        return subprocess.run([str(NODE_CHECK)], env={**env, "ARCHGAP_NODE_CHECK_CONF": str(conf)},
                              capture_output=True, text=True, timeout=60, check=False)  # fmt: skip

    done = run('(--require "RTX PRO 6000" --gpu T4)')
    assert done.returncode == 0, done.stderr
    assert json.loads(record.read_text())[-4:] == ["--require", "RTX PRO 6000", "--gpu", "T4"]
    record.unlink()
    done = run("\"--require 'RTX PRO 6000'\"")
    assert done.returncode == 2 and UNJUDGED + "ARCHGAP_ARGS" in done.stderr, done.stderr
    assert not record.exists()


# --- NHC: deploy/nhc/archgap.nhc under NHC 1.4.3's die() (the harness of test_engines_nhc) ------


def nhc_with(tmp_path: Path, archgap: Path, *args: str) -> tuple[int, list[list[str]], str]:
    """check_archgap with ``archgap`` as ARCHGAP: NHC's exit status, its OFFLINE_NODE calls."""
    out = tmp_path / "offline.jsonl"
    recorder = tmp_path / "node-mark-offline"
    recorder.write_text(RECORDER.format(python=sys.executable, out=out))
    recorder.chmod(0o755)
    env = {**os.environ, "CHECK": str(NHC_CHECK), "OFFLINE_NODE": str(recorder),
           "ARCHGAP": str(archgap)}  # fmt: skip
    done = subprocess.run(["bash", "-c", HARNESS, "nhc", *args], capture_output=True, text=True,
                          timeout=120, env=env, check=False)  # fmt: skip
    calls = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return done.returncode, calls, done.stderr


def _nhc_killed(tmp_path: Path) -> Path:
    killed = tmp_path / "killed-archgap"
    killed.write_text("#!/bin/sh\nkill -USR1 $$\nsleep 5\n")
    killed.chmod(0o755)
    return killed


NHC_CASES: dict[str, tuple[Callable[[Path], Path], tuple[str, ...], str]] = {
    "not-found-127": (lambda t: t / "nonexistent" / "archgap", (),
                      "check_archgap:  {bin} not found or not runnable."),
    "not-executable-126": (lambda t: shim(t, 0o644), (),
                           "check_archgap:  {bin} is not executable."),
    "usage-2": (shim, ("--gpu", "NOSUCHGPU"), "archgap could not judge: usage: unknown GPU"),
    "argparse-usage-2": (shim, ("--no-such-option",), "archgap could not judge: exit 2"),
    "no-python-2": (shim, ("--python", "/nonexistent/python", "--gpu", "T4"),
                    "archgap could not judge: no-python: "),
    "signal": (_nhc_killed, (), "check_archgap:  {bin} caught fatal signal 10"),
}  # fmt: skip


@pytest.mark.parametrize("name", list(NHC_CASES))
def test_nhc_marks_a_node_that_cannot_be_judged(tmp_path: Path, name: str) -> None:
    """NHC's own rule for a helper (check_nv_healthmon): not found, killed, or any failure code
    fails the check, and die() marks the node offline with the message, whole."""
    make, args, message = NHC_CASES[name]
    archgap = make(tmp_path)
    code, calls, stderr = nhc_with(tmp_path, archgap, *args)
    assert code == 1, stderr
    assert len(calls) == 1 and calls[0][0] == "node07", (calls, stderr)
    assert calls[0][1].startswith(message.format(bin=archgap)), calls
