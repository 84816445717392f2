"""The fleet report's arithmetic on hand-made host summaries: drift against the largest group,
JIT cells of the heat map, hostlist compression, and the page at 1,000 hosts."""

from __future__ import annotations

from dataclasses import replace

from archgap.analysis.fleet import (
    Coverage,
    FleetReport,
    HostGroup,
    HostSummary,
    JitStatus,
    Unreachable,
    _with_fingerprint,
    compress_hosts,
    drift_between,
    jit_cells,
)


def host(name: str, packages: tuple[str, ...], env: tuple[str, ...] = ()) -> HostSummary:
    return _with_fingerprint(
        HostSummary(
            name=name, hostname=name, gpus=("12.0 NVIDIA RTX PRO 6000 ×8",),
            compute_capabilities=("12.0",), driver="580.95", toolkits=(), python="3.11 /v/python",
            packages=packages, coverage=(), jit=(), env=env, gaps=(), problems=(), fingerprint="",
        )
    )  # fmt: skip


def group(*members: HostSummary) -> HostGroup:
    return HostGroup(members[0].fingerprint, tuple(m.name for m in members), members[0])


def test_drift_lists_each_group_against_the_largest_only_where_it_differs() -> None:
    """Three groups: B and C both run flashinfer 0.6.16 instead of A's 0.6.8, and C also sets
    CUDA_HOME. Against A, B differs in packages only and C in packages and env; the package both
    share is reported for each of them against A, never as 'only in B' / 'only in C'."""
    a = [host(f"a{i}", ("flashinfer-python==0.6.8", "torch==2.9.1")) for i in range(3)]
    b = [host(f"b{i}", ("flashinfer-python==0.6.16", "torch==2.9.1")) for i in range(2)]
    c = [host("c0", ("flashinfer-python==0.6.16", "torch==2.9.1"), ("CUDA_HOME=/cuda-12.9",))]
    groups = (group(*a), group(*b), group(*c))
    drift = drift_between(groups)
    got = [(d.group, d.field, d.added, d.removed) for d in drift]
    new, old = ("flashinfer-python==0.6.16",), ("flashinfer-python==0.6.8",)
    assert got == [
        (b[0].fingerprint, "packages", new, old),
        (c[0].fingerprint, "packages", new, old),
        (c[0].fingerprint, "env", ("CUDA_HOME=/cuda-12.9",), ()),
    ]
    assert drift_between(groups[:1]) == ()


def test_jit_cells_fails_ok_and_not_installed() -> None:
    fails = JitStatus("flashinfer-python", "0.6.8", "12.0", "fails", "nvcc 12.8 is too old")
    broken = replace(host("h1", ("flashinfer-python==0.6.8",)), jit_findings=(fails,))
    fine = host("h2", ("flashinfer_python==0.6.16",))  # another spelling of the same name
    bare = host("h3", ("torch==2.9.1",))
    packages = ("flashinfer-python",)
    assert [jit_cells(h, packages) for h in (broken, fine, bare)] == [("fails",), ("ok",), ("",)]


def test_compress_hosts() -> None:
    names = ["gpu003", "gpu001", "gpu002", "gpu010", "login", "n9", "n10", "n11", "x01"]
    assert compress_hosts(names) == "gpu[001-003,010],n[9-11],x01,login"
    assert compress_hosts(["gpu0999", "gpu1000", "gpu0001"]) == "gpu[0001,0999-1000]"
    assert compress_hosts([]) == ""


def test_html_at_1000_hosts_has_one_heatmap_row_per_group() -> None:
    from archgap.report.html import fleet_html

    summaries = []
    for i in range(1000):
        packages = (
            "torch==2.9.1",
            "flashinfer-python==0.6.8" if i % 10 else "flashinfer-python==0.6.16",
        )
        cov = (Coverage("torch", "2.9.1", "12.0", "native" if i % 100 else "none", "r"),)
        summaries.append(_with_fingerprint(replace(host(f"gpu{i:04d}", packages), coverage=cov)))
    by_print: dict[str, list[HostSummary]] = {}
    for s in summaries:
        by_print.setdefault(s.fingerprint, []).append(s)
    groups = tuple(sorted((group(*m) for m in by_print.values()), key=lambda g: -len(g.hosts)))
    dead = tuple(Unreachable(f"dead{i}", "unreachable", "refused", "") for i in range(50))
    report = FleetReport(tuple(summaries), groups, drift_between(groups), dead)
    page = fleet_html(report, "1000/1050 hosts answered")
    heatmap = page.split('<div id="heatmap">')[1].split("</div>")[0]
    # A header, one row per group (900 + 90 + 10 hosts), one red row for the 50 not probed.
    assert len(groups) == 3 and heatmap.count("<tr>") == 1 + 3 + 1
    assert heatmap.count('<td class="failed"') == 1 and "not probed: unreachable" in heatmap
    assert '900: <span title="gpu[0001-0009,0011-0019,' in page  # cut, whole in the title
    assert page.count('<td class="bad">unreachable</td>') == 1  # 50 dead hosts, one row


def test_text_names_each_group_its_drift_and_the_hosts_not_probed() -> None:
    """The text report (report.fleet.text) of two groups and a dead host: each group once with
    its hosts in hostlist form, the smaller group's package drift against the larger (+ only in
    it, - only in the baseline), and the host that did not answer with its kind."""
    from archgap.report.console import plain_text
    from archgap.report.fleet import text

    a = [host(f"gpu{i}", ("flashinfer-python==0.6.8",)) for i in range(1, 4)]
    b = [host("gpu9", ("flashinfer-python==0.6.16",))]
    groups = (group(*a), group(*b))
    dead = (Unreachable("gpu7", "unreachable", "connection refused", ""),)
    report = FleetReport((*a, *b), groups, drift_between(groups), dead)
    shown = plain_text("\n".join(text(report, "4/5 hosts answered")))
    assert shown is not None
    lines = shown.splitlines()
    assert lines[0] == "4/5 hosts answered"
    assert f"group A (3 host(s), fingerprint {a[0].fingerprint}): gpu[1-3]" in lines
    assert f"group B (1 host(s), fingerprint {b[0].fingerprint}): gpu9" in lines
    drift = lines[lines.index("Drift against group A (the largest, 3 host(s)); + only in the "
                              "group, - only in A"):]  # fmt: skip
    assert drift[1:3] == [
        "  group B (1 host(s))",
        "    packages  +flashinfer-python==0.6.16; -flashinfer-python==0.6.8",
    ]
    assert lines[-2:] == ["Not probed", "  gpu7: unreachable connection refused"]
