"""The straggler probe's slowest and fastest GPU on the ``straggler_ratio`` check. Pure.

The check itself (the ratio against the profile's bound) is made with the case's other health checks
(harness/kinds/ddp_scaling/checks.py); this names where the ratio came from, in the note and as locations.
"""

from __future__ import annotations

from dataclasses import replace

from harness import telemetry as tm
from harness.results.check import Check
from harness.records import RunRecord
from harness.results.location import Location


def name_straggler(checks: list[Check], record: RunRecord) -> list[Check]:
    """``straggler_ratio`` naming its slowest and fastest GPU, in its note and as locations (the slowest
    blamed, the fastest named for comparison). Applied to a case's checks once they are made."""
    straggler = record.straggler
    if straggler is None:
        return checks
    several_hosts = len(record.hosts) > 1
    uuids = {rank.rank: rank.gpu_uuid for rank in record.per_rank}

    def at(rank: int, host: str, index: int | None, detail: str) -> Location:
        return Location(node=host if several_hosts else None, gpu_index=index, gpu_uuid=uuids.get(rank), rank=rank,
                        detail=detail, blamed=detail == "slowest")

    slowest = at(straggler.slowest_rank, straggler.slowest_host, straggler.slowest_gpu_index, "slowest")
    fastest = at(straggler.fastest_rank, straggler.fastest_host, straggler.fastest_gpu_index, "fastest")
    named = "; ".join(f"{where.detail}: {_rank_text(where)}" for where in (slowest, fastest))
    return [replace(c, note=f"{c.note}; {named}" if c.note else named, locations=(slowest, fastest))
            if c.key == "straggler_ratio" and c.evaluated else c for c in checks]


def _rank_text(where: Location) -> str:
    """``GPU 3 (GPU-8d1c...), rank 3``, with its host on several nodes."""
    label = tm.gpu_label(where.gpu_index, where.gpu_uuid) if where.names_gpu else "no GPU"
    return f"{label}, rank {where.rank}" + (f" on {where.node}" if where.node else "")
