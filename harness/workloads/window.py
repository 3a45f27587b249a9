"""When warmup ends and when the measured window stops, and the window's timers.

**Warmup** runs in blocks of steps with a sync after each block (warmup is not measured). The
first block holds one-time costs (cuDNN autotuning, allocator growth, compilation), so the clock
starts after it: at least ``warmup_seconds`` more and ``min_warmup_steps``, until two consecutive
blocks agree within 5 %, but never past ``max_warmup_seconds``. **Adaptive window**: blocks of
about ``ci_block_seconds`` until the throughput's CI half-width meets ``ci_target`` (after
``measure_seconds``) or ``max_measure_seconds`` passes. Every rank votes after each block (an
all-reduce MIN of "done"), so all ranks run the same number of steps.

The rules are pure (unit-tested on synthetic block series); the loops take the training step,
the sync and the cross-rank vote as functions, so nothing here imports torch.
"""

from __future__ import annotations

import itertools
import math
import time
from typing import Any, Callable

from harness.rank import RankPhase
from harness.workloads.plan import CasePlan
from harness.workloads.stats import throughput_ci95_rel

Vote = Callable[[float, Any], float]
"""``(value, dist.ReduceOp) -> value reduced over every rank``: ProcessGroup.across_ranks."""
MIN_BLOCK_STEPS = 5
"""The adaptive window's least steps per block: with 3 blocks at least, a window of 110-130 ms steps
closes at ``measure_seconds`` instead of 30 steps (3.4-3.9 s for a 2 s window on H200, issue 28)."""
HOT_SETTLE_FRACTION = 0.25
"""A hot case (the same work ran on this rank earlier in the launch: autotuned, compiled, GPU at
temperature) settles for this fraction of ``warmup_seconds``; the steadiness rule still holds."""


def warmup_done(*, steps: int, block_means_ms: list[float], since_first_block_s: float, min_steps: int,
                warmup_s: float, max_warmup_s: float, steady_tolerance: float = 0.05) -> bool:
    """Whether this rank would stop warming up (pure, unit-tested).

    The first block holds the one-time costs (cuDNN autotuning, torch.compile, allocator growth),
    so the clocks start after it: at least ``warmup_s`` more and ``min_steps`` in total, until two
    consecutive blocks agree within ``steady_tolerance``; but never more than ``max_warmup_s``
    after the first block, because a noisy host (a shared CPU) may never look steady.
    """
    if since_first_block_s >= max_warmup_s:
        return True
    if steps < min_steps or since_first_block_s < warmup_s or len(block_means_ms) < 3:
        return False
    previous, last = block_means_ms[-2], block_means_ms[-1]
    return abs(last - previous) <= steady_tolerance * previous


def measurement_done(step_times_ms: list[float], *, block_steps: int, elapsed_s: float, ci_target: float,
                     min_seconds: float, max_seconds: float) -> str | None:
    """Why the adaptive window may stop now, or None to go on (pure, unit-tested).

    The 95 % CI of throughput comes from block means (harness.workloads.stats), so a drift between blocks
    widens it and keeps the window open until ``max_seconds``; steady blocks close it as soon as
    ``min_seconds`` have passed.
    """
    if elapsed_s >= max_seconds:
        return "max time"
    if elapsed_s < min_seconds:
        return None
    ci_rel, blocks = throughput_ci95_rel(step_times_ms, block_steps=block_steps)
    if ci_rel is not None and blocks >= 3 and ci_rel <= ci_target:
        return "CI target"
    return None


def warm_up(plan: CasePlan, train_step: Callable[[str, int], Any], sync: Callable[[], None], vote: Vote,
            min_op: Any, phase: RankPhase, *, hot: bool = False) -> tuple[int, float, float]:
    """Run warmup blocks until every rank agrees it is done; return (steps, last block ms/step, seconds).
    ``hot``: the settle time is HOT_SETTLE_FRACTION of ``warmup_seconds`` (doubling one doubles the other)."""
    settle_s = plan.warmup_seconds * (HOT_SETTLE_FRACTION if hot else 1.0)
    # Hot: nothing one-time is left for a long first block to absorb, so blocks and the step floor halve.
    block_steps = math.ceil(plan.warmup_block_steps / 2) if hot else plan.warmup_block_steps
    min_steps = math.ceil(plan.min_warmup_steps / 2) if hot else plan.min_warmup_steps
    steps = 0
    block_means_ms: list[float] = []
    sync()
    start = time.perf_counter()
    first_block_end = None
    while True:
        block_start = time.perf_counter()
        for _ in range(block_steps):
            train_step("warmup", steps)
            steps += 1
        sync()  # warmup is not measured: a sync per block is how we see time pass
        now = time.perf_counter()
        block_means_ms.append((now - block_start) * 1000.0 / block_steps)
        first_block_end = first_block_end or now
        phase.write("warmup", expected_s=now - block_start)  # heartbeat: the next block should take as long
        done_here = warmup_done(steps=steps, block_means_ms=block_means_ms, since_first_block_s=now - first_block_end,
                                min_steps=min_steps, warmup_s=settle_s,
                                max_warmup_s=plan.max_warmup_seconds)
        # Every rank must run the same number of steps, or DDP's all-reduces stop pairing up.
        if vote(1.0 if done_here else 0.0, min_op) >= 1.0:
            return steps, block_means_ms[-1], now - start


def measure_adaptively(plan: CasePlan, run_steps: Callable[[int, int], list[float]], estimated_step_s: float,
                       vote: Vote, min_op: Any, phase: RankPhase) -> tuple[list[float], int, str]:
    """Blocks of ~ci_block_seconds until every rank agrees the CI target (or the time cap) is met.

    One sync per block (reading its events) and one tiny all-reduce: the host waits only at block
    boundaries, never inside a block. Returns (step times in ms, steps per block, why it stopped).
    """
    block_steps = max(MIN_BLOCK_STEPS, math.ceil(plan.ci_block_seconds / max(estimated_step_s, 1e-6)))
    step_times_ms: list[float] = []
    start = time.perf_counter()
    while True:
        step_times_ms += run_steps(len(step_times_ms), block_steps)
        reason = measurement_done(step_times_ms, block_steps=block_steps, elapsed_s=time.perf_counter() - start,
                                  ci_target=plan.ci_target, min_seconds=plan.measure_seconds,
                                  max_seconds=plan.max_measure_seconds)
        phase.write("measure", expected_s=plan.max_measure_seconds)  # heartbeat for the stall detector
        if vote(1.0 if reason else 0.0, min_op) >= 1.0:
            return step_times_ms, block_steps, reason or "max time"


def fixed_window_steps(plan: CasePlan, estimated_step_s: float) -> int:
    """The fixed window's step count: measure_seconds at the slowest rank's pace, at least min_measure_steps."""
    return max(plan.min_measure_steps, math.ceil(plan.measure_seconds / max(estimated_step_s, 1e-6)))


class CudaWindowTimer:
    """CUDA events recorded after every step; read only after the window (one sync at the end)."""

    def __init__(self, steps: int, torch: Any):
        self._events = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
        self._marks = 0

    def start(self) -> None:
        self._events[0].record()

    def mark(self) -> None:
        self._marks += 1
        self._events[self._marks].record()

    def finish(self) -> list[float]:
        self._events[self._marks].synchronize()
        return [self._events[i].elapsed_time(self._events[i + 1]) for i in range(self._marks)]


class HostWindowTimer:
    """CPU (gloo) steps are synchronous, so the host clock after each step is the step's end."""

    def __init__(self, steps: int):
        self._stamps: list[float] = []

    def start(self) -> None:
        self._stamps = [time.perf_counter()]

    def mark(self) -> None:
        self._stamps.append(time.perf_counter())

    def finish(self) -> list[float]:
        return [(b - a) * 1000.0 for a, b in itertools.pairwise(self._stamps)]


def window_timer(cuda: bool, steps: int, torch: Any) -> CudaWindowTimer | HostWindowTimer:
    """The timer of a block of ``steps`` steps: CUDA events on a GPU, the host clock on CPU."""
    return CudaWindowTimer(steps, torch) if cuda else HostWindowTimer(steps)
