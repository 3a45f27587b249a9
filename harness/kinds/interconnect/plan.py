"""What one all-reduce sweep runs: written once by the launcher (harness/kinds/interconnect/spec.py, where the
defaults live) through harness/workloads/plan.py's write_plan, read once by every rank; and the result file rank
0 leaves."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.kinds.interconnect.busbw import message_sizes
from harness.workloads.plan import Device

ALLREDUCE_RESULT_FILE = "allreduce.json"


@dataclass(frozen=True, kw_only=True, slots=True)
class AllReducePlan:
    """One all-reduce bus-bandwidth sweep: message sizes min_bytes, × factor, ... up to max_bytes."""

    device: Device
    min_bytes: int
    max_bytes: int
    factor: int
    target_seconds: float
    """Timed seconds per message size."""
    warmup_iters: int
    run_dir: Path
    run_id: str

    def planned_steps(self) -> list[tuple[str, float]]:
        """The sweep as one step: its timed seconds per message size."""
        return [("all-reduce sweep", len(message_sizes(self.min_bytes, self.max_bytes, self.factor))
                 * self.target_seconds)]
