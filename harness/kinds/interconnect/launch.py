"""The all-reduce sweep from the launcher's side: run it (harness/launch/supervise.py), read what it
measured, and the session's summary of every sweep for the report."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from harness.launch.command import launch_command
from harness.launch.prestart import Started
from harness.launch.supervise import run_job
from harness.results.job import JobResult
from harness.workloads.plan import PLAN_FILE, write_plan
from harness.kinds.interconnect.plan import ALLREDUCE_RESULT_FILE
from harness.kinds.interconnect.spec import AllReduceSpec


@dataclass(kw_only=True)
class AllReduceRun(JobResult):
    """What one sweep measured (invalid: a wrong sum), or why it has no measurement."""

    gpus: int
    rows: list[dict] = field(default_factory=list)
    result: dict = field(default_factory=dict)
    """Rank 0's allreduce.json: backend, NCCL version, peer access, every rank's identity."""

    @property
    def largest(self) -> dict | None:
        return max(self.rows, key=lambda r: r["size_bytes"]) if self.rows else None

    def to_dict(self) -> dict:
        return {"gpus": self.gpus, **self.outcome_dict(), "rows": self.rows, "telemetry": self.telemetry,
                "backend": self.result.get("backend"), "nccl": self.result.get("nccl"),
                "torch_peer_access": self.result.get("torch_peer_access"), "ranks": self.result.get("ranks")}


def run_allreduce(spec: AllReduceSpec, run_dir: Path, *, run_id: str, started: Started | None = None) -> AllReduceRun:
    """Launch the sweep through torchrun (bounded, cleaned up) with the telemetry sampler beside it; ``started``:
    this launch, started before its turn (harness/launch/prestart.py), taken when it is this one, else stopped."""
    run_dir = Path(run_dir)
    command = launch_command(spec, run_dir)
    process = started.adopt(spec.launch, command, run_dir, run_id) if started is not None else None
    write_plan(run_dir / PLAN_FILE, spec.plan(run_dir, run_id))  # a launch started early begins here
    outcome = run_job(spec.launch, command, run_dir, run_id, result_file=ALLREDUCE_RESULT_FILE,
                      started_process=process)
    if outcome.failure is None:
        result = json.loads((run_dir / ALLREDUCE_RESULT_FILE).read_text())
        return AllReduceRun(gpus=spec.world_size, run_id=run_id, status=result["status"], rows=result["rows"],
                            telemetry=outcome.telemetry, result=result, elapsed_s=outcome.elapsed_s)
    return AllReduceRun(gpus=spec.world_size, run_id=run_id, status=outcome.status, failure=outcome.failure,
                        telemetry=outcome.telemetry, elapsed_s=outcome.elapsed_s)


def session_summary(runs: dict[int, AllReduceRun], topology: dict | None) -> dict:
    """``harness["interconnect"]`` of report.json / session.json (the shape docs/report.md describes)."""
    rows = [{"gpus": gpus, **{k: row[k] for k in ("size_bytes", "busbw_gbps", "algbw_gbps", "time_us", "correct")}}
            for gpus, run in sorted(runs.items()) for row in run.rows]
    return {"allreduce": rows, "runs": {str(g): {k: v for k, v in run.to_dict().items() if k != "telemetry"}
                                        for g, run in sorted(runs.items())},
            "topology": topology}
