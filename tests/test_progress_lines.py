"""Progress: a line per launch at least every 20 s with its case, phase and the ETA of its plan
(harness/launch/heartbeat.py, from run_job's wait loop), and a line per selftest row while its
session runs (harness/selftest/cli.py)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from harness.launch import heartbeat
from harness.launch.heartbeat import Heartbeat, heartbeat_line, plan_steps
from harness.launch.spec import LaunchSettings
from harness.kinds.interconnect.plan import AllReducePlan
from harness.kinds.soak.plan import SoakPlan
from harness.workloads.plan import BenchmarkPlan, CasePlan, read_plan, write_plan
from harness.launch.supervise import run_job
from harness.selftest.cli import last_progress_line, row_progress

CASES = tuple(CasePlan(model=model, precision="fp32", scaling=scaling, batch_size_per_gpu=8, global_batch_size=8,
                       device="cpu", warmup_seconds=warmup, max_warmup_seconds=warmup, min_warmup_steps=1,
                       warmup_block_steps=1, measure_seconds=measure, min_measure_steps=1, compute_probe_steps=0,
                       compile=False, peak_tflops=None, sync_each_step=False, ci_target=0.0,
                       max_measure_seconds=measure, ci_block_seconds=1.0, independent=False, ranks=1,
                       run_dir=Path("/r"), run_id="r")
              for model, scaling, warmup, measure in (("tiny_bert", "weak", 10.0, 20.0),
                                                      ("tiny_bert", "strong", 10.0, 20.0),
                                                      ("resnet18", "weak", 15.0, 45.0)))


PLAN = {"steps": [["tiny_bert fp32 weak", 30.0], ["tiny_bert fp32 strong", 30.0], ["resnet18 fp32 weak", 60.0]]}
"""CASES' plan.json as the heartbeat reads it."""


def _written(tmp_path: Path, plan) -> dict:
    """The plan as plan.json holds it, written as a launch writes it."""
    write_plan(tmp_path / "plan.json", plan)
    return json.loads((tmp_path / "plan.json").read_text())


def test_the_plan_gives_each_step_its_planned_seconds(tmp_path):
    """Each kind's plan says its own steps in plan.json; the heartbeat reads no kind's fields."""
    assert plan_steps(_written(tmp_path, BenchmarkPlan(cases=CASES))) == plan_steps(PLAN) == [
        ("tiny_bert fp32 weak", 30.0), ("tiny_bert fp32 strong", 30.0), ("resnet18 fp32 weak", 60.0)]
    sweep = AllReducePlan(device="cpu", min_bytes=1024, max_bytes=4096, factor=2, target_seconds=1.5,
                          warmup_iters=1, run_dir=Path("/r"), run_id="r")
    assert plan_steps(_written(tmp_path, sweep)) == [("all-reduce sweep", 4.5)]
    soak = SoakPlan(model="resnet50", precision="bf16", batch_size_per_gpu=8, device="cpu", duration_seconds=600,
                    window_seconds=60, warmup_seconds=30, run_dir=Path("/r"), run_id="r")
    assert plan_steps(_written(tmp_path, soak)) == [("soak resnet50 bf16", 630.0)]
    assert read_plan(tmp_path / "plan.json", SoakPlan) == soak  # the steps are the launcher's, not the worker's
    assert plan_steps("not a plan") == [] and plan_steps({"steps": "x"}) == [] and plan_steps({"cases": []}) == []


def test_the_line_names_the_case_the_phase_and_the_time_left_by_the_plan():
    now = 1000.0
    phases = {0: {"phase": "measure", "since": now - 12, "case": 1}, 1: {"phase": "warmup", "case": 1}}
    line = heartbeat_line("run-g1", plan_steps(PLAN), phases, elapsed_s=45.0, now=now)
    assert line == ("launch run-g1: 45 s in; case 2/3 tiny_bert fp32 strong, rank 0 measure for 12 s; "
                    "about 1 min 15 s left of a planned 2 min 00 s")
    late = heartbeat_line("run-g1", plan_steps(PLAN), {0: {"phase": "measure", "case": 2}}, 130.0, now)
    assert late.endswith("past its planned 2 min 00 s")
    assert "starting (no rank has reported yet)" in heartbeat_line("r", [], {}, 3.0, now)


def test_a_heartbeat_speaks_once_a_period_and_never_raises(tmp_path, monkeypatch):
    said: list[str] = []
    monkeypatch.setattr(heartbeat, "SINK", said.append)
    beat = Heartbeat(tmp_path, "r", started=0.0, period_s=20.0)
    for now in (5.0, 19.9, 20.0, 25.0, 39.0, 40.5):
        beat.tick(lambda _: {}, now)
    assert len(said) == 2 and said[0].startswith("launch r: 20 s in")
    (tmp_path / "plan.json").write_text("{damaged")
    broken = Heartbeat(tmp_path, "r", started=0.0, period_s=1.0)
    broken.tick(lambda _: {}, 2.0)  # an unreadable plan costs the line, not the launch
    assert len(said) == 2


def test_a_holding_launch_s_follow_on_cases_count_on_from_its_plan(tmp_path, monkeypatch):
    """A re-measure handed to the session's launch (launch/group.py) is named like its planned cases, not left
    as "case 4/3" or unnamed."""
    said: list[str] = []
    monkeypatch.setattr(heartbeat, "SINK", said.append)
    (tmp_path / "plan.json").write_text(json.dumps(PLAN))
    (tmp_path / "more1.json").write_text(json.dumps({"steps": PLAN["steps"][2:]}))
    beat = Heartbeat(tmp_path, "r", started=0.0, period_s=1.0)
    beat.tick(lambda _: {0: {"phase": "measure", "since": 1.5, "case": 3}}, 2.0)
    assert said[-1].startswith("launch r: 2 s in; case 4/4 resnet18 fp32 weak, rank 0 measure")
    (tmp_path / "more2.json").write_text(json.dumps({"steps": PLAN["steps"][:1]}))
    beat.tick(lambda _: {0: {"phase": "warmup", "since": 3.5, "case": 4}}, 4.0)
    assert "case 5/5 tiny_bert fp32 weak" in said[-1]


CHILD = """
import json, os, sys, time
run_dir = sys.argv[1]
for phase in ("warmup", "measure"):
    with open(os.path.join(run_dir, "rank0.phase"), "w") as f:
        json.dump({"rank": 0, "phase": phase, "since": time.time(), "expected_s": 5, "case": 0}, f)
    time.sleep(1.2)
"""


def test_a_launch_says_where_it_is_while_it_runs(tmp_path, monkeypatch):
    said: list[str] = []
    monkeypatch.setattr(heartbeat, "SINK", said.append)
    monkeypatch.setattr(heartbeat, "HEARTBEAT_S", 0.5)
    run_dir = tmp_path / "launch"
    run_dir.mkdir()
    (run_dir / "plan.json").write_text(json.dumps(PLAN))
    launch = LaunchSettings(gpus_per_node=1, device="cpu", telemetry=False)
    outcome = run_job(launch, [sys.executable, "-c", CHILD, str(run_dir)], run_dir, "hb-run", timeout_s=30)
    assert outcome.returncode == 0, outcome.failure
    assert len(said) >= 3, said
    assert all(line.startswith("launch hb-run: ") for line in said)
    assert any("case 1/3 tiny_bert fp32 weak, rank 0 measure" in line for line in said), said
    assert all("left of a planned 2 min 00 s" in line for line in said if "rank 0" in line)


def test_a_selftest_row_says_it_is_running_and_what_its_session_last_said(tmp_path, capsys):
    log = tmp_path / "selftest-session.log"
    log.write_text("collected 12 items\nharness: launch x-g1: 40 s in; case 1/2 tiny_bert fp32 weak, rank 0 "
                   "measure for 9 s; about 1 min 05 s left of a planned 1 min 45 s\n....\n")
    assert last_progress_line(log).startswith("harness: launch x-g1: 40 s in")
    with row_progress("[2/5] foreign_load", log, timeout_s=900, period_s=0.2):
        time.sleep(0.7)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) >= 2
    assert lines[0].startswith("[2/5] foreign_load still running: 0 s of at most 900 s; the session: launch x-g1: 40 s")
    assert last_progress_line(tmp_path / "missing.log") == ""


@pytest.mark.parametrize("value", [None])
def test_the_heartbeat_period_is_at_most_30_s(value):
    assert heartbeat.HEARTBEAT_S <= 30
    assert Heartbeat(Path("."), "r", started=0.0, period_s=value).period_s == heartbeat.HEARTBEAT_S


def test_a_launch_an_interrupt_stops_is_kept_with_its_time(tmp_path, monkeypatch):
    """A session cut by a time limit: no record holds the stopped launch's time, which the session's last line
    called "other (launch gaps, checks, outputs) 218 s" on host I (2026-11-27). run_job keeps its name and time."""
    from harness.launch import supervise

    def interrupted(*args, **kwargs):
        time.sleep(0.3)
        raise KeyboardInterrupt

    monkeypatch.setattr(supervise, "_wait", interrupted)
    before = len(supervise.STOPPED_LAUNCHES)
    run_dir = tmp_path / "launch2-4gpu"
    run_dir.mkdir()
    launch = LaunchSettings(gpus_per_node=1, device="cpu", telemetry=False)
    with pytest.raises(KeyboardInterrupt):
        run_job(launch, [sys.executable, "-c", "import time; time.sleep(30)"], run_dir, "stop-run", timeout_s=30)
    [stopped] = supervise.stopped_since(before)
    assert stopped.name == "launch2-4gpu" and 0.3 <= stopped.elapsed_s < 10


def test_the_tests_kept_from_running_by_one_reason_share_one_line():
    """A 1 x H200 calibration session printed one sentence 8 times, once per case its profile's older training
    definition kept from being judged (2026-11-28): one line per reason, the tests named, the reason once."""
    from harness.plugin.progress import not_run_lines

    reason = "not evaluated: the profile's training bounds were measured under definition 2026-11-21"
    cases = [{"name": f"test_weak_scaling[case{i}]", "reason": reason} for i in range(8)]
    lines = not_run_lines([*cases, {"name": "test_gpu_state[gpu0]", "reason": "not collected"}])
    assert lines == [
        "harness: did not run, 8 tests: test_weak_scaling[case0], test_weak_scaling[case1], test_weak_scaling[case2], "
        "test_weak_scaling[case3], test_weak_scaling[case4], test_weak_scaling[case5] and 2 more (report.html lists "
        f"them): {reason}",
        "harness: did not run: test_gpu_state[gpu0]: not collected"]
