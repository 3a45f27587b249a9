"""The launcher: torchrun command, spec validation, failure records, process cleanup, fault parsing.

The pure tests run in milliseconds; the ``slow`` ones launch torchrun on CPU (gloo) with an
injected fault and check that every way a rank can die becomes a record naming the rank, and
that no process of the launch survives it.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.workloads import faults
from harness.workloads.faults import Fault, parse_fault
from harness.launch.benchmark import failure_record, run_benchmark
from harness.launch.cleanup import kill_run, tagged_pids
from harness.node.process_tags import RUN_ID_ENV
from harness.launch.command import Rendezvous, launch_env, prepare_launch
from harness.launch.failure import explain_failure
from harness.launch.spec import BenchmarkSpec, LaunchSettings, check_window
from harness.durations import default_max_measure_seconds
from harness.launch.stall import Stall
from harness.records import read_record
from harness.workloads.plan import BenchmarkPlan, CasePlan, read_plan

LAUNCH_FIELDS = {f.name for f in dataclasses.fields(LaunchSettings)}


def _spec(**overrides) -> BenchmarkSpec:
    """A short CPU spec; the launch settings among ``overrides`` go to its LaunchSettings."""
    launch = {"gpus_per_node": 2, "device": "cpu",
              **{k: overrides.pop(k) for k in list(overrides) if k in LAUNCH_FIELDS}}
    fields = {"model": "tiny_bert", "precision": "fp32", "batch_size_per_gpu": 4}
    return BenchmarkSpec(**{**fields, **overrides}, launch=LaunchSettings(**launch))


# --- torchrun command --------------------------------------------------------------------------


def _planned_case(command: list[str]) -> CasePlan:
    """The one case of the plan a command runs (``--plan PATH`` at its end)."""
    assert command[-2] == "--plan"
    plan = read_plan(Path(command[-1]), BenchmarkPlan)
    assert len(plan.cases) == 1
    return plan.cases[0]


def test_standalone_command(tmp_path):
    command = prepare_launch(_spec(), tmp_path, "rid-1")
    assert command[:3] == [sys.executable, "-m", "torch.distributed.run"]
    assert "--standalone" in command
    assert "--nproc-per-node=2" in command
    worker = command.index("harness.workloads.ddp")
    assert command[worker - 1] == "-m"
    # torchrun's own options come before the module, the worker's plan after it.
    assert command.index("--nproc-per-node=2") < worker
    assert command[worker + 1:] == ["--plan", str(tmp_path / "plan.json")]
    case = _planned_case(command)
    assert (case.batch_size_per_gpu, case.global_batch_size, case.device) == (4, 8, "cpu")
    assert (case.run_dir, case.run_id) == (tmp_path, "rid-1")
    assert not any(arg.startswith("--rdzv") for arg in command)


def test_strong_scaling_command_passes_the_per_gpu_share(tmp_path):
    case = _planned_case(prepare_launch(_spec(scaling="strong", batch_size_per_gpu=None, global_batch_size=16),
                                        tmp_path, "r"))
    assert (case.batch_size_per_gpu, case.global_batch_size, case.scaling) == (8, 16, "strong")


def test_rendezvous_command(tmp_path):
    spec = _spec(nodes=2, gpus_per_node=8)
    command = prepare_launch(spec, tmp_path, "rid-2", Rendezvous(endpoint="node1:29400", run_id="job-42"))
    assert "--standalone" not in command
    assert "--rdzv-backend=c10d" in command
    assert "--rdzv-endpoint=node1:29400" in command
    assert "--rdzv-id=job-42" in command
    assert "--nnodes=2" in command
    assert "--nproc-per-node=8" in command
    assert _planned_case(command).global_batch_size == 4 * 16


def test_optional_flags_only_when_asked(tmp_path):
    plain = _planned_case(prepare_launch(_spec(), tmp_path / "plain", "r"))
    assert (plain.compile, plain.peak_tflops, plain.sync_each_step) == (False, None, False)
    flagged = _planned_case(prepare_launch(_spec(compile=True, peak_tflops=989.0, sync_each_step=True),
                                           tmp_path / "flagged", "r"))
    assert (flagged.compile, flagged.peak_tflops, flagged.sync_each_step) == (True, 989.0, True)


def test_the_plan_holds_every_default_resolved(tmp_path):
    case = _planned_case(prepare_launch(_spec(warmup_seconds=2.0, measure_seconds=3.0), tmp_path, "r"))
    assert (case.warmup_seconds, case.max_warmup_seconds, case.measure_seconds) == (2.0, 2 * 2.0 + 5, 3.0)
    assert (case.warmup_block_steps, case.compute_probe_steps, case.min_warmup_steps, case.min_measure_steps) == (
        5, 5, 10, 20)


def test_a_worker_refuses_anything_but_a_plan(tmp_path):
    from harness.workloads.plan import plan_argument

    with pytest.raises(SystemExit, match="usage: python -m harness.workloads.ddp --plan PLAN.json"):
        plan_argument(["--model", "tiny_bert"], "harness.workloads.ddp")
    (tmp_path / "plan.json").write_text('{"kind": "SoakPlan"}')
    with pytest.raises(SystemExit, match="not a readable BenchmarkPlan"):
        read_plan(tmp_path / "plan.json", BenchmarkPlan)


def test_launch_env_tags_the_run_and_pins_cpu(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    env = launch_env(_spec(extra_env={"HARNESS_FAULT": "kind=nan"}).launch, "rid-3")
    assert env[RUN_ID_ENV] == "rid-3"
    assert env["HARNESS_FAULT"] == "kind=nan"
    assert env["CUDA_VISIBLE_DEVICES"] == ""
    assert int(env["OMP_NUM_THREADS"]) >= 1
    package_root = str(Path(__file__).resolve().parent.parent)
    assert env["PYTHONPATH"].split(os.pathsep)[0] == package_root


# --- spec validation ---------------------------------------------------------------------------


def test_unknown_model_is_rejected():
    with pytest.raises(ValueError, match=r"model 'resnet9000' is unknown; known models: .*tiny_bert"):
        _spec(model="resnet9000")


def test_unknown_precision_is_rejected():
    with pytest.raises(ValueError, match=r"precision 'fp8' is unknown; use one of fp32, fp16, bf16"):
        _spec(precision="fp8")


def test_weak_scaling_needs_a_batch_size():
    with pytest.raises(ValueError, match="weak scaling needs a batch size per GPU"):
        _spec(batch_size_per_gpu=None)


def test_strong_scaling_needs_a_global_batch():
    with pytest.raises(ValueError, match="strong scaling needs a global batch size"):
        _spec(scaling="strong", batch_size_per_gpu=None)


def test_indivisible_global_batch_is_rejected():
    with pytest.raises(ValueError, match="not divisible by 2 GPUs"):
        _spec(scaling="strong", batch_size_per_gpu=None, global_batch_size=7)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("scaling", "sideways", "scaling 'sideways' is unknown"),
    ("device", "tpu", "device 'tpu' is unknown"),
    ("gpus_per_node", 0, "gpus_per_node must be >= 1, got 0"),
    ("measure_seconds", 0.0, "measure_seconds must be > 0 seconds"),
    ("timeout_s", -1.0, "timeout_s must be > 0 seconds"),
    ("stall_factor", 0.0, "stall_factor must be > 0 and finite, got 0.0"),
    ("min_measure_steps", 0, "min_measure_steps must be >= 1, got 0"),
    # Finite as well as positive (issue 20): inf ran a window or waited on a deadline for ever.
    ("measure_seconds", float("inf"), "measure_seconds must be > 0 seconds and finite, got inf"),
    ("warmup_seconds", float("nan"), "warmup_seconds must be > 0 seconds and finite, got nan"),
    ("timeout_s", float("inf"), "timeout_s must be > 0 seconds and finite, got inf"),
    ("stall_floor_s", float("inf"), "stall_floor_s must be > 0 seconds and finite, got inf"),
    ("stall_factor", float("inf"), "stall_factor must be > 0 and finite, got inf"),
    ("max_measure_seconds", float("inf"), "max_measure_seconds (inf) must be >= measure_seconds (10.0) and finite"),
    ("peak_tflops", -989.0, "peak_tflops must be a finite dense peak TFLOP/s per GPU > 0 (or 0/None: no MFU)"),
])
def test_bad_spec_field_names_itself(field, value, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        _spec(**{field: value})


# --- failure records from a dead launch (no torchrun) ------------------------------------------

TORCHRUN_ROOT_CAUSE_LOG = (
    "[W0101 00:00:01.000000 99 torch/distributed/elastic/multiprocessing/api.py:900] Sending process 1233 closing "
    "signal SIGTERM\n"
    "E0101 00:00:01.100000 99 torch/distributed/elastic/multiprocessing/api.py:874] failed (exitcode: -9) "
    "local_rank: 3 (pid: 1234) of binary: /usr/bin/python\n") + """\
Traceback (most recent call last):
  File "/usr/lib/python3/site-packages/torch/distributed/run.py", line 900, in main
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
harness.workloads.ddp FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2025-01-01_00:00:01
  host      : node7
  rank      : 3 (local_rank: 3)
  exitcode  : -9 (pid: 1234)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 1234
============================================================
"""


def _failure_from_log(tmp_path: Path, log: str, phases: dict[int, dict], **kwargs):
    (tmp_path / "torchrun.log").write_text(log)
    stall = Stall(reason="rank 0 showed no progress") if kwargs.pop("timed_out", False) else None
    status, failure = explain_failure(tmp_path, returncode=kwargs.pop("returncode", 1), stall=stall, elapsed_s=12.0,
                                      phases=phases)
    return failure_record(_spec(gpus_per_node=4), "rid-f", status=status, failure=failure, elapsed_s=12.0,
                          phases=phases)


def test_root_cause_block_names_the_killed_rank(tmp_path):
    record = _failure_from_log(tmp_path, TORCHRUN_ROOT_CAUSE_LOG, phases={})
    assert record.status == "failed"
    assert record.failure.rank == 3
    assert re.match(r"rank 3\b.* was killed by SIGKILL", record.failure.reason), record.failure.reason
    assert "torchrun.log" in record.failure.log_tails
    assert "Root Cause" in record.failure.log_tails["torchrun.log"]


def test_root_cause_uses_the_ranks_phase_and_host(tmp_path):
    phases = {3: {"rank": 3, "host": "node7", "phase": "measure"}, 0: {"rank": 0, "host": "node4", "phase": "measure"}}
    record = _failure_from_log(tmp_path, TORCHRUN_ROOT_CAUSE_LOG, phases=phases)
    assert record.failure.reason == "rank 3 (host node7) was killed by SIGKILL in phase measure"
    assert record.failure.phase == "measure"
    assert set(record.hosts) == {"node4", "node7"}


def test_root_cause_with_an_exit_code(tmp_path):
    log = TORCHRUN_ROOT_CAUSE_LOG.replace("exitcode  : -9 (pid: 1234)", "exitcode  : 1 (pid: 1234)")
    record = _failure_from_log(tmp_path, log, phases={})
    assert record.failure.rank == 3
    assert "rank 3 (host node7) exited with code 1" in record.failure.reason  # host from torchrun


def test_no_root_cause_says_torchrun_failed(tmp_path):
    record = _failure_from_log(tmp_path, "RuntimeError: address already in use\n", phases={}, returncode=1)
    assert record.status == "failed"
    assert record.failure.rank is None
    assert record.failure.reason.startswith("torchrun exited with code 1 before any rank reported a result")
    assert "address already in use" in record.failure.reason


def test_timeout_names_the_earliest_stuck_phase(tmp_path):
    phases = {0: {"phase": "measure", "host": "a"}, 1: {"phase": "warmup", "host": "a"}}
    record = _failure_from_log(tmp_path, "", phases=phases, timed_out=True)
    assert record.status == "timeout"
    assert record.failure.reason.startswith("timed out in phase warmup after 12 s")
    assert "measure: ranks 0" in record.failure.reason and "warmup: ranks 1" in record.failure.reason


def test_rank_failure_file_wins_over_the_torchrun_log(tmp_path):
    (tmp_path / "rank2.failure.json").write_text(
        '{"rank": 2, "reason": "out of memory at batch 4 per GPU", "phase": "measure", "status": "failed"}')
    record = _failure_from_log(tmp_path, TORCHRUN_ROOT_CAUSE_LOG, phases={2: {"host": "node7", "phase": "measure"}})
    assert record.failure.rank == 2
    assert record.failure.reason == "rank 2 (host node7): out of memory at batch 4 per GPU"


# --- process cleanup ---------------------------------------------------------------------------


def _wait_for_tagged(run_id: str, count: int, timeout_s: float = 5.0) -> list[int]:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        pids = tagged_pids(run_id)
        if len(pids) >= count:
            return pids
        time.sleep(0.05)
    return tagged_pids(run_id)


def test_kill_run_ends_a_tagged_process_tree(assert_no_process_left):
    run_id = f"test-kill-tree-{os.getpid()}-{time.time_ns()}"
    proc = subprocess.Popen(["bash", "-c", "sleep 60 & sleep 60"], env={**os.environ, RUN_ID_ENV: run_id},
                            start_new_session=True)
    assert len(_wait_for_tagged(run_id, 3)) >= 2  # bash and its children carry the tag
    kill_run(proc, run_id, grace_s=2.0)
    assert proc.returncode is not None
    assert_no_process_left(run_id)


def test_kill_run_escalates_to_sigkill_for_a_process_that_ignores_sigterm(assert_no_process_left):
    """A child in a session of its own that ignores SIGTERM: only the /proc sweep and SIGKILL reach it."""
    run_id = f"test-kill-stubborn-{os.getpid()}-{time.time_ns()}"
    proc = subprocess.Popen(["bash", "-c", "trap '' TERM; setsid sleep 60 & sleep 60"],
                            env={**os.environ, RUN_ID_ENV: run_id}, start_new_session=True)
    assert len(_wait_for_tagged(run_id, 3)) >= 2
    started = time.monotonic()
    kill_run(proc, run_id, grace_s=0.5)
    assert time.monotonic() - started < 5.0
    assert_no_process_left(run_id)


def test_tagged_pids_matches_the_exact_run_id():
    run_id = f"test-exact-{os.getpid()}-{time.time_ns()}"
    proc = subprocess.Popen(["sleep", "60"], env={**os.environ, RUN_ID_ENV: run_id + "-other"})
    try:
        _wait_for_tagged(run_id + "-other", 1)
        assert tagged_pids(run_id) == []
        assert tagged_pids(run_id + "-other") == [proc.pid]
    finally:
        proc.kill()
        proc.wait()


# --- launched runs with injected faults (slow) -------------------------------------------------


# When one rank dies its peers fail too ("Connection closed by peer" from gloo, NCCL's "remote
# process exited"); the record must blame the rank that died, not the echo (launch._root_cause).

# torchrun polls its workers every 0.1 s, so whether the surviving rank reports the lost peer
# before torchrun terminates it is a race. Polling every second lets it always win, as it always
# does for ranks on another node (whose torchrun never sees the dead rank at all).
PEER_NOTICES_FIRST = {"PET_MONITOR_INTERVAL": "1"}


def _launch(tmp_path_factory, fast_spec, name: str, **overrides):
    run_dir = tmp_path_factory.mktemp(name)
    return run_dir, run_benchmark(fast_spec(**overrides), run_dir)


@pytest.fixture(scope="module")
def crashed_run(tmp_path_factory, fast_spec):
    return _launch(tmp_path_factory, fast_spec, "crash", gpus_per_node=2,
                   extra_env={"HARNESS_FAULT": "kind=crash,rank=1,phase=measure,step=1"})


@pytest.fixture(scope="module")
def killed_run(tmp_path_factory, fast_spec):
    return _launch(tmp_path_factory, fast_spec, "kill", gpus_per_node=2,
                   extra_env={"HARNESS_FAULT": "kind=kill,rank=1,phase=measure,step=1", **PEER_NOTICES_FIRST})


@pytest.mark.slow
def test_a_crashing_rank_fails_the_run_and_leaves_no_process(crashed_run, assert_no_process_left):
    run_dir, record = crashed_run
    assert record.status == "failed"
    assert record.failure is not None and record.failure.phase == "measure"
    assert read_record(run_dir / "record.json").status == "failed"
    assert_no_process_left(record.run_id)


@pytest.mark.slow
def test_a_crashing_ranks_traceback_is_in_the_log_tails(crashed_run):
    _, record = crashed_run
    tails = record.failure.log_tails
    assert "rank1.log" in tails and "torchrun.log" in tails
    assert "Traceback (most recent call last)" in tails["rank1.log"]
    assert "RuntimeError: injected crash (HARNESS_FAULT) at measure step 1" in tails["rank1.log"]


@pytest.mark.slow
def test_a_crashing_rank_is_named(crashed_run):
    _, record = crashed_run
    failure = record.failure
    assert failure.rank == 1, failure.reason
    assert re.match(r"rank 1\b", failure.reason), failure.reason
    assert "injected crash (HARNESS_FAULT) at measure step 1" in failure.reason


@pytest.mark.slow
def test_a_sigkilled_rank_fails_the_run_and_leaves_no_process(killed_run, assert_no_process_left):
    run_dir, record = killed_run
    assert record.status == "failed"
    assert "rank1.log" in record.failure.log_tails
    assert read_record(run_dir / "record.json").status == "failed"
    assert_no_process_left(record.run_id)


@pytest.mark.slow
def test_a_sigkilled_rank_is_named(killed_run):
    _, record = killed_run
    failure = record.failure
    assert failure.rank == 1, failure.reason
    assert re.match(r"rank 1\b.* was killed by SIGKILL in phase measure", failure.reason), failure.reason
    assert failure.phase == "measure"


@pytest.mark.slow
def test_a_hanging_rank_times_out(tmp_path, fast_spec, assert_no_process_left):
    spec = fast_spec(gpus_per_node=2, timeout_s=20.0,
                     extra_env={"HARNESS_FAULT": "kind=hang,rank=1,phase=measure,step=1"})
    started = time.monotonic()
    record = run_benchmark(spec, tmp_path)
    elapsed_s = time.monotonic() - started
    assert record.status == "timeout", record.failure.reason
    assert record.failure.reason.startswith("timed out in phase measure"), record.failure.reason
    assert record.failure.phase == "measure"
    assert elapsed_s < 30.0
    assert read_record(tmp_path / "record.json").status == "timeout"
    assert_no_process_left(record.run_id)


@pytest.mark.slow
def test_an_oom_is_reported_with_the_batch_and_the_way_out(tmp_path, fast_spec, assert_no_process_left):
    spec = fast_spec(gpus_per_node=1, extra_env={"HARNESS_FAULT": "kind=oom,rank=0,phase=measure,step=0"})
    record = run_benchmark(spec, tmp_path)
    assert record.status == "failed"
    assert record.failure.rank == 0
    assert record.failure.phase == "measure"
    assert "out of memory at batch 4 per GPU" in record.failure.reason
    assert "harness find-max-bs --model tiny_bert --precision fp32" in record.failure.reason
    assert_no_process_left(record.run_id)


@pytest.mark.slow
def test_an_oom_on_a_later_rank_is_not_masked_by_its_peer(tmp_path, fast_spec):
    spec = fast_spec(gpus_per_node=2, extra_env={"HARNESS_FAULT": "kind=oom,rank=1,phase=measure,step=1"})
    record = run_benchmark(spec, tmp_path)
    assert record.status == "failed"
    assert record.failure.rank == 1, record.failure.reason
    assert "out of memory at batch 4 per GPU" in record.failure.reason


# --- fault specifications ----------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("kind=kill,rank=1,phase=measure,step=5", Fault(kind="kill", rank=1, phase="measure", step=5)),
    ("kind=nan", Fault(kind="nan", rank=0, phase="measure", step=0)),
    (" kind = hang , phase = warmup , step = 3 ", Fault(kind="hang", rank=0, phase="warmup", step=3)),
    ("kind=oom,rank=7", Fault(kind="oom", rank=7, phase="measure", step=0)),
])
def test_parse_fault_accepts(text, expected):
    assert parse_fault(text) == expected


@pytest.mark.parametrize(("text", "named"), [
    ("kind=kill,colour=red", "unknown keys ['colour']"),
    ("kind=explode", "kind 'explode' is not one of kill, crash, hang, nan, oom"),
    ("rank=1", "kind '' is not one of"),
    ("kind=kill,phase=teardown", "phase 'teardown' is not one of warmup, measure"),
    ("kind=kill,step=five", "rank and step must be integers"),
    ("kind=kill,rank=one", "rank and step must be integers"),
    ("kind=kill,step", "expected key=value pairs separated by commas, got 'step'"),
])
def test_parse_fault_rejects_and_names_the_bad_part(text, named):
    with pytest.raises(ValueError, match=re.escape(named)) as excinfo:
        parse_fault(text)
    assert "HARNESS_FAULT" in str(excinfo.value)


def test_fault_is_due_only_at_its_rank_phase_and_step():
    fault = parse_fault("kind=crash,rank=1,phase=measure,step=2")
    assert fault.due(1, "measure", 2)
    assert not fault.due(0, "measure", 2)
    assert not fault.due(1, "warmup", 2)
    assert not fault.due(1, "measure", 3)


def test_fault_from_env(monkeypatch):
    monkeypatch.delenv(faults.ENV_VAR, raising=False)
    assert faults.fault_from_env() is None
    monkeypatch.setenv(faults.ENV_VAR, "kind=nan,rank=1")
    assert faults.fault_from_env() == Fault(kind="nan", rank=1, phase="measure", step=0)


def test_crash_and_oom_faults_raise():
    import torch

    with pytest.raises(RuntimeError, match="injected crash"):
        faults.trigger(parse_fault("kind=crash,step=4"))
    with pytest.raises(torch.OutOfMemoryError, match="injected out-of-memory"):
        faults.trigger(parse_fault("kind=oom"))


# --- several cases in one launch: the pure parts ------------------------------------------------


def test_cases_of_one_launch_must_share_its_shape(tmp_path):
    from harness.launch.group import run_benchmark_group

    specs = [_spec(), _spec(telemetry=False)]
    with pytest.raises(ValueError, match="the cases of one launch must share telemetry"):
        run_benchmark_group(specs, [tmp_path / "a", tmp_path / "b"], ["a", "b"], tmp_path / "launch")
    with pytest.raises(ValueError, match="one run directory and one run id per spec"):
        run_benchmark_group([_spec(), _spec()], [tmp_path / "a"], ["a", "b"], tmp_path / "launch")
    assert not (tmp_path / "launch").exists()  # refused before anything was written


def test_the_worker_gets_the_adaptive_window_only_when_asked(tmp_path):
    fixed = _planned_case(prepare_launch(_spec(), tmp_path / "fixed", "r"))
    assert fixed.ci_target == 0 and fixed.max_measure_seconds == default_max_measure_seconds(fixed.measure_seconds)
    adaptive = _planned_case(prepare_launch(_spec(ci_target=0.01, max_measure_seconds=12, measure_seconds=2),
                                            tmp_path / "adaptive", "r"))
    assert adaptive.ci_target == 0.01 and adaptive.max_measure_seconds == 12


@pytest.mark.parametrize(("overrides", "message"), [
    ({"ci_target": 1.0}, "ci_target must be a fraction in"),
    ({"ci_target": 0.01, "measure_seconds": 5, "max_measure_seconds": 4},
     "max_measure_seconds .4. must be >= measure_seconds"),
])
def test_adaptive_window_fields_are_checked(overrides, message):
    with pytest.raises(ValueError, match=message):
        _spec(**overrides)


@pytest.mark.parametrize(("window", "message"), [
    ({"warmup_seconds": 1.0, "measure_seconds": 0.0}, "measure_seconds must be > 0 seconds and finite, got 0.0"),
    ({"warmup_seconds": -1.0, "measure_seconds": 5.0}, "warmup_seconds must be > 0 seconds and finite, got -1.0"),
    ({"warmup_seconds": 1.0, "measure_seconds": 5.0, "ci_target": 2.0}, "ci_target must be a fraction in [0, 1)"),
    ({"warmup_seconds": 1.0, "measure_seconds": 5.0, "max_measure_seconds": 4.0},
     "max_measure_seconds (4.0) must be >= measure_seconds (5.0)"),
])
def test_check_window_is_what_a_spec_checks_without_building_one(window, message):
    """The pytest plugin checks its duration options with it before any benchmark (a usage error)."""
    with pytest.raises(ValueError, match=re.escape(message)):
        check_window(**window)
    with pytest.raises(ValueError, match=re.escape(message)):
        _spec(**window)


def test_each_case_gets_its_sampler_when_it_begins(tmp_path):
    from harness.launch.group import CaseSamplers

    started = []

    class FakeSampler:
        def __init__(self, run_dir):
            self.run_dir = run_dir

        def start(self):
            started.append(self.run_dir.name)
            return self

        def stop(self):
            return {"status": "ok", "case": self.run_dir.name}

    dirs = [tmp_path / "case0", tmp_path / "case1"]
    for directory in dirs:
        directory.mkdir()
    samplers = CaseSamplers(dirs, _spec().launch, factory=FakeSampler)
    samplers.poll()
    assert started == []  # no case has begun
    (dirs[0] / "rank0.phase").write_text("{}")
    samplers.poll()
    samplers.poll()
    assert started == ["case0"]  # once, and only for the case that began
    summaries = samplers.stop()
    assert summaries == {str(dirs[0]): {"status": "ok", "case": "case0"}}
