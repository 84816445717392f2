"""Which nodes fleet --slurm leaves out, and how srun is then asked for the others.

States are sinfo(1)'s long names (NODE STATE CODES): a DRAIN, DRAINING, DOWN or FAIL node takes
no new job, and a trailing "*" marks a node that is not responding; srun(1) takes an option as
``-N3``, ``-N 3``, ``--nodes=3`` or ``--nodes 3``, the last one given winning.
"""

from __future__ import annotations

import pytest

from archgap.transport.slurm_nodes import LeftOut, _narrowed, option_values, unavailable


@pytest.mark.parametrize(
    ("state", "out"),
    [
        ("idle", False), ("mixed", False), ("allocated", False), ("planned", False),
        ("drained", True), ("draining", True), ("down", True), ("down*", True),
        ("idle*", True), ("fail", True), ("failing", True), ("drained$", True),
    ],
)  # fmt: skip
def test_unavailable_states(state: str, out: bool) -> None:
    assert unavailable(state) is out


def test_option_values_in_every_form_srun_takes() -> None:
    args = ["-N3", "-p", "gpu", "--nodes", "4", "--nodes=2-5", "-w", "n[1-3]", "--x=1"]
    assert option_values(args, "-N", "--nodes") == ["3", "4", "2-5"]
    assert option_values(args, "-p", "--partition") == ["gpu"]
    assert option_values(args, "-w", "--nodelist") == ["n[1-3]"]
    assert option_values(["--nodelist=a,b"], "-w", "--nodelist") == ["a,b"]


def test_the_nodes_asked_for_leave_the_unavailable_ones_out() -> None:
    drained = (LeftOut("n2", "drained", "rack 4 PSU"),)
    # Three nodes asked for, two usable: srun asks for two and excludes n2 (with the user's -x).
    assert _narrowed(["-N3", "-x", "n9"], ["n1", "n3"], drained) == [
        "--exclude=n9,n2",
        "--nodes=2",
    ]
    # A nodelist is replaced by its usable nodes (an --exclude of a listed node is an error).
    assert _narrowed(["-w", "n[1-3]"], ["n1", "n3"], drained) == ["--nodelist=n1,n3"]
    # A range keeps its minimum when enough nodes are left, its maximum lowered.
    assert _narrowed(["--nodes=1-3"], ["n1", "n3"], drained) == ["--exclude=n2", "--nodes=1-2"]
    assert _narrowed(["-N2"], ["n1", "n3"], drained) == ["--exclude=n2"]


def test_left_out_message_names_state_and_reason() -> None:
    assert LeftOut("n2", "drained*", "rack 4 PSU").message == (
        "Slurm: drained, not responding (rack 4 PSU); left out of the allocation"
    )
    assert LeftOut("n5", "down", "none").message == (
        "Slurm: down (no reason given); left out of the allocation"
    )
