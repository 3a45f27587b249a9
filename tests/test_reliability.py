"""Faults give clear verdicts: hangs are bounded by the expected step time, busy GPUs refuse to run,
and an interrupted session kills its processes and still writes its reports."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.node.hardware import GpuInfo
from harness.node.processes import busy_gpu_message, gpu_processes
from harness.launch.cleanup import tagged_pids
from harness.launch.spec import BenchmarkSpec, LaunchSettings
from harness.launch.stall import find_stall
from support.fake_nvml import FakeNvml, fake_nvml

SPEC = BenchmarkSpec(model="tiny_bert", precision="bf16", batch_size_per_gpu=4,
                     launch=LaunchSettings(gpus_per_node=2, device="cpu", stall_factor=3.0, stall_floor_s=10.0,
                                           setup_timeout_s=100.0))
LAUNCH = SPEC.launch


def phase(name, since, expected=None, rank=0, pid=None):
    return {"rank": rank, "host": "node7", "gpu_index": rank, "phase": name, "since": since, "expected_s": expected,
            "pid": pid}


def test_no_stall_while_every_rank_is_within_its_bound():
    phases = {0: phase("measure", 100.0, expected=5.0), 1: phase("measure", 100.0, expected=5.0, rank=1)}
    assert find_stall(LAUNCH, phases, started=0.0, now=124.0) is None  # bound 3 x 5 + 10 = 25 s


def test_a_rank_silent_past_factor_times_expected_plus_floor_is_hung():
    phases = {0: phase("measure", 100.0, expected=5.0), 1: phase("measure", 100.0, expected=5.0, rank=1)}
    stall = find_stall(LAUNCH, phases, started=0.0, now=126.0)
    assert stall.phase == "measure"
    assert "rank 0 (host node7, GPU 0) showed no progress for 26 s (bound: 3 x expected 5.0 s + 10 s)" in stall.reason


def test_setup_has_its_own_bound_when_nothing_is_expected_yet():
    assert find_stall(LAUNCH, {0: phase("setup", 0.0)}, started=0.0, now=99.0) is None
    assert find_stall(LAUNCH, {0: phase("setup", 0.0)}, started=0.0, now=101.0).phase == "setup"
    assert "no rank started within 100 s" in find_stall(LAUNCH, {}, started=0.0, now=101.0).reason


def test_finished_ranks_are_not_hung():
    assert find_stall(LAUNCH, {0: phase("done", 0.0)}, started=0.0, now=1000.0) is None


def test_a_stopped_process_is_named_as_the_culprit():
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        os.kill(sleeper.pid, signal.SIGSTOP)
        time.sleep(0.2)
        phases = {0: phase("measure", 0.0, expected=1.0, pid=os.getpid()),
                  1: phase("measure", 0.0, expected=1.0, rank=1, pid=sleeper.pid)}
        stall = find_stall(LAUNCH, phases, started=0.0, now=time.time())
        assert "rank 1 (host node7, GPU 1) is stopped (SIGSTOP)" in stall.reason
        assert stall.ranks == (1,)
    finally:
        sleeper.kill()
        sleeper.wait()


def nvml_with_processes(processes: dict[int, list[tuple[int, int | None]]]) -> FakeNvml:
    """Four GPUs; ``processes``: GPU index -> (pid, used bytes) of its compute processes."""
    nvml = fake_nvml(4)
    for index, on_gpu in processes.items():
        nvml.gpus[index].compute_processes = on_gpu
    return nvml


GPUS = [GpuInfo(index=i, name="NVIDIA H200", uuid=f"GPU-{i}", memory_total_gib=140.4, pci_bus_id=f"0:{i}")
        for i in range(4)]


def test_idle_gpus_have_no_processes():
    assert gpu_processes(GPUS, nvml=nvml_with_processes({})) == []


def test_a_foreign_process_is_named_with_gpu_uuid_pid_and_memory():
    found = gpu_processes(GPUS, nvml=nvml_with_processes({2: [(os.getpid(), 20 * 2**30)]}))
    assert len(found) == 1
    message = busy_gpu_message(found)
    assert f"GPU 2 (GPU-2): pid {os.getpid()} (" in message
    assert "20,480 MiB" in message
    assert "CUDA_VISIBLE_DEVICES" in message


def test_only_the_gpus_a_case_uses_are_checked():
    assert gpu_processes(GPUS[:2], nvml=nvml_with_processes({3: [(123, None)]})) == []


def test_refused_launch_is_a_failed_record_naming_the_gpu():
    from harness.node.processes import GpuProcess
    from harness.kinds.ddp_scaling.launcher import refused_record

    busy = [GpuProcess(gpu_index=1, gpu_uuid="GPU-1", pid=4242, name="python3", used_memory_mib=1000.0)]
    record = refused_record(SPEC, "run-1", busy)
    assert record.status == "failed"
    assert "GPU 1 (GPU-1): pid 4242 (python3, 1,000 MiB)" in record.failure.reason


@pytest.mark.slow
def test_sigterm_to_the_session_kills_every_process_and_keeps_the_reports(tmp_path):
    """Slurm's time limit: SIGTERM to pytest -> children gone within 10 s, reports written, exit non-zero."""
    thresholds = tmp_path / "thresholds"
    thresholds.mkdir()
    (thresholds / "cpu.toml").write_text("""
schema_version = 1
[hardware]
name = "cpu"
description = "sigterm test"
device = "cpu"
[run]
warmup_seconds = 0.5
measure_seconds = 120
timeout_seconds = 300
[defaults]
gpu_counts = [1]
models = ["tiny_bert"]
precisions = ["bf16"]
source = "test"
[models.tiny_bert.bf16]
batch_size_per_gpu = 4
source = "test"
""")
    reports = tmp_path / "reports"
    root = Path(__file__).resolve().parent.parent
    session = subprocess.Popen(
        [sys.executable, "-m", "pytest", str(root / "acceptance"), f"--harness-thresholds-dir={thresholds}",
         f"--harness-report-dir={reports}", "-p", "no:cacheprovider"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + 120
        phase_files = []
        while time.time() < deadline:
            # the benchmark's launch: the session also runs other launches (component checks) first
            phase_files = [path for path in reports.glob("*/logs/*/rank0.phase")
                           if "cases" in json.loads((path.parent / "plan.json").read_text() or "{}")]
            if phase_files and json.loads(phase_files[0].read_text() or "{}").get("phase") == "measure":
                break
            time.sleep(0.5)
        assert phase_files, "the benchmark never started"
        run_id = json.loads((phase_files[0].parent / "plan.json").read_text())["cases"][0]["run_id"]
        assert tagged_pids(run_id), "expected the benchmark's processes to be running"
        sent = time.time()
        session.send_signal(signal.SIGTERM)
        output, _ = session.communicate(timeout=30)
        assert time.time() - sent < 10, output
    finally:
        if session.poll() is None:
            session.kill()
    assert session.returncode != 0, output
    assert tagged_pids(run_id) == []
    run_dir = phase_files[0].parent.parent.parent
    summary = json.loads((run_dir / "session.json").read_text())
    assert summary["interrupted"] is True
    assert (run_dir / "report.json").exists()
    assert "INCOMPLETE" in (run_dir / "report.html").read_text()
