"""Repeats of one case (``--repeats N``): one figure from N launches, by a stated rule.

N < 5: the median. N >= 5: the best and the worst run are dropped and the rest averaged, as
MLPerf Training scores its runs. The record that stands for the case is the run closest to that
figure, with the figure put in its place and every run's throughput kept in ``settings["repeats"]``;
a failed or invalid repeat fails the case (a node that fails one run in N is not healthy).
"""

from __future__ import annotations

import dataclasses
import statistics

from harness.records import RankStats, RunRecord

OLYMPIC_FROM = 5
"""From this many repeats on, the best and worst run are dropped before averaging."""


def repeat_estimate(values: list[float]) -> tuple[float, str]:
    """(the figure, the rule that made it) from one value per repeat."""
    if not values:
        raise ValueError("no repeats to combine")
    if len(values) >= OLYMPIC_FROM:
        kept = sorted(values)[1:-1]
        return statistics.fmean(kept), f"mean of {len(kept)} after dropping the best and the worst of {len(values)}"
    return statistics.median(values), f"median of {len(values)}"


def combine(records: list[RunRecord]) -> RunRecord:
    """One record for a case measured len(records) times."""
    if len(records) == 1:
        return records[0]
    bad = [record for record in records if not record.ok or record.throughput_per_gpu is None]
    runs = [{"run_id": r.run_id, "status": r.status, "throughput_per_gpu": r.throughput_per_gpu,
             "throughput_ci95_rel": r.throughput_ci95_rel} for r in records]
    if bad:
        first = bad[0]
        rule = f"repeat {records.index(first) + 1} of {len(records)} did not succeed"
        return dataclasses.replace(first, settings={**first.settings, "repeats": {
            "n": len(records), "runs": runs, "rule": rule}})
    measured = [(record, record.throughput_per_gpu) for record in records if record.throughput_per_gpu is not None]
    values = [value for _, value in measured]
    figure, rule = repeat_estimate(values)
    closest = min(measured, key=lambda pair: abs(pair[1] - figure))[0]
    return dataclasses.replace(
        closest, throughput_per_gpu=figure, throughput_total=figure * closest.world_size,
        per_rank=per_rank_figures(closest, records),
        settings={**closest.settings, "repeats": {
            "n": len(records), "rule": rule, "runs": runs, "representative_run_id": closest.run_id,
            "spread_rel": (max(values) - min(values)) / figure}})


def per_rank_figures(closest: RunRecord, records: list[RunRecord]) -> tuple[RankStats, ...]:
    """The representative run's ranks, each rank's rate the same rule's figure over its repeats (a
    GPU is judged on its own rate as the case is on its throughput); unchanged when a run lacks them."""
    rates = [[rank.throughput for rank in record.per_rank if rank.throughput is not None] for record in records]
    if any(len(run) != len(closest.per_rank) for run in rates):
        return closest.per_rank
    return tuple(dataclasses.replace(rank, throughput=repeat_estimate([run[i] for run in rates])[0])
                 for i, rank in enumerate(closest.per_rank))
