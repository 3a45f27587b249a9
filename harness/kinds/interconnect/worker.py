"""The all-reduce bus-bandwidth sweep through torch.distributed: the torchrun worker.

    python -m harness.kinds.interconnect.worker --plan PLAN.json

One process per GPU (NCCL), or per CPU rank (gloo). For each message size of the sweep (1 MiB up
to 8 GiB on GPUs with the memory for it, 64 KiB to 4 MiB on CPU) every rank:

1. fills a float32 buffer with a pattern that depends on the rank and the element index, all-
   reduces it once and checks every element against the exact expected sum (integers small
   enough for float32 to add exactly, and a period of 1009, a prime, so a chunk landing at the
   wrong offset or a rank's contribution missing or doubled cannot go unnoticed);
2. times ``iters`` back-to-back all-reduces between two CUDA events (no host sync inside; a host
   clock around the loop on CPU, where gloo's all-reduce returns when it is done), after a few
   untimed ones, with ``iters`` chosen so each size takes about ``target_seconds``.

Time per all-reduce is the mean over ranks, as nccl-tests reports it (its ``-a 1`` default); the
slowest rank's time is kept too; bandwidths as harness/kinds/interconnect/busbw.py defines them. Rank 0
also records which GPU pairs torch says can access each other (``torch.cuda.can_device_access_peer``).
The launcher's side is harness/kinds/interconnect/launch.py; the checks, harness/kinds/interconnect/checks.py.

torch comes from the process group (harness.rank.start_process_group imports it), so this module
stays light: the rank's log and phase file exist, and it dies with torchrun, before torch loads.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.rank import ProcessGroup, Rank, run_rank, start_process_group
from harness.files import write_json_atomic
from harness.kinds.interconnect.busbw import MIB, bus_bandwidth_gbps, iterations_for, message_sizes, size_label
from harness.kinds.interconnect.plan import ALLREDUCE_RESULT_FILE, AllReducePlan
from harness.workloads.plan import plan_argument, prestart_wait_s, read_plan, wait_started_early

PATTERN_PERIOD = 1009
"""A prime: buffer sizes and chunk offsets are powers of two, so no misplaced chunk lines up with the pattern."""
RANK_STRIDE = 1024
CHECK_CHUNK_ELEMENTS = 64 * MIB
"""Elements filled and checked at a time: the index and expected-value temporaries of an 8 GiB
buffer would otherwise need another 24 GiB."""


# --- the correctness check -------------------------------------------------------------------


def pattern_values(torch: Any, start: int, end: int, rank: int, device: Any) -> Any:
    """What rank ``rank`` puts in elements [start, end) before the checked all-reduce."""
    index = torch.arange(start, end, dtype=torch.int64, device=device)
    return (index % PATTERN_PERIOD).to(torch.float32) + float(RANK_STRIDE * rank)


def expected_sum(torch: Any, start: int, end: int, world_size: int, device: Any) -> Any:
    """The exact all-reduce (sum) of every rank's pattern over elements [start, end)."""
    index = torch.arange(start, end, dtype=torch.int64, device=device)
    offset = RANK_STRIDE * world_size * (world_size - 1) // 2
    return (index % PATTERN_PERIOD).to(torch.float32) * world_size + float(offset)


def fill_pattern(torch: Any, buffer: Any, rank: int) -> None:
    for start in range(0, buffer.numel(), CHECK_CHUNK_ELEMENTS):
        end = min(start + CHECK_CHUNK_ELEMENTS, buffer.numel())
        buffer[start:end] = pattern_values(torch, start, end, rank, buffer.device)


@dataclass(frozen=True, kw_only=True, slots=True)
class Correctness:
    mismatches: int
    first_bad_index: int | None = None
    got: float | None = None
    expected: float | None = None

    @property
    def ok(self) -> bool:
        return self.mismatches == 0

    def describe(self) -> str:
        if self.ok:
            return "every element equals the expected sum"
        return (f"{self.mismatches:,} elements differ from the expected sum; the first, element "
                f"{self.first_bad_index:,}, is {self.got!r} instead of {self.expected!r}")


def check_allreduce(torch: Any, buffer: Any, world_size: int) -> Correctness:
    """Compare an all-reduced pattern buffer with the exact expected sum, element by element."""
    mismatches, first = 0, None
    for start in range(0, buffer.numel(), CHECK_CHUNK_ELEMENTS):
        end = min(start + CHECK_CHUNK_ELEMENTS, buffer.numel())
        expected = expected_sum(torch, start, end, world_size, buffer.device)
        wrong = buffer[start:end] != expected
        count = int(wrong.sum().item())
        if count and first is None:
            offset = int(wrong.nonzero()[0].item())
            first = Correctness(mismatches=0, first_bad_index=start + offset,
                                got=float(buffer[start + offset].item()), expected=float(expected[offset].item()))
        mismatches += count
    if not mismatches:
        return Correctness(mismatches=0)
    assert first is not None
    return Correctness(mismatches=mismatches, first_bad_index=first.first_bad_index, got=first.got,
                       expected=first.expected)


# --- the worker (runs under torchrun) --------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    plan_path = plan_argument(argv, "harness.kinds.interconnect.worker")
    wait_s = prestart_wait_s()
    if wait_s is not None:  # started before its turn (harness/launch/prestart.py): its plan comes later, here
        return run_rank("interconnect", plan_path.parent, lambda rank: sweep_started_early(plan_path, rank, wait_s))
    plan = read_plan(plan_path, AllReducePlan)
    return run_rank("interconnect", plan.run_dir, lambda rank: sweep(plan, rank))


def sweep_started_early(plan_path: Path, rank: Rank, wait_s: float) -> None:
    """Import torch (the start-up this launch hides), wait for the plan touching no GPU, then sweep as any launch."""
    import torch.distributed  # noqa: F401 - loaded now, while the launches before this one measure

    if wait_started_early(plan_path, rank.phase, wait_s):
        sweep(read_plan(plan_path, AllReducePlan), rank)


def seconds_per_allreduce(group: ProcessGroup, buffer: Any, iters: int) -> float:
    """Seconds per all-reduce over ``iters`` back-to-back calls; the host waits only at the end."""
    if group.cuda:
        event = group.torch.cuda.Event
        start, end = event(enable_timing=True), event(enable_timing=True)
        start.record()
        for _ in range(iters):
            group.dist.all_reduce(buffer)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1000.0 / iters
    began = time.perf_counter()
    for _ in range(iters):
        group.dist.all_reduce(buffer)
    return (time.perf_counter() - began) / iters


def measure_size(plan: AllReducePlan, group: ProcessGroup, rank: Rank, size: int) -> dict:
    """One message size: the checked all-reduce, then the timed ones; one row of the result."""
    torch, dist, world_size = group.torch, group.dist, rank.world_size
    buffer = torch.empty(size // 4, dtype=torch.float32, device=group.device)
    fill_pattern(torch, buffer, rank.rank)
    dist.all_reduce(buffer)
    correctness = check_allreduce(torch, buffer, world_size)
    buffer.zero_()  # timed calls reduce zeros: the same work, and nothing grows to inf
    estimate = seconds_per_allreduce(group, buffer, max(1, plan.warmup_iters))
    iters = iterations_for(group.across_ranks(estimate, dist.ReduceOp.MAX), plan.target_seconds)
    seconds = seconds_per_allreduce(group, buffer, iters)
    mean_s = group.across_ranks(seconds, dist.ReduceOp.SUM) / world_size
    slowest_s = group.across_ranks(seconds, dist.ReduceOp.MAX)
    bad = group.across_ranks(float(correctness.mismatches), dist.ReduceOp.SUM)
    algbw, busbw = bus_bandwidth_gbps(size, mean_s, world_size)
    print(f"[harness interconnect] {size_label(size):>10}  {iters:4d} iters  {mean_s * 1e6:12.1f} us  "
          f"algbw {algbw:8.2f}  busbw {busbw:8.2f} GB/s  {'ok' if bad == 0 else 'WRONG'}", flush=True)
    return {"size_bytes": size, "iters": iters, "time_us": mean_s * 1e6, "slowest_time_us": slowest_s * 1e6,
            "algbw_gbps": algbw, "busbw_gbps": busbw, "correct": bad == 0, "mismatches": int(bad),
            "rank0_check": correctness.describe() if rank.rank == 0 else None}


def sweep(plan: AllReducePlan, rank: Rank) -> None:
    group = start_process_group(plan.device, rank)
    torch, dist = group.torch, group.dist
    rows = []
    dist.barrier()
    group.sync()
    rank.phase.write("measure", expected_s=None)
    for size in message_sizes(plan.min_bytes, plan.max_bytes, plan.factor):
        rows.append(measure_size(plan, group, rank, size))
        rank.phase.write("measure", expected_s=None)  # heartbeat: the next size has started
    rank.phase.write("gather", expected_s=1.0)
    peers = None
    if group.cuda and rank.rank == 0:
        count = torch.cuda.device_count()
        peers = {f"{a}-{b}": bool(torch.cuda.can_device_access_peer(a, b))
                 for a in range(count) for b in range(count) if a != b}
    identities: list[Any] = [None] * rank.world_size
    dist.all_gather_object(identities, {**rank.phase.identity})
    if rank.rank == 0:
        result = {"status": "ok" if all(r["correct"] for r in rows) else "invalid", "world_size": rank.world_size,
                  "device": plan.device, "backend": dist.get_backend(), "dtype": "float32", "op": "sum",
                  "rows": rows, "ranks": identities, "torch_peer_access": peers,
                  "torch": torch.__version__,
                  "nccl": ".".join(map(str, torch.cuda.nccl.version())) if group.cuda else None}
        write_json_atomic(plan.run_dir / ALLREDUCE_RESULT_FILE, json.dumps(result, indent=1))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
