"""The soak from the launcher's side: run it (harness/launch/supervise.py) for its duration, and read
its windows, the last ones written even when the soak died."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from harness.launch.command import prepare_launch
from harness.launch.spec import SoakSpec
from harness.launch.supervise import JobResult, run_job
from harness.workloads.plan import SOAK_PROGRESS_FILE, SOAK_RESULT_FILE
from harness.workloads.soak_windows import throughput_decay


@dataclass(kw_only=True)
class SoakRun(JobResult):
    """What one soak measured, window by window (invalid: a non-finite loss), or why it stopped."""

    spec: SoakSpec
    windows: list[dict] = field(default_factory=list)
    loss_finite: bool | None = None
    sample_unit: str = "samples"

    @property
    def decay(self) -> float | None:
        return throughput_decay(self.windows)

    def to_dict(self) -> dict:
        return {"case": self.spec.case_id, "model": self.spec.model, "precision": self.spec.precision,
                "gpus": self.spec.world_size, "duration_s": self.spec.duration_s, "window_s": self.spec.window,
                "run_id": self.run_id, "status": self.status, "failure": self.failure,
                "loss_finite": self.loss_finite, "sample_unit": self.sample_unit, "windows": self.windows,
                "throughput_decay": self.decay, "elapsed_s": self.elapsed_s}


def run_soak(spec: SoakSpec, run_dir: Path, *, run_id: str) -> SoakRun:
    """Launch the soak (bounded by its duration, cleaned up) with the telemetry sampler on throughout."""
    run_dir = Path(run_dir)
    (run_dir / SOAK_PROGRESS_FILE).unlink(missing_ok=True)
    command = prepare_launch(spec, run_dir, run_id)
    outcome = run_job(spec.launch, command, run_dir, run_id, result_file=SOAK_RESULT_FILE, timeout_s=spec.timeout_s)
    if outcome.failure is None:
        result = json.loads((run_dir / SOAK_RESULT_FILE).read_text())
        return SoakRun(spec=spec, run_id=run_id, status=result["status"], windows=result["windows"],
                       loss_finite=result["loss_finite"], sample_unit=result["sample_unit"],
                       telemetry=outcome.telemetry, elapsed_s=outcome.elapsed_s,
                       failure=None if result["loss_finite"] else "non-finite loss during the soak")
    try:
        windows = json.loads((run_dir / SOAK_PROGRESS_FILE).read_text())
    except (OSError, ValueError):
        windows = []
    return SoakRun(spec=spec, run_id=run_id, status=outcome.status, windows=windows, failure=outcome.failure.reason,
                   telemetry=outcome.telemetry, elapsed_s=outcome.elapsed_s)
