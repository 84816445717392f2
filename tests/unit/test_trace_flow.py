"""Knobs (env vars feeding a write, through calls) and swallowed exceptions, on a hand-made package
that has the shape of the FlashInfer incident: a constructor fills a set in a try whose broad
except only logs, through a helper in another module that reads CUDA_HOME and can raise."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from archgap.probe.source.trace import trace

CONTEXT = textwrap.dedent(
    """\
    import logging
    import os

    from .tools import version_at_least

    logger = logging.getLogger(__name__)
    DEFAULT = os.getenv("PKG_DEFAULT_ARCH")


    class Context:
        @staticmethod
        def normalize(major):
            if major == 12:
                if version_at_least("12.9"):
                    return (12, "0f")
                raise RuntimeError("SM 12.x needs 12.9")
            return (major, "0")

        def __init__(self):
            self.ARCHS = set()
            if "PKG_ARCH_LIST" in os.environ:
                self.ARCHS.add(os.environ["PKG_ARCH_LIST"])
            else:
                try:
                    for device in range(count_devices()):
                        self.ARCHS.add(self.normalize(device))
                except Exception as e:
                    logger.warning("failed: %s", e)

        def strict(self):
            try:
                self.ARCHS.add(DEFAULT)
            except Exception:
                raise
    """
)

TOOLS = textwrap.dedent(
    """\
    import os
    import subprocess


    def cuda_path():
        home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
        if home is None:
            raise RuntimeError("no CUDA")
        return home


    def cuda_version():
        try:
            return subprocess.check_output([cuda_path() + "/bin/nvcc", "--version"])
        except RuntimeError:
            return "0"


    def version_at_least(wanted):
        return cuda_version() >= wanted
    """
)


def make_package(tmp_path: Path) -> Path:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "context.py").write_text(CONTEXT)
    (package / "tools.py").write_text(TOOLS)
    return package


def test_knobs_reach_the_writes_through_the_call_chain(tmp_path: Path) -> None:
    package = make_package(tmp_path)
    facts = trace("ARCHS", [str(tmp_path)])
    writes = {o.line: o for o in facts.occurrences if o.kind == "write"}
    assert sorted(writes) == [20, 22, 26, 32]
    knobs = {k.variable: k for k in writes[20].knobs}
    assert set(knobs) == {"PKG_ARCH_LIST", "CUDA_HOME", "CUDA_PATH"}
    cuda_home = knobs["CUDA_HOME"]
    assert (Path(cuda_home.path), cuda_home.line) == (package / "tools.py", 6)
    assert [f.function for f in cuda_home.call_path] == [
        "pkg.context.Context.__init__",
        "pkg.context.Context.normalize",
        "pkg.tools.version_at_least",
        "pkg.tools.cuda_version",
        "pkg.tools.cuda_path",
    ]
    assert [f.line for f in cuda_home.call_path] == [26, 14, 20, 14, 6]
    # A module-level constant read from the environment feeds the function that uses it.
    strict = {k.variable: k for k in writes[32].knobs}
    assert set(strict) == {"PKG_DEFAULT_ARCH"}
    assert [f.line for f in strict["PKG_DEFAULT_ARCH"].call_path] == [32, 7]


def test_the_broad_except_that_only_logs_is_reported_with_what_it_hides(tmp_path: Path) -> None:
    make_package(tmp_path)
    facts = trace("ARCHS", [str(tmp_path)])
    writes = {o.line: o for o in facts.occurrences if o.kind == "write"}
    assert [o.swallowed for o in (writes[20], writes[22])] == [(), ()]
    assert writes[32].swallowed == ()  # its handler re-raises: nothing is swallowed
    (swallow,) = writes[26].swallowed
    assert (swallow.try_line, swallow.except_line) == (24, 27)
    assert swallow.handler == "except Exception as e:"
    assert swallow.action.startswith("logger.warning(")
    raised = {(Path(r.path).name, r.line, r.message) for r in swallow.raisers}
    # "no CUDA" is raised inside cuda_version's try and caught there: it cannot reach line 27.
    assert raised == {("context.py", 16, "SM 12.x needs 12.9")}
    (raiser,) = swallow.raisers
    assert raiser.exception == "RuntimeError"
    assert [(f.function.rsplit(".", 1)[-1], f.line) for f in raiser.call_path] == [
        ("__init__", 26),
        ("normalize", 16),
    ]
    assert [(c.call, c.line) for c in swallow.external_calls] == [("count_devices", 25)]


def test_nothing_is_written_into_the_inspected_tree(tmp_path: Path) -> None:
    make_package(tmp_path)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    trace("ARCHS", [str(tmp_path)])
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_trace_and_gates_are_probe_sections(tmp_path: Path) -> None:
    from archgap.codec import decode
    from archgap.probe.collect import collect
    from archgap.probe.environment.system import System
    from archgap.probe.facts import GatesFacts, TraceFacts

    make_package(tmp_path)
    request = {
        "trace": {"name": "ARCHS", "paths": [str(tmp_path)]},
        "gates": {"paths": [str(tmp_path)]},
    }
    facts = json.loads(json.dumps(collect(request, System.local())))  # as it crosses the wire
    assert facts["errors"] == {}
    traced = decode(TraceFacts, facts["sections"]["trace"])
    assert [o.line for o in traced.occurrences if o.kind == "write"] == [20, 22, 26, 32]
    gated = decode(GatesFacts, facts["sections"]["gates"])
    (target,) = gated.targets
    found = {f.function: [(g.line, g.kind) for g in f.gates] for f in target.functions}
    assert found == {
        "<module>": [(7, "arch-env")],  # os.getenv("PKG_DEFAULT_ARCH")
        "Context.normalize": [(13, "comparison"), (16, "raise")],
        "Context.__init__": [(21, "arch-env"), (22, "arch-env")],
    }
    bad = collect({"trace": {"name": "a;b"}}, System.local())["sections"]["trace"]
    assert bad["error"] == "not a traceable name: 'a;b'"


def test_an_in_place_method_is_a_write_and_not_a_call_into_other_code(tmp_path: Path) -> None:
    # set.discard and dict.popitem change the container in place (Python's own docs of set and
    # dict): trace must count them as writes, and the swallowed-exception analysis must not list
    # them as calls into other code that may raise.
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "context.py").write_text(
        textwrap.dedent(
            """\
            import logging

            logger = logging.getLogger(__name__)


            class Context:
                def __init__(self):
                    self.ARCHS = {"8.0": 1}
                    try:
                        self.ARCHS.popitem()
                        self.ARCHS.discard(probe_devices())
                    except Exception as e:
                        logger.warning("failed: %s", e)
            """
        )
    )
    facts = trace("ARCHS", [str(tmp_path)])
    writes = {o.line: o for o in facts.occurrences if o.kind == "write"}
    assert sorted(writes) == [8, 10, 11]
    (swallow,) = writes[11].swallowed
    assert [(c.call, c.line) for c in swallow.external_calls] == [("probe_devices", 11)]
