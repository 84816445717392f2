"""A node's health (``scan --health``, ``--drain``, ``--nfd``) is decided behind the API
(``api.node_health`` -> ``NodeHealth``), so a script and the MCP server read the same code, exit
code and labels the CLI prints (issue 44 item 3); ``report.health`` and ``report.nfd`` only
render it. The expectations are the documented contract (docs/engines/slurm.md's codes and exit
codes, docs/engines/kubernetes.md's labels) applied to hand-made facts."""

from __future__ import annotations

from dataclasses import replace

from archgap import api
from archgap.analysis.jit.findings import JitFinding, JitStatus
from archgap.analysis.scan import ScanReport
from archgap.analysis.verdicts.compat import resolve_gpu
from archgap.analysis.verdicts.verdicts import PackageVerdict, Verdict
from archgap.probe.facts import Gpu, GpuFacts, Problem, PythonEnvironment
from archgap.report.health import line
from archgap.report.nfd import feature_file
from archgap.results import NodeHealth

ENV = PythonEnvironment("/venv/bin/python", "3.11", ("/venv/lib/site-packages",), (), ())
NO_GPU = GpuFacts((), None, None, "none")


def _package(name: str, verdict: Verdict, gpu: str = "H100") -> PackageVerdict:
    return PackageVerdict(name, "1.0", gpu, verdict, f"{name}: why {verdict}", ())


def _jit(package: str, status: JitStatus) -> JitFinding:
    return JitFinding(
        package, "0.6", "H100", "9.0", status, None, f"{package} {status}", (), (),
        "at its first call", gates_exit_code=status == "fails",
    )  # fmt: skip


def _report(*packages: PackageVerdict, role: str = "named", **more: object) -> ScanReport:
    gpu = replace(resolve_gpu("H100"), role=role)
    return ScanReport(ENV, NO_GPU, (gpu,), (), packages, **more)  # type: ignore[arg-type]


def _labels(health: NodeHealth) -> dict[str, str]:
    text = feature_file(health, 0.0, 60.0)
    pairs = [ln.split("=", 1) for ln in text.splitlines() if not ln.startswith("#")]
    return {k.removeprefix("feature.node.kubernetes.io/"): v for k, v in pairs}


def test_a_package_with_no_kernel_for_a_named_gpu_is_a_gap_that_drains() -> None:
    # 'none' on the GPU a scan was asked about: the node cannot run the stack (exit 1, drain).
    health = api.node_health(_report(_package("torch", "none"), _package("numpy", "native")))
    assert (health.code, health.exit_code, health.drains, health.judged) == (
        "no-kernel", 1, True, True,
    )  # fmt: skip
    assert health.subject == "torch 1.0 on 9.0 (H100)" and health.more == 0
    assert line(health) == "archgap: no-kernel: torch 1.0 on 9.0 (H100): torch: why none"
    labels = _labels(health)
    assert labels["archgap.state"] == "gap" and labels["archgap.ok"] == "false"
    assert labels["archgap.health"] == "no-kernel" and labels["archgap.gaps"] == "1"
    assert labels["archgap.torch.sm_90"] == "none" and labels["archgap.numpy.sm_90"] == "native"


def test_no_kernel_ranks_before_blocked_whatever_the_names() -> None:
    # 'blocked' ranks after 'none' (analysis/verdicts/verdicts.py RANK): aaa sorts first by name
    # but zzz's missing kernel is the reason; the other gap is counted.
    report = _report(_package("aaa", "blocked"), _package("zzz", "none"))
    health = api.node_health(report)
    assert (health.code, health.subject, health.more) == ("no-kernel", "zzz 1.0 on 9.0 (H100)", 1)
    assert line(health).endswith(" (+1 more)")
    only_blocked = api.node_health(_report(_package("aaa", "blocked")))
    assert only_blocked.code == "blocked" and only_blocked.exit_code == 1


def test_native_everywhere_is_ok() -> None:
    health = api.node_health(_report(_package("torch", "native")))
    assert (health.code, health.exit_code, health.drains, line(health)) == ("ok", 0, False, "OK")
    assert _labels(health)["archgap.ok"] == "true" and _labels(health)["archgap.gaps"] == "0"


def test_a_required_gpu_not_present_is_missing_before_any_package_gap() -> None:
    # The H100 is present (a real device on this node); a B200 (10.0) is required and absent.
    report = _report(_package("torch", "none"), role="present")
    health = api.node_health(report, require=["B200", "H100"])
    assert (health.code, health.subject, health.exit_code) == ("gpu-missing", "B200", 1)
    assert health.why == "not present (GPUs present: 9.0)"
    assert api.node_health(report, require=["H100"]).code == "no-kernel"


def test_a_gpu_fault_comes_first_and_drains() -> None:
    # nvidia-smi installed but failing, and no GPU answered: the GPU fell off the bus.
    facts = GpuFacts((), None, None, "none", (Problem("nvidia-smi", "timed out after 10 s"),))
    health = api.node_health(replace(_report(_package("torch", "none")), gpu_facts=facts))
    assert (health.code, health.subject, health.why) == (
        "gpu-fault",
        "nvidia-smi",
        "timed out after 10 s",
    )
    assert health.drains


def test_nothing_to_judge_is_exit_2_never_a_drain_and_no_ok_label() -> None:
    # No GPU present and none named: only the default matrix, which never gates.
    health = api.node_health(_report(_package("torch", "none"), role="matrix"))
    assert (health.code, health.exit_code, health.drains, health.judged) == (
        "no-gpu",
        2,
        False,
        False,
    )
    labels = _labels(health)
    assert labels == {"archgap.state": "unknown", "archgap.health": "no-gpu"}


def test_an_interpreter_without_site_packages_cannot_be_judged() -> None:
    report = replace(_report(), environment=replace(ENV, site_packages=()))
    health = api.node_health(report)
    assert health.code == "no-python" and health.exit_code == 2
    assert health.why.startswith("/venv/bin/python: ")


def test_a_gpu_whose_compute_capability_is_unknown_cannot_be_judged() -> None:
    # The driver gives no compute capability and kb/gpus.json does not know the name.
    unknown = Gpu(0, "NVIDIA Future GPU", "GPU-0", "", "nvidia-smi")
    report = replace(_report(role="present"), gpu_facts=GpuFacts((unknown,), None, None, "nvml"))
    health = api.node_health(report)
    assert health.code == "gpu-unknown" and health.exit_code == 2
    assert health.why.startswith("GPU 0 (NVIDIA Future GPU): compute capability unknown")


def test_a_failing_jit_is_a_gap_and_the_label_is_the_worst_status() -> None:
    # One package, two findings on the H100: unknown, then fails. The label says fails.
    report = _report(_package("flashinfer", "jit"), jit=(_jit("flashinfer", "unknown"),
                                                          _jit("flashinfer", "fails")))  # fmt: skip
    health = api.node_health(report)
    assert (health.code, health.subject) == ("jit-fails", "flashinfer 0.6 on 9.0 (H100)")
    assert _labels(health)["archgap.flashinfer.jit.sm_90"] == "fails"
    assert _labels(health)["archgap.gaps"] == "1"


def test_a_run_that_failed_is_its_code_with_exit_2() -> None:
    for code in ("probe-failed", "usage", "no-python", "gpu-unknown", "no-gpu"):
        health = NodeHealth(code, why="x")
        assert health.exit_code == 2 and not health.drains
        assert line(health) == f"archgap: {code}: x"


def test_health_in_one_call_makes_facts_that_cannot_be_collected_a_value() -> None:
    # The service's environment file does not exist: no facts, so nothing judged (exit 2, never
    # a drain), returned as the probe-failed code, not raised.
    health = api.health(gpus=["H100"], env_from="/nonexistent/sglang.env")
    assert (health.code, health.exit_code, health.drains) == ("probe-failed", 2, False)
    assert health.why.startswith("--env-from /nonexistent/sglang.env: ")
    assert line(health).startswith("archgap: probe-failed: --env-from /nonexistent/sglang.env")


def test_the_document_follows_its_schema_and_carries_the_line() -> None:
    import jsonschema

    from archgap.report.health import document
    from archgap.report.jsondoc import schema

    judged = api.node_health(_report(_package("torch", "none")))
    doc = document(judged)
    jsonschema.validate(doc, schema("health"))
    assert (doc["command"], doc["code"], doc["exit_code"], doc["gaps"]) == (
        "health",
        "no-kernel",
        1,
        1,
    )
    assert doc["line"] == line(judged)
    assert doc["verdicts"] == [{"package": "torch", "compute_capability": "9.0", "value": "none"}]
    unjudged = document(NodeHealth("no-gpu", why="no GPU found and none named"))
    jsonschema.validate(unjudged, schema("health"))
    assert unjudged["gaps"] is None and unjudged["verdicts"] == [] and not unjudged["judged"]
