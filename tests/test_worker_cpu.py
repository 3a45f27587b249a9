"""The DDP worker end to end on CPU (gloo), launched through harness.launch.benchmark.run_benchmark.

Each successful launch is shared by the tests of one module-scoped fixture, so that every
behaviour gets its own test without paying for a launch per assertion.
"""

from __future__ import annotations

import pytest

from harness.launch.benchmark import run_benchmark
from harness.launch.spec import BenchmarkSpec, LaunchSettings
from harness.records import read_record

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=[1, 2], ids=["1rank", "2ranks"])
def ok_run(request, tmp_path_factory, fast_spec):
    """(spec, run_dir, record) of a weak-scaling run that should succeed."""
    spec = fast_spec(gpus_per_node=request.param)
    run_dir = tmp_path_factory.mktemp(f"ok-{request.param}rank")
    record = run_benchmark(spec, run_dir)
    return spec, run_dir, record


def _reason(record) -> str:
    return record.failure.reason if record.failure else "(no failure recorded)"


# --- a successful run --------------------------------------------------------------------------


def test_status_is_ok(ok_run):
    _, _, record = ok_run
    assert record.status == "ok", _reason(record)
    assert record.ok
    assert record.failure is None


def test_world_size_and_global_batch(ok_run):
    spec, _, record = ok_run
    assert record.world_size == spec.gpus_per_node
    assert record.nodes == 1
    assert record.device_kind == "cpu"
    assert record.batch_size_per_gpu == 4
    assert record.global_batch_size == 4 * spec.gpus_per_node


def test_throughput_per_gpu_is_total_over_world_size(ok_run):
    _, _, record = ok_run
    assert record.throughput_per_gpu > 0
    assert record.throughput_total > 0
    assert record.throughput_per_gpu == pytest.approx(record.throughput_total / record.world_size, rel=1e-9)
    assert record.sample_unit == "sequences"


def test_per_rank_has_one_entry_per_rank(ok_run):
    spec, _, record = ok_run
    assert len(record.per_rank) == spec.gpus_per_node
    assert sorted(r.rank for r in record.per_rank) == list(range(spec.gpus_per_node))
    for rank_stats in record.per_rank:
        assert rank_stats.window_s > 0
        assert rank_stats.step_time.steps == record.measured_steps


def test_step_time_percentiles_are_ordered(ok_run):
    _, _, record = ok_run
    stats = record.step_time_ms
    assert stats is not None
    assert stats.p99_ms >= stats.p95_ms >= stats.median_ms > 0
    assert stats.mean_ms > 0
    # Pooled over ranks: every rank's measured steps.
    assert stats.steps == record.measured_steps * record.world_size


def test_measured_steps_meet_the_minimum(ok_run):
    spec, _, record = ok_run
    assert record.measured_steps >= spec.min_measure_steps
    assert record.warmup_steps >= spec.min_warmup_steps


def test_loss_is_finite(ok_run):
    _, _, record = ok_run
    assert record.loss_finite is True
    assert record.final_loss is not None and record.final_loss > 0


@pytest.mark.parametrize("ok_run", [2], ids=["2ranks"], indirect=True)
def test_straggler_is_reported_for_two_ranks(ok_run):
    _, _, record = ok_run
    lag = record.straggler
    assert lag is not None
    assert lag.ratio >= 1.0
    assert record.straggler_ratio == lag.ratio
    assert {lag.slowest_rank, lag.fastest_rank} <= {0, 1}
    if lag.ratio > 1.0:
        assert lag.slowest_rank != lag.fastest_rank
    # The compute probe ran (gradient sync off) on both ranks: that is what the ratio compares.
    assert all(r.compute_step_ms and r.compute_step_ms > 0 for r in record.per_rank)


def test_versions_are_recorded(ok_run):
    import torch

    _, _, record = ok_run
    assert record.versions is not None
    assert record.versions.torch == torch.__version__
    assert record.versions.python


def test_phases_cover_the_launch(ok_run):
    _, _, record = ok_run
    expected = {"process_start", "import", "init", "build", "warmup", "measure", "launch_total"}
    assert expected <= set(record.phases_s), sorted(record.phases_s)
    assert all(record.phases_s[name] >= 0 for name in expected)
    # The launcher's wall time covers every phase the worker timed.
    worker_phases = sum(v for k, v in record.phases_s.items() if k != "launch_total")
    assert record.phases_s["launch_total"] >= worker_phases * 0.99


def test_record_json_round_trips(ok_run):
    _, run_dir, record = ok_run
    on_disk = read_record(run_dir / "record.json")
    assert on_disk.status == "ok"
    assert on_disk.run_id == record.run_id
    assert on_disk.throughput_total == record.throughput_total
    assert on_disk.per_rank == record.per_rank
    # The copy in the run directory is the final record, the launcher's additions included.
    assert on_disk == record and "launch_total" in on_disk.phases_s and on_disk.telemetry is not None


def test_every_rank_writes_its_log(ok_run):
    spec, run_dir, _ = ok_run
    for rank in range(spec.gpus_per_node):
        log = run_dir / f"rank{rank}.log"
        assert log.exists()
        assert f"rank {rank}/{spec.gpus_per_node}" in log.read_text()


def test_no_process_left_after_success(ok_run, assert_no_process_left):
    _, _, record = ok_run
    assert_no_process_left(record.run_id)


# --- strong scaling ----------------------------------------------------------------------------


def test_strong_scaling_splits_the_global_batch(tmp_path, fast_spec):
    spec = fast_spec(gpus_per_node=2, scaling="strong", global_batch_size=8)
    assert spec.per_gpu_batch == 4
    record = run_benchmark(spec, tmp_path)
    assert record.status == "ok", _reason(record)
    assert record.scaling == "strong"
    assert record.batch_size_per_gpu == 4
    assert record.global_batch_size == 8
    assert record.world_size == 2


def test_strong_scaling_rejects_an_indivisible_global_batch():
    with pytest.raises(ValueError, match="not divisible") as excinfo:
        BenchmarkSpec(model="tiny_bert", precision="fp32", scaling="strong", global_batch_size=7,
                      launch=LaunchSettings(gpus_per_node=2, device="cpu"))
    assert "7" in str(excinfo.value) and "2 GPUs" in str(excinfo.value)


# --- non-finite loss ---------------------------------------------------------------------------


def test_nan_in_the_measured_window_makes_the_run_invalid(tmp_path, fast_spec, assert_no_process_left):
    spec = fast_spec(gpus_per_node=2, extra_env={"HARNESS_FAULT": "kind=nan,rank=0,phase=measure,step=2"})
    record = run_benchmark(spec, tmp_path)
    assert record.status == "invalid", _reason(record)
    assert record.loss_finite is False
    assert record.failure is not None
    assert "non-finite loss" in record.failure.reason
    assert record.failure.phase == "measure"
    assert read_record(tmp_path / "record.json").status == "invalid"
    assert_no_process_left(record.run_id)


def test_nan_during_warmup_makes_the_run_invalid(tmp_path, fast_spec, assert_no_process_left):
    spec = fast_spec(gpus_per_node=1, extra_env={"HARNESS_FAULT": "kind=nan,rank=0,phase=warmup,step=1"})
    record = run_benchmark(spec, tmp_path)
    assert record.status == "invalid", _reason(record)
    assert record.failure is not None
    assert "non-finite loss" in record.failure.reason
    assert record.failure.phase == "warmup"
    assert read_record(tmp_path / "record.json").status == "invalid"
    assert_no_process_left(record.run_id)


# --- several cases in one launch (harness.launch.group.run_benchmark_group) ------------------------


@pytest.fixture(scope="module")
def group_run(tmp_path_factory, fast_spec):
    """Three 2-rank cases in one launch; the second crashes (fault filtered to its model) mid-window."""
    from harness.launch.group import run_benchmark_group

    crash = {"HARNESS_FAULT": "kind=crash,rank=1,phase=measure,step=2,model=resnet18"}
    specs = [fast_spec(gpus_per_node=2, model=model, extra_env=crash)
             for model in ("tiny_bert", "resnet18", "tiny_bert")]
    specs[2] = fast_spec(gpus_per_node=2, model="tiny_bert", batch_size_per_gpu=8, extra_env=crash)
    root = tmp_path_factory.mktemp("group")
    run_dirs = [root / f"case{i}" for i in range(3)]
    records = run_benchmark_group(specs, run_dirs, [f"group-case{i}" for i in range(3)], root / "launch")
    return root, run_dirs, records


def test_a_group_gives_one_record_per_case_in_order(group_run):
    _, run_dirs, records = group_run
    assert [r.run_id for r in records] == ["group-case0", "group-case1", "group-case2"]
    assert [read_record(d / "record.json").run_id for d in run_dirs] == ["group-case0", "group-case1", "group-case2"]


def test_a_failed_case_of_a_group_fails_alone_naming_its_rank(group_run):
    _, _, records = group_run
    assert [r.status for r in records] == ["ok", "failed", "ok"], [_reason(r) for r in records]
    assert "rank 1" in records[1].failure.reason and "injected crash" in records[1].failure.reason
    assert records[1].failure.phase == "measure"


def test_the_cases_after_a_failure_run_again_in_a_launch_of_their_own(group_run):
    _, _, records = group_run
    assert {k: records[0].settings["launch"][k] for k in ("cases", "index")} == {"cases": 3, "index": 0}
    assert {k: records[2].settings["launch"][k] for k in ("cases", "index")} == {"cases": 1, "index": 0}
    assert records[2].batch_size_per_gpu == 8


@pytest.fixture(scope="module")
def mixed_width_run(tmp_path_factory, fast_spec):
    """One 2-rank launch: the 1-rank reference on both ranks at once, a 1-rank DDP case (rank 1 waits),
    then the 2-rank DDP case, as the plugin orders a node's cases (launch_order)."""
    from harness.launch.group import run_benchmark_group

    specs = [fast_spec(gpus_per_node=2, independent=True), fast_spec(gpus_per_node=1), fast_spec(gpus_per_node=2)]
    root = tmp_path_factory.mktemp("mixed")
    run_dirs = [root / f"case{i}" for i in range(3)]
    return run_dirs, run_benchmark_group(specs, run_dirs, [f"mixed-case{i}" for i in range(3)], root / "launch")


@pytest.mark.slow
def test_cases_of_every_width_share_one_launch(mixed_width_run):
    run_dirs, records = mixed_width_run
    assert [r.status for r in records] == ["ok", "ok", "ok"], [_reason(r) for r in records]
    assert [r.world_size for r in records] == [1, 1, 2]
    assert [len(r.per_rank) for r in records] == [2, 1, 2]
    assert [r.settings["launch"]["ranks"] for r in records] == [2, 1, 2]
    assert {r.settings["launch"]["launch_ranks"] for r in records} == {2}
    assert {r.settings["launch"]["cases"] for r in records} == {3}  # nothing ran again in a launch of its own
    # The reference paid the cold start; the same work after it on the same ranks settles hot.
    assert [r.settings["launch"]["settle"] for r in records] == ["cold", "hot", "hot"]
    assert not list(run_dirs[1].glob("rank1.*")), "rank 1 is not one of the 1-rank case's ranks"


@pytest.mark.slow
def test_a_ddp_figure_is_timed_as_its_reference_is(mixed_width_run):
    """Both over the busy seconds of the slowest rank (step events summed), not the window with its pauses."""
    _, records = mixed_width_run
    ddp = records[2]
    slowest = max(ddp.per_rank, key=lambda rank: rank.throughput and 1 / rank.throughput)
    steps = ddp.measured_steps
    busy_s = slowest.step_time.mean_ms * steps / 1000
    assert ddp.throughput_total == pytest.approx(ddp.global_batch_size * steps / busy_s)


def test_start_up_is_charged_to_the_first_case_of_a_launch(group_run):
    _, _, records = group_run
    first, relaunched = records[0], records[2]
    assert first.phases_s["import"] > 0 and relaunched.phases_s["import"] > 0
    assert first.phases_s["launch_total"] > first.phases_s["measure"]


# --- a launch that holds for follow-on cases (issue 28: re-measures run warm, in the session's launch) ------


@pytest.fixture(scope="module")
def held_run(tmp_path_factory, fast_spec):
    """A 2-rank launch of a reference and its 2-rank DDP case that holds: the follow-on hands it both again
    (a re-measure), then nothing. (root, calls: how many records each follow-on call saw, records)."""
    from harness.launch.group import run_benchmark_group

    specs = [fast_spec(gpus_per_node=2, independent=True), fast_spec(gpus_per_node=2)]
    root = tmp_path_factory.mktemp("held")
    calls: list[list[str]] = []

    def follow_on(records):
        calls.append([r.run_id for r in records])
        if len(calls) > 1:
            return []
        return [(spec, root / f"again{i}", f"held-again{i}") for i, spec in enumerate(specs)]

    records = run_benchmark_group(specs, [root / "case0", root / "case1"], ["held-case0", "held-case1"],
                                  root / "launch", follow_on=follow_on)
    return root, calls, records


def test_a_holding_launch_runs_its_follow_ons_on_the_same_processes_and_ends_on_an_empty_one(held_run):
    root, calls, records = held_run
    assert [r.run_id for r in records] == ["held-case0", "held-case1", "held-again0", "held-again1"]
    assert [r.status for r in records] == ["ok"] * 4, [_reason(r) for r in records]
    # Asked once every case it had been handed had ended, each time with all of their final records.
    assert calls == [["held-case0", "held-case1"], ["held-case0", "held-case1", "held-again0", "held-again1"]]
    assert [r.settings["launch"].get("follow_on") for r in records] == [None, None, 1, 1]
    assert [r.settings["launch"]["index"] for r in records] == [0, 1, 2, 3]
    # Warm: no start-up of their own, and the re-measured reference settles hot as a later case of its work does.
    assert [r.settings["launch"]["settle"] for r in records] == ["cold", "hot", "hot", "hot"]
    assert records[2].phases_s["import"] == 0 and records[0].phases_s["import"] > 0
    assert all(r.telemetry is not None and r.phases_s["launch_total"] > 0 for r in records)
    assert [read_record(root / d / "record.json").run_id for d in ("case0", "again1")] == ["held-case0", "held-again1"]
    plans = sorted(p.name for p in (root / "launch").glob("more*.json"))
    assert plans == ["more1.json", "more2.json"]  # the second, empty, ended it


def test_a_holding_launch_leaves_no_process_behind(held_run, assert_no_process_left):
    root, _, records = held_run
    assert_no_process_left(records[0].run_id)


def test_a_follow_on_that_cannot_be_decided_ends_the_launch_with_the_records_it_has(tmp_path, fast_spec, capsys):
    """The launch must end whatever the session's judging does: the session then re-measures the old way."""
    from harness.launch.group import run_benchmark_group

    def follow_on(records):
        raise KeyError("no bounds for this case")

    records = run_benchmark_group([fast_spec(gpus_per_node=2)], [tmp_path / "case0"], ["broken-follow-on"],
                                  tmp_path / "launch", follow_on=follow_on)
    assert [r.status for r in records] == ["ok"], [_reason(r) for r in records]
    assert "deciding its follow-on cases failed (KeyError" in capsys.readouterr().out


def test_a_holding_rank_ends_on_its_own_when_no_follow_on_comes(tmp_path, fast_spec):
    """A launcher that died writes no follow-on plan: the workers end after ``hold_s`` instead of holding the GPUs;
    one that comes is read, and every rank must agree to run it (one that saw none ends them all)."""
    import time
    from types import SimpleNamespace

    from harness.workloads import ddp_cases
    from harness.workloads.plan import BenchmarkPlan, write_plan

    written = []
    rank = SimpleNamespace(phase=SimpleNamespace(enter_case=lambda *a: None,
                                                 write=lambda name, expected_s=None: written.append(name)))
    agreed = {"value": 1.0}
    group = SimpleNamespace(across_ranks=lambda value, op: min(value, agreed["value"]))
    launch = SimpleNamespace(rank=rank, group=group, index=2)
    started = time.time()
    assert ddp_cases.follow_on(tmp_path, 1, 0.3, launch) == ()
    assert 0.3 <= time.time() - started < 2.0 and written == ["waiting"]
    case = fast_spec().case_plan(tmp_path, "a-case")
    write_plan(tmp_path / "more1.json", BenchmarkPlan(cases=(case,)))
    assert ddp_cases.follow_on(tmp_path, 1, 5.0, launch) == (case,)
    agreed["value"] = 0.0  # another rank saw none
    assert ddp_cases.follow_on(tmp_path, 1, 5.0, launch) == ()


# --- the adaptive window, end to end -------------------------------------------------------------


def test_the_adaptive_window_stops_on_its_target_with_every_rank_on_the_same_step(tmp_path, fast_spec):
    spec = fast_spec(gpus_per_node=2, ci_target=0.5, measure_seconds=1.0, max_measure_seconds=8.0,
                     ci_block_seconds=0.2)
    record = run_benchmark(spec, tmp_path)
    assert record.status == "ok", _reason(record)
    assert record.settings["ci_target"] == 0.5
    assert record.settings["measure_stop_reason"] in ("CI target", "max time")
    if record.settings["measure_stop_reason"] == "CI target":  # a loaded CI machine may need the cap
        assert record.throughput_ci95_rel <= 0.5 and record.ci_blocks >= 3
    assert record.measure_s >= 1.0
    assert len({rank.step_time.steps for rank in record.per_rank}) == 1  # all ranks voted to stop together
