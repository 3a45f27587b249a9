"""The component benchmarks from the launcher's side: the spec (every default of a component launch
lives here), the launch through harness/launch/supervise.run_job, and what it measured per GPU.

One launch runs every part on every GPU at once (torchrun, one process per GPU); the plugin judges
each GPU (and each ordered pair) from its figures in a test of its own (runner.py).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, ClassVar, Sequence

from harness.launch.command import worker_command
from harness.launch.spec import LaunchedSpec, LaunchSettings, check_positive_seconds
from harness.launch.supervise import run_job
from harness.results.job import JobResult
from harness.workloads.units import GIB, MIB
from harness.node.hardware import GpuInfo
from harness.kinds.components.arith import numa_node_of
from harness.catalog import CPU_GEMM_DTYPES, GEMM_DTYPES, GPU_GEMM_DTYPES
from harness.kinds.components.plan import (COMPONENTS_RESULT_FILE, PARTS, ComponentSizes, ComponentsPlan,
                                               GpuPlacement, write_components_plan)
from harness.workloads.plan import PLAN_FILE


# GPU: the sizes of the lead's H100 probe (docs/components.md).
GPU_SIZES = ComponentSizes(
    # 8192^3: large enough to run the tensor cores at their settled rate (1.6 ms a product on H100);
    # 3 s of warm-up lets the clocks settle under the power cap before the 3 s that are measured.
    gemm_dtypes=GPU_GEMM_DTYPES, gemm_size=8192, gemm_warmup_seconds=3.0, gemm_measure_seconds=3.0,
    block_seconds=0.25, hbm_bytes=4 * GIB, host_bytes=1 * GIB, peer_bytes=256 * MIB, latency_bytes=4,
    bandwidth_seconds=0.5, peer_seconds=0.25)
CPU_SIZES = ComponentSizes(
    # Seconds in all on a 2-core CI VM; memory traffic well beyond its caches (64 MiB).
    gemm_dtypes=CPU_GEMM_DTYPES, gemm_size=512, gemm_warmup_seconds=0.3, gemm_measure_seconds=1.0,
    block_seconds=0.1, hbm_bytes=64 * MIB, host_bytes=0, peer_bytes=0, latency_bytes=0, bandwidth_seconds=0.5,
    peer_seconds=0.25)


def placements_of(gpus: Sequence[GpuInfo]) -> tuple[GpuPlacement, ...]:
    """Each local rank's GPU (CUDA order) and its NUMA node from sysfs, as the ranks will bind to it."""
    found = []
    for local_rank, gpu in enumerate(gpus):
        node, why = numa_node_of(gpu.pci_bus_id)
        found.append(GpuPlacement(local_rank=local_rank, pci_bus_id=gpu.pci_bus_id, numa_node=node,
                                  numa_node_note=why))
    return tuple(found)


@dataclass(frozen=True, kw_only=True, slots=True)
class ComponentsSpec(LaunchedSpec):
    """The component benchmarks on ``launch.gpus_per_node`` GPUs (one CPU rank on a CPU profile)."""

    worker_module: ClassVar[str] = "harness.kinds.components.worker"
    launch: LaunchSettings
    sizes: ComponentSizes
    parts: tuple[str, ...] = PARTS
    placements: tuple[GpuPlacement, ...] = ()

    def __post_init__(self) -> None:
        unknown = [p for p in self.parts if p not in PARTS]
        if unknown or not self.parts:
            raise ValueError(f"parts {self.parts}: each must be one of {', '.join(PARTS)}")
        bad = [d for d in self.sizes.gemm_dtypes if d not in GEMM_DTYPES]
        if bad:
            raise ValueError(f"GEMM dtypes {bad} unknown; known: {', '.join(GEMM_DTYPES)}")
        check_positive_seconds(self.sizes, "gemm_warmup_seconds", "gemm_measure_seconds", "block_seconds",
                               "bandwidth_seconds", "peer_seconds")

    @property
    def case_id(self) -> str:
        return f"components-{self.gpus_per_node}gpu"

    def plan(self, run_dir: Path, run_id: str) -> ComponentsPlan:
        return ComponentsPlan(device=self.device, parts=self.parts, sizes=self.sizes, placements=self.placements,
                              run_dir=Path(run_dir), run_id=run_id)


def node_components_spec(device: str, gpus: Sequence[GpuInfo], launch: Callable[[int], LaunchSettings], *,
                         gemm_dtypes: tuple[str, ...] = GPU_GEMM_DTYPES, peer: bool = True) -> ComponentsSpec:
    """The component launch of a node, as acceptance and calibrate run it: every GPU at once with the GPU
    sizes; on a CPU profile one rank, GEMM and memory only (its figures are a self-check). ``launch`` gives
    the LaunchSettings for a number of GPUs (ranks); ``gemm_dtypes`` and ``peer`` narrow a GPU launch to
    what the session judges (each GEMM dtype costs its warm-up and window; the peer matrix n x (n - 1) pairs)."""
    if device == "cuda":
        parts = tuple(part for part in PARTS if peer or part != "peer")
        return ComponentsSpec(launch=launch(len(gpus)), sizes=dataclasses.replace(GPU_SIZES, gemm_dtypes=gemm_dtypes),
                              placements=placements_of(gpus), parts=parts)
    return ComponentsSpec(launch=launch(1), sizes=CPU_SIZES, parts=("gemm", "hbm"))


@dataclass(kw_only=True)
class ComponentsRun(JobResult):
    """What one component launch measured: rank 0's components.json, or why there is none."""

    result: dict = field(default_factory=dict)

    def rank_of_gpu(self, index: int, uuid: str | None = None) -> dict | None:
        """The figures of the rank on the GPU of ``uuid`` (else of NVML index ``index``), or of CPU rank ``index``."""
        ranks = self.result.get("ranks") or []
        for rank in ranks:
            if uuid is not None and rank.get("gpu_uuid") == uuid:
                return rank
        for rank in ranks:
            if rank.get("gpu_uuid") is None and rank.get("gpu_index") == index:
                return rank
            if rank.get("gpu_uuid") is None and rank.get("gpu_index") is None and rank.get("rank") == index:
                return rank
        return None

    def to_dict(self) -> dict:
        return {**self.outcome_dict(), "result": self.result}


def run_components(spec: ComponentsSpec, run_dir: Path, *, run_id: str) -> ComponentsRun:
    """Launch the component benchmarks through torchrun (bounded, cleaned up) with telemetry beside them."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    plan_path = run_dir / PLAN_FILE
    write_components_plan(plan_path, spec.plan(run_dir, run_id))
    command = worker_command(spec.worker_module, plan_path, spec.launch)
    outcome = run_job(spec.launch, command, run_dir, run_id, result_file=COMPONENTS_RESULT_FILE)
    if outcome.failure is None:
        result = json.loads((run_dir / COMPONENTS_RESULT_FILE).read_text())
        return ComponentsRun(run_id=run_id, status=result["status"], result=result, telemetry=outcome.telemetry,
                             elapsed_s=outcome.elapsed_s)
    return ComponentsRun(run_id=run_id, status=outcome.status, failure=outcome.failure,
                         telemetry=outcome.telemetry, elapsed_s=outcome.elapsed_s)
