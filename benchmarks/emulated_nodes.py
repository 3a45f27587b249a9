"""Several "nodes" on one host: one torchrun agent per node meeting at a c10d rendezvous, as srun starts them.

    python benchmarks/emulated_nodes.py --model resnet152 --precision bf16 --nodes 2 --gpus-per-node 2 \
        --batch 256 --out out/nodes

Three launches through the harness launcher (harness.launch.supervise.run_job: the same time bounds,
process sweep and records as every test):

1. 1 GPU, the weak-scaling baseline;
2. nodes x gpus-per-node GPUs as one node (torchrun --standalone);
3. the same GPUs as ``--nodes`` torchrun agents with ``--nnodes`` and ``--rdzv-backend=c10d`` on a
   localhost endpoint: the multi-node launch of docs/slurm.md, less srun and the network between hosts.

Each agent sees every GPU, rotated (agent 1 of 2x2: CUDA_VISIBLE_DEVICES=2,3,0,1), so its local
ranks land on GPUs of their own while NCCL still sees every peer and picks the same NVLink paths as
launch 2; hiding the peers would push NCCL onto shared memory and measure something else.

Prints per-GPU throughput and weak-scaling efficiency of launches 2 and 3 and their difference in
points (issue 7 asks for at most 1). Exit status 0 when both launches succeeded, whatever the
difference; the numbers are for a person to read.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import socket
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from harness.launch.benchmark import record_of_launch, run_benchmark  # noqa: E402
from harness.launch.command import Rendezvous, prepare_launch  # noqa: E402
from harness.launch.spec import BenchmarkSpec, LaunchSettings  # noqa: E402
from harness.launch.supervise import run_job  # noqa: E402
from harness.workloads.plan import RECORD_FILE  # noqa: E402
from harness.records import RunRecord, write_record  # noqa: E402


def rotated_devices(node: int, gpus_per_node: int, nodes: int) -> str:
    """CUDA_VISIBLE_DEVICES of agent ``node``: all GPUs, its own first."""
    total = gpus_per_node * nodes
    first = node * gpus_per_node
    return ",".join(str(i) for i in [*range(first, total), *range(first)])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def agents_command(spec: BenchmarkSpec, run_dir: Path, run_id: str) -> list[str]:
    """One bash command starting ``spec.nodes`` torchrun agents; it fails when any agent fails."""
    rendezvous = Rendezvous(endpoint=f"127.0.0.1:{free_port()}", run_id=run_id)
    agent = shlex.join(prepare_launch(spec, run_dir, run_id, rendezvous))
    lines, waits = [], []
    for node in range(spec.nodes):
        devices = (f"CUDA_VISIBLE_DEVICES={rotated_devices(node, spec.gpus_per_node, spec.nodes)} "
                   if spec.device == "cuda" else "")
        lines.append(f"{devices}{agent} > {shlex.quote(str(run_dir / f'agent{node}.log'))} 2>&1 & pid{node}=$!")
        waits.append(f"wait $pid{node} || rc=$?")
    return ["bash", "-c", "\n".join(["rc=0", *lines, *waits, "exit $rc"])]


def run_as_nodes(spec: BenchmarkSpec, run_dir: Path) -> RunRecord:
    run_id = f"{spec.case_id}-emulated-{uuid.uuid4().hex[:8]}"
    outcome = run_job(spec.launch, agents_command(spec, run_dir, run_id), run_dir, run_id, result_file=RECORD_FILE)
    return record_of_launch(spec, run_id, run_dir, outcome)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--precision", default="bf16")
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--gpus-per-node", type=int, default=2)
    p.add_argument("--batch", type=int, required=True, help="per-GPU batch (weak scaling)")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--warmup", type=float, default=3.0)
    p.add_argument("--measure", type=float, default=6.0)
    p.add_argument("--out", type=Path, required=True)
    ns = p.parse_args()

    def spec(gpus_per_node: int, nodes: int) -> BenchmarkSpec:
        # On CPU the launcher shares the cores among one agent's ranks; the agents here share one host.
        threads = {"OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // (gpus_per_node * nodes)))}
        return BenchmarkSpec(model=ns.model, precision=ns.precision, batch_size_per_gpu=ns.batch,
                             warmup_seconds=ns.warmup, measure_seconds=ns.measure,
                             launch=LaunchSettings(gpus_per_node=gpus_per_node, nodes=nodes, device=ns.device,
                                                   timeout_s=600, extra_env=threads if ns.device == "cpu" else {}))

    world = ns.nodes * ns.gpus_per_node
    launches = {
        "1gpu": run_benchmark(spec(1, 1), ns.out / "1gpu"),
        f"1x{world}gpu": run_benchmark(spec(world, 1), ns.out / f"1x{world}gpu"),
        f"{ns.nodes}x{ns.gpus_per_node}gpu": run_as_nodes(spec(ns.gpus_per_node, ns.nodes),
                                                        ns.out / f"{ns.nodes}x{ns.gpus_per_node}gpu"),
    }
    summary = {}
    for name, record in launches.items():
        write_record(ns.out / f"{name}.json", record)
        if not record.ok:
            print(f"{name}: {record.status}: {record.failure.reason if record.failure else ''}")
            return 1
        base = launches["1gpu"].throughput_per_gpu
        efficiency = record.throughput_per_gpu / base
        summary[name] = {"throughput_per_gpu": record.throughput_per_gpu, "ci95_rel": record.throughput_ci95_rel,
                         "efficiency": efficiency, "world_size": record.world_size, "nodes": record.nodes,
                         "hosts": list(record.hosts)}
        print(f"{name}: {record.world_size} ranks on {record.nodes} node(s): {record.throughput_per_gpu:,.1f} "
              f"{record.sample_unit}/s per GPU (CI95 ±{(record.throughput_ci95_rel or 0) * 100:.2f} %), "
              f"efficiency {efficiency:.4f}")
    one_node, many = summary[f"1x{world}gpu"], summary[f"{ns.nodes}x{ns.gpus_per_node}gpu"]
    points = (many["efficiency"] - one_node["efficiency"]) * 100
    print(f"{ns.nodes} agents vs 1 node, {world} GPUs: efficiency {many['efficiency']:.4f} vs "
          f"{one_node['efficiency']:.4f} = {points:+.2f} points")
    (ns.out / "summary.json").write_text(json.dumps({**summary, "difference_points": points}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
