"""The run record is the contract: it must survive JSON exactly and refuse unknown versions."""

import json

import pytest

from harness.records import (
    SCHEMA_VERSION,
    Failure,
    RankStats,
    RunRecord,
    StepTimeStats,
    Straggler,
    Versions,
    read_record,
    write_record,
)


def full_record(**changes) -> RunRecord:
    stats = StepTimeStats(mean_ms=55.2, median_ms=55.1, p95_ms=55.9, p99_ms=56.3, cv=0.004, steps=54)
    ranks = tuple(RankStats(rank=r, local_rank=r, host="node1", gpu_index=r, gpu_uuid=f"GPU-{r}", device_name="H200",
                            step_time=stats, window_s=2.98, compute_step_ms=54.0 + r, peak_memory_gib=11.1)
                  for r in range(2))
    fields = dict(
        run_id="r1", model="resnet50", precision="bf16", scaling="weak", world_size=2, nodes=1, device_kind="cuda",
        batch_size_per_gpu=256, global_batch_size=512, status="ok", sample_unit="images", throughput_per_gpu=4623.8,
        throughput_total=9247.6, throughput_ci95_rel=0.0003, ci_blocks=10, step_time_ms=stats, per_rank=ranks,
        straggler=Straggler(ratio=1.004, slowest_rank=1, slowest_host="node1", slowest_gpu_index=1, fastest_rank=0,
                            fastest_host="node1", fastest_gpu_index=0),
        straggler_ratio=1.004, peak_memory_gib=11.1, tflops_per_gpu=114.2, mfu=0.115, peak_tflops=989.0,
        loss_finite=True, final_loss=5.4, warmup_steps=15, warmup_s=2.8, measured_steps=54, measure_s=2.99,
        device_name="NVIDIA H200", hosts=("node1",),
        versions=Versions(torch="2.11.0", cuda="13.0", nccl="2.28.9", driver="580.159.04", python="3.12.3",
                          harness="0.1.0"),
        phases_s={"warmup": 2.8}, settings={"measure_seconds": 3.0},
    )
    fields.update(changes)
    return RunRecord(**fields)


def test_round_trip_is_exact(tmp_path):
    record = full_record()
    path = tmp_path / "run.json"
    write_record(path, record)
    assert read_record(path) == record
    assert json.loads(path.read_text())["schema_version"] == SCHEMA_VERSION


def test_failed_record_round_trips_with_log_tails():
    record = full_record(status="failed", throughput_per_gpu=None, throughput_total=None, per_rank=(),
                         failure=Failure(reason="rank 1 was killed by SIGKILL", phase="measure", rank=1,
                                         log_tails={"rank1.log": "last line"}))
    assert RunRecord.from_json(record.to_json()) == record
    assert not record.ok


def test_unknown_schema_version_is_refused_with_a_clear_message():
    data = full_record().to_dict()
    data["schema_version"] = 99
    with pytest.raises(ValueError, match="schema_version 99 is not supported"):
        RunRecord.from_dict(data)


def test_non_finite_numbers_are_not_written_as_invalid_json():
    with pytest.raises(ValueError):
        full_record(final_loss=float("nan")).to_json()


def test_atomic_write_leaves_no_temporary_files(tmp_path):
    write_record(tmp_path / "a.json", full_record())
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]
