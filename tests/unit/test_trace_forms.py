"""archgap trace on small hand-written sources: every write and read form, classified by line.

Each source line carries its expectation as a trailing ``# expect KIND FORM`` comment (several
separated by ";"); a line without one must yield nothing. The expectations are written by hand
from the Python grammar, not taken from the scanner's output.
"""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path

import pytest

from archgap.probe.facts import Occurrence
from archgap.probe.source import files
from archgap.probe.source.sourcefile import SourceFile
from archgap.probe.source.trace import trace, valid_name

FORMS = '''
import os
import X  # expect write import
import pkg.X.sub  # expect read import
from mod import X as other  # expect read import
from mod import thing as X  # expect write import
from X.y import z  # expect read import-from
X = 1  # expect write assign
X += 2  # expect write augassign
X: int = 3  # expect write annassign
a, X = 1, 2  # expect write unpack
[b, *X] = [1, 2]  # expect write unpack
for X in range(3):  # expect write for
    pass
with open("f") as X:  # expect write with
    pass
X.add(1)  # expect write mutate:.add
X.append(1)  # expect write mutate:.append
X.extend([1])  # expect write mutate:.extend
X.update({})  # expect write mutate:.update
X.insert(0, 1)  # expect write mutate:.insert
X.setdefault("k", 1)  # expect write mutate:.setdefault
X.pop()  # expect write mutate:.pop
X.clear()  # expect write mutate:.clear
X["k"] = 1  # expect write subscript-assign
del X["k"]  # expect write del
del X  # expect write del
obj.X = 5  # expect write assign
obj.X.y = 5  # expect write attribute-assign
obj.X[0] = 5  # expect write subscript-assign
d["X"] = 1  # expect write subscript-assign
os.environ["X"] = "1"  # expect write subscript-assign
setattr(obj, "X", 1)  # expect write setattr
cache.setdefault("X", 2)  # expect write mutate:.setdefault
(X := 5)  # expect write walrus
squares = [1 for X in range(3)]  # expect write for
print(X)  # expect read name
y = obj.X  # expect read attribute
v = d["X"]  # expect read key
os.environ.get("X")  # expect read string-key
f(X=1)  # expect read keyword
msg = "the X value"  # expect read string
XY = X_Y = 1
"""A bare string that mentions X is documentation, not code."""
# a comment that mentions X


def X():  # expect write def
    """Docstring about X."""
    global X  # expect write global
    return X  # expect read name


class X:  # expect write class
    pass


def g(X):  # expect write parameter
    pass


try:
    pass
except ValueError as X:  # expect write except-as
    pass
'''


def expectations(source: str) -> set[tuple[int, str, str]]:
    expected = set()
    for number, line in enumerate(source.splitlines(), start=1):
        match = re.search(r"# expect (.*)$", line)
        if match:
            for item in match.group(1).split(";"):
                kind, form = item.split()
                expected.add((number, kind, form))
    return expected


def found(occurrences: tuple[Occurrence, ...]) -> set[tuple[int, str, str]]:
    return {(o.line, o.kind, o.form) for o in occurrences}


def write_module(tmp_path: Path, text: str, name: str = "mod.py") -> Path:
    package = tmp_path / "pkg"
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text("")
    path = package / name
    path.write_text(text)
    return path


def test_every_write_and_read_form_at_module_level(tmp_path: Path) -> None:
    write_module(tmp_path, FORMS)
    facts = trace("X", [str(tmp_path)])
    assert facts.problems == ()
    assert found(facts.occurrences) == expectations(FORMS)


def test_the_same_forms_inside_an_indented_method(tmp_path: Path) -> None:
    # The scanner parses only the def around a hit: indent every form into a method.
    body = "\n".join(
        line for line in FORMS.splitlines() if not line.startswith(("def ", "class ", "try"))
    )
    body = body.split("\n\n\n")[0]  # the module-level part, before the defs
    source = "import os\n\n\nclass Holder:\n    def method(self):\n" + textwrap.indent(
        body.replace("import os\n", ""), "        "
    )
    path = write_module(tmp_path, source)
    facts = trace("X", [str(tmp_path)])
    assert facts.problems == ()
    assert found(facts.occurrences) == expectations(source)
    assert {o.function for o in facts.occurrences} == {"Holder.method"}
    assert all(o.path == str(path) for o in facts.occurrences)


def test_writes_come_first_and_the_defining_file_leads(tmp_path: Path) -> None:
    write_module(tmp_path, "from pkg.b import LIMIT\n\nprint(LIMIT)\nLIMIT2 = LIMIT\n", "a.py")
    write_module(tmp_path, "LIMIT = 3\n", "b.py")
    write_module(tmp_path, "def f(cfg):\n    cfg.LIMIT = 4\n", "c.py")
    facts = trace("LIMIT", [str(tmp_path)])
    kinds = [o.kind for o in facts.occurrences]
    assert kinds == sorted(kinds, key=lambda k: k != "write")
    assert facts.defining_files == (str(tmp_path / "pkg" / "b.py"),)
    first = facts.occurrences[0]
    assert (Path(first.path).name, first.line, first.form) == ("b.py", 1, "assign")
    assert [(Path(o.path).name, o.line) for o in facts.occurrences if o.kind == "read"] == [
        ("a.py", 3),
        ("a.py", 4),
    ]


def test_branch_conditions_of_a_write(tmp_path: Path) -> None:
    source = textwrap.dedent(
        """\
        import os


        class Ctx:
            def __init__(self):
                self.ARCHS = set()
                if "ARCH_LIST" in os.environ:
                    for arch in os.environ["ARCH_LIST"].split():
                        if arch.endswith("a"):
                            self.ARCHS.add(arch)
                        else:
                            self.ARCHS.add(arch + "x")
                else:
                    try:
                        self.ARCHS.add(probe())
                    except Exception:
                        self.ARCHS = None
        """
    )
    write_module(tmp_path, source)
    by_line = {o.line: o for o in trace("ARCHS", [str(tmp_path)]).occurrences}
    assert [(g.kind, g.condition) for g in by_line[6].branch] == []
    assert [(g.kind, g.condition) for g in by_line[10].branch] == [
        ("if", '"ARCH_LIST" in os.environ'),
        ("for", 'arch in os.environ["ARCH_LIST"].split()'),
        ("if", 'arch.endswith("a")'),
    ]
    assert [g.kind for g in by_line[12].branch] == ["if", "for", "else"]
    assert [(g.kind, g.line) for g in by_line[15].branch] == [("else", 7), ("try", 14)]
    assert [(g.kind, g.condition) for g in by_line[17].branch] == [
        ("else", '"ARCH_LIST" in os.environ'),
        ("except", "Exception"),
    ]
    assert by_line[6].function == "Ctx.__init__"


def test_dotted_name_matches_only_that_attribute_chain(tmp_path: Path) -> None:
    write_module(
        tmp_path,
        "import torch\n\nx = torch.cuda.get_device_capability(0)\n"
        "y = other.get_device_capability()\nget_device_capability = 1\n",
    )
    facts = trace("torch.cuda.get_device_capability", [str(tmp_path)])
    assert found(facts.occurrences) == {(3, "read", "attribute")}


def test_comments_docstrings_and_longer_names_are_not_occurrences(tmp_path: Path) -> None:
    source = textwrap.dedent(
        '''\
        """Module docstring with a column-0 line:
        def ARCHS():
            ARCHS = 1
        """
        # ARCHS in a comment
        ARCHS_EXTRA = 1
        MY_ARCHS = 2


        def f():
            """ARCHS in a docstring."""
            return 1
        '''
    )
    write_module(tmp_path, source)
    facts = trace("ARCHS", [str(tmp_path)])
    assert facts.occurrences == ()
    assert facts.candidate_files == 1


def test_unparseable_and_binary_files_are_reported_and_skipped(tmp_path: Path) -> None:
    # Only what encloses a hit is parsed: the syntax error is in the hit's own statement.
    write_module(tmp_path, "def broken():\n    NAME = = 1\n", "bad.py")
    (tmp_path / "pkg" / "junk.py").write_bytes(b"\x00\xff\xfeNAME\x00\x81garbage")
    write_module(tmp_path, "NAME = 2\n", "good.py")
    facts = trace("NAME", [str(tmp_path)])
    assert found(facts.occurrences) == {(1, "write", "assign")}
    subjects = {Path(p.subject).name: p.reason for p in facts.problems}
    assert set(subjects) == {"bad.py", "junk.py"}
    assert "does not parse" in subjects["bad.py"]


def test_pep263_coding_cookie_is_respected(tmp_path: Path) -> None:
    text = "# -*- coding: latin-1 -*-\nNOM = 'caf\xe9'\nprint(NOM)\n"
    (tmp_path / "latin.py").write_bytes(text.encode("latin-1"))
    facts = trace("NOM", [str(tmp_path / "latin.py")])
    assert facts.problems == ()
    assert [(o.line, o.text) for o in facts.occurrences] == [
        (2, "NOM = 'café'"),
        (3, "print(NOM)"),
    ]


def test_a_decorated_nested_def_and_a_def_in_a_string_at_column_0(tmp_path: Path) -> None:
    source = textwrap.dedent(
        """\
        class A:
            @staticmethod
            def helper():
                TEMPLATE = '''
        def not_code():
            VALUE = 1
        '''
                VALUE = 2
                return TEMPLATE, VALUE
        """
    )
    write_module(tmp_path, source)
    facts = trace("VALUE", [str(tmp_path)])
    assert found(facts.occurrences) == {
        (6, "read", "string"),
        (8, "write", "assign"),
        (9, "read", "name"),
    }
    assert {o.function for o in facts.occurrences} == {"A.helper"}


@pytest.mark.parametrize(
    "name", ["TARGET_CUDA_ARCHS", "torch.cuda.get_device_capability", "cuda-arch", "a/b:c"]
)
def test_valid_names(name: str) -> None:
    assert valid_name(name)


@pytest.mark.parametrize(
    "name", ["", "a;b", "$(id)", "a b", "`x`", "a|b", "x>y", "a&&b", "../x", "a..b", "'q'"]
)
def test_names_with_shell_characters_are_rejected(name: str) -> None:
    assert not valid_name(name)


def test_a_continuation_line_below_a_nested_def(tmp_path: Path) -> None:
    # The hit's own indentation (8) is deeper than the nested def above it (4), which does not
    # hold it: the enclosing function is the outer one.
    source = textwrap.dedent(
        """\
        def outer(q):
            def reference():
                return q

            if (
                not q
                or probe(q) != (9, 0)
            ):
                return reference()
        """
    )
    write_module(tmp_path, source)
    facts = trace("probe", [str(tmp_path)])
    assert [(o.line, o.kind, o.function) for o in facts.occurrences] == [(7, "read", "outer")]


def test_methods_below_multi_line_class_and_def_headers(tmp_path: Path) -> None:
    # A line that closes a bracket at a shallower indentation (the `):` of a header spread over
    # lines, as formatters write long ones) is no statement of its own: the hits below still
    # belong to their def, and a hit in a method is parsed as one statement of the method.
    source = textwrap.dedent(
        """\
        class Backend(
            Base,
            Mixin,
        ):
            def __init__(
                self,
                device,
            ) -> None:
                def probe(
                    index,
                ):
                    return CAP(index)

                if device:
                    self.cap = CAP(device)
        """
    )
    path = write_module(tmp_path, source)
    facts = trace("CAP", [str(tmp_path)])
    # Python names these Backend.__init__.<locals>.probe and Backend.__init__.
    assert [(o.line, o.kind, o.function) for o in facts.occurrences] == [
        (12, "read", "Backend.__init__.probe"),
        (15, "read", "Backend.__init__"),
    ]
    src = SourceFile(str(path), source)
    pieces, error = src.statement_pieces([15])
    assert error == ""
    (stmts, scope, def_line), *more = pieces
    # The `if device:` statement of __init__ (lines 14-15), not the whole class.
    assert not more and (scope, def_line) == (("Backend", "__init__"), 5)
    assert [(s.lineno, s.end_lineno) for s in stmts] == [(14, 15)]


def test_the_forked_helper_changes_nothing_in_the_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Sixteen packages: the forked helper reads and analyses every other one. The answer (and
    # the order of its problems) is the one a single process gives, with or without the helper.
    for index in range(16):
        (tmp_path / f"p{index:02d}").mkdir()
        write_module(tmp_path / f"p{index:02d}", f"import os\nFLAG = os.environ.get('F{index}')\n")
        write_module(tmp_path / f"p{index:02d}", "def use():\n    return FLAG +\n", "bad.py")
    together = trace("FLAG", [str(tmp_path)])
    assert len(together.occurrences) == 16 and len(together.problems) == 16
    assert [p.subject for p in together.problems] == sorted(p.subject for p in together.problems)
    monkeypatch.setattr(
        files, "in_two_processes", lambda child, parent, heard=None: (parent(), None)
    )
    assert trace("FLAG", [str(tmp_path)]) == together
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    assert trace("FLAG", [str(tmp_path)]) == together
