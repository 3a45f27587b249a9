"""The load watch of another node's GPUs (harness/node/load_watch.py) and its two checks
(harness/checks/node_load.py): what it counts as the session's, what as foreign, when a clock-event
fault counts, and what each verdict says."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from harness.checks.node_load import case_windows, load_foreign_check, load_throttling_check
from harness.node import load_watch
from harness.node.load_watch import LoadWatch
from harness.results.location import Location
from support.fake_nvml import UUIDS, fake_nvml

OWNER = "4242:1000"
HW_SLOWDOWN, SW_POWER_CAP, HW_THERMAL = 0x8, 0x4, 0x40


class Procs:
    """What /proc shows: pid -> (start time, owner tag); a pid not listed is gone or not visible."""

    def __init__(self, table: dict[int, tuple[str, str | None]] | None = None):
        self.table = dict(table or {})
        self.owner_reads = 0

    def start_time(self, pid: int) -> str | None:
        return self.table.get(pid, (None, None))[0]

    def owner(self, pid: int) -> str | None:
        self.owner_reads += 1
        return self.table.get(pid, (None, None))[1]


def watch(procs: Procs, count: int = 1, owner: str | None = OWNER, **gpu_changes):
    nvml = fake_nvml(count, **gpu_changes)
    gpus = [SimpleNamespace(index=i, uuid=UUIDS[i]) for i in range(count)]
    watcher = LoadWatch(gpus, owner, nvml, start_time_of=procs.start_time, owner_of=procs.owner)
    assert watcher.open()
    return watcher, nvml


def test_the_session_s_processes_load_the_gpu_and_others_are_foreign():
    procs = Procs({100: ("1", OWNER), 200: ("2", "9:9"), 300: ("3", None)})
    watcher, nvml = watch(procs)
    nvml.gpus[0].compute_processes = [(100, 2**30), (200, 2**31), (300, None)]
    for second in range(3):
        watcher.poll(1000.0 + second)
    gpu = watcher.to_dict()["gpus"][UUIDS[0]]
    assert gpu["samples"] == gpu["loaded_samples"] == gpu["process_checks"] == 3
    assert procs.owner_reads == 3  # each process's environment read once, not every period
    # Another session's rank (another owner) and an untagged process are foreign; ours is not.
    assert [(p["pid"], p["first_seen"], p["last_seen"]) for p in gpu["foreign_processes"]] == [
        (200, 1000.0, 1002.0), (300, 1000.0, 1002.0)]
    assert gpu["foreign_processes"][0]["used_memory_mib"] == 2048.0


def test_a_rank_that_ends_between_nvml_s_list_and_proc_is_not_foreign_but_an_invisible_one_is():
    procs = Procs({100: ("1", OWNER)})
    watcher, nvml = watch(procs)
    nvml.gpus[0].compute_processes = [(100, 2**30), (555, 2**30)]
    watcher.poll(1.0)  # 555 listed once, not in /proc: it ended as the case ended
    assert watcher.to_dict()["gpus"][UUIDS[0]]["foreign_processes"] == []
    watcher.poll(2.0)  # listed again and still not in /proc: another PID namespace, foreign (as on the driver's node)
    [found] = watcher.to_dict()["gpus"][UUIDS[0]]["foreign_processes"]
    assert found["pid"] == 555 and found["name"] == "not visible from this PID namespace"


def test_a_reused_pid_is_asked_again():
    procs = Procs({100: ("1", OWNER)})
    watcher, nvml = watch(procs)
    nvml.gpus[0].compute_processes = [(100, None)]
    watcher.poll(1.0)
    procs.table[100] = ("77", None)  # our rank ended; another user's process got its pid
    watcher.poll(2.0)
    assert [p["pid"] for p in watcher.to_dict()["gpus"][UUIDS[0]]["foreign_processes"]] == [100]


def test_without_an_owner_tag_nothing_is_the_session_s():
    watcher, nvml = watch(Procs({100: ("1", OWNER)}), owner=None)
    nvml.gpus[0].compute_processes = [(100, None)]
    watcher.poll(1.0)
    gpu = watcher.to_dict()["gpus"][UUIDS[0]]
    assert gpu["loaded_samples"] == 0 and [p["pid"] for p in gpu["foreign_processes"]] == [100]


def test_faults_are_kept_as_intervals_apart_from_idle_ones():
    watcher, nvml = watch(Procs({100: ("1", OWNER)}))
    gpu = nvml.gpus[0]
    gpu.reasons = HW_THERMAL  # idle and hot: recorded, not loaded
    watcher.poll(1.0)
    gpu.compute_processes, gpu.reasons = [(100, None)], HW_THERMAL | SW_POWER_CAP
    watcher.poll(2.0)
    watcher.poll(3.0)
    gpu.reasons = SW_POWER_CAP
    watcher.poll(4.0)
    gpu.reasons = HW_SLOWDOWN
    watcher.poll(5.0)
    record = watcher.to_dict()["gpus"][UUIDS[0]]
    assert record["fault_intervals"] == [
        {"first": 1.0, "last": 1.0, "loaded": False, "reasons": ["hw thermal slowdown"]},
        {"first": 2.0, "last": 3.0, "loaded": True, "reasons": ["hw thermal slowdown"]},
        {"first": 5.0, "last": 5.0, "loaded": True, "reasons": ["hw slowdown"]}]
    assert record["reasons_loaded"] == {"hw thermal slowdown": 2, "sw power cap": 3, "hw slowdown": 1}
    assert record["reasons_all"]["hw thermal slowdown"] == 3 and record["loaded_samples"] == 4


def test_intervals_are_bounded_and_the_rest_counted(monkeypatch):
    monkeypatch.setattr(load_watch, "MAX_INTERVALS", 2)
    watcher, nvml = watch(Procs({100: ("1", OWNER)}))
    nvml.gpus[0].compute_processes = [(100, None)]
    for second in range(10):
        nvml.gpus[0].reasons = HW_SLOWDOWN if second % 2 == 0 else 0
        watcher.poll(float(second))
    record = watcher.to_dict()["gpus"][UUIDS[0]]
    assert len(record["fault_intervals"]) == 2 and record["fault_runs"] == 5
    check = load_throttling_check("node n2: GPU 0", record, "")
    assert check.passed is False and "(and 3 more)" in check.note


def test_a_gpu_that_cannot_report_reasons_or_processes_says_so_once():
    watcher, nvml = watch(Procs(), unsupported={"nvmlDeviceGetCurrentClocksEventReasons",
                                                "nvmlDeviceGetComputeRunningProcesses"})
    watcher.poll(1.0)
    watcher.poll(2.0)
    record = watcher.to_dict()["gpus"][UUIDS[0]]
    assert set(record["unsupported"]) == {"clock_event_reasons", "processes"} and record["reason_reads"] == 0
    throttling = load_throttling_check("node n2: GPU 0", record, "")
    foreign = load_foreign_check("node n2: GPU 0", record, "")
    assert throttling.passed is None and throttling.note.startswith("node n2: GPU 0: NVML reported no clock-event")
    assert foreign.passed is None and "NVML listed no processes" in foreign.note


def test_a_watch_runs_on_its_thread_until_stopped():
    nvml = fake_nvml(1)
    procs = Procs()
    watcher = LoadWatch([SimpleNamespace(index=0, uuid=UUIDS[0])], OWNER, nvml, period_s=0.01,
                        start_time_of=procs.start_time, owner_of=procs.owner).start()
    try:
        deadline = time.monotonic() + 5
        while watcher.gpus[0].samples < 3:
            assert time.monotonic() < deadline
            time.sleep(0.005)
    finally:
        watcher.stop()
    assert watcher.failure is None and watcher.ended_at is not None and "nvmlShutdown" in nvml.lifecycle


# --- the checks -----------------------------------------------------------------------------------


def record(**changes) -> dict:
    base = {"samples": 100, "loaded_samples": 60, "reason_reads": 100, "process_checks": 100, "fault_runs": 0,
            "fault_intervals": [], "reasons_loaded": {"sw power cap": 55}, "reasons_all": {"sw power cap": 55},
            "foreign_processes": [], "unsupported": {}, "errors": {}}
    return {**base, **changes}


WINDOWS = [{"case": "resnet50 bf16 x16 GPUs", "start": 1000.0, "end": 1060.0},
           {"case": "vit_b_16 bf16 x16 GPUs", "start": 1100.0, "end": 1160.0}]


def test_throttling_names_the_case_whose_window_it_fell_in():
    fault = {"first": 1110.0, "last": 1125.0, "loaded": True, "reasons": ["hw slowdown"]}
    idle = {"first": 1070.0, "last": 1075.0, "loaded": False, "reasons": ["hw thermal slowdown"]}
    check = load_throttling_check("node n2: GPU 3 (GPU-x)", record(fault_intervals=[idle, fault], fault_runs=2),
                                  "", WINDOWS)
    assert check.passed is False and check.key == "throttling"
    assert "during vit_b_16 bf16 x16 GPUs" in check.note and "hw thermal" not in check.note.split(";")[0]
    assert "over 60 of 100 samples under the session's load: sw power cap in 55" in check.note


def test_throttling_judges_every_sample_where_no_process_of_the_session_was_seen():
    idle = {"first": 1070.0, "last": 1075.0, "loaded": False, "reasons": ["hw thermal slowdown"]}
    check = load_throttling_check("GPU 0", record(loaded_samples=0, fault_intervals=[idle], fault_runs=1,
                                                  reasons_all={"hw thermal slowdown": 6}), "", WINDOWS)
    assert check.passed is False
    assert "all 100 samples (NVML showed no process of the session on this GPU)" in check.note
    healthy = load_throttling_check("GPU 0", record(), "", WINDOWS)
    assert healthy.passed is True and healthy.note == ("GPU 0: none over 60 of 100 samples under the session's "
                                                       "load (not faults: sw power cap in 55)")


@pytest.mark.parametrize("check", [load_throttling_check, load_foreign_check])
def test_an_unwatched_gpu_fails_both_naming_why(check):
    result = check("node n2: GPU 1", None, "node n2: no end snapshot from the GPU-state probe")
    assert result.passed is False and "not watched: node n2: no end snapshot" in result.note


def test_foreign_processes_name_pid_memory_time_and_case():
    process = {"pid": 31337, "name": "python3", "used_memory_mib": 10240.0, "first_seen": 1020.0, "last_seen": 1030.0}
    check = load_foreign_check("node n2: GPU 0", record(foreign_processes=[process]), "", WINDOWS)
    assert check.passed is False and "pid 31337 (python3, 10,240 MiB, seen " in check.note
    assert check.note.endswith("during resnet50 bf16 x16 GPUs)")
    at = Location(node="n2", gpu_index=0, gpu_uuid="GPU-x")
    placed = load_foreign_check("node n2: GPU 0", record(foreign_processes=[process]), "", WINDOWS, at)
    assert placed.locations == (Location(node="n2", gpu_index=0, gpu_uuid="GPU-x", pid=31337, detail="python3"),)
    blind = load_foreign_check("GPU 0", record(loaded_samples=0), "")
    assert blind.passed is None and "NVML cannot see this node's processes" in blind.note
    assert load_foreign_check("GPU 0", record(), "").passed is True


def test_case_windows_come_from_each_result_s_telemetry():
    results = [SimpleNamespace(context="a", record=SimpleNamespace(telemetry={"window": {"start": 1, "end": 2}})),
               SimpleNamespace(context="b", record=SimpleNamespace(telemetry={"status": "unavailable"})),
               SimpleNamespace(context="c", record=None)]
    assert case_windows(results) == [{"case": "a", "start": 1.0, "end": 2.0}]
