"""`archgap fix` end to end on a copy of the real flashinfer-python 0.6.8 venv (tests/.data is
never modified) with the nvcc 12.8 stand-in: the incident's RTX PRO 6000 (12.0) fails because
FlashInfer 0.6.8's _normalize_cuda_arch raises "SM 12.x requires CUDA >= 12.9" for nvcc 12.8.
FLASHINFER_CUDA_ARCH_LIST="12.0a" bypasses that function (a suffixed value is used verbatim,
compilation_context.py:67-69) and nvcc 12.8 knows compute_120a: the gap is gone. Locally and over
ssh to the loopback sshd."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import FIXTURES, json_output, run_cli, tree_hashes
from tests.toolkit_stubs import banner_toolkit, incident_copy

VENV = "venv-flashinfer-python-0.6.8"
SM75 = "RuntimeError: FlashInfer requires GPUs with sm75 or higher"
RELEASED_SHA = "e55c7f58a83810590e18686954527cc62735a6e91c3fa67286a5e7f00afc9be5"


@pytest.fixture(scope="module")
def copied(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One copy of the venv for the module (57 MB); every test leaves it as it found it."""
    return incident_copy(tmp_path_factory.mktemp("fix"))


@pytest.fixture
def setup(copied: Path) -> Iterator[dict[str, Any]]:
    env_file = copied / "etc" / "sglang.env"
    env_file.parent.mkdir(exist_ok=True)
    env_file.write_text(f"# sglang.service EnvironmentFile\nCUDA_HOME={copied / 'cuda-12.8'}\n")
    venv = copied / "venv"
    context = next(venv.glob("lib/python*/site-packages/flashinfer/compilation_context.py"))
    before = tree_hashes(venv)
    yield {"tmp": copied, "venv": venv, "env": env_file, "context": context}
    assert tree_hashes(venv) == before  # the test undid what it applied
    shutil.rmtree(copied / "state", ignore_errors=True)


def fix(s: dict[str, Any], *extra: str, env: dict[str, str] | None = None) -> tuple[int, Any]:
    args = ["fix", "--python", str(s["venv"] / "bin" / "python"), "--gpu", "RTX PRO 6000"]
    args += ["--env-from", str(s["env"]), "--state-dir", str(s["tmp"] / "state"), "--json"]
    result = run_cli(*args, *extra, env={"CUDA_HOME": "", **(env or {})})
    assert result.stderr == "" or result.returncode != 0, result.stderr
    return result.returncode, json_output(result, "fix")


def refusal(s: dict[str, Any], *extra: str) -> str:
    """The one line a usage refusal (exit 2) prints; nothing of the target is changed."""
    args = ["fix", "--python", str(s["venv"] / "bin" / "python"), "--gpu", "RTX PRO 6000"]
    args += ["--env-from", str(s["env"]), "--state-dir", str(s["tmp"] / "state")]
    before = tree_hashes(s["tmp"])
    result = run_cli(*args, *extra, env={"CUDA_HOME": ""})
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result
    assert tree_hashes(s["tmp"]) == before
    return result.stderr


def scan_gap(s: dict[str, Any]) -> tuple[int, list[dict[str, Any]]]:
    result = run_cli(
        "scan",
        "--python",
        str(s["venv"] / "bin" / "python"),
        "--gpu",
        "RTX PRO 6000",
        "--env-from",
        str(s["env"]),
        "--json",
        env={"CUDA_HOME": ""},
    )
    doc = json_output(result, "scan")
    fails = [f for f in doc["jit"] if f["status"] == "fails"]
    return result.returncode, fails


def test_env_file_is_the_deprecated_name_of_write_env_file(setup: dict[str, Any]) -> None:
    # --env-from reads an environment, fix writes one: the writing option says so in its name;
    # the old name still plans the same change, with a warning that names the new one.
    args = ["fix", "--python", str(setup["venv"] / "bin" / "python"), "--gpu", "RTX PRO 6000"]
    args += ["--env-from", str(setup["env"]), "--state-dir", str(setup["tmp"] / "state"), "--json"]
    old = run_cli(*args, "--env-file", str(setup["env"]), env={"CUDA_HOME": ""})
    assert "--env-file is deprecated: use --write-env-file" in old.stderr
    code, new = fix(setup, "--write-env-file", str(setup["env"]))
    assert old.returncode == code == 1
    assert json_output(old, "fix")["actions"] == new["actions"]


def test_dry_run_then_env_fix_then_undo_over_a_hand_edit(setup: dict[str, Any]) -> None:
    before = tree_hashes(setup["tmp"])
    code, doc = fix(setup, "--write-env-file", str(setup["env"]))
    # The dry run: every file of the venv, the env file and the toolkit as they were, no journal.
    assert tree_hashes(setup["tmp"]) == before and not (setup["tmp"] / "state").exists()
    assert code == 1 and doc["gap"] is True and doc["applied"] is None
    kinds = {a["kind"]: a for a in doc["actions"]}
    assert set(kinds) >= {"env", "upgrade", "patch"}
    assert all(SM75 in a["removes"][0] for a in doc["actions"])
    assert "+FLASHINFER_CUDA_ARCH_LIST=12.0a" in kinds["env"]["diff"]
    assert kinds["upgrade"]["command"][-1] == "flashinfer-python>=0.7.1"
    assert kinds["upgrade"]["needs_only"] and kinds["patch"]["needs_only"]
    raised = '-                raise RuntimeError("SM 12.x requires CUDA >= 12.9")'
    assert raised in kinds["patch"]["diff"]

    original = setup["env"].read_bytes()
    code, doc = fix(setup, "--write-env-file", str(setup["env"]), "--apply", "--only", "env")
    assert code == 0, doc
    assert [c["path"] for c in doc["applied"]["changed"]] == [str(setup["env"])]
    assert [v["status"] for v in doc["verified"]] == ["gone"]
    assert setup["env"].read_text() == original.decode() + "FLASHINFER_CUDA_ARCH_LIST=12.0a\n"
    assert scan_gap(setup) == (0, [])  # the service's env file, scanned as the service sees it

    with setup["env"].open("a") as handle:  # a hand edit after archgap's
        handle.write("SGLANG_LOG=debug\n")
    edited = setup["env"].read_bytes()
    code, doc = fix(setup, "--undo", "--write-env-file", str(setup["env"]))
    assert code == 3 and doc["undo"]["restored"] == []
    assert "+SGLANG_LOG=debug" in doc["undo"]["refused"][0]["diff"]
    assert setup["env"].read_bytes() == edited
    code, doc = fix(setup, "--undo", "--write-env-file", str(setup["env"]), "--force")
    assert code == 0 and setup["env"].read_bytes() == original


def test_patch_removes_the_gap_and_undo_restores_every_file(setup: dict[str, Any]) -> None:
    before = tree_hashes(setup["tmp"])
    code, doc = fix(setup, "--apply", "--only", "patch")
    (changed,) = doc["applied"]["changed"]
    assert changed["path"] == str(setup["context"]) and changed["sha256_before"] == RELEASED_SHA
    code, fails = scan_gap(setup)
    assert code == 0 and fails == []  # the failure is no longer predicted: the new scan
    # recognises archgap's own patch by the file's hash (kb/patches.json sha256_after).
    assert [v["status"] for v in doc["verified"]] == ["gone"]
    # Nothing is left to change: --apply says and exits what the dry run does (no gap: 0).
    args = ["fix", "--python", str(setup["venv"] / "bin" / "python"), "--gpu", "RTX PRO 6000"]
    args += ["--env-from", str(setup["env"]), "--state-dir", str(setup["tmp"] / "state")]
    dry, applied = (
        run_cli(*args, env={"CUDA_HOME": ""}),
        run_cli(*args, "--apply", env={"CUDA_HOME": ""}),
    )
    assert (applied.returncode, applied.stdout) == (dry.returncode, dry.stdout) == (0, dry.stdout)
    code, doc = fix(setup, "--undo")
    assert code == 0 and [r["path"] for r in doc["undo"]["restored"]] == [str(setup["context"])]
    after = tree_hashes(setup["tmp"])
    state = {k for k in after if k.startswith("state/")}
    assert {k: v for k, v in after.items() if k not in state} == before


def test_refusals_are_reasons_and_exit_3(setup: dict[str, Any]) -> None:
    missing = setup["tmp"] / "no-such-dir" / "x.env"
    code, doc = fix(setup, "--write-env-file", str(missing), "--apply")
    assert code == 3 and "does not exist" in doc["applied"]["error"]
    assert not missing.parent.exists()
    (setup["tmp"] / "state").mkdir(exist_ok=True)
    (setup["tmp"] / "state" / "journal.json").write_text("[")
    before = setup["env"].read_bytes()
    code, doc = fix(setup, "--write-env-file", str(setup["env"]), "--apply")
    assert code == 3 and "is corrupt" in doc["applied"]["error"]
    assert setup["env"].read_bytes() == before
    code, doc = fix(setup, "--undo")
    assert code == 3 and "is corrupt" in doc["undo"]["error"]
    (setup["tmp"] / "state" / "journal.json").unlink()


def test_no_destination_prints_export_lines_and_systemd_gets_a_drop_in(
    setup: dict[str, Any],
) -> None:
    refused = refusal(setup, "--apply", "--only", "env")  # the variables and nowhere to write
    assert "nowhere to write the variables" in refused
    code, doc = fix(setup)
    assert doc["exports"] and all(x.startswith("export ") for x in doc["exports"])
    unit_dir = setup["tmp"] / "systemd"
    (unit_dir / "sglang.service.d").mkdir(parents=True)
    args = ("--systemd", "sglang", "--systemd-dir", str(unit_dir), "--apply", "--only", "env")
    code, doc = fix(setup, *args)
    dropin = unit_dir / "sglang.service.d" / "50-archgap.conf"
    assert dropin.read_text() == '[Service]\nEnvironment="FLASHINFER_CUDA_ARCH_LIST=12.0a"\n'
    assert doc["reload"] == "systemctl daemon-reload && systemctl restart sglang.service"
    assert code == 1 and [v["status"] for v in doc["verified"]] == ["not-confirmed"]
    code, doc = fix(setup, "--undo")  # the environment named: the drop-in is not its change
    assert code == 0 and doc["undo"]["kept"] == [str(dropin)] and dropin.exists()
    fix(setup, "--undo", "--systemd", "sglang", "--systemd-dir", str(unit_dir))
    assert not dropin.exists()


def test_over_ssh_patch_and_undo(setup: dict[str, Any]) -> None:
    from tests.integration.test_remote_services import require, ssh_env

    require("ssh")
    before = tree_hashes(setup["tmp"])
    code, doc = fix(setup, "--host", "gamma", "--apply", "--only", "patch", env=ssh_env())
    assert doc["applied"]["error"] is None, doc
    assert hashlib.sha256(setup["context"].read_bytes()).hexdigest() != RELEASED_SHA
    assert scan_gap(setup)[0] == 0
    with setup["env"].open("a") as handle:  # an edit of a file archgap did not change: no refusal
        handle.write("# note\n")
    del before["etc/sglang.env"]
    code, doc = fix(setup, "--host", "gamma", "--undo", env=ssh_env())
    assert code == 0 and len(doc["undo"]["restored"]) == 1
    after = {k: v for k, v in tree_hashes(setup["tmp"]).items() if not k.startswith("state/")}
    del after["etc/sglang.env"]
    assert after == before and doc["undo"]["error"] is None


def test_upgrade_runs_only_when_named_and_reports_what_pip_did(setup: dict[str, Any]) -> None:
    # The plain --apply leaves the upgrade out (and refuses: no env file or unit is named).
    assert "add --write-env-file FILE" in refusal(setup, "--apply")
    # --only upgrade runs `PYTHON -m pip install 'flashinfer-python>=0.7.1'` in the target's
    # interpreter. This venv was made --without-pip: pip's own failure is reported, nothing is
    # installed, the gap remains (exit 1), and nothing is journaled (pip is not undoable).
    code, doc = fix(setup, "--apply", "--only", "upgrade")
    (ran,) = doc["applied"]["upgrades"]
    assert ran["argv"][-3:] == ["pip", "install", "flashinfer-python>=0.7.1"]
    assert ran["returncode"] == 1 and "No module named pip" in ran["output"]
    assert code == 1 and [v["status"] for v in doc["verified"]] == ["remains"]


# --- issue 43: fixes a service will accept ------------------------------------------------------

INCIDENT_LOG = FIXTURES / "explain_corpus" / "sglang-incident-flashinfer-0.6.8.log"


def test_an_env_file_gets_cuda_home_and_never_the_callers_path(setup: dict[str, Any]) -> None:
    """What a service reads gets only the variables the fix needs. systemd.exec(5): in
    Environment= "variable expansion is not performed inside the strings, and the $ character
    has no special meaning", and EnvironmentFile= holds the same assignments; `docker run
    --env-file` takes each VAR=value line literally. So `PATH=/usr/local/cuda-12.9/bin:$PATH`
    would set PATH to that text, and expanding $PATH here would freeze this shell's PATH (pyenv
    shims, cargo, archgap's own venv) into the service. FlashInfer runs $CUDA_HOME/bin/nvcc
    (jit/cpp_ext.py): CUDA_HOME alone moves it to the other toolkit."""
    root = setup["tmp"] / "sysroot"  # a recorded system tree: its /usr/local/cuda-12.{8,9}
    for version in ("12.8", "12.9"):
        banner_toolkit(root / "usr" / "local", version)
    app = setup["tmp"] / "etc" / "app.env"  # a new env file; no --env-from: the shell's is read
    shell = {
        "CUDA_HOME": "/usr/local/cuda-12.8",
        "PATH": f"/home/u/.pyenv/shims:/home/u/.cargo/bin:{os.environ['PATH']}",
    }
    args = ["fix", "--python", str(setup["venv"] / "bin" / "python"), "--gpu", "RTX PRO 6000"]
    args += ["--write-env-file", str(app), "--root", str(root), "--json"]
    args += ["--state-dir", str(setup["tmp"] / "state")]
    doc = json_output(run_cli(*args, env=shell), "fix")
    (toolkit,) = [a for a in doc["actions"] if a["kind"] == "toolkit"]
    assert toolkit["env"] == [["CUDA_HOME", "/usr/local/cuda-12.9"]], toolkit
    assert not [n for a in doc["actions"] for n, _ in a["env"] if n == "PATH"]
    assert "PATH" not in toolkit["diff"] and "no PATH line" in toolkit["note"]
    assert ".pyenv" not in json.dumps(doc)
    done = run_cli(*args, "--apply", "--only", "toolkit", env=shell)
    assert app.read_text() == "CUDA_HOME=/usr/local/cuda-12.9\n"
    verified = json_output(done, "fix")["verified"]
    assert done.returncode == 0 and [v["status"] for v in verified] == ["gone"], verified
    assert fix(setup, "--undo", "--write-env-file", str(app))[0] == 0 and not app.exists()
    shutil.rmtree(root)


def test_the_dry_run_says_where_apply_writes_or_that_it_has_nowhere(
    setup: dict[str, Any],
) -> None:
    """--apply with the variables and no env file or unit changed nothing and exited 1, and the
    plan never said so: the dry run now says it, and --apply refuses before anything."""
    base = ["fix", "--python", str(setup["venv"] / "bin" / "python"), "--gpu", "RTX PRO 6000"]
    base += ["--env-from", str(setup["env"]), "--state-dir", str(setup["tmp"] / "state")]
    nowhere = run_cli(*base, env={"CUDA_HOME": ""})
    assert nowhere.returncode == 1
    assert "--apply has nowhere to write the variables: add --write-env-file" in nowhere.stdout
    written = run_cli(*base, "--write-env-file", str(setup["env"]), env={"CUDA_HOME": ""})
    assert f"--apply writes {setup['env']}." in written.stdout, written.stdout
    assert "add --write-env-file FILE" in refusal(setup, "--apply")
    assert "--state-dir" in run_cli("fix", "--help").stdout  # docs/mcp.md names it


def _scan_text(s: dict[str, Any]) -> str:
    python = str(s["venv"] / "bin" / "python")
    args = ["--python", python, "--gpu", "RTX PRO 6000", "--env-from", str(s["env"])]
    return run_cli("scan", *args, env={"CUDA_HOME": "", "COLUMNS": "400"}).stdout


def test_scan_recognises_archgaps_own_patch_and_says_how_to_undo_it(
    setup: dict[str, Any],
) -> None:
    """After `fix --apply --only patch` the installed file's sha256 is the patch's sha256_after
    (kb/patches.json): scan says it is archgap's patch and how to take it back, and neither
    predicts the failure again nor proposes the patch it already holds."""
    before = _scan_text(setup)
    assert "patch flashinfer/compilation_context.py" in before and SM75 in before
    _, doc = fix(setup, "--apply", "--only", "patch")
    assert doc["applied"]["error"] is None, doc
    after = _scan_text(setup)
    python = setup["venv"] / "bin" / "python"
    assert "patched by archgap fix" in after, after
    assert f"undo: archgap fix --undo --python {python}" in after
    assert "patch flashinfer/compilation_context.py" not in after and SM75 not in after
    assert fix(setup, "--undo")[0] == 0
    assert "patched by archgap fix" not in _scan_text(setup)


def _numbered(lines: str, pattern: str) -> dict[str, str]:
    """{fix text: its number} of the lines ``pattern`` (groups: number, text) matches."""
    return {m.group(2): m.group(1) for m in re.finditer(pattern, lines, re.MULTILINE)}


def test_scan_explain_and_fix_number_the_same_fixes_alike(setup: dict[str, Any]) -> None:
    """One numbering: a fix is "fix N" in scan, "N." in explain's fixes and "N. kind" in fix's
    plan (fix numbered its upgrade 3 and its patch 4, scan the other way round)."""
    python = str(setup["venv"] / "bin" / "python")
    where = ["--python", python, "--gpu", "RTX PRO 6000", "--env-from", str(setup["env"])]
    wide = {"CUDA_HOME": "", "COLUMNS": "400"}
    scan = _numbered(_scan_text(setup), r"^\s+fix (\d+): (.*)$")
    explained = run_cli("explain", str(INCIDENT_LOG), *where, env=wide).stdout
    explain = _numbered(explained, r"^\s*(\d+)\. \[\w+\] (.*?)(?:: pip install .*)?$")
    planned = run_cli("fix", *where, "--write-env-file", str(setup["env"]), env=wide).stdout
    plan = _numbered(planned, r"^([\d, ]+)\. \w+: (.*?)(?: \(applied only with .*)?$")
    assert len(plan) >= 4 and set(plan.values()) <= set(scan.values()), (plan, scan)
    for text, number in [*plan.items(), *explain.items()]:
        assert scan[text] == number, (text, number, scan)


def test_undo_takes_back_only_the_environment_it_names(setup: dict[str, Any]) -> None:
    """A patch made in the incident's venv is not taken back by `fix --undo --python OTHER`
    (another environment: its site-packages do not hold the file); it is listed as kept. The
    environment that holds it takes it back."""
    code, doc = fix(setup, "--apply", "--only", "patch")
    patched = setup["context"].read_bytes()
    args = ["fix", "--undo", "--python", sys.executable, "--json"]
    other = run_cli(*args, "--state-dir", str(setup["tmp"] / "state"))
    undone = json_output(other, "fix")["undo"]
    assert other.returncode == 0 and undone["restored"] == [], undone
    assert undone["kept"] == [str(setup["context"])]
    assert setup["context"].read_bytes() == patched
    code, doc = fix(setup, "--undo")  # --python: the venv that holds the patch
    assert code == 0 and [r["path"] for r in doc["undo"]["restored"]] == [str(setup["context"])]
