"""The all-reduce sweep from the launcher's side: what one sweep is (``AllReduceSpec``, with its
``LaunchSettings``), validated when it is made, resolving into the plan its worker reads
(harness/kinds/interconnect/plan.py): ``spec.plan(run_dir, run_id)``. The session's sweep is built from
the profile and the command line by the kind's runner (runner.py ``allreduce_spec``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from harness.kinds.interconnect.busbw import message_sizes
from harness.kinds.interconnect.plan import AllReducePlan
from harness.launch.spec import LaunchedSpec, LaunchSettings, check_positive_seconds
from harness.workloads.units import GIB, MIB

ALLREDUCE_SWEEP = {
    # (smallest message bytes, size factor between messages, seconds timed per message)
    "cuda": (MIB, 2, 0.2),
    "cpu": (64 * 1024, 4, 0.1),  # gloo is slow: fewer, shorter steps keep the sweep to seconds
}
"""The session's sweep on each device (runner.py ``allreduce_spec``); its largest message: busbw.default_max_bytes."""


@dataclass(frozen=True, kw_only=True, slots=True)
class AllReduceSpec(LaunchedSpec):
    """One all-reduce sweep on the launch's GPUs (or CPU ranks)."""

    worker_module: ClassVar[str] = "harness.kinds.interconnect.worker"
    launch: LaunchSettings
    min_bytes: int = 1 * MIB
    max_bytes: int = 8 * GIB
    factor: int = 2
    target_seconds: float = 0.2
    """Timed seconds per message size."""
    warmup_iters: int = 3
    """Untimed all-reduces per size, whose time sets the timed iteration count."""

    def __post_init__(self) -> None:
        check_positive_seconds(self, "target_seconds")
        if self.warmup_iters < 1:
            raise ValueError(f"warmup_iters must be >= 1, got {self.warmup_iters}")
        message_sizes(self.min_bytes, self.max_bytes, self.factor)  # raises ValueError naming the values

    @property
    def case_id(self) -> str:
        return f"allreduce-{self.gpus_per_node}gpu"

    def plan(self, run_dir: Path, run_id: str) -> AllReducePlan:
        return AllReducePlan(device=self.device, min_bytes=self.min_bytes, max_bytes=self.max_bytes, factor=self.factor,
                             target_seconds=self.target_seconds, warmup_iters=self.warmup_iters, run_dir=Path(run_dir),
                             run_id=run_id)
