"""What one acceptance test hands to the verdict, report.json and session.json.

A benchmark case carries its ``case_id`` (harness.cases.CaseId); the report reads the case from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.cases import CaseId
from harness.checks.verdict import Check
from harness.records import RunRecord


@dataclass(kw_only=True)
class CaseResult:
    """A benchmark case: its record and the checks it was judged by."""

    case: CaseId
    record: RunRecord
    checks: list[Check]
    baseline_run_id: str | None
    context: str
    log_dir: Path

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.passed is False]

    def failure_message(self) -> str:
        lines = [check.describe(self.context) for check in self.failed]
        if self.record.failure:
            lines.append(f"rank logs: {self.log_dir}/")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"case": self.case.test_param, "case_id": self.case.to_dict(), "scaling": self.case.scaling,
                "nodes": self.case.nodes, "context": self.context, "record": self.record.to_dict(),
                "baseline_run_id": self.baseline_run_id, "checks": [c.to_dict() for c in self.checks]}


@dataclass(kw_only=True)
class CheckedResult:
    """The checks of a test that is not a benchmark case: the all-reduce sweep, the topology, the soak."""

    name: str
    context: str
    checks: list[Check]
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
                **self.data}
