"""Statistics of step-time series: pure functions, no torch, unit-tested against hand values."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from harness.records import RankStats, StepTimeStats, Straggler

# Two-sided 95 % Student-t quantiles t(0.975, df). Beyond the table the quantile is interpolated
# linearly in 1/df towards the normal 1.95996, which is accurate to < 0.1 % for df > 30.
_T975 = {
    1: 12.7062, 2: 4.3027, 3: 3.1824, 4: 2.7764, 5: 2.5706, 6: 2.4469, 7: 2.3646, 8: 2.3060,
    9: 2.2622, 10: 2.2281, 11: 2.2010, 12: 2.1788, 13: 2.1604, 14: 2.1448, 15: 2.1314,
    16: 2.1199, 17: 2.1098, 18: 2.1009, 19: 2.0930, 20: 2.0860, 21: 2.0796, 22: 2.0739,
    23: 2.0687, 24: 2.0639, 25: 2.0595, 26: 2.0555, 27: 2.0518, 28: 2.0484, 29: 2.0452,
    30: 2.0423,
}
_Z975 = 1.959964


def t_quantile_975(df: int) -> float:
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if df in _T975:
        return _T975[df]
    return _Z975 + (_T975[30] - _Z975) * (30 / df)


def percentile(values: Sequence[float], q: float) -> float:
    """Percentile with linear interpolation between closest ranks (numpy's default method)."""
    if not values:
        raise ValueError("percentile of an empty series")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be in [0, 100], got {q}")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    lower = math.floor(position)
    upper = min(lower + 1, len(ordered) - 1)
    return ordered[lower] + (ordered[upper] - ordered[lower]) * (position - lower)


def step_time_stats(step_times_ms: Sequence[float]) -> StepTimeStats:
    if not step_times_ms:
        raise ValueError("no step times to summarise")
    mean = statistics.fmean(step_times_ms)
    stdev = statistics.stdev(step_times_ms) if len(step_times_ms) > 1 else 0.0
    return StepTimeStats(
        mean_ms=mean,
        median_ms=statistics.median(step_times_ms),
        p95_ms=percentile(step_times_ms, 95),
        p99_ms=percentile(step_times_ms, 99),
        cv=stdev / mean if mean > 0 else 0.0,
        steps=len(step_times_ms),
    )


def block_steps_for(steps: int) -> int:
    """Steps per batch-mean block: about ten blocks, each 5–50 steps long.

    Consecutive step times are autocorrelated (clock and thermal drift, allocator, NCCL), so a
    CI from single steps is far too narrow; means of blocks of 10–20 steps are close to
    independent (shared/REFERENCE.md, measurement practice).
    """
    return max(5, min(50, steps // 10))


def block_means(values: Sequence[float], block_steps: int) -> list[float]:
    """Means of consecutive full blocks; a partial block at the end is dropped."""
    if block_steps < 1:
        raise ValueError(f"block_steps must be >= 1, got {block_steps}")
    blocks = len(values) // block_steps
    return [statistics.fmean(values[i * block_steps:(i + 1) * block_steps]) for i in range(blocks)]


def throughput_ci95_rel(step_times_ms: Sequence[float], block_steps: int | None = None) -> tuple[float | None, int]:
    """Relative half-width of the 95 % CI of throughput, from batch means of step time.

    Each block's throughput is samples / block mean step time (the batch size cancels in the
    relative width). Returns (None, blocks) when fewer than 2 blocks exist.
    """
    block_steps = block_steps or block_steps_for(len(step_times_ms))
    means_ms = block_means(step_times_ms, block_steps)
    if len(means_ms) < 2:
        return None, len(means_ms)
    rates = [1000.0 / m for m in means_ms]
    mean_rate = statistics.fmean(rates)
    half_width = t_quantile_975(len(rates) - 1) * statistics.stdev(rates) / math.sqrt(len(rates))
    return half_width / mean_rate, len(rates)


def straggler(ranks: Sequence[RankStats]) -> Straggler | None:
    """Slowest / fastest rank by unsynchronised compute step time (falls back to synced time)."""
    timed = [(r.compute_step_ms if r.compute_step_ms else r.step_time.mean_ms, r) for r in ranks]
    if not timed:
        return None
    slow_ms, slow = max(timed, key=lambda item: item[0])
    fast_ms, fast = min(timed, key=lambda item: item[0])
    return Straggler(
        ratio=slow_ms / fast_ms if fast_ms > 0 else float("inf"),
        slowest_rank=slow.rank, slowest_host=slow.host, slowest_gpu_index=slow.gpu_index,
        fastest_rank=fast.rank, fastest_host=fast.host, fastest_gpu_index=fast.gpu_index,
    )
