"""How any job ended, one shape for every kind: its status and, when it has no good result, a typed
``Failure``. A DDP case's ``RunRecord`` (harness/records.py) carries these two as its own fields; the jobs that
write a result of their own (the all-reduce sweep, the component benchmarks, the soak) subclass ``JobResult``
and add what they measured. Readers act on ``failure.reason`` whatever the job was."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["ok", "failed", "timeout", "invalid"]
"""ok: finished with a valid result; invalid: it ran, but its result is wrong (a wrong sum, a non-finite loss);
failed: it stopped before a result; timeout: stopped at its time limit or for making no progress."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Failure:
    reason: str
    """One line a person can act on, e.g. 'rank 1 (host a, GPU 3) exited with signal SIGKILL'."""
    phase: str | None = None
    """Where it happened: setup, warmup, measure, report."""
    rank: int | None = None
    log_tails: dict[str, str] = field(default_factory=dict)
    """Last lines of each rank's log (and the launcher's), keyed by log name."""


@dataclass(kw_only=True)
class JobResult:
    """What a job that writes its own result measured (its subclass's fields), or why it did not."""

    run_id: str
    status: Status
    failure: Failure | None = None
    telemetry: dict | None = None
    """The telemetry sampler's summary of the launch (read it with harness.results.telemetry_summary)."""
    elapsed_s: float | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def why(self) -> str:
        """The failure's reason; empty when there is none."""
        return self.failure.reason if self.failure is not None else ""

    def outcome_dict(self) -> dict[str, Any]:
        """The fields every job's JSON shares, the failure as a run record writes it."""
        return {"run_id": self.run_id, "status": self.status,
                "failure": dataclasses.asdict(self.failure) if self.failure is not None else None,
                "elapsed_s": self.elapsed_s}


def failure_reason(value: object) -> str:
    """A stored failure's reason: a failure as written since 2026-11-27 ({"reason": ...}), or the bare line that
    sessions of the all-reduce, component and soak jobs wrote before; empty for none."""
    if isinstance(value, dict):
        reason = value.get("reason")
        return reason if isinstance(reason, str) else ""
    return value if isinstance(value, str) else ""
