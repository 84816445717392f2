"""Push, not fan-out: every node writes its own document (`archgap probe --out DIR`, run by a
Slurm Epilog, a systemd timer or a DaemonSet) and one `fleet --from DIR` reads the directory.

The rule that makes it safe: rename(2) replaces a directory entry atomically, so a reader opens
either the old file or the new one, never a file half written; the writer works in a dot file
(which readers skip, as nfd-worker and node_exporter's textfile collector skip theirs) and
renames it into place.
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path

from archgap.report.console import write_atomic
from archgap.report.probe import document_path
from archgap.transport.fleet import read_documents
from tests.helpers import CUDA_BIN, install_fake_distribution, json_output, make_venv, run_cli


def _ptx_venv(tmp_path: Path) -> Path:
    """libptxonly.so has only compute_80 PTX: no kernel for a T4 (7.5)."""
    venv = tmp_path / "venv"
    install_fake_distribution(
        make_venv(venv), "ptxkernels", "0.1", {"ptxkernels/libptx.so": CUDA_BIN / "libptxonly.so"}
    )
    return venv / "bin" / "python"


def test_probe_out_and_fleet_from_round_trip(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    python = _ptx_venv(tmp_path)
    ran = run_cli("probe", "--python", str(python), "--out", str(inbox))
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == ""  # the document went to the directory, not to stdout
    host = os.uname().nodename
    (written,) = inbox.iterdir()
    assert written.name == Path(document_path(str(inbox), host)).name
    assert json.loads(written.read_text())["facts"]["host"] == host
    # The next run replaces the node's document (the same name), never adds a second one.
    assert run_cli("probe", "--python", str(python), "--out", str(inbox)).returncode == 0
    assert len(list(inbox.iterdir())) == 1
    result = run_cli("fleet", "--json", "--from", str(inbox), "--gpu", "T4")
    doc = json_output(result, "fleet")
    assert result.returncode == 1 and doc["documents"] == 1
    (judged,) = doc["hosts"]
    assert judged["name"] == host
    assert judged["gaps"][0].startswith("ptxkernels 0.1 cannot run on 7.5 (T4)")


def test_probe_out_refuses_a_missing_directory(tmp_path: Path) -> None:
    result = run_cli("probe", "--out", str(tmp_path / "absent"))
    assert result.returncode == 2 and "not a directory" in result.stderr
    assert "Traceback" not in result.stderr


def test_document_names_keep_only_safe_characters() -> None:
    """A host name is not trusted as a path: the file stays in the directory, is not a dot file
    (readers skip those) and keeps only letters, digits, '-', '_' and '.'."""
    assert document_path("/inbox", "gpu-17.cluster") == "/inbox/gpu-17.cluster.json"
    for host in ("../../etc/passwd", "..", ".hidden", "a\nb c", "", "x" * 300, "gpu\u202e7"):
        path = document_path("/inbox", host)
        name = os.path.basename(path)
        assert os.path.dirname(path) == "/inbox" and not name.startswith("."), host
        assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\.json", name) and len(name) < 255, host


def test_a_reader_never_sees_a_partial_document(tmp_path: Path) -> None:
    """A reader lists and reads the directory while nodes rewrite their documents: with `--out`
    it always reads whole documents; the same reader catches a writer that writes in place."""
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    ran = run_cli("probe", "--out", str(inbox))
    assert ran.returncode == 0, ran.stderr
    (document,) = inbox.iterdir()
    body = document.read_text()

    def read_while(writer: threading.Thread) -> list[str]:
        seen: list[str] = []
        writer.start()
        while writer.is_alive() or not seen:
            seen += [h.error_kind or "facts" for h in read_documents([str(inbox)])]
        writer.join()
        return seen

    def probe_again() -> None:  # the real command, as each node runs it, and its writer
        assert run_cli("probe", "--out", str(inbox)).returncode == 0
        for _ in range(100):
            write_atomic(str(document), body)

    seen = read_while(threading.Thread(target=probe_again))
    assert set(seen) == {"facts"}, seen
    # A writer caught mid-write leaves its dot file: the reader takes only finished documents.
    (inbox / ".archgap-1234.tmp").write_text(body[: len(body) // 2])
    assert [h.error_kind for h in read_documents([str(inbox)])] == [None]

    def write_in_place() -> None:  # what --out must not do: open, then write in pieces
        for _ in range(20):
            with document.open("w") as f:
                for start in range(0, len(body), 4096):
                    f.write(body[start : start + 4096])
                    f.flush()

    seen = read_while(threading.Thread(target=write_in_place))
    assert set(seen) - {"facts"}, "the reader never caught a file being written"
