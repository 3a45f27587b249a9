"""A launch started before its turn (harness/launch/prestart.py), end to end on CPU (gloo): its workers start,
import and wait for their plan; the launch that takes it runs its cases on those processes; one nobody takes is
stopped, or ends on its own."""

from __future__ import annotations

import time

import pytest

from harness.launch import prestart
from harness.launch.command import group_launch_command
from harness.launch.group import run_benchmark_group
from harness.rank import read_phases

pytestmark = pytest.mark.slow


def started_early(spec, launch_dir, run_id: str) -> prestart.Started:
    return prestart.start_early(spec.launch, group_launch_command(launch_dir, spec.launch), launch_dir, run_id)


def wait_for_phase(launch_dir, ranks: int, phase: str, timeout_s: float = 120.0) -> dict:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        phases = read_phases(launch_dir)
        if len(phases) == ranks and all(info.get("phase") == phase for info in phases.values()):
            return phases
        time.sleep(0.1)
    raise AssertionError(f"the ranks never all reached {phase!r}: {read_phases(launch_dir)}")


def test_a_launch_started_early_waits_for_its_plan_then_runs_it_on_the_same_processes(
        tmp_path, fast_spec, assert_no_process_left):
    specs = [fast_spec(gpus_per_node=2, independent=True), fast_spec(gpus_per_node=2)]
    launch_dir = tmp_path / "launch"
    early = started_early(specs[1], launch_dir, "early")
    phases = wait_for_phase(launch_dir, 2, "waiting for the plan")
    assert early.process.poll() is None and not (launch_dir / "plan.json").exists()
    pids = {info["pid"] for info in phases.values()}
    time.sleep(3.0)  # waiting, as while the launches before it measure: no case may be charged this

    records = run_benchmark_group(specs, [tmp_path / "case0", tmp_path / "case1"], ["early-case0", "early-case1"],
                                  launch_dir, started=early)
    assert [r.status for r in records] == ["ok", "ok"], [r.failure for r in records]
    assert early.process.returncode == 0 and early not in prestart.STARTED  # taken, run, ended
    assert {info["pid"] for info in read_phases(launch_dir).values()} == pids  # the same workers ran the cases
    first, second = records[0].phases_s, records[1].phases_s
    assert first["process_start"] == first["import"] == 0 and first["start_up_hidden"] > 0
    assert second["start_up_hidden"] == 0
    own_s = sum(seconds for phase, seconds in first.items() if phase not in ("start_up_hidden", "launch_total"))
    assert first["launch_total"] < own_s + 2.0  # counted from the plan, not from the start
    assert_no_process_left("early")


def test_a_launch_started_for_another_is_stopped_and_one_started_in_its_place(tmp_path, fast_spec,
                                                                              assert_no_process_left):
    spec = fast_spec(gpus_per_node=2)
    launch_dir = tmp_path / "launch"
    wrong = started_early(fast_spec(gpus_per_node=1), launch_dir, "narrower")  # one rank: not this launch
    records = run_benchmark_group([fast_spec(gpus_per_node=2, independent=True), spec],
                                  [tmp_path / "case0", tmp_path / "case1"], ["own-case0", "own-case1"], launch_dir,
                                  started=wrong)
    assert [r.status for r in records] == ["ok", "ok"], [r.failure for r in records]
    assert wrong.process.returncode not in (None, 0) and wrong not in prestart.STARTED
    assert records[0].phases_s["import"] > 0 and "start_up_hidden" not in records[0].phases_s
    assert_no_process_left("narrower")


def test_a_launch_nobody_takes_is_stopped_at_the_end_of_the_session(tmp_path, fast_spec, assert_no_process_left):
    early = started_early(fast_spec(gpus_per_node=2), tmp_path / "launch", "untaken")
    wait_for_phase(tmp_path / "launch", 2, "waiting for the plan")
    assert prestart.stop_all() == 1
    assert early.process.returncode is not None and prestart.STARTED == []
    assert_no_process_left("untaken")


def test_a_launch_started_early_ends_on_its_own_when_no_plan_comes(tmp_path, fast_spec, monkeypatch,
                                                                   assert_no_process_left):
    """A launcher that forgot it (or died without the parent-death signal reaching it) leaves no worker waiting."""
    monkeypatch.setattr(prestart, "WAIT_S", 1.0)
    early = started_early(fast_spec(gpus_per_node=2), tmp_path / "launch", "forgotten")
    assert early.process.wait(timeout=120) == 0
    assert "no plan in 1 s" in (tmp_path / "launch" / "rank0.log").read_text()
    early.stop()
    assert_no_process_left("forgotten")


def test_a_start_up_the_plan_came_during_is_the_sessions_time_not_hidden():
    """A session whose first launch is the started one (``-k scaling``) waits for the imports: only what ran before
    the plan was written is hidden, so the timeline's start-up is not lost to "other"."""
    from harness.workloads.ddp import hidden_start_up

    assert hidden_start_up(100.0, 112.0, 140.0) == {"process_start": 0.0, "import": 0.0, "start_up_hidden": 12.0}
    assert hidden_start_up(100.0, 112.0, 101.0) == {"process_start": 0.0, "import": 11.0, "start_up_hidden": 1.0}
