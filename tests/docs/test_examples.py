"""Every console example in the README and docs/ runs, and prints what the page says it prints."""

from __future__ import annotations

import pytest
from sybil import Example
from sybil.example import SybilFailure

from tests.docs.examples import Sandbox, Step, document_examples, matches, steps

EXAMPLES = document_examples()


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Sandbox:
    return Sandbox(tmp_path_factory.mktemp("examples"))


def test_the_docs_have_examples() -> None:
    files = {name.rsplit(":", 1)[0] for name, _ in EXAMPLES}
    assert "README.md" in files and len(EXAMPLES) >= 10, sorted(files)


@pytest.mark.parametrize("example", [e for _, e in EXAMPLES], ids=[n for n, _ in EXAMPLES])
def test_example(example: Example, sandbox: Sandbox) -> None:
    example.namespace["sandbox"] = sandbox
    example.evaluate()


def test_a_changed_output_fails(sandbox: Sandbox) -> None:
    """The check is real: the README's first example with one expected line altered fails."""
    name, example = next((n, e) for n, e in EXAMPLES if n.startswith("README.md"))
    first = steps(str(example.parsed))[0]
    actual = sandbox.run(first)
    assert matches(sandbox.normalise("\n".join(first.expected)), actual), name
    altered = Step(first.command, [*first.expected[:-1], first.expected[-1] + " (changed)"])
    assert not matches(sandbox.normalise("\n".join(altered.expected)), actual)
    example.namespace["sandbox"] = sandbox
    original = example.parsed
    try:
        example.parsed = str(original).replace(first.expected[-1], first.expected[-1] + " (x)", 1)
        with pytest.raises(SybilFailure):
            example.evaluate()
    finally:
        example.parsed = original


def test_ellipsis_and_sessions() -> None:
    block = "$ echo a \\\n  b\na b\n$ seq 3\n1\n...\n"
    parsed = steps(block)
    assert [s.command for s in parsed] == ["echo a \\\n  b", "seq 3"]
    assert matches(["1", "..."], ["1", "2", "3"]) and not matches(["2", "..."], ["1", "2"])
    assert matches(["...", "3"], ["1", "2", "3"]) and not matches([], ["x"])
