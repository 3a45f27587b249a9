"""The soak's training loop on one rank (harness/kinds/soak/worker.py starts it): warm up, then windows of
equal step counts for the soak's duration, one host sync and one all-reduce per window, never per
step; rank 0 rewrites soak_windows.json after every window and writes soak.json at the end.

torch comes from the process group (harness.rank.start_process_group imports it), the model and the recipe
when the soak starts: importing this module loads no torch, as on the launcher's side (tests/test_layout.py)."""

from __future__ import annotations

import json
import math
import time
from typing import TYPE_CHECKING, Any

from harness.rank import SEED, ProcessGroup, Rank, start_process_group
from harness.files import write_json_atomic
from harness.kinds.soak.plan import SOAK_PROGRESS_FILE, SOAK_RESULT_FILE, SoakPlan
from harness.kinds.soak.windows import window_count

if TYPE_CHECKING:
    from harness.workloads import recipe

WARMUP_BLOCK_STEPS = 5
MIN_WARMUP_STEPS = 10
MIN_WINDOW_STEPS = 5


def warm_up(plan: SoakPlan, step: recipe.TrainStep, group: ProcessGroup, rank: Rank) -> float:
    """Synced blocks (not measured) for at least MIN_WARMUP_STEPS and warmup_seconds; then one more
    block whose time, the slowest rank's, sizes the windows. Returns that step time in seconds."""
    rank.phase.write("warmup")
    began, steps = time.perf_counter(), 0
    while steps < MIN_WARMUP_STEPS or time.perf_counter() - began < plan.warmup_seconds:
        block = time.perf_counter()
        for _ in range(WARMUP_BLOCK_STEPS):
            step()
        group.sync()
        steps += WARMUP_BLOCK_STEPS
        rank.phase.write("warmup", expected_s=time.perf_counter() - block)
    block = time.perf_counter()
    for _ in range(WARMUP_BLOCK_STEPS):
        step()
    group.sync()
    return group.across_ranks((time.perf_counter() - block) / WARMUP_BLOCK_STEPS, group.dist.ReduceOp.MAX)


def soak(plan: SoakPlan, rank: Rank) -> None:
    from harness.workloads import recipe
    from harness.workloads.models import get_model

    group = start_process_group(plan.device, rank)
    torch, dist = group.torch, group.dist
    if group.cuda:
        torch.backends.cudnn.benchmark = True
    model = get_model(plan.model)
    torch.manual_seed(SEED + rank.rank)
    ddp = recipe.build_ddp(model, group.device)
    step = recipe.TrainStep(ddp, ddp.parameters(), model, plan.precision, group.device, plan.batch_size_per_gpu)
    loss_sum = torch.zeros((), device=group.device, dtype=torch.float32)
    step_s = warm_up(plan, step, group, rank)
    steps_per_window = max(MIN_WINDOW_STEPS, math.ceil(plan.window_seconds / step_s))
    samples_per_window = plan.batch_size_per_gpu * rank.world_size * steps_per_window
    windows = window_count(plan.duration_seconds, plan.window_seconds)

    dist.barrier()
    group.sync()
    rank.phase.write("measure", expected_s=steps_per_window * step_s)
    results: list[dict] = []
    last = time.perf_counter()
    for index in range(windows):
        for _ in range(steps_per_window):
            loss_sum += step()
        group.sync()
        slowest = group.across_ranks(time.perf_counter() - last, dist.ReduceOp.MAX)
        last = time.perf_counter()  # the all-reduce above belongs to no window
        results.append({"window": index, "seconds": slowest, "throughput": samples_per_window / slowest,
                        "end_time": time.time()})
        rank.phase.write("measure", expected_s=steps_per_window * step_s)  # heartbeat for hang detection
        if rank.rank == 0:
            write_json_atomic(plan.run_dir / SOAK_PROGRESS_FILE, json.dumps(results))
            print(f"[harness soak] window {index + 1}/{windows}: {samples_per_window / slowest:,.1f} "
                  f"{model.sample_unit}/s in {slowest:.1f} s", flush=True)
    finite = group.across_ranks(float(bool(torch.isfinite(loss_sum).item())), dist.ReduceOp.MIN) == 1.0
    rank.phase.write("gather", expected_s=1.0)
    if rank.rank == 0:
        result: dict[str, Any] = {
            "status": "ok" if finite else "invalid", "loss_finite": finite, "model": plan.model,
            "precision": plan.precision, "batch_size_per_gpu": plan.batch_size_per_gpu, "world_size": rank.world_size,
            "sample_unit": model.sample_unit, "steps_per_window": steps_per_window, "estimated_step_s": step_s,
            "windows": results}
        write_json_atomic(plan.run_dir / SOAK_RESULT_FILE, json.dumps(result, indent=1))
    dist.barrier()
    dist.destroy_process_group()
