"""What one soak runs: written once by the launcher (harness/kinds/soak/spec.py, where the defaults live) through
harness/workloads/plan.py's write_plan, read once by every rank; and the files its rank 0 leaves."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.workloads.plan import Device

SOAK_RESULT_FILE = "soak.json"
SOAK_PROGRESS_FILE = "soak_windows.json"
"""The soak's windows so far, rewritten after every window: a soak that dies still shows how far it got."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SoakPlan:
    """One burn-in: a training case for ``duration_seconds``, in windows of ``window_seconds``."""

    model: str
    precision: str
    batch_size_per_gpu: int
    device: Device
    duration_seconds: float
    window_seconds: float
    warmup_seconds: float
    run_dir: Path
    run_id: str

    def planned_steps(self) -> list[tuple[str, float]]:
        """The burn-in as one step: its warmup and its duration."""
        return [(f"soak {self.model} {self.precision}", self.warmup_seconds + self.duration_seconds)]
