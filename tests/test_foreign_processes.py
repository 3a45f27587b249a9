"""Naming the cause: processes that appeared on a case's GPUs during its window (the sampler, the
``foreign_processes`` check), clock-event reasons with their share of the window, and what a failing
case lists as seen in its window."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

from harness.checks.telemetry_checks import reason_shares, telemetry_checks
from harness.node.processes import descends_from, parent_pid
from harness.node.xid import XidEvent
from harness.plugin.gpu_state import GpuStateWatcher
from harness.plugin.results import CaseResult
from harness.results.location import Location
from harness.results.telemetry_summary import GpuTelemetry
from support.fake_nvml import UUIDS, fake_nvml
from support.sampling import drive
from test_records import full_record

GIB = 2**30
NOT_A_PID = 4_194_999
"""Above Linux's pid_max (2^22): no process has it, so nothing of ours."""
SW_POWER_CAP, HW_SLOWDOWN = 0x4, 0x8


def checks_of(summary: dict) -> dict:
    return {c.key: c for c in telemetry_checks(summary, missing_note="n/a")}


def test_a_process_that_appears_mid_window_fails_naming_pid_name_memory_and_gpu(tmp_path):
    nvml = fake_nvml(2)

    def during(i):
        if i == 12:
            nvml.gpus[1].compute_processes = [(NOT_A_PID, 10 * GIB)]

    summary = drive(nvml, tmp_path, measured_polls=30, during=during)
    [found] = summary["gpus"][1]["foreign_processes"]
    assert found["pid"] == NOT_A_PID and found["used_memory_mib"] == 10240.0
    assert found["name"] == "not visible from this PID namespace"
    assert 1.0 <= found["first_seen_s"] <= 2.1 and summary["gpus"][0]["foreign_processes"] == []
    check = checks_of(summary)["foreign_processes"]
    assert check.passed is False and check.kind == "health"
    assert f"GPU 1 ({UUIDS[1]}): pid {NOT_A_PID} (not visible from this PID namespace, 10,240 MiB" in check.note
    assert check.locations == (Location(gpu_index=1, gpu_uuid=UUIDS[1], pid=NOT_A_PID,
                                        detail="not visible from this PID namespace"),)
    assert nvml.calls.count("nvmlDeviceGetComputeRunningProcesses") < 30 * 2  # listed about once a second


def test_the_case_s_own_ranks_and_children_of_this_harness_are_not_foreign(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert descends_from(child.pid, os.getpid()) and parent_pid(child.pid) == os.getpid()
        assert not descends_from(NOT_A_PID, os.getpid())
        # pid 1 is what the phase files of support/sampling.py give every rank.
        nvml = fake_nvml(2, compute_processes=[(1, GIB), (child.pid, 2 * GIB), (os.getpid(), None)])
        summary = drive(nvml, tmp_path)
    finally:
        child.kill()
        child.wait()
    assert all(gpu["foreign_processes"] == [] for gpu in summary["gpus"])
    assert checks_of(summary)["foreign_processes"].passed is True


def test_no_process_list_is_not_evaluated_never_passed(tmp_path):
    summary = drive(fake_nvml(2, unsupported={"nvmlDeviceGetComputeRunningProcesses"}), tmp_path)
    check = checks_of(summary)["foreign_processes"]
    assert check.passed is None and "NVML listed no processes" in check.note


def test_throttle_reasons_carry_their_share_of_the_window_and_power_cap_is_information(tmp_path):
    nvml = fake_nvml(2, reasons=SW_POWER_CAP)

    def during(i):
        nvml.gpus[0].reasons = SW_POWER_CAP | (HW_SLOWDOWN if i < 3 else 0)

    summary = drive(nvml, tmp_path, during=during)
    check = checks_of(summary)["throttling"]
    assert check.passed is False
    assert f"GPU 0 ({UUIDS[0]}): hw slowdown in 3 of 10 samples (30%, ~0.3 s)" in check.note
    assert "not faults" in check.note and "sw power cap in 10 of 10 samples (100%" in check.note
    healthy = checks_of(drive(fake_nvml(2, reasons=SW_POWER_CAP), tmp_path))["throttling"]
    assert healthy.passed is True and "sw power cap in 10 of 10 samples" in healthy.note
    assert reason_shares(GpuTelemetry(index=0, uuid=None, samples=0, clock_events={"gpu idle": 0}), None) == {
        "gpu idle": "gpu idle in 0 of ? samples"}


def test_a_failing_case_lists_what_else_its_window_saw(tmp_path):
    nvml = fake_nvml(2, reasons=SW_POWER_CAP, compute_processes=[(NOT_A_PID, 4 * GIB)])
    summary = drive(nvml, tmp_path)
    runner = GpuStateWatcher(ctx=SimpleNamespace(device="cuda"))  # type: ignore[arg-type]
    runner.watcher = SimpleNamespace(events_between=lambda start, end: [  # type: ignore[assignment]
        XidEvent(time=start + 0.5, gpu_index=1, gpu_uuid=UUIDS[1], xid=79),
        XidEvent(time=start + 0.5, gpu_index=3, gpu_uuid=UUIDS[3], xid=13)])  # not a GPU of this case
    seen = runner.seen_in_window(summary)
    assert any(line.startswith(f"GPU 0 ({UUIDS[0]}): foreign process pid {NOT_A_PID}") for line in seen)
    assert any("clock-event reasons: sw power cap in 10 of 10 samples" in line for line in seen)
    assert any(line.startswith("XID 79 (GPU has fallen off the bus) on GPU 1") for line in seen)
    assert not any("XID 13" in line for line in seen)
    record = full_record(world_size=2, telemetry=summary)
    failed = telemetry_checks(summary, missing_note="n/a")
    result = CaseResult(case=SimpleNamespace(), record=record, checks=failed, baseline_run_id=None,  # type: ignore
                        context="h200, resnet50 bf16, 2 GPUs", log_dir=tmp_path, seen_in_window=seen)
    message = result.failure_message()
    assert "no foreign process on the GPUs during the window: FAILED" in message
    assert "seen in this window:" in message and "XID 79" in message
    assert runner.seen_in_window({"status": "unavailable"}) == []
