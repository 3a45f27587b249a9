"""The component benchmarks under torchrun: one process per GPU (per CPU rank on a CPU profile).

    python -m harness.kinds.components.worker --plan PLAN.json

Each rank binds itself to its GPU's NUMA node's CPUs where sysfs names one (and says so where it
does not), then, every GPU at once: dense GEMM per dtype, HBM copy and read-modify-write; host<->GPU
bandwidth each GPU alone (the ranks take turns) and all at once; and rank 0 alone the peer matrix
over every ordered pair of the node's GPUs. The ranks meet on a gloo group, so a waiting GPU runs
no NCCL kernel beside a measured one. Rank 0 gathers every rank's figures into components.json.

torch comes from the process group (harness.rank.start_process_group imports it), so this module
stays light until the rank is set up.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from harness.rank import ProcessGroup, Rank, gpu_uuid, physical_gpu_index, run_rank, start_process_group
from harness.files import write_json_atomic
from harness.kinds.components import kernels
from harness.kinds.components.arith import node_cpus
from harness.kinds.components.plan import COMPONENTS_RESULT_FILE, ComponentsPlan, read_components_plan
from harness.workloads.plan import plan_argument

MODULE = "harness.kinds.components.worker"


def bind_to_numa_node(plan: ComponentsPlan, local_rank: int) -> dict:
    """Pin this process to its GPU's NUMA node's CPUs where known; what was used, and why, either way."""
    placement = next((p for p in plan.placements if p.local_rank == local_rank), None)
    before = sorted(os.sched_getaffinity(0))
    if placement is None or placement.numa_node is None:
        why = placement.numa_node_note if placement is not None else "no placement for this rank (a CPU run)"
        return {"numa_node": None, "cpu_affinity": before, "bound": False, "binding_note": f"not bound: {why}"}
    cpus, why = node_cpus(placement.numa_node)
    usable = sorted(set(cpus) & set(before))
    if not usable:
        return {"numa_node": placement.numa_node, "cpu_affinity": before, "bound": False,
                "binding_note": f"not bound: NUMA node {placement.numa_node} has no CPU this process may use "
                                f"({why or f'node CPUs {cpus}, allowed {before}'})"}
    os.sched_setaffinity(0, usable)
    return {"numa_node": placement.numa_node, "cpu_affinity": usable, "bound": True,
            "binding_note": f"bound to NUMA node {placement.numa_node}'s CPUs"}


def _phase(rank: Rank, name: str, expected_s: float) -> None:
    rank.phase.write(name, expected_s=expected_s)


def _host_link(plan: ComponentsPlan, group: ProcessGroup, rank: Rank, barrier: Any) -> dict:
    """Each GPU alone (one rank at a time, the others waiting), then all at once."""
    one_s = 2 * (plan.sizes.bandwidth_seconds + 0.5)
    alone = None
    for turn in range(rank.world_size):
        _phase(rank, "host_alone", expected_s=one_s * (rank.world_size - turn) + 5)
        if turn == rank.rank:
            alone = kernels.host_link(group.torch, group.device, plan.sizes.host_bytes, plan.sizes.bandwidth_seconds)
        barrier()
    _phase(rank, "host_concurrent", expected_s=one_s + 5)
    concurrent = kernels.host_link(group.torch, group.device, plan.sizes.host_bytes, plan.sizes.bandwidth_seconds)
    barrier()
    return {"alone": alone, "concurrent": concurrent}


def _peer_matrix(plan: ComponentsPlan, group: ProcessGroup) -> dict:
    """Rank 0: every ordered pair of the node's GPUs."""
    torch = group.torch
    count = torch.cuda.device_count()
    devices = [torch.device("cuda", i) for i in range(count)]
    labels = [{"index": physical_gpu_index(i), "uuid": gpu_uuid(torch, d)} for i, d in enumerate(devices)]
    rows = kernels.peer_matrix(torch, devices, labels, torch.cuda.can_device_access_peer, nbytes=plan.sizes.peer_bytes,
                               latency_bytes=plan.sizes.latency_bytes, seconds=plan.sizes.peer_seconds)
    return {"gpus": labels, "pairs": rows}


def measure(plan: ComponentsPlan, rank: Rank) -> None:
    binding = bind_to_numa_node(plan, rank.local_rank) if plan.device == "cuda" else {
        "numa_node": None, "cpu_affinity": sorted(os.sched_getaffinity(0)), "bound": False,
        "binding_note": "not bound: a CPU run"}
    group = start_process_group(plan.device, rank)
    dist = group.dist
    # The ranks wait for each other on gloo: an NCCL barrier would spin a kernel on a waiting GPU.
    host_group = dist.new_group(backend="gloo") if group.cuda else None

    def barrier() -> None:
        dist.barrier(group=host_group)

    mine: dict[str, Any] = {"rank": rank.rank, "local_rank": rank.local_rank, "host": group.host,
                            "gpu_index": group.gpu_index, "gpu_uuid": group.gpu_uuid,
                            "device_name": group.device_name, **binding}
    barrier()
    if "gemm" in plan.parts:
        sizes = plan.sizes
        per_dtype_s = sizes.gemm_warmup_seconds + sizes.gemm_measure_seconds + 5
        # "measure": the telemetry sampler records while a rank is in it, so the GEMMs' window is sampled.
        _phase(rank, "measure", expected_s=per_dtype_s * len(sizes.gemm_dtypes))
        mine["gemm"] = {dtype: kernels.gemm(group.torch, group.device, dtype, sizes.gemm_size,
                                            warmup_s=sizes.gemm_warmup_seconds, measure_s=sizes.gemm_measure_seconds,
                                            block_s=sizes.block_seconds) for dtype in sizes.gemm_dtypes}
        barrier()
    if "hbm" in plan.parts:
        _phase(rank, "hbm", expected_s=4 * plan.sizes.bandwidth_seconds + 10)
        mine["hbm"] = kernels.hbm(group.torch, group.device, plan.sizes.hbm_bytes, plan.sizes.bandwidth_seconds)
        barrier()
    if "host" in plan.parts and group.cuda:
        mine["host_link"] = _host_link(plan, group, rank, barrier)
    peer = None
    if "peer" in plan.parts and group.cuda:
        count = group.torch.cuda.device_count()
        _phase(rank, "peer", expected_s=count * count * 2 * (plan.sizes.peer_seconds + 0.5) + 10)
        if rank.rank == 0 and count > 1:
            peer = _peer_matrix(plan, group)
        barrier()
    _phase(rank, "gather", expected_s=5)
    everyone: list[Any] = [None] * rank.world_size
    dist.all_gather_object(everyone, mine, group=host_group)
    if rank.rank == 0:
        result = {"status": "ok", "device": plan.device, "world_size": rank.world_size,
                  "torch": group.torch.__version__, "ranks": everyone, "peer": peer,
                  "gpu_count": group.torch.cuda.device_count() if group.cuda else 0}
        write_json_atomic(plan.run_dir / COMPONENTS_RESULT_FILE, json.dumps(result, indent=1))
    barrier()
    dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    plan = read_components_plan(plan_argument(argv, MODULE))
    return run_rank("components", plan.run_dir, lambda rank: measure(plan, rank))


if __name__ == "__main__":
    sys.exit(main())
