"""GPU telemetry: the sampler, its reductions and the checks built on them, against the fake NVML
of tests/support (pynvml's real errors and constants, only functions the real pynvml has).

The pure parts run in milliseconds; one ``slow`` test follows the phase files of a real CPU
benchmark launch.
"""

from __future__ import annotations

import json
import time

import pynvml
import pytest

from harness import telemetry
from harness.kinds.ddp_scaling import checks as scaling_checks
from harness.checks.telemetry_checks import telemetry_checks
from harness.kinds.ddp_scaling.checks import weak_scaling_checks
from harness.launch import benchmark as launch
from harness.records import RunRecord
from harness.telemetry import Sampler, Timeline, sampler_for, window_state
from support.fake_nvml import UUIDS, FakeGpu, FakeNvml, fake_nvml
from support.sampling import Clock, drive, write_phase
from test_records import full_record
from test_verdict import BOUNDS

HW_THERMAL = 0x40
SW_POWER_CAP = 0x4


# ---------------------------------------------------------------------------------------------
# Pure parts


def test_a_short_timeline_keeps_every_sample():
    line = Timeline(max_points=10)
    for i in range(7):
        line.add(i * 0.1, float(i))
    assert line.points() == [[round(i * 0.1, 3), float(i)] for i in range(7)]


def test_a_long_timeline_is_averaged_into_bounded_points_keeping_its_shape():
    line = Timeline(max_points=50)
    for i in range(10_000):
        line.add(float(i), 100.0 if i < 5_000 else 50.0)  # a step halfway
    points = line.points()
    assert len(points) <= 51
    assert points[0][1] == 100.0 and points[-1][1] == 50.0
    assert points[0][0] < 200 and points[-1][0] > 9_800
    assert all(a[0] < b[0] for a, b in zip(points, points[1:], strict=False))  # neighbours: one pair fewer than points


def test_window_follows_the_phase_files():
    before = {0: {"phase": "warmup"}, 1: {"phase": "probe"}}
    assert window_state(before, was_open=False) == "before"
    assert window_state({0: {"phase": "measure"}, 1: {"phase": "probe"}}, was_open=False) == "open"
    assert window_state({0: {"phase": "gather"}, 1: {"phase": "measure"}}, was_open=True) == "open"
    assert window_state({0: {"phase": "gather"}, 1: {"phase": "done"}}, was_open=True) == "closed"


# ---------------------------------------------------------------------------------------------
# The sampler, driven period by period with a fake clock


def test_sampler_reduces_each_metric_over_the_window_only(tmp_path):
    nvml = fake_nvml(2)

    def during(i):
        nvml.gpus[0].util = 90.0 + i           # mean 94.5
        nvml.gpus[0].temperature_c = 60 + i    # max 69
        nvml.gpus[0].sm_clock_mhz = 1980 - 10 * i  # min 1890
        nvml.gpus[1].power_mw = 500_000 if i % 2 else 600_000  # mean 550 W

    summary = drive(nvml, tmp_path, during=during)
    assert summary["status"] == "ok"
    assert summary["window"]["samples"] == 10 and summary["window"]["seconds"] == pytest.approx(1.0)
    gpu0, gpu1 = summary["gpus"]
    assert (gpu0["index"], gpu0["uuid"], gpu1["index"], gpu1["uuid"]) == (0, UUIDS[0], 1, UUIDS[1])
    assert gpu0["reduced"]["util_pct"] == pytest.approx(94.5)
    assert gpu0["reduced"]["temperature_c"] == 69
    assert gpu0["reduced"]["sm_clock_mhz"] == 1890
    assert gpu1["reduced"]["power_w"] == pytest.approx(550.0)
    assert gpu1["reduced"]["power_limit_w"] == 700.0
    assert gpu0["reduced"]["mem_used_gib"] == pytest.approx(60.0)
    assert gpu0["reduced"]["clock_event_reasons"] == []
    assert gpu0["reduced"]["ecc_corrected"] == 0 and gpu0["reduced"]["pcie_replays"] == 0
    assert (gpu0["reduced"]["pcie_gen"], gpu0["reduced"]["pcie_width"]) == (5, 16)
    assert gpu0["stats"]["util_pct"] == {"min": 90.0, "mean": 94.5, "max": 99.0}
    # Counters are read when the window opens and closes, not every period.
    assert nvml.calls.count("nvmlDeviceGetPcieReplayCounter") == 4  # 2 GPUs x (open, close)


def test_timelines_have_the_shape_the_report_draws(tmp_path):
    summary = drive(fake_nvml(2), tmp_path, measured_polls=5)
    util = summary["metrics"]["util_pct"]
    assert util["label"] == "GPU utilization" and util["unit"] == "%"
    assert set(util["per_gpu"]) == {"0", "1"}
    assert util["per_gpu"]["0"] == [[pytest.approx(0.1 * i), 98.0] for i in range(5)]
    assert set(summary["metrics"]) == {"util_pct", "power_w", "temperature_c", "sm_clock_mhz"}
    json.dumps(summary, allow_nan=False)  # goes into the run record as is


def test_a_throttle_event_fails_the_throttle_check_naming_the_gpu(tmp_path):
    nvml = fake_nvml(2)

    def during(i):
        nvml.gpus[1].reasons = HW_THERMAL | SW_POWER_CAP if 3 <= i < 7 else SW_POWER_CAP

    summary = drive(nvml, tmp_path, during=during)
    assert summary["gpus"][1]["reduced"]["clock_event_reasons"] == ["sw power cap", "hw thermal slowdown"]
    assert summary["gpus"][1]["clock_events"] == {"sw power cap": 10, "hw thermal slowdown": 4}
    checks = {c.name: c for c in telemetry_checks(summary, missing_note="n/a")}
    check = checks["no thermal / hardware-slowdown throttling"]
    assert check.passed is False
    line = check.describe("h200, resnet152 bf16, 2 GPUs")
    assert f"GPU 1 ({UUIDS[1]}): hw thermal slowdown in 4 of 10 samples" in line
    assert UUIDS[0] not in line


def test_power_capping_alone_is_recorded_but_is_no_fault(tmp_path):
    summary = drive(fake_nvml(2, reasons=SW_POWER_CAP), tmp_path)
    checks = {c.name: c for c in telemetry_checks(summary, missing_note="n/a")}
    check = checks["no thermal / hardware-slowdown throttling"]
    assert check.passed is True and "sw power cap" in check.note


def test_an_ecc_increment_fails_the_ecc_check_naming_the_gpu(tmp_path):
    nvml = fake_nvml(2)

    def during(i):
        if i == 5:
            nvml.gpus[0].ecc_corrected = 3  # was 0 when the window opened

    summary = drive(nvml, tmp_path, during=during)
    assert summary["gpus"][0]["reduced"]["ecc_corrected"] == 3
    assert summary["gpus"][1]["reduced"]["ecc_corrected"] == 0
    check = {c.name: c for c in telemetry_checks(summary, missing_note="n/a")}["no new ECC errors"]
    assert check.passed is False
    assert (f"GPU 0 ({UUIDS[0]}): 3 new corrected, 0 new uncorrected volatile ECC errors during the window"
            in check.describe("ctx"))


def test_errors_counted_before_the_window_are_not_new(tmp_path):
    summary = drive(fake_nvml(2, ecc_corrected=7, replays=12), tmp_path)
    assert summary["gpus"][0]["reduced"]["ecc_corrected"] == 0
    assert summary["gpus"][0]["counters"]["ecc_corrected"] == {"start": 7, "end": 7}
    assert {c.name: c for c in telemetry_checks(summary, missing_note="n/a")}["no new ECC errors"].passed is True


def test_bounded_checks_name_every_gpu_that_missed(tmp_path):
    nvml = fake_nvml(4)
    nvml.gpus[2].util = 71.0
    nvml.gpus[3].util = 85.0
    nvml.gpus[1].temperature_c = 91
    nvml.gpus[0].power_mw = 200_000
    summary = drive(nvml, tmp_path, gpus=4)
    checks = {c.name: c for c in telemetry_checks(summary, min_gpu_utilization_pct=90, min_power_fraction_of_limit=0.5,
                                                  max_temperature_c=85, source="h200 defaults", missing_note="n/a")}
    util = checks["mean GPU utilization"]
    assert util.passed is False and util.measured == 71.0
    assert util.describe("h200, resnet152 bf16, 4 GPUs") == (
        f"mean GPU utilization 71.000 % < 90.000 %: GPU 2 ({UUIDS[2]}) 71.000 %, GPU 3 ({UUIDS[3]}) 85.000 % "
        "(h200, resnet152 bf16, 4 GPUs)")
    temperature = checks["max GPU temperature"]
    assert temperature.passed is False and temperature.measured == 91
    assert f"GPU 1 ({UUIDS[1]}) 91.000 °C" in temperature.note
    power = checks["mean power / power limit"]
    assert power.passed is False and power.measured == pytest.approx(200 / 700)
    assert f"GPU 0 ({UUIDS[0]})" in power.note and UUIDS[1] not in power.note
    assert util.source == "h200 defaults"


def test_healthy_gpus_pass_every_check_and_name_the_worst(tmp_path):
    nvml = fake_nvml(2)
    nvml.gpus[1].util = 95.0
    summary = drive(nvml, tmp_path)
    checks = telemetry_checks(summary, min_gpu_utilization_pct=90, min_power_fraction_of_limit=0.5,
                              max_temperature_c=85, missing_note="n/a")
    assert [c.passed for c in checks] == [True] * 6
    assert {c.name: c for c in checks}["mean GPU utilization"].note == f"worst: GPU 1 ({UUIDS[1]})"


def test_a_metric_the_gpu_cannot_report_is_not_evaluated_never_passed(tmp_path):
    nvml = fake_nvml(2, unsupported={"nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetPcieReplayCounter"})
    summary = drive(nvml, tmp_path)
    assert "ecc_corrected" not in summary["gpus"][0]["reduced"]
    assert "Not Supported" in summary["gpus"][0]["unsupported"]["ecc_corrected"]
    # Asked once per metric (corrected, uncorrected) and GPU when the window opened, then never again.
    assert nvml.calls.count("nvmlDeviceGetTotalEccErrors") == 2 * 2
    ecc = {c.name: c for c in telemetry_checks(summary, missing_note="n/a")}["no new ECC errors"]
    assert ecc.passed is None and "ECC off or not supported" in ecc.note


def test_one_gpu_without_a_reading_makes_the_check_not_evaluated(tmp_path):
    nvml = FakeNvml([FakeGpu(uuid=UUIDS[0]), FakeGpu(uuid=UUIDS[1], unsupported={"nvmlDeviceGetPowerUsage"})])
    summary = drive(nvml, tmp_path)
    power = {c.name: c for c in telemetry_checks(summary, min_power_fraction_of_limit=0.5,
                                                 missing_note="n/a")}["mean power / power limit"]
    assert power.passed is None and f"no value from GPU 1 ({UUIDS[1]})" in power.note


def test_ranks_of_other_hosts_are_not_sampled_here(tmp_path):
    nvml = fake_nvml(2)
    clock = Clock()
    sampler = Sampler(tmp_path, period_s=0.1, nvml=nvml, clock=clock, host="node1")
    sampler.init()
    write_phase(tmp_path, 0, "measure", clock.now, uuid=UUIDS[0], index=0, host="node1")
    write_phase(tmp_path, 1, "measure", clock.now, uuid="GPU-elsewhere", index=0, host="node2")
    sampler.poll()
    summary = sampler.stop()
    assert [g["uuid"] for g in summary["gpus"]] == [UUIDS[0]]


def test_a_uuid_nvml_does_not_know_falls_back_to_the_index(tmp_path):
    sampler = Sampler(tmp_path, nvml=fake_nvml(2), clock=Clock(), host="node1")
    sampler.init()
    write_phase(tmp_path, 0, "measure", 1000.0, uuid="GPU-spelled-differently", index=1)
    sampler.poll()
    assert [(g["index"], g["uuid"]) for g in sampler.stop()["gpus"]] == [(1, UUIDS[1])]


def test_a_run_that_dies_in_its_window_keeps_what_was_sampled(tmp_path):
    nvml = fake_nvml(1)
    clock = Clock()
    sampler = Sampler(tmp_path, period_s=0.1, nvml=nvml, clock=clock, host="node1")
    sampler.init()
    write_phase(tmp_path, 0, "measure", clock.now, uuid=UUIDS[0], index=0)
    for _ in range(3):
        sampler.poll()
        clock.now += 0.1
    summary = sampler.stop()  # the launcher stops the sampler when it kills the run
    assert summary["status"] == "ok" and summary["window"]["samples"] == 3
    assert "ecc_corrected" in summary["gpus"][0]["reduced"]


def test_a_run_that_never_reached_its_window_has_no_telemetry(tmp_path):
    sampler = Sampler(tmp_path, nvml=fake_nvml(1), host="node1")
    sampler.init()
    write_phase(tmp_path, 0, "warmup", 1.0, uuid=UUIDS[0], index=0)
    sampler.poll()
    summary = sampler.stop()
    assert summary == {"status": "unavailable", "reason": "the run never reached its measured window", "period_s": 0.1}


def test_no_nvml_means_unavailable_with_the_reason(tmp_path):
    nvml = FakeNvml([], init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    summary = Sampler(tmp_path, nvml=nvml).start().stop()
    assert summary["status"] == "unavailable"
    assert summary["reason"] == "NVML is not available: NVML Shared Library Not Found"
    checks = telemetry_checks(summary, min_gpu_utilization_pct=90, missing_note="fallback")
    assert [c.passed for c in checks] == [None, None, None, None]
    assert all("NVML Shared Library Not Found" in c.note for c in checks)


def test_a_cpu_launch_and_a_switched_off_sampler_say_why(tmp_path, monkeypatch):
    monkeypatch.delenv(telemetry.TELEMETRY_ENV, raising=False)
    cpu = sampler_for("cpu", tmp_path).start().stop()
    assert cpu == {"status": "unavailable", "reason": "a CPU run (gloo) has no GPU to sample", "period_s": 0.1}
    off = sampler_for("cuda", tmp_path, enabled=False).stop()
    assert off["status"] == "disabled" and "switched off" in off["reason"]
    monkeypatch.setenv(telemetry.TELEMETRY_ENV, "0")
    env_off = sampler_for("cuda", tmp_path).stop()
    assert env_off["status"] == "disabled" and "HARNESS_TELEMETRY=0" in env_off["reason"]
    monkeypatch.setenv(telemetry.TELEMETRY_ENV, "1")
    assert isinstance(sampler_for("cuda", tmp_path), Sampler)


def test_the_threaded_sampler_stops_by_itself_when_the_window_closes(tmp_path):
    nvml = fake_nvml(1)
    sampler = Sampler(tmp_path, period_s=0.01, nvml=nvml, host="node1").start()
    write_phase(tmp_path, 0, "measure", time.time(), uuid=UUIDS[0], index=0)
    deadline = time.time() + 5
    while sampler.samples < 5 and time.time() < deadline:
        time.sleep(0.01)
    write_phase(tmp_path, 0, "gather", time.time(), uuid=UUIDS[0], index=0)
    sampler._thread.join(timeout=5)
    assert not sampler._thread.is_alive()
    summary = sampler.stop()
    assert summary["status"] == "ok" and summary["window"]["samples"] >= 5
    assert nvml.calls[-1] == "nvmlShutdown"


# ---------------------------------------------------------------------------------------------
# Records and the verdict


def test_record_carries_telemetry_and_old_records_still_load(tmp_path):
    summary = drive(fake_nvml(2), tmp_path)
    record = full_record(telemetry=summary)
    assert RunRecord.from_json(record.to_json()) == record
    old = json.loads(full_record().to_json())
    del old["telemetry"]
    assert RunRecord.from_dict(old).telemetry is None


def test_the_verdict_uses_the_record_telemetry(tmp_path):
    nvml = fake_nvml(2)
    nvml.gpus[1].util = 50.0
    record = full_record(model="resnet152", world_size=2, throughput_per_gpu=2100.0, throughput_total=4200.0,
                         telemetry=drive(nvml, tmp_path))
    checks = {c.name: c for c in weak_scaling_checks(record, full_record(model="resnet152", world_size=1),
                                                     BOUNDS, telemetry_note="n/a")}
    util = checks["mean GPU utilization"]
    assert util.passed is False and UUIDS[1] in util.note
    assert checks["no new ECC errors"].passed is True


def test_without_telemetry_the_checks_say_why_and_fail_nothing():
    unavailable = full_record(model="resnet152", world_size=1,
                              telemetry=telemetry.unavailable("a CPU run (gloo) has no GPU to sample"))
    checks = weak_scaling_checks(unavailable, None, BOUNDS, telemetry_note="fallback")
    health = [c for c in checks if c.name in ("mean GPU utilization", "no new ECC errors",
                                              "no thermal / hardware-slowdown throttling")]
    assert len(health) == 3 and all(c.passed is None for c in health)
    assert all(c.note == "a CPU run (gloo) has no GPU to sample" for c in health)


# ---------------------------------------------------------------------------------------------
# Following a real launch (CPU ranks, so the GPU identity is added to what the sampler reads)


class SamplerWithFakeGpus(Sampler):
    """The real sampler on a real CPU launch's phase files, with a fake GPU per rank."""

    def _local_phases(self):
        phases = super()._local_phases()
        for rank, info in phases.items():
            info.update(gpu_uuid=UUIDS[rank], gpu_index=rank)
        return phases


@pytest.mark.slow
def test_the_sampler_follows_a_real_measured_window_and_its_summary_lands_in_the_record(tmp_path, fast_spec,
                                                                                       monkeypatch,
                                                                                       assert_no_process_left):
    nvml = fake_nvml(1)
    samplers = []

    def make(device, run_dir, *, enabled=True, period_s=0.1, nvml_module=None):
        samplers.append(SamplerWithFakeGpus(run_dir, period_s=0.05, nvml=nvml))
        return samplers[-1]

    monkeypatch.setattr(telemetry, "sampler_for", make)
    spec = fast_spec(measure_seconds=1.5, min_measure_steps=5)
    record = launch.run_benchmark(spec, tmp_path / "run", run_id="telemetry-follow-1")
    assert_no_process_left("telemetry-follow-1")
    assert record.ok, record.failure
    tele = record.telemetry
    assert tele["status"] == "ok" and tele["gpus"][0]["uuid"] == UUIDS[0]
    # The sampled span is the measured window: not the start-up, warmup or gather around it.
    window = tele["window"]["seconds"]
    assert window == pytest.approx(record.measure_s, abs=0.5)
    assert tele["window"]["samples"] >= 5
    assert tele["window"]["samples"] <= window / 0.05 + 3
    assert "mean GPU utilization" in {c.name for c in scaling_checks.health_checks(
        record, BOUNDS, telemetry_note="n/a")}
