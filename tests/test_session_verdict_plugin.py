"""The session verdict through the plugin: the same PASS/FAIL/INCOMPLETE in the terminal's last line,
report.json, session.json, junit.xml, report.html and pytest's exit status (pytester, fake launcher;
one slow test interrupts a real CPU session)."""

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from support.profiles import cpu_test_profile
from test_gpu_state import h100_session  # noqa: F401 - the fake H100 session h100_node starts from
from test_plugin import FakeLauncher

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent

# Two tests per GPU count: weak scaling only; gpu_counts [1, 2, 64] on a host of fewer cores.
PROFILE = cpu_test_profile(case="min_samples_per_sec_per_gpu = {{ 1 = {min_tp}, 2 = {min_tp} }}\n"
                                "min_weak_efficiency = {{ 2 = 0.5, 64 = 0.5 }}")

TEST_FILE = """
def test_weak_scaling(harness, weak_case):
    result = harness.keep(harness.runner("scaling").run(weak_case))
    harness.assert_passed(result)
"""


@pytest.fixture
def session(pytester, monkeypatch, tmp_path):
    """run(*args, min_tp=50, launcher=None) -> (pytester result, run directory)."""
    thresholds = tmp_path / "thresholds"
    thresholds.mkdir()
    pytester.makeini("[pytest]\nharness_acceptance = true\n")
    pytester.makepyfile(test_accept=TEST_FILE)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)  # a 2-core node

    def run(*args, min_tp=50, launcher=None):
        launcher = launcher or FakeLauncher()
        monkeypatch.setattr("harness.launch.benchmark.run_benchmark", launcher)
        monkeypatch.setattr("harness.launch.group.run_benchmark_group", launcher.group)
        (thresholds / "cpu-test.toml").write_text(PROFILE.format(min_tp=min_tp))
        reports = pytester.path / "reports"
        result = pytester.runpytest(f"--harness-thresholds-dir={thresholds}", f"--harness-report-dir={reports}",
                                    "-p", "no:cacheprovider", *args, no_reraise_ctrlc=True)
        run_dirs = [p for p in reports.iterdir() if (p / "session.json").is_file()] if reports.is_dir() else []
        return result, (run_dirs[0] if run_dirs else None)

    return run


def verdict_everywhere(result, run_dir: Path) -> dict:
    """The verdict as each output shows it; asserts they agree and returns session.json's."""
    stored = json.loads((run_dir / "session.json").read_text())["session_verdict"]
    report = json.loads((run_dir / "report.json").read_text())["harness"]["session_verdict"]
    suite = ET.parse(run_dir / "junit.xml").getroot().find("testsuite")
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    html = (run_dir / "report.html").read_text()
    last_line = [line for line in result.outlines if line.strip()][-1]
    assert report == stored
    assert properties["harness_verdict"] == stored["verdict"] and properties["harness_scope"] == stored["scope"]
    assert re.search(r'data-verdict="([A-Z]+)"', html)[1] == stored["verdict"]
    assert stored["headline"].replace("—", "&mdash;") in html or _escaped(stored["headline"]) in html
    assert last_line == f"harness: {stored['headline']} (exit status {stored['exit_code']})"
    assert int(result.ret) == stored["exit_code"]
    return stored


def _escaped(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("'", "&#39;")


def test_a_full_cpu_session_passes_as_a_self_check_with_exit_0(session):
    result, run_dir = session()
    result.assert_outcomes(passed=2, skipped=1)  # 64 ranks: above this node's shape, not required
    verdict = verdict_everywhere(result, run_dir)
    assert (verdict["verdict"], verdict["scope"], verdict["exit_code"]) == ("PASS", "full", 0)
    assert "harness self-check on CPU — not a GPU sign-off" in verdict["headline"] and not verdict["sign_off"]


def test_gpus_beyond_the_node_is_incomplete_not_pass(session):
    """Issue 16 path 2: `--gpus 8` on a smaller node ended "8 skipped", exit 0."""
    result, run_dir = session("--gpus", "8")
    result.assert_outcomes(skipped=1)
    verdict = verdict_everywhere(result, run_dir)
    assert (verdict["verdict"], verdict["exit_code"]) == ("INCOMPLETE", 6)
    assert verdict["scope"] == "partial: 0 of 2 profile cases"
    assert verdict["not_run"][0]["name"] == "test_weak_scaling[tiny_bert-bf16-8gpu]"


def test_a_narrowed_run_is_a_partial_pass_and_says_it_is_no_sign_off(session):
    result, run_dir = session("--gpus", "1")
    verdict = verdict_everywhere(result, run_dir)
    assert (verdict["verdict"], verdict["scope"]) == ("PASS", "partial: 1 of 2 profile cases")
    assert "not a node sign-off" in verdict["headline"]


def test_a_keyword_selection_is_partial(session):
    result, run_dir = session("-k", "1gpu")
    verdict = verdict_everywhere(result, run_dir)
    assert verdict["scope"] == "partial: 1 of 2 profile cases" and verdict["narrowing"] == ["-k 1gpu"]


def test_a_failed_check_fails_with_its_cause_grouped(session):
    result, run_dir = session(min_tp=1000)
    verdict = verdict_everywhere(result, run_dir)
    assert (verdict["verdict"], verdict["exit_code"]) == ("FAIL", 1)
    # The 1-GPU case misses its rate; the 2-GPU case is judged by its efficiency, not by a stretched 1-GPU floor.
    assert [c["key"] for c in verdict["causes"]] == ["throughput_per_gpu"] and verdict["causes"][0]["count"] == 1
    assert "harness: failed: throughput_per_gpu ×1" in result.stdout.str()


def test_an_expected_node_shape_makes_the_missing_cases_required(session, monkeypatch):
    """The node helper fills ctx.expected_gpus; cases up to it are required, and skipped ones don't pass."""
    from harness.plugin import session as plugin_session

    start = plugin_session.start_session

    def with_shape(config, options, jobs):
        started = start(config, options, jobs)
        started.ctx = dataclasses.replace(started.ctx, expected_gpus=64)
        return started

    monkeypatch.setattr("harness.plugin.start_session", with_shape)
    result, run_dir = session()
    verdict = verdict_everywhere(result, run_dir)
    assert verdict["verdict"] == "INCOMPLETE" and verdict["required_total"] == 3
    assert [n["name"] for n in verdict["not_run"]] == ["test_weak_scaling[tiny_bert-bf16-64gpu]"]


def test_an_interrupted_case_is_interrupted_everywhere_and_the_session_incomplete(session):
    """Issue 20 item 7: the case cut short was "passed" in report.json and nameless in junit.xml."""
    def interrupt_second(call):
        if call == 2:
            raise KeyboardInterrupt
        return 100.0

    result, run_dir = session("--harness-launch", "per-case", launcher=FakeLauncher(per_gpu=interrupt_second))
    verdict = verdict_everywhere(result, run_dir)
    assert (verdict["verdict"], verdict["exit_code"]) == ("INCOMPLETE", 2)
    reasons = {entry["name"]: entry["reason"] for entry in verdict["not_run"]}  # no record left: not "measured"
    assert reasons["test_weak_scaling[tiny_bert-bf16-2gpu]"] == "interrupted: the session stopped while it ran"
    report = json.loads((run_dir / "report.json").read_text())
    tests = {t["nodeid"].rpartition("::")[2]: t["outcome"] for t in report["tests"]}
    assert tests["test_weak_scaling[tiny_bert-bf16-2gpu]"] == "interrupted"
    assert (report["summary"]["passed"], report["summary"]["interrupted"]) == (1, 1)
    cases = ET.parse(run_dir / "junit.xml").getroot().iter("testcase")
    named = {case.get("name"): case for case in cases}
    assert None not in named
    assert named["test_weak_scaling[tiny_bert-bf16-2gpu]"].find("skipped").get("type") == "harness.interrupted"
    html = (run_dir / "report.html").read_text()
    cell = html[html.index('id="matrix"'):]
    assert re.search(r"INTERRUPTED</\w+>.{0,400}the session stopped while this test ran", cell, re.S), cell[:3000]


def test_a_case_measured_before_the_stop_says_so_not_never_started(session, pytester):
    """2026-11-28, a 4 x H100 host: the stop came while the session's launch re-measured 5 cases in doubt, after
    all 24 planned cases were measured; each was listed "never started". A case whose record the cut launch left
    in logs/ is "measured, not judged", naming that record; the session stays INCOMPLETE."""
    def measured_then_interrupted(call):
        if call == 2:
            run_dir = next(p for p in (pytester.path / "reports").iterdir() if (p / "logs").is_dir())
            (run_dir / "logs" / "tiny_bert-bf16-weak-2gpu").mkdir(parents=True, exist_ok=True)
            (run_dir / "logs" / "tiny_bert-bf16-weak-2gpu" / "record.json").write_text("{}")
            raise KeyboardInterrupt
        return 100.0

    result, run_dir = session("--harness-launch", "per-case", launcher=FakeLauncher(per_gpu=measured_then_interrupted))
    verdict = verdict_everywhere(result, run_dir)
    assert verdict["verdict"] == "INCOMPLETE"
    reasons = {entry["name"]: entry["reason"] for entry in verdict["not_run"]}
    assert reasons["test_weak_scaling[tiny_bert-bf16-2gpu]"] == (
        "measured, not judged: the session stopped while its launch still ran; its record: "
        "logs/tiny_bert-bf16-weak-2gpu/record.json")


def test_a_launch_stopped_by_the_interrupt_is_named_in_the_time_line_not_counted_as_a_gap(session):
    """What run_job keeps of a launch an interrupt stopped (harness/launch/supervise.py) reaches session.json's
    timeline and the terminal's time line under the launch's name."""
    from harness.launch import supervise

    def interrupt_second(call):
        if call == 2:
            supervise.STOPPED_LAUNCHES.append(supervise.StoppedLaunch(name="launch2-2gpu", elapsed_s=215.0))
            raise KeyboardInterrupt
        return 100.0

    result, run_dir = session("--harness-launch", "per-case", launcher=FakeLauncher(per_gpu=interrupt_second))
    timeline = json.loads((run_dir / "session.json").read_text())["timeline"]
    assert timeline["launches_s"]["launch2-2gpu (stopped while it ran)"] == 215.0
    result.stdout.fnmatch_lines(["harness: time: * launch2-2gpu (stopped while it ran) 215 s*"])


def test_harness_report_reads_the_stored_verdict_and_an_old_session_says_not_recorded(session):
    from support.report import build_report

    _, run_dir = session(min_tp=1000)
    stored = json.loads((run_dir / "session.json").read_text())
    assert 'data-recorded="yes"' in build_report(run_dir)
    del stored["session_verdict"]
    (run_dir / "session.json").write_text(json.dumps(stored))
    report = json.loads((run_dir / "report.json").read_text())
    del report["harness"]["session_verdict"]
    (run_dir / "report.json").write_text(json.dumps(report))
    html = build_report(run_dir)
    assert 'data-recorded="no"' in html and "session verdict: not recorded" in html


@pytest.mark.slow
@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_a_real_cpu_session_stopped_by_a_signal_is_incomplete(tmp_path, signal_name):
    """A real CPU session (torchrun, gloo), stopped while its one case runs: INCOMPLETE, exit 2."""
    reports = tmp_path / "reports"
    command = [sys.executable, "-m", "pytest", str(ROOT / "acceptance"), "--hardware", "cpu", "--models",
               "tiny_bert", "--precisions", "fp32", "--gpus", "1", "--harness-warmup-seconds", "0.5",
               "--harness-measure-seconds", "60", f"--harness-report-dir={reports}", "-q"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": ""}
    process = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(reports.glob("*/logs/*tiny_bert*/*")):
        time.sleep(0.5)  # the case's launch has started (after the component tests): its log directory exists
    time.sleep(2)
    process.send_signal(getattr(signal, signal_name))
    output, _ = process.communicate(timeout=120)
    run_dir = next(p for p in reports.iterdir() if (p / "session.json").is_file())
    stored = json.loads((run_dir / "session.json").read_text())["session_verdict"]
    assert (stored["verdict"], stored["exit_code"], process.returncode) == ("INCOMPLETE", 2, 2), output
    outcomes = {t["nodeid"].rpartition("::")[2]: t["outcome"]
                for t in json.loads((run_dir / "report.json").read_text())["tests"]}
    assert outcomes["test_weak_scaling[tiny_bert-fp32-1gpu]"] == "interrupted"
    junit = ET.parse(run_dir / "junit.xml").getroot()
    assert all(case.get("name") for case in junit.iter("testcase"))
    assert re.match(r"harness: INCOMPLETE — partial: \d+ of \d+ profile cases; 1 that had to run did not: "
                    r"test_weak_scaling\[tiny_bert-fp32-1gpu\] \(interrupted", output.strip().splitlines()[-1])


AT_ONCE = re.compile(r"^((?:min_samples_per_sec_per_gpu|min_gpu_utilization_pct|"
                     r"min_power_fraction_of_limit) = \{ )(.*?\b4 = (\{[^}]*\}))", re.M)


def one_gpu_shape(text: str) -> str:
    """The shipped profile with each 4-GPUs-at-once bound also written for 1 GPU: the fake node here has one
    GPU, a shape the shipped profile has no measured bound for (shown by the test after this fixture's). The
    fake records' step times are not a healthy GPU's jitter: the step-time CV bounds are left out."""
    text = "\n".join(line for line in text.splitlines() if not line.startswith("max_step_time_cv")) + "\n"
    return AT_ONCE.sub(lambda m: f"{m[1]}1 = {m[3]}, {m[2]}", text)


@pytest.fixture
def h100_node(h100_session, monkeypatch, tmp_path):  # noqa: F811 - the fixture imported above
    """The acceptance suite on one fake H100 (test_gpu_state.py's session: detection and NVML faked,
    the shipped h100-80gb profile; its GPU-state test is test_a_gpu_state.py, beside a plain test_other),
    every case far above its bound: run(*args) -> (result, session.json's session_verdict)."""
    run_session, _, root = h100_session
    for test_file in (ROOT / "acceptance").glob("test_*.py"):
        # The GPU-state test is there already; the component tests would launch real benchmarks
        # (tests/test_components*.py fake those), so the profile's [components] is left out here, and
        # its [topology] (below).
        if test_file.name not in ("test_gpu_state.py", "test_components.py"):
            (root / test_file.name).write_text(test_file.read_text())
            # this process may hold tests/test_soak.py, tests/test_interconnect.py under the same names
            monkeypatch.delitem(sys.modules, test_file.stem, raising=False)
    for profile in (tmp_path / "thresholds").glob("h100-80gb.toml"):  # h100_session's copy
        # [topology] too: its test reads the node's NVML (tests/test_interconnect.py fakes that).
        text = profile.read_text()
        for section in ("components", "topology"):
            start = text.index(f"\n[{section}]")
            end = text.find("\n[", start + 1)
            text = text[:start] + (text[end:] if end != -1 else "\n")
        profile.write_text(one_gpu_shape(text))
    launcher = FakeLauncher(per_gpu=1e6)
    monkeypatch.setattr("harness.launch.benchmark.run_benchmark", launcher)
    monkeypatch.setattr("harness.launch.group.run_benchmark_group", launcher.group)

    def run(*args):
        result = run_session(*args)
        [path] = list(root.rglob("session.json"))
        return result, json.loads(path.read_text())["session_verdict"]

    return run


def test_a_healthy_gpu_node_passes_in_full_and_is_signed_off(h100_node):
    """Every required test of a 1-GPU H100 node: its 8 one-GPU cases, test_node_shape, test_gpu_state[gpu0]."""
    result, verdict = h100_node()
    outcomes = result.parseoutcomes()  # skipped: the 2..8-GPU cases, topology, all-reduce, soak: not asked for
    assert outcomes["passed"] == 11 and "failed" not in outcomes and outcomes["skipped"] > 0
    assert (verdict["verdict"], verdict["scope"], verdict["required_total"]) == ("PASS", "full", 10)
    assert verdict["sign_off"] and verdict["exit_code"] == result.ret == 0
    assert verdict["headline"] == "PASS — full: 10 profile cases of this node"


def test_the_shipped_h100_profile_leaves_a_1gpu_node_incomplete_naming_the_unmeasured_shape(
        h100_session, monkeypatch):  # noqa: F811 - the fixture imported above
    """Its bounds were fitted on 4-GPU nodes: a 1-GPU node's cases are not evaluated, never judged against
    a 4-GPU figure, and the session is INCOMPLETE, not a PASS."""
    run_session, _, root = h100_session
    (root / "test_scaling.py").write_text((ROOT / "acceptance" / "test_scaling.py").read_text())
    monkeypatch.delitem(sys.modules, "test_scaling", raising=False)
    launcher = FakeLauncher(per_gpu=1e6)
    monkeypatch.setattr("harness.launch.benchmark.run_benchmark", launcher)
    monkeypatch.setattr("harness.launch.group.run_benchmark_group", launcher.group)
    result = run_session("--models", "resnet50", "--precisions", "bf16", "-k", "1gpu or gpu_state or other")
    [path] = list(root.rglob("session.json"))
    verdict = json.loads(path.read_text())["session_verdict"]
    assert verdict["verdict"] == "INCOMPLETE" and not verdict["sign_off"]
    assert "not evaluated: no min_samples_per_sec_per_gpu bound measured for 1 GPU (the profile has it for 4)" in (
        result.stdout.str())


def test_a_gpu_node_asked_for_two_gpus_is_not_signed_off(h100_node):
    result, verdict = h100_node("--models", "resnet50", "--gpus", "1,2")
    assert (verdict["verdict"], verdict["scope"], result.ret) == ("INCOMPLETE", "partial: 4 of 10 profile cases", 6)
    # the two 2-GPU cases and, since the profile bounds all-reduce on 2 GPUs, the 2-GPU all-reduce
    assert [n["reason"] for n in verdict["not_run"]] == ["needs 2 GPUs; this node has 1"] * 3
    assert "test_allreduce_bus_bandwidth[2gpu]" in [n["name"] for n in verdict["not_run"]]


def test_a_gpu_node_without_its_state_test_is_incomplete(h100_node, pytester):
    (pytester.path / "test_a_gpu_state.py").unlink()
    result, verdict = h100_node()
    assert (verdict["verdict"], result.ret) == ("INCOMPLETE", 6)
    assert verdict["not_run"][0]["name"] == "test_gpu_state[gpu0]"
    assert "harness: did not run: test_gpu_state[gpu0]: not collected" in result.stdout.str()


def test_overrides_recorded_in_session_json_are_shown_beside_the_verdict(session, monkeypatch):
    """The reliability helper records environment overrides in session.json; the verdict names them."""
    from harness.results.overrides import EFFECTS

    monkeypatch.setenv("NCCL_P2P_DISABLE", "1")  # found at session start (harness/results/overrides.py)
    effect = EFFECTS["NCCL_P2P_DISABLE"]
    override = {"name": "NCCL_P2P_DISABLE", "value": "1", "effect": effect}
    result, run_dir = session()
    verdict = verdict_everywhere(result, run_dir)
    assert verdict["overrides"] == [override] and "overrides: NCCL_P2P_DISABLE=1" in verdict["headline"]
    assert f"harness: override: NCCL_P2P_DISABLE=1: {effect}" in result.stdout.str()
    shown = f"Override: NCCL_P2P_DISABLE=1: {effect}".split("'")[0]  # the page escapes the apostrophe
    assert shown in (run_dir / "report.html").read_text()
