"""Every node of a multi-node session is judged: the probe on each other node
(harness/node/gpu_state_probe.py) and the driver's side of it (harness/plugin/remote_gpu_state.py),
with a fake NVML per node and a stand-in for the ``srun`` step that runs the probe in threads."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from support.jobs import required_tests
from support.gpu_state import check_gpu
from harness.launch.cleanup import owner_env, session_owner
from harness.launch.slurm import SlurmAllocation
from harness.node.gpu_state_probe import STOP_FILE, node_file, watch
from harness.node.hardware import GpuInfo
from harness.kinds.gpu_state.params import gpu_state_params
from harness.plugin.gpu_state import GpuStateWatcher
from harness.kinds.node_shape.runner import NodeShapeRuns
from harness.plugin.remote_gpu_state import NodeGpu, judged_nodes, probe_command
from harness.kinds.shipped import load_shipped_profile
from harness.report.outcomes import SessionTest
from harness.kinds.shipped import report_sections
from harness.report.sections.gpus import build_gpu_table
from support.hardware import make_hardware
from test_gpu_state import h100_session  # noqa: F401 - the fake H100 session two_node_session starts from
from support.fake_nvml import HOPPER_VM_UNSUPPORTED, UUIDS, FakeNvml, fake_nvml

pytest_plugins = ["pytester"]

THRESHOLDS = Path(__file__).resolve().parents[1] / "thresholds"
H100 = load_shipped_profile(THRESHOLDS / "h100-80gb.toml")


def h100s(count: int = 2, **changes: Any) -> FakeNvml:
    return fake_nvml(count, name="NVIDIA H100 80GB HBM3", unsupported=set(HOPPER_VM_UNSUPPORTED), **changes)


def no_nvml() -> FakeNvml:
    return FakeNvml([], init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)


class ProbeStep:
    """Stands in for ``srun ... gpu_state_probe watch``: one thread per node that has a fake NVML; a
    node without one never writes (its probe never started); exits 1 at once when no node has one."""

    def __init__(self, nvml_by_node: dict[str, FakeNvml], directory: Path, owner: str | None = None):
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=watch, args=(directory, node, nvml, self.stop, 0.02), daemon=True,
                                         kwargs={"owner": owner, "load_period_s": 0.02})
                        for node, nvml in nvml_by_node.items()]
        for thread in self.threads:
            thread.start()
        self.signals: list[int] = []

    def poll(self) -> int | None:
        if not self.threads:
            return 1
        return None if any(t.is_alive() for t in self.threads) else 0

    def send_signal(self, signum: int) -> None:
        self.signals.append(signum)
        self.stop.set()  # the probe's handler: end snapshot, exit

    def terminate(self) -> None:
        self.signals.append(signal.SIGTERM)
        self.stop.set()

    def kill(self) -> None:
        self.signals.append(signal.SIGKILL)
        self.stop.set()

    def wait(self, timeout: float | None = None) -> int:
        for thread in self.threads:
            thread.join(timeout)
        return 0


def fake_srun(nvml_by_node: dict[str, FakeNvml], launched: list[list[str]]):
    def popen(command: list[str], **_: Any) -> ProbeStep:
        launched.append(command)
        return ProbeStep(nvml_by_node, Path(command[command.index("--dir") + 1]), command[command.index("--owner") + 1])
    return popen


def session_ctx(tmp_path: Path, nodes: tuple[str, ...] = ("gpu01", "gpu02"), gpus: int = 2, level: str = "standard",
                device: str = "cuda", driver: str = "gpu01.cluster.example") -> Any:
    hardware = replace(make_hardware(*[("NVIDIA H100 80GB HBM3", 79.6)] * gpus), nvml_gpu_count=gpus, hostname=driver,
                       gpus=tuple(GpuInfo(index=i, name="NVIDIA H100 80GB HBM3", uuid=UUIDS[i], memory_total_gib=79.6,
                                          pci_bus_id=f"00000000:{i:02X}:00.0") for i in range(gpus)))
    allocation = SlurmAllocation(job_id="77", nodes=nodes, gpus_per_node=gpus, cpus_per_node=32) if nodes else None
    return SimpleNamespace(device=device, hardware=hardware, profile=H100, allocation=allocation,
                           options=SimpleNamespace(level=level, nodes=None), run_dir=tmp_path, expected_gpus=gpus,
                           expected_gpus_source=f"the Slurm allocation: {gpus} GPUs on this node",
                           available_gpus=gpus, node_gpus=gpus, expected_gpus_stated=True, nvidia_presence=None)


def start_runner(tmp_path: Path, remote_nvml: dict[str, FakeNvml], **ctx: Any) -> tuple[GpuStateWatcher, FakeNvml]:
    driver = h100s(ctx.get("gpus", 2))
    runner = GpuStateWatcher(ctx=session_ctx(tmp_path, **ctx))
    runner.start(driver, popen=fake_srun(remote_nvml, []))
    return runner, driver


def run_all(runner: GpuStateWatcher, driver: FakeNvml) -> dict[str, Any]:
    params = gpu_state_params(runner.ctx, runner.remote)
    results = {p.id: check_gpu(runner, p.values[0], nvml=driver) for p in params}
    runner.stop()
    return results


def failed_keys(result: Any) -> list[str]:
    return [c.key for c in result.failed]


# --- the probe on one node ------------------------------------------------------------------------


def test_the_probe_writes_start_and_end_with_the_xids_between(tmp_path):
    nvml = h100s(2)
    stop = threading.Event()
    thread = threading.Thread(target=watch, args=(tmp_path, "gpu02", nvml, stop, 0.02))
    thread.start()
    start = _wait_for_file(node_file(tmp_path, "gpu02", "start"))
    assert start["status"] == "ok" and [g["uuid"] for g in start["gpus"]] == list(UUIDS[:2])
    assert start["states"][1]["readings"]["enforced_power_limit_w"]["value"] == 700.0
    nvml.xid_queue.append((1, 79))
    nvml.gpus[1].limit_mw = 450_000
    _wait_until(lambda: not nvml.xid_queue)
    (tmp_path / STOP_FILE).touch()
    thread.join(10)
    end = json.loads(node_file(tmp_path, "gpu02", "end").read_text())
    assert end["states"][1]["readings"]["enforced_power_limit_w"]["value"] == 450.0
    assert [(e["gpu_uuid"], e["xid"]) for e in end["xid"]["events"]] == [(UUIDS[1], 79)]
    assert end["xid"]["status"] == {UUIDS[0]: "ok", UUIDS[1]: "ok"} and end["xid"]["failure"] is None


def test_a_node_without_nvml_says_so_in_both_files(tmp_path):
    stop = threading.Event()
    stop.set()
    watch(tmp_path, "gpu02", no_nvml(), stop, 0.02)
    for phase in ("start", "end"):
        data = json.loads(node_file(tmp_path, "gpu02", phase).read_text())
        assert data["status"] == "unavailable" and data["why"].startswith("NVML unavailable") and data["gpus"] == []


# --- which nodes, and the srun step ---------------------------------------------------------------


def test_only_sessions_whose_cases_span_nodes_probe_other_nodes(tmp_path):
    assert judged_nodes(session_ctx(tmp_path)) == ("gpu01", "gpu02")
    assert judged_nodes(session_ctx(tmp_path, nodes=())) == ()
    assert judged_nodes(session_ctx(tmp_path, nodes=("gpu01",))) == ()
    assert judged_nodes(session_ctx(tmp_path, level="quick")) == ()  # no DDP matrix: no case uses gpu02
    assert judged_nodes(session_ctx(tmp_path, device="cpu")) == ()
    # A driver outside the allocation (an salloc shell on a login node): the first node is probed too.
    assert judged_nodes(session_ctx(tmp_path, driver="login1")) == ("login1", "gpu01", "gpu02")


def test_the_probe_step_runs_one_task_on_each_other_node_beside_the_cases(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_STEP_WRAPPER", "apptainer exec --nv /x/harness.sif")
    alloc = SlurmAllocation(job_id="77", nodes=("gpu01", "gpu02", "gpu03"), gpus_per_node=8, cpus_per_node=32)
    command = probe_command(alloc, ("gpu02", "gpu03"), tmp_path)
    assert command[:5] == ["srun", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--nodelist=gpu02,gpu03"]
    assert {"--overlap", "--kill-on-bad-exit=0", "--gpus-per-node=8"} <= set(command)
    wrapper = command.index("apptainer")
    assert command[wrapper:wrapper + 4] == ["apptainer", "exec", "--nv", "/x/harness.sif"]
    assert command[-8:] == [sys.executable, "-m", "harness.node.gpu_state_probe", "watch", "--dir", str(tmp_path),
                            "--owner", session_owner()]
    # The tag every launch of this session carries, so the probe tells the session's ranks from others.
    assert owner_env(tmp_path)["HARNESS_OWNER"] == session_owner()


# --- the session: node 2 capped, unreadable, short; one node unchanged ----------------------------


def test_a_capped_power_limit_on_node_2_fails_naming_node_2_and_its_gpu(tmp_path):
    remote = h100s(2)
    runner, driver = start_runner(tmp_path, {"gpu02": remote})
    assert [p.id for p in gpu_state_params(runner.ctx, runner.remote)] == [
        "gpu01-gpu0", "gpu01-gpu1", "gpu02-gpu0", "gpu02-gpu1"]
    remote.gpus[1].limit_mw = 400_000  # capped during the session, on node 2 only: its end snapshot shows it
    results = run_all(runner, driver)
    assert {name: failed_keys(r) for name, r in results.items()} == {
        "gpu01-gpu0": [], "gpu01-gpu1": [], "gpu02-gpu0": [], "gpu02-gpu1": ["power_limit"]}
    capped = results["gpu02-gpu1"]
    assert f"node gpu02: GPU 1 ({UUIDS[1]}): enforced power limit 400 W < default 700 W at session end" in \
        capped.failure_message()
    assert capped.name == "gpu-state-gpu02-gpu1" and "node gpu02" in capped.context
    assert results["gpu01-gpu0"].checks[0].note.startswith("node gpu01: GPU 0")


def test_an_xid_on_node_2_fails_its_gpu_naming_the_node(tmp_path):
    remote = h100s(2)
    runner, driver = start_runner(tmp_path, {"gpu02": remote})
    remote.xid_queue.append((0, 48))
    _wait_until(lambda: not remote.xid_queue)
    results = run_all(runner, driver)
    assert failed_keys(results["gpu02-gpu0"]) == ["xid_events"]
    message = results["gpu02-gpu0"].failure_message()
    assert f"node gpu02: GPU 0 ({UUIDS[0]}): XID 48" in message


@pytest.fixture
def processes():
    """Start real processes (``sleep``) with or without the session's owner tag; all killed at the end."""
    started: list[subprocess.Popen] = []

    def start(tagged: bool) -> int:
        env = {key: value for key, value in os.environ.items() if key != "HARNESS_OWNER"}
        env.update(owner_env(Path(".")) if tagged else {})
        started.append(subprocess.Popen(["sleep", "60"], env=env))
        return started[-1].pid

    yield start
    for process in started:
        process.kill()
        process.wait()


def test_throttling_and_a_foreign_process_on_node_2_fail_its_gpus_naming_node_and_cause(tmp_path, processes):
    remote = h100s(2)
    runner, driver = start_runner(tmp_path, {"gpu02": remote})  # idle at start, as a session needs
    # Then, GPU 0: the session's rank, and a foreign process beside it; GPU 1: the session's rank, slowed for heat.
    ours, foreign = processes(tagged=True), processes(tagged=False)
    remote.gpus[0].compute_processes = [(ours, 30 * 2**30), (foreign, 2 * 2**30)]
    remote.gpus[1].compute_processes = [(ours, 30 * 2**30)]
    remote.gpus[1].reasons = 0x40 | 0x4  # hw thermal slowdown + sw power cap
    time.sleep(0.2)  # several load samples
    results = run_all(runner, driver)
    assert {name: failed_keys(r) for name, r in results.items()} == {
        "gpu01-gpu0": [], "gpu01-gpu1": [], "gpu02-gpu0": ["foreign_processes"], "gpu02-gpu1": ["throttling"]}
    message = results["gpu02-gpu0"].failure_message()
    assert f"node gpu02: GPU 0 ({UUIDS[0]}): pid {foreign} (sleep, 2,048 MiB, seen" in message
    assert str(ours) not in message
    throttled = next(c for c in results["gpu02-gpu1"].checks if c.key == "throttling")
    assert throttled.note.startswith(f"node gpu02: GPU 1 ({UUIDS[1]}): hw thermal slowdown at ")
    assert "samples under the session's load: hw thermal slowdown in" in throttled.note
    assert "sw power cap in" in throttled.note
    # The driver's GPUs are judged per case (their windows' telemetry), not here.
    assert [c.key for c in results["gpu01-gpu0"].checks if c.key in ("throttling", "foreign_processes")] == []


def test_node_2_under_the_session_s_load_alone_passes_both(tmp_path, processes):
    remote = h100s(2)
    runner, driver = start_runner(tmp_path, {"gpu02": remote})
    ours = processes(tagged=True)
    for gpu in remote.gpus:
        gpu.compute_processes = [(ours, 30 * 2**30)]
        gpu.reasons = 0x4  # sw power cap: how a healthy GPU runs under full load
    time.sleep(0.2)
    results = run_all(runner, driver)
    for name in ("gpu02-gpu0", "gpu02-gpu1"):
        checks = {c.key: c for c in results[name].checks}
        assert checks["throttling"].passed is True and "(not faults: sw power cap in" in checks["throttling"].note
        assert checks["foreign_processes"].passed is True
        assert "only the session's processes in" in checks["foreign_processes"].note


@pytest.mark.parametrize("remote, says", [
    ({}, "node gpu02: no start snapshot from the GPU-state probe; the probe step ended with status 1"),
    ({"gpu02": no_nvml()}, "node gpu02: NVML unavailable"),
])
def test_an_unreadable_node_2_never_passes(tmp_path, remote, says):
    runner, driver = start_runner(tmp_path, remote)
    shape = NodeShapeRuns(ctx=runner.ctx).check(runner.remote)
    [count] = [c for c in shape.checks if c.key == "remote_gpu_count"]
    assert count.passed is False and says in count.note
    results = run_all(runner, driver)
    assert [name for name in results if name.startswith("gpu02")] == ["gpu02-gpu0", "gpu02-gpu1"]
    for name in ("gpu02-gpu0", "gpu02-gpu1"):
        result = results[name]
        assert result.failed and all(c.passed is False for c in result.checks), name
        assert says in result.failure_message()
    assert all(not failed_keys(results[f"gpu01-gpu{i}"]) for i in range(2))


def test_node_2_with_fewer_gpus_fails_the_node_shape_and_its_missing_gpu(tmp_path):
    runner, driver = start_runner(tmp_path, {"gpu02": h100s(1)})
    shape = NodeShapeRuns(ctx=runner.ctx).check(runner.remote)
    [count] = [c for c in shape.checks if c.key == "remote_gpu_count"]
    assert count.passed is False and count.measured == 1.0 and count.bound == 2.0
    assert f"node gpu02: 1 usable GPUs < 2 expected (NVML there shows: GPU 0 {UUIDS[0]})" in count.note
    assert [gpu["uuid"] for gpu in shape.data["other_nodes"]["gpu02"]] == [UUIDS[0]]
    results = run_all(runner, driver)
    assert "node gpu02: GPU 1 is missing: NVML there shows 1 GPUs (0)" in results["gpu02-gpu1"].failure_message()
    assert not failed_keys(results["gpu02-gpu0"])


def test_a_healthy_two_node_session_passes_and_keeps_both_nodes_in_session_json(tmp_path):
    runner, driver = start_runner(tmp_path, {"gpu02": h100s(2)})
    shape = NodeShapeRuns(ctx=runner.ctx).check(runner.remote)
    assert [c.passed for c in shape.checks if c.key.startswith("remote_")] == [True, True]
    results = run_all(runner, driver)
    assert all(not r.failed for r in results.values())
    summary = runner.summary()
    assert summary is not None and summary["other_nodes"]["nodes"] == ["gpu02"]
    assert summary["other_nodes"]["end"]["gpu02"]["phase"] == "end"


def test_one_node_is_unchanged(tmp_path):
    launched: list[list[str]] = []
    runner = GpuStateWatcher(ctx=session_ctx(tmp_path, nodes=("gpu01",)))
    runner.start(h100s(2), popen=fake_srun({}, launched))
    assert launched == [] and runner.remote is None
    assert [p.id for p in gpu_state_params(runner.ctx, runner.remote)] == ["gpu0", "gpu1"]
    result = check_gpu(runner, 1, nvml=h100s(2))
    runner.stop()
    assert result.name == "gpu-state-gpu1" and result.checks[0].note.startswith(f"GPU 1 ({UUIDS[1]})")
    assert "node" not in result.to_dict()["gpu_state"]
    assert [c.key for c in NodeShapeRuns(ctx=runner.ctx).check().checks].count("remote_gpu_count") == 0


def test_every_node_s_gpu_state_tests_are_required_in_a_multi_node_session():
    two = required_tests(H100, 2, nodes=("gpu01", "gpu02"))
    assert [n for n in two if n.startswith("test_gpu_state")] == [
        "test_gpu_state[gpu01-gpu0]", "test_gpu_state[gpu01-gpu1]", "test_gpu_state[gpu02-gpu0]",
        "test_gpu_state[gpu02-gpu1]"]
    one = required_tests(H100, 2)
    assert [n for n in one if n.startswith("test_gpu_state")] == ["test_gpu_state[gpu0]", "test_gpu_state[gpu1]"]
    assert [n for n in two if not n.startswith("test_gpu_state")] == [n for n in one if not n.startswith("test_gpu_")]


def test_a_remote_gpu_never_probed_fails_named(tmp_path):
    runner = GpuStateWatcher(ctx=session_ctx(tmp_path))  # start() never ran: no probe step
    result = check_gpu(runner, NodeGpu(node="gpu02", index=0))
    assert result.failed and "node gpu02: the GPU-state probe step was never started for this node" in \
        result.failure_message()


def _wait_for_file(path: Path) -> dict:
    _wait_until(path.exists)
    return json.loads(path.read_text())


def _wait_until(condition, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


# --- a whole acceptance session in a 2-node Slurm job, through pytester ---------------------------


@pytest.fixture
def two_node_session(h100_session, monkeypatch):  # noqa: F811 - the fixture imported above
    """test_gpu_state.py's fake one-H100 session, in a Slurm job of nodes node01 (the driver) and gpu02,
    whose probe step is ``fake_srun`` over ``remote`` (node -> fake NVML)."""
    run_session, _, root = h100_session
    # make_hardware's host is node01: the driver on the allocation's first node, as the batch script runs it.
    for name, value in {"SLURM_JOB_ID": "77", "SLURM_JOB_NODELIST": "node01,gpu02", "SLURM_JOB_NUM_NODES": "2",
                        "SLURM_GPUS_ON_NODE": "1", "SLURM_CPUS_ON_NODE": "4"}.items():
        monkeypatch.setenv(name, value)
    remote: dict[str, FakeNvml] = {"gpu02": h100s(1)}
    launched: list[list[str]] = []
    monkeypatch.setattr("harness.plugin.remote_gpu_state.subprocess",
                        SimpleNamespace(Popen=fake_srun(remote, launched), STDOUT=-2, TimeoutExpired=TimeoutError))

    def run(*args):
        result = run_session(*args)
        [path] = list(root.rglob("session.json"))
        return result, json.loads(path.read_text())

    return run, remote, launched, root


def test_a_two_node_session_fails_on_node_2_s_capped_gpu_and_requires_its_test(two_node_session):
    run, remote, launched, _ = two_node_session
    remote["gpu02"].gpus[0].limit_mw = 400_000
    result, session = run()
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*test_gpu_state?node01-gpu0? PASSED*", "*test_gpu_state?gpu02-gpu0? FAILED*",
                                 "*node gpu02: GPU 0 (GPU-1111*): enforced power limit 400 W < default 700 W*"])
    assert launched and "--nodelist=gpu02" in launched[0]
    verdict = session["session_verdict"]
    assert verdict["verdict"] == "FAIL" and verdict["exit_code"] == result.ret == 1
    assert [c["text"] for c in verdict["causes"]] == [f"power_limit ×1, on GPU 0 of node gpu02 (UUID {UUIDS[0]})"]
    assert session["gpu_state"]["other_nodes"]["end"]["gpu02"]["xid"]["status"] == {UUIDS[0]: "ok"}


def test_a_two_node_session_missing_node_2_s_test_is_not_a_pass(two_node_session):
    run, _, _, _ = two_node_session
    result, session = run("-k", "not gpu02")
    verdict = session["session_verdict"]
    assert verdict["verdict"] != "PASS" and not verdict["sign_off"]
    # gpu02's GPU-state test is required: one more than the same node's requirement on its own.
    two = required_tests(H100, 1, nodes=("node01", "gpu02"))
    assert "test_gpu_state[gpu02-gpu0]" in two
    assert verdict["required_total"] == len(two) == len(required_tests(H100, 1)) + 1


def test_a_multi_node_case_is_skipped_where_node_2_lacks_its_gpus(two_node_session, pytester):
    run, remote, _, _ = two_node_session
    remote["gpu02"] = h100s(0)  # NVML works there and shows no GPU
    scaling = (Path(__file__).resolve().parents[1] / "acceptance" / "test_scaling.py").read_text()
    pytester.makepyfile(test_c_scaling=scaling)
    result, session = run("--models", "resnet50", "--precisions", "bf16", "--gpus", "1", "-k", "2x1gpu or gpu_state")
    [report] = list(pytester.path.rglob("report.json"))
    reasons = {t["nodeid"].rpartition("::")[2]: t for t in json.loads(report.read_text())["tests"]}
    case = reasons["test_weak_scaling[resnet50-bf16-2x1gpu]"]
    assert case["outcome"] == "skipped" and "needs 1 GPUs on each node; gpu02 has 0" in json.dumps(case)
    verdict = session["session_verdict"]
    assert verdict["verdict"] == "FAIL"  # gpu02's GPU-state test: its GPU 0 is missing
    assert verdict["causes"][0]["where"] == ["GPU 0 of node gpu02 ×1"]


def test_a_process_already_on_a_gpu_of_node_2_refuses_the_session_naming_node_and_pid(tmp_path):
    remote = h100s(2)
    remote.gpus[1].compute_processes = [(4242, 2 << 30)]
    runner = GpuStateWatcher(ctx=session_ctx(tmp_path))
    with pytest.raises(pytest.UsageError) as refused:
        runner.start(h100s(2), popen=fake_srun({"gpu02": remote}, []))
    message = str(refused.value)
    assert f"node gpu02: GPU(s) already busy with processes this harness did not start:\n  GPU 1 ({UUIDS[1]}): " \
           "pid 4242" in message and message.endswith("No benchmark was started.")
    assert "GPU 0" not in message
    assert runner.remote is not None and runner.remote.end is not None  # the probe step was ended first
    assert all(not thread.is_alive() for thread in runner.remote.process.threads)


def test_node_2_of_another_gpu_model_fails_the_node_shape(tmp_path):
    runner, driver = start_runner(tmp_path, {"gpu02": fake_nvml(2)})  # H200s beside the driver's H100s
    shape = NodeShapeRuns(ctx=runner.ctx).check(runner.remote)
    runner.stop()
    [model] = [c for c in shape.checks if c.key == "remote_gpu_model"]
    assert model.passed is False and model.note == (
        "node gpu02: NVIDIA H200; the driver's node and profile h100-80gb: NVIDIA H100 80GB HBM3")


def test_a_gpu_node_2_loses_during_the_session_fails_with_nvml_s_words(tmp_path):
    remote = h100s(2)
    runner, driver = start_runner(tmp_path, {"gpu02": remote})
    remote.gpus[1].uuid = "GPU-gone"  # NVML finds no GPU of its UUID at the end snapshot: lost
    results = run_all(runner, driver)
    assert not failed_keys(results["gpu02-gpu0"])
    lost = results["gpu02-gpu1"]
    assert "power_limit" in failed_keys(lost) and f"node gpu02: GPU 1 ({UUIDS[1]}): NVML cannot find it" in \
        lost.failure_message()


def test_the_report_s_gpu_table_keeps_other_nodes_gpus_out_of_this_node_s_rows(tmp_path):
    remote = h100s(2)
    runner, driver = start_runner(tmp_path, {"gpu02": remote})
    remote.gpus[1].limit_mw = 400_000
    results = run_all(runner, driver)
    assert results["gpu02-gpu1"].to_dict()["gpu_state"]["other_node"] is True
    assert "other_node" not in results["gpu01-gpu1"].to_dict()["gpu_state"]
    tests = [SessionTest(nodeid=f"test_gpu_state.py::test_gpu_state[{name}]", outcome="passed" if not r.failed
                         else "failed", harness=r.to_dict()) for name, r in results.items()]
    header = {"hardware": {"gpus": [{"index": i, "uuid": UUIDS[i]} for i in range(2)]}}
    table = build_gpu_table(header, tests, report_sections().gpu_columns)
    assert table is not None and not any(row["failed"] for row in table["rows"])  # gpu02's GPU 1 is not gpu01's


def test_a_watcher_that_never_sees_the_stop_file_ends_on_sigusr1_and_is_still_read(tmp_path, monkeypatch):
    # An NFS client can hide the driver's `stop` from node 2 for a while: SIGUSR1 through srun ends it.
    monkeypatch.setattr("harness.node.gpu_state_probe.STOP_FILE", "never-shown")
    runner, driver = start_runner(tmp_path, {"gpu02": h100s(2)})
    assert runner.remote is not None
    end = runner.remote.finish(timeout_s=0.3)
    assert runner.remote.process.signals == [signal.SIGUSR1] and end["gpu02"]["phase"] == "end"
    assert not any(r.failed for r in run_all(runner, driver).values())


def test_a_two_node_session_fails_on_node_2_s_throttling_under_load(two_node_session, processes):
    run, remote, _, root = two_node_session
    ours = processes(tagged=True)
    # Idle at the start snapshot, then the session's rank and a hardware slowdown, once the probe began.
    gpu = remote["gpu02"].gpus[0]

    def load_once_started() -> None:
        deadline = time.monotonic() + 60
        while not list(root.rglob("gpu02.start.json")) and time.monotonic() < deadline:
            time.sleep(0.005)
        gpu.compute_processes, gpu.reasons = [(ours, 2**30)], 0x8

    threading.Thread(target=load_once_started, daemon=True).start()
    result, session = run()
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*test_gpu_state?gpu02-gpu0? FAILED*",
                                 "*node gpu02: GPU 0 (GPU-1111*): hw slowdown at*"])
    verdict = session["session_verdict"]
    assert verdict["verdict"] == "FAIL"
    assert [c["text"] for c in verdict["causes"]] == [f"throttling ×1, on GPU 0 of node gpu02 (UUID {UUIDS[0]})"]
    load = session["gpu_state"]["other_nodes"]["end"]["gpu02"]["load"]
    assert load["owner"] is not None and load["gpus"][UUIDS[0]]["loaded_samples"] > 0


def test_locked_clocks_on_node_2_under_load_fail_its_clocks_check(tmp_path, processes):
    remote = h100s(2)
    runner, driver = start_runner(tmp_path, {"gpu02": remote})
    ours = processes(tagged=True)
    for gpu in remote.gpus:
        gpu.compute_processes = [(ours, 2**30)]
    # GPU 1 held at 1,005 MHz by a clock setting (what nvidia-smi -lgc looks like to NVML); GPU 0 at its default.
    remote.gpus[0].reasons = remote.gpus[1].reasons = 0x2
    remote.gpus[1].sm_clock_mhz = 1005
    time.sleep(0.2)
    results = run_all(runner, driver)
    assert failed_keys(results["gpu02-gpu0"]) == [] and failed_keys(results["gpu02-gpu1"]) == ["clocks"]
    note = next(c.note for c in results["gpu02-gpu1"].checks if c.key == "clocks")
    assert note.startswith(f"node gpu02: GPU 1 ({UUIDS[1]}): \"applications clocks setting\" held the SM clock at "
                           "1,005 MHz < default 1980 MHz under load in the session on node gpu02 (")
