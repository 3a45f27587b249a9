"""One benchmark case, launched alone: a record always, written once by each side.

The worker's rank 0 writes the measured record to <run_dir>/record.json; the launcher adds what
only it knows (the launch's wall time, the telemetry of the window) and writes the final record
over it, once. When the worker could not write one, the launcher writes a failure record there
instead. Either way <run_dir>/record.json is the record ``run_benchmark`` returns.
"""

from __future__ import annotations

import dataclasses
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from harness.launch.command import Rendezvous, make_run_id, prepare_launch, slurm_launch
from harness.launch.spec import BenchmarkSpec
from harness.launch.supervise import JobOutcome, run_job
from harness.results.overrides import find_overrides
from harness.records import RunRecord, read_record, write_record
from harness.results.job import Failure, Status
from harness.workloads.plan import RECORD_FILE


def run_benchmark(spec: BenchmarkSpec, run_dir: Path, *, run_id: str | None = None,
                  rendezvous: Rendezvous | None = None) -> RunRecord:
    """Launch, wait (bounded), clean up, and return the run record: a failure is a record, not an exception.

    One node: torchrun --standalone. Several: srun + torchrun with a c10d rendezvous in the Slurm
    job (slurm_launch), unless the caller gives the rendezvous.
    """
    run_id = run_id or make_run_id(spec)
    run_dir = Path(run_dir)
    prefix: list[str] = []
    if spec.nodes > 1 and rendezvous is None:
        prefix, rendezvous = slurm_launch(spec.launch, run_id)
    command = prefix + prepare_launch(spec, run_dir, run_id, rendezvous)
    outcome = run_job(spec.launch, command, run_dir, run_id, result_file=RECORD_FILE)
    return record_of_launch(spec, run_id, run_dir, outcome)


def record_of_launch(spec: BenchmarkSpec, run_id: str, run_dir: Path, outcome: JobOutcome) -> RunRecord:
    """The final record of one case launched alone, written to <run_dir>/record.json: the worker's,
    with the launch's wall time and telemetry, when it finished; else a failure record saying why."""
    record_path = run_dir / RECORD_FILE
    if outcome.failure is None:
        record = read_record(record_path)
        record = dataclasses.replace(record, phases_s={**record.phases_s, "launch_total": outcome.elapsed_s},
                                     telemetry=outcome.telemetry)
    else:
        record = failure_record(spec, run_id, status=outcome.status, failure=outcome.failure,
                                elapsed_s=outcome.elapsed_s, phases=outcome.phases, telemetry=outcome.telemetry)
    write_record(record_path, record)
    return record


def failure_record(spec: BenchmarkSpec, run_id: str, *, status: Status, failure: Failure, elapsed_s: float,
                   phases: dict[int, dict], telemetry: dict[str, Any] | None = None) -> RunRecord:
    """The record of a case whose worker wrote none: who it was, why it failed, which hosts it reached."""
    return RunRecord(
        run_id=run_id, model=spec.model, precision=spec.precision, scaling=spec.scaling,
        world_size=spec.training_world_size, nodes=spec.nodes, device_kind=spec.device,
        batch_size_per_gpu=spec.per_gpu_batch, global_batch_size=spec.per_gpu_batch * spec.training_world_size,
        independent=spec.independent,
        compile=spec.compile, status=status, failure=failure,
        phases_s={"launch_total": elapsed_s},
        hosts=tuple(dict.fromkeys(info["host"] for info in phases.values() if info.get("host"))),
        finished_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        telemetry=telemetry,
        overrides=find_overrides({**os.environ, **spec.launch.extra_env}),  # what the ranks ran with
    )
