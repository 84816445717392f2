"""A remote scan names its target in every report: text, markdown, the summary line, JSON and
-v. The target here is a real command prefix (``--via env``: the probe travels over stdin to a
python3 that ``env`` starts), the path every remote target (ssh, a container, a pod) takes."""

from __future__ import annotations

import json

import jsonschema
import pytest

from archgap.cli import main
from archgap.report.jsondoc import schema


@pytest.mark.parametrize("form", ["text", "markdown", "summary", "json"])
def test_every_report_of_a_remote_scan_names_the_target(
    form: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["scan", "--via", "env", "--gpu", "12.0", "--format", form, "-v"]) == 0
    out, err = capsys.readouterr()
    assert "archgap: scanning env" in err.splitlines()
    if form == "json":
        doc = json.loads(out)
        jsonschema.validate(doc, schema("scan"))
        assert doc["target"] == "env"
    else:
        # The line naming the interpreter names the machine it is on.
        python_line = next(line for line in out.splitlines() if "Python" in line)
        assert " on env" in python_line, out


def test_a_local_scan_names_no_target(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scan", "--gpu", "12.0", "--json"]) == 0
    assert "target" not in json.loads(capsys.readouterr().out)


def test_the_text_report_is_lines_and_the_table_between_them() -> None:
    # report.scan.text renders in-process what the CLI prints: markup lines, the package table
    # as a table (the CLI fits it to the terminal), the verdict last.
    from archgap.api import scan
    from archgap.report.scan import text
    from archgap.report.table import Table
    from archgap.transport.target import via_target

    report = scan(gpus=["12.0"], target=via_target("env", "python3"))
    blocks = text(report, libs=False, elapsed=0.5)
    assert isinstance(blocks[0], str) and blocks[0].startswith("[bold]Python[/] ")
    assert ") on env" in blocks[0]  # the interpreter's version, then where it runs
    tables = [b for b in blocks if isinstance(b, Table)]
    assert len(tables) <= 1 and isinstance(blocks[-1], str)
    assert "on a present or named GPU" in blocks[-1]
