"""Statistics helpers against values computed by hand."""

import math

import pytest

from harness.records import RankStats, StepTimeStats
from harness.workloads.stats import (
    block_means,
    block_steps_for,
    percentile,
    step_time_stats,
    straggler,
    t_quantile_975,
    throughput_ci95_rel,
)


def test_percentile_interpolates_between_ranks():
    assert percentile([1, 2, 3, 4, 5], 95) == pytest.approx(4.8)  # position 3.8
    assert percentile([5, 1, 3], 50) == 3
    assert percentile([7.0], 99) == 7.0


def test_percentile_rejects_bad_input():
    with pytest.raises(ValueError, match="empty"):
        percentile([], 50)
    with pytest.raises(ValueError, match=r"\[0, 100\]"):
        percentile([1], 101)


def test_step_time_stats_by_hand():
    stats = step_time_stats([10.0, 12.0, 14.0])
    assert stats.mean_ms == 12.0
    assert stats.median_ms == 12.0
    assert stats.p95_ms == pytest.approx(13.8)  # position 1.9
    assert stats.p99_ms == pytest.approx(13.96)
    assert stats.cv == pytest.approx(2.0 / 12.0)  # sample stdev 2
    assert stats.steps == 3


def test_block_means_drop_the_partial_block():
    assert block_means([1, 3, 5, 7, 100], 2) == [2.0, 6.0]


@pytest.mark.parametrize("steps, expected", [(10, 5), (20, 5), (100, 10), (200, 20), (1000, 50), (5000, 50)])
def test_block_size_aims_at_ten_blocks_of_5_to_50_steps(steps, expected):
    assert block_steps_for(steps) == expected


def test_t_quantile_table_and_tail():
    assert t_quantile_975(1) == 12.7062
    assert t_quantile_975(30) == 2.0423
    assert t_quantile_975(40) == pytest.approx(2.0211, abs=1e-3)  # table value 2.0211
    assert t_quantile_975(10_000) == pytest.approx(1.96, abs=1e-2)
    with pytest.raises(ValueError):
        t_quantile_975(0)


def test_ci_from_two_blocks_by_hand():
    # Blocks of 2 steps: means 10 ms and 20 ms -> 100/s and 50/s; mean 75, stdev 35.355.
    rel, blocks = throughput_ci95_rel([10, 10, 20, 20], block_steps=2)
    assert blocks == 2
    assert rel == pytest.approx(12.7062 * (50 / math.sqrt(2)) / math.sqrt(2) / 75, rel=1e-6)


def test_ci_is_tight_for_steady_steps_and_wide_for_drift():
    steady, _ = throughput_ci95_rel([100.0 + (i % 3) * 0.1 for i in range(200)])
    drifting, _ = throughput_ci95_rel([100.0 + i for i in range(200)])
    assert steady < 0.001
    assert drifting > 0.1


def test_ci_needs_two_blocks():
    assert throughput_ci95_rel([10.0] * 6, block_steps=5) == (None, 1)


def _rank(rank, compute_ms, host="h", gpu=None):
    return RankStats(rank=rank, local_rank=rank, host=host, gpu_index=gpu, gpu_uuid=None, device_name="x",
                     step_time=StepTimeStats(mean_ms=50, median_ms=50, p95_ms=50, p99_ms=50, cv=0, steps=10),
                     window_s=0.5, compute_step_ms=compute_ms, peak_memory_gib=None)


def test_straggler_names_slowest_and_fastest_by_compute_time():
    lag = straggler([_rank(0, 40.0, "a", 0), _rank(1, 44.0, "b", 5), _rank(2, 41.0, "a", 1)])
    assert lag.ratio == pytest.approx(1.1)
    assert (lag.slowest_rank, lag.slowest_host, lag.slowest_gpu_index) == (1, "b", 5)
    assert (lag.fastest_rank, lag.fastest_host, lag.fastest_gpu_index) == (0, "a", 0)


def test_straggler_falls_back_to_synced_step_time():
    lag = straggler([_rank(0, None), _rank(1, None)])
    assert lag.ratio == 1.0
