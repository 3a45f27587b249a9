"""Every rank's raw timings of one benchmark case, gathered on rank 0, into the run record (pure: no
GPU, no process group; unit-tested). Throughput = global samples in the window / the slowest rank's busy
seconds (its step events summed: the host's pauses between blocks left out, as for the 1-GPU reference);
its 95 % CI from batch means; TFLOP/s and MFU from the model's FLOPs per sample.

Each rank's own rate goes into its RankStats. An independent case (each GPU its own 1-GPU run)
is summed up by the median GPU: its throughput, CI and TFLOP/s are the median GPU's, so one slow
or fast GPU does not move the baseline the wider cases are judged against."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any

from harness.records import RankStats, RunRecord, Versions
from harness.results.job import Failure
from harness.workloads import compilecache, recipe
from harness.workloads.plan import CasePlan
from harness.workloads.stats import step_time_stats, straggler, throughput_ci95_rel


def busy_seconds(g: dict) -> float:
    """The seconds of one rank's measured steps: their CUDA events back to back within each block. The
    pauses between blocks (the host reads the events and the ranks vote) are left out, under DDP and
    for an independent rank alike, so an efficiency's numerator and denominator are timed the same way."""
    return sum(g["step_times_ms"]) / 1000.0


def rank_throughput(plan: CasePlan, g: dict) -> float:
    """One rank's own rate, samples/s, over its busy seconds (under DDP every rank waits for the slowest
    inside each step, so each rank's rate is the run's; an independent rank's is its GPU's own)."""
    return plan.batch_size_per_gpu * len(g["step_times_ms"]) / busy_seconds(g)


def _per_rank(plan: CasePlan, gathered: list[dict]) -> tuple[RankStats, ...]:
    return tuple(
        RankStats(
            rank=g["rank"], local_rank=g["local_rank"], host=g["host"], gpu_index=g["gpu_index"],
            gpu_uuid=g["gpu_uuid"], device_name=g["device_name"], step_time=step_time_stats(g["step_times_ms"]),
            window_s=g["window_s"], compute_step_ms=g["compute_step_ms"], peak_memory_gib=g["peak_memory_gib"],
            throughput=rank_throughput(plan, g),
        )
        for g in sorted(gathered, key=lambda g: g["rank"])
    )


def median_rank(plan: CasePlan, gathered: list[dict]) -> dict:
    """The rank whose own rate is the median (the lower middle one of an even count)."""
    ranked = sorted(gathered, key=lambda g: rank_throughput(plan, g))
    return ranked[(len(ranked) - 1) // 2]


def _invalid_loss(gathered: list[dict]) -> Failure | None:
    bad = [g["rank"] for g in gathered if not g["loss_finite"]]
    if not bad:
        return None
    return Failure(reason=f"non-finite loss on rank(s) {bad} during the measured window: the run is invalid, "
                          "whatever its speed", phase="measure", rank=bad[0])


def _settings(plan: CasePlan, stop_reason: str | None, launch: dict | None) -> dict[str, Any]:
    """How the case was measured, as the record's ``settings`` says it."""
    return {
        "warmup_seconds": plan.warmup_seconds, "max_warmup_seconds": plan.max_warmup_seconds,
        "min_warmup_steps": plan.min_warmup_steps, "measure_seconds": plan.measure_seconds,
        "min_measure_steps": plan.min_measure_steps, "compute_probe_steps": plan.compute_probe_steps,
        "sync_each_step": plan.sync_each_step, "optimizer": recipe.describe(plan.precision),
        "ci_target": plan.ci_target or None, "measure_stop_reason": stop_reason,
        "max_measure_seconds": plan.max_measure_seconds if plan.ci_target else None,
        "launch": launch or {"cases": 1, "index": 0},
    }


def build_record(plan: CasePlan, *, spec: Any, world_size: int, gathered: list[dict], warmup_steps: int,
                 warmup_s: float, measured_steps: int, phases_s: dict[str, float], versions: Versions, nodes: int,
                 launch: dict | None = None, started_at: float | None = None) -> RunRecord:
    """Turn every rank's raw timings into the run record; ``spec`` is the case's ModelSpec."""
    per_rank = _per_rank(plan, gathered)
    slowest = max(gathered, key=busy_seconds)
    window_s = max(g["window_s"] for g in gathered)
    # Independent: each GPU trained alone; the median GPU stands for the node (world size 1).
    judged = median_rank(plan, gathered) if plan.independent else slowest
    throughput_total = (rank_throughput(plan, judged) if plan.independent
                        else plan.global_batch_size * measured_steps / busy_seconds(slowest))
    ci_rel, ci_blocks = throughput_ci95_rel(judged["step_times_ms"], block_steps=judged.get("ci_block_steps"))
    pooled = [t for g in gathered for t in g["step_times_ms"]]
    tflops = throughput_total / world_size * spec.train_flops_per_sample / 1e12
    failure = _invalid_loss(gathered)
    lag = None if plan.independent else straggler(per_rank)
    memories = [g["peak_memory_gib"] for g in gathered if g["peak_memory_gib"] is not None]
    now = datetime.now(timezone.utc)
    return RunRecord(
        run_id=plan.run_id, model=plan.model, precision=plan.precision, scaling=plan.scaling,
        world_size=world_size, nodes=nodes, device_kind=plan.device,
        batch_size_per_gpu=plan.batch_size_per_gpu, global_batch_size=plan.global_batch_size, compile=plan.compile,
        status="ok" if failure is None else "invalid", failure=failure,
        sample_unit=spec.sample_unit, throughput_per_gpu=throughput_total / world_size,
        throughput_total=throughput_total, throughput_ci95_rel=ci_rel, ci_blocks=ci_blocks,
        step_time_ms=step_time_stats(pooled), per_rank=per_rank, independent=plan.independent, straggler=lag,
        straggler_ratio=lag.ratio if lag else None, peak_memory_gib=max(memories) if memories else None,
        tflops_per_gpu=tflops, mfu=tflops / plan.peak_tflops if plan.peak_tflops else None,
        peak_tflops=plan.peak_tflops, loss_finite=failure is None,
        final_loss=gathered[0]["final_loss"] if math.isfinite(gathered[0]["final_loss"]) else None,
        warmup_steps=warmup_steps, warmup_s=warmup_s, measured_steps=measured_steps, measure_s=window_s,
        device_name=gathered[0]["device_name"], hosts=tuple(dict.fromkeys(g["host"] for g in gathered)),
        versions=versions, phases_s=phases_s,
        compile_cache=compilecache.combine([g.get("compile_cache") for g in sorted(gathered, key=lambda g: g["rank"])]),
        settings=_settings(plan, slowest.get("stop_reason"), launch),
        started_at=datetime.fromtimestamp(started_at, timezone.utc).isoformat(timespec="seconds") if started_at else
        now.isoformat(timespec="seconds"),
        finished_at=now.isoformat(timespec="seconds"),
    )
