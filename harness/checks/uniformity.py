"""Each GPU's own rate in a run record, and how it stands against the node's median. Pure.

The verdict (harness/kinds/ddp_scaling/checks.py) judges throughput per GPU, the slowest GPU named, and the
node's uniformity on the independent 1-GPU run (every GPU training its own model at once): each
GPU's rate over the median GPU's on the same work. A mean would hide one slow GPU among eight;
the median is the node's healthy majority, which one slow GPU cannot pull down.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from harness import telemetry as tm
from harness.records import RankStats, RunRecord
from harness.results.location import Location

CPU_RANKS_NOTE = ("CPU ranks share the host's cores, so their spread measures the OS scheduler, not a GPU; "
                  "uniformity is judged on GPUs only")
ONE_GPU_NOTE = "one GPU: no other GPU on this node to compare it with (uniformity needs 2 or more)"


@dataclass(frozen=True, kw_only=True, slots=True)
class GpuRate:
    """One rank's own throughput and its fraction of the median rank's."""

    rank: RankStats
    throughput: float
    """samples/s"""
    fraction_of_median: float


def rank_label(rank: RankStats, several_hosts: bool = False) -> str:
    """``GPU 3 (GPU-8d1c...)``, with its host on several nodes; ``rank 1`` for a CPU rank."""
    label = (tm.gpu_label(rank.gpu_index, rank.gpu_uuid) if rank.gpu_index is not None or rank.gpu_uuid
             else f"rank {rank.rank}")
    return f"{label} on {rank.host}" if several_hosts else label


def rank_location(rank: RankStats, several_hosts: bool = False, detail: str | None = None,
                  blamed: bool = True) -> Location:
    """The rank's GPU (index, UUID) and rank number, with its host on several nodes."""
    return Location(node=rank.host if several_hosts else None, gpu_index=rank.gpu_index, gpu_uuid=rank.gpu_uuid,
                    rank=rank.rank, detail=detail, blamed=blamed)


def rate_locations(rates: list[GpuRate], several_hosts: bool = False) -> tuple[Location, ...]:
    return tuple(rank_location(rate.rank, several_hosts) for rate in rates)


def gpu_rates(record: RunRecord) -> list[GpuRate]:
    """Every rank with its own rate, slowest first; empty for a record without per-rank rates (a
    failed run, or one written before ranks carried their rate)."""
    rated = [(rank, rank.throughput) for rank in record.per_rank if rank.throughput]
    if not rated:
        return []
    median = statistics.median(rate for _, rate in rated)
    rates = [GpuRate(rank=rank, throughput=rate, fraction_of_median=rate / median) for rank, rate in rated]
    return sorted(rates, key=lambda r: r.throughput)


def node_median(rates: list[GpuRate]) -> float:
    return statistics.median(r.throughput for r in rates)


def describe_rate(rate: GpuRate, unit: str, several_hosts: bool = False) -> str:
    """``GPU 3 (GPU-8d1c...) 1,880.2 images/s (0.941 of the median)``."""
    return (f"{rank_label(rate.rank, several_hosts)} {_number(rate.throughput)} {unit} "
            f"({rate.fraction_of_median:.3f} of the median)")


def _number(value: float) -> str:
    return f"{value:,.1f}" if abs(value) >= 100 else f"{value:.3f}"
