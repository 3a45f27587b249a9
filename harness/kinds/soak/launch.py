"""The soak from the launcher's side: run it (harness/launch/supervise.py) for its duration, report its
state every minute while it runs, and read its windows, the last ones written even when the soak died."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from harness.catalog import MODELS

from harness.launch.command import prepare_launch
from harness.launch.heartbeat import every
from harness.launch.supervise import run_job
from harness.results.job import Failure, JobResult
from harness.kinds.soak.plan import SOAK_PROGRESS_FILE, SOAK_RESULT_FILE
from harness.kinds.soak.spec import SoakSpec
from harness.kinds.soak.windows import throughput_decay, window_count

PROGRESS_PERIOD_S = 60.0
"""How often a running soak's state is reported: often enough to show it is alive, seldom enough for hours."""


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
                **self.outcome_dict(), "loss_finite": self.loss_finite, "sample_unit": self.sample_unit,
                "windows": self.windows, "throughput_decay": self.decay}


def run_soak(spec: SoakSpec, run_dir: Path, *, run_id: str, on_progress: Callable[[str], None] | None = None,
             progress_period_s: float = PROGRESS_PERIOD_S) -> SoakRun:
    """Launch the soak (bounded by its duration, cleaned up) with the telemetry sampler on throughout;
    every ``progress_period_s`` while it runs, ``on_progress`` gets a line saying how far it is."""
    run_dir = Path(run_dir)
    (run_dir / SOAK_PROGRESS_FILE).unlink(missing_ok=True)
    command = prepare_launch(spec, run_dir, run_id)
    with reporting_progress(spec, run_dir, on_progress, progress_period_s):
        outcome = run_job(spec.launch, command, run_dir, run_id, result_file=SOAK_RESULT_FILE,
                          timeout_s=spec.timeout_s)
    if outcome.failure is None:
        result = json.loads((run_dir / SOAK_RESULT_FILE).read_text())
        return SoakRun(spec=spec, run_id=run_id, status=result["status"], windows=result["windows"],
                       loss_finite=result["loss_finite"], sample_unit=result["sample_unit"],
                       telemetry=outcome.telemetry, elapsed_s=outcome.elapsed_s,
                       failure=None if result["loss_finite"] else Failure(reason="non-finite loss during the soak"))
    windows = windows_so_far(run_dir)
    return SoakRun(spec=spec, run_id=run_id, status=outcome.status, windows=windows, failure=outcome.failure,
                   telemetry=outcome.telemetry, elapsed_s=outcome.elapsed_s)


def windows_so_far(run_dir: Path) -> list[dict]:
    """The windows the soak's rank 0 wrote so far (none yet, or unreadable: [])."""
    try:
        return json.loads((run_dir / SOAK_PROGRESS_FILE).read_text())
    except (OSError, ValueError):
        return []


def progress_line(spec: SoakSpec, windows: list[dict], elapsed_s: float) -> str:
    """``soak resnet50 bf16 on 4 GPUs: 12 of 240 min, window 3/48 at 1,234.5 images/s (first 1,240.1)``."""
    total = window_count(spec.duration_s, spec.window)
    head = (f"soak {spec.model} {spec.precision} on {spec.world_size} {'GPU' if spec.device == 'cuda' else 'rank'}"
            f"{'' if spec.world_size == 1 else 's'}: {elapsed_s / 60:.0f} of {spec.duration_s / 60:.0f} min")
    if not windows:
        return f"{head}, warming up (no window measured yet)"
    unit = f"{MODELS[spec.model].sample_unit}/s"
    last, first = windows[-1]["throughput"], windows[0]["throughput"]
    decay = throughput_decay(windows)
    return (f"{head}, window {len(windows)}/{total} at {last:,.1f} {unit} (first {first:,.1f}"
            f"{f', decay {decay:.1%}' if decay is not None else ''})")


@contextmanager
def reporting_progress(spec: SoakSpec, run_dir: Path, on_progress: Callable[[str], None] | None,
                        period_s: float) -> Iterator[None]:
    """While the block runs, a thread hands ``on_progress`` the soak's state every ``period_s``."""
    if on_progress is None:
        yield
        return
    with every(period_s, lambda elapsed_s: on_progress(progress_line(spec, windows_so_far(run_dir), elapsed_s)),
               name="soak-progress"):
        yield
