"""The soak from the launcher's side: what one burn-in is (``SoakSpec``, with its ``LaunchSettings``), validated
when it is made, resolving into the plan its worker reads (harness/kinds/soak/plan.py): ``spec.plan(run_dir,
run_id)``. The session's soak is built from the profile and ``--soak`` by the kind's runner (runner.py
``soak_spec``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from harness.durations import WARMUP_SECONDS
from harness.kinds.soak.plan import SoakPlan
from harness.launch.spec import LaunchedSpec, LaunchSettings, check_model_and_precision, check_positive_seconds
from harness.kinds.soak.windows import window_seconds


@dataclass(frozen=True, kw_only=True, slots=True)
class SoakSpec(LaunchedSpec):
    """One soak: a training case on the launch's GPUs for ``duration_s``."""

    worker_module: ClassVar[str] = "harness.kinds.soak.worker"
    model: str
    precision: str
    batch_size_per_gpu: int
    duration_s: float
    launch: LaunchSettings
    warmup_seconds: float = WARMUP_SECONDS
    window_s: float | None = None
    """None: window_seconds(duration_s)."""

    def __post_init__(self) -> None:
        check_model_and_precision(self.model, self.precision)
        if self.batch_size_per_gpu < 1:
            raise ValueError(f"batch_size_per_gpu must be >= 1, got {self.batch_size_per_gpu}")
        check_positive_seconds(self, "duration_s", "warmup_seconds")

    @property
    def window(self) -> float:
        return self.window_s if self.window_s is not None else window_seconds(self.duration_s)

    @property
    def timeout_s(self) -> float:
        """The whole soak, its warmup, start-up and one window of slack (hang detection acts sooner)."""
        return self.duration_s + self.window + 4 * self.warmup_seconds + self.launch.setup_timeout_s

    @property
    def case_id(self) -> str:
        return f"soak-{self.model}-{self.precision}-{self.gpus_per_node}gpu"

    def plan(self, run_dir: Path, run_id: str) -> SoakPlan:
        return SoakPlan(model=self.model, precision=self.precision, batch_size_per_gpu=self.batch_size_per_gpu,
                        device=self.device, duration_seconds=self.duration_s, window_seconds=self.window,
                        warmup_seconds=self.warmup_seconds, run_dir=Path(run_dir), run_id=run_id)
