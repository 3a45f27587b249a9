"""What one acceptance test hands to the verdict, report.json and session.json.

The dicts written here are the plugin's half of the contract with the report (docs/architecture.md):
a benchmark case carries its ``case_id`` (harness.cases.CaseId) and the ``bounds`` the session
resolved for it, with ``bounds_inherited`` naming those that came from ``[defaults]``; the all-reduce,
topology and soak results carry their section's ``bounds``; every check carries a stable ``key``.
The report renders these and never re-derives them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.cases import CaseId
from harness.results.check import Check
from harness.records import RunRecord


@dataclass(kw_only=True)
class CaseResult:
    """A benchmark case: its record, the checks it was judged by, and the bounds they used."""

    case: CaseId
    record: RunRecord
    checks: list[Check]
    baseline_run_id: str | None
    context: str
    log_dir: Path
    bounds: dict | None = None
    """The case's bounds as the session resolved them (``CaseBounds.to_dict()``); None when the profile has none."""
    bounds_inherited: list[str] = field(default_factory=list)
    """Which of ``bounds`` came from the profile's ``[defaults]`` rather than the case's own table."""
    seen_in_window: list[str] = field(default_factory=list)
    """What else the window saw (foreign processes, clock-event reasons with their share, XIDs), one
    line each, listed under a failure so it names its likely cause (harness/plugin/gpu_state.py)."""

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.passed is False]

    def failure_message(self) -> str:
        lines = [check.describe(self.context) for check in self.failed]
        if lines and self.seen_in_window:
            lines += ["seen in this window:", *(f"  {line}" for line in self.seen_in_window)]
        if self.record.failure:
            lines.append(f"rank logs: {self.log_dir}/")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"case": self.case.test_param, "case_id": self.case.to_dict(), "scaling": self.case.scaling,
                "nodes": self.case.nodes, "context": self.context, "record": self.record.to_dict(),
                "baseline_run_id": self.baseline_run_id, "bounds": self.bounds,
                "bounds_inherited": list(self.bounds_inherited), "checks": [c.to_dict() for c in self.checks],
                "seen_in_window": list(self.seen_in_window)}


@dataclass(kw_only=True)
class CheckedResult:
    """The checks of a test that is not a benchmark case: the all-reduce sweep, the topology, the soak."""

    name: str
    context: str
    checks: list[Check]
    bounds: dict | None
    """The profile section the checks were judged against (its ``to_dict()``); None when it has none."""
    data: dict = field(default_factory=dict)
    """What the report shows beside the checks; ``record`` (a run id and telemetry) is drawn like a case's."""
    log_dir: Path | None = None

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.passed is False]

    def failure_message(self) -> str:
        lines = [check.describe(self.context) for check in self.failed]
        if self.log_dir is not None and any(c.kind == "sanity" for c in self.failed):
            lines.append(f"rank logs: {self.log_dir}/")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"case": self.name, "context": self.context, "checks": [c.to_dict() for c in self.checks],
                "bounds": self.bounds, **self.data}
