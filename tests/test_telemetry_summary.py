"""The telemetry summary as a type (issue 29): what the sampler wrote, read once and tolerantly."""

from __future__ import annotations

import dataclasses

from harness.results.telemetry_summary import GpuTelemetry, TelemetrySummary, read_telemetry

WRITTEN = {
    "status": "ok", "reason": None, "period_s": 0.1,
    "window": {"start": 1700000000.5, "end": 1700000004.5, "seconds": 4.0, "samples": 40},
    "sampler_cpu_s": 0.01, "reductions": {"util_pct": "mean"},
    "gpus": [{"index": 3, "uuid": "GPU-3", "rank": 3, "samples": 40,
              "reduced": {"util_pct": 99.5, "power_w": 650.0, "power_limit_w": 700.0,
                          "clock_event_reasons": ["sw_power_cap"]},
              "stats": {"util_pct": {"mean": 99.5}}, "clock_events": {"sw_power_cap": 38},
              "counters": {}, "unsupported": {"nvlink": "Not Supported"}, "errors": {},
              "foreign_processes": [{"pid": 4242, "name": "python3"}], "process_checks": 40}],
    "metrics": {"util_pct": {"label": "GPU utilization", "unit": "%", "per_gpu": {"3": [[0.0, 99.0]]}}},
}


def test_what_the_sampler_wrote_reads_by_attribute():
    summary = read_telemetry(WRITTEN)
    assert summary.ok and (summary.window_s, summary.window_start, summary.window_end) == (4.0, 1700000000.5,
                                                                                            1700000004.5)
    [gpu] = summary.gpus
    assert (gpu.index, gpu.uuid, gpu.rank, gpu.samples, gpu.process_checks) == (3, "GPU-3", 3, 40, 40)
    assert gpu.value("util_pct") == 99.5 and gpu.value("temperature_c") is None
    assert gpu.clock_events == {"sw_power_cap": 38} and gpu.unsupported == {"nvlink": "Not Supported"}
    assert gpu.foreign_processes == ({"pid": 4242, "name": "python3"},)
    assert summary.metrics["util_pct"]["unit"] == "%"
    assert read_telemetry(summary) is summary


def test_no_telemetry_says_why_and_the_callers_reason_where_it_has_none():
    assert not read_telemetry(None).ok and read_telemetry(None).why_not("telemetry off") == "telemetry off"
    unavailable = read_telemetry({"status": "unavailable", "reason": "a CPU run (gloo) has no GPU to sample"})
    assert unavailable.why_not("x") == "a CPU run (gloo) has no GPU to sample"
    empty = read_telemetry({"status": "ok", "gpus": []})
    assert not empty.ok and empty.why_not("x") == "no GPU was sampled"


def test_a_damaged_summary_reads_as_far_as_it_is_sound():
    damaged = {**WRITTEN, "window": "4 s", "period_s": "fast",
               "gpus": ["GPU 0", {"index": True, "uuid": 7, "samples": -0.5, "reduced": [1, 2],
                                  "clock_events": {"hw_slowdown": "often", "sw_thermal": 3},
                                  "foreign_processes": ["pid 1", {"pid": 1}]}]}
    summary = read_telemetry(damaged)
    assert (summary.window_s, summary.period_s) == (None, None)
    [gpu] = summary.gpus
    assert gpu == GpuTelemetry(index=None, uuid=None, samples=0, clock_events={"sw_thermal": 3},
                               foreign_processes=({"pid": 1},))
    assert read_telemetry([1, 2]) == TelemetrySummary(status="unavailable")


def test_one_gpu_of_a_summary_is_a_summary():
    summary = read_telemetry(WRITTEN)
    narrowed = dataclasses.replace(summary, gpus=tuple(g for g in summary.gpus if g.uuid == "GPU-0"))
    assert not narrowed.ok and narrowed.why_not("x") == "no GPU was sampled"
