"""Run records × a profile's bounds → checks. Pure: no GPU, no files, no pytest.

A check is sanity (did the run run correctly?), performance (was it fast enough?) or health
(was the hardware behaving: stragglers, jitter, utilisation). A check whose measurement does not
exist (no telemetry on a CPU run, a failed baseline) is *not evaluated* — shown as such in the
report, never counted as passed, and it does not fail the test on its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from harness.records import RunRecord
from harness.thresholds import CaseBounds

CheckKind = Literal["sanity", "performance", "health"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Check:
    name: str
    kind: CheckKind
    measured: float | None
    bound: float | None
    unit: str
    comparison: Literal[">=", "<=", "=="]
    passed: bool | None
    """None: not evaluated (see ``note``)."""
    note: str = ""
    source: str = ""
    """Where the bound came from (the profile entry's stated source)."""

    @property
    def evaluated(self) -> bool:
        return self.passed is not None

    def describe(self, context: str) -> str:
        """One line, e.g. ``weak-scaling efficiency 0.912 < 0.960 (h200, resnet152 bf16, 4 GPUs)``."""
        if self.passed is None:
            return f"{self.name}: not evaluated — {self.note} ({context})"
        if self.measured is None or self.bound is None:
            return f"{self.name}: {'ok' if self.passed else 'FAILED'}{' — ' + self.note if self.note else ''} ({context})"
        holds = self.passed
        shown = {">=": ">=" if holds else "<", "<=": "<=" if holds else ">", "==": "==" if holds else "!="}[self.comparison]
        unit = f" {self.unit}" if self.unit else ""
        return f"{self.name} {_fmt(self.measured)}{unit} {shown} {_fmt(self.bound)}{unit} ({context})"

    def to_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind, "measured": self.measured, "bound": self.bound,
                "unit": self.unit, "comparison": self.comparison, "passed": self.passed, "note": self.note,
                "source": self.source}


def _fmt(value: float) -> str:
    if abs(value) >= 100:
        return f"{value:,.1f}"
    return f"{value:.3f}"


def _bounded(name: str, kind: CheckKind, measured: float | None, bound: float | None, unit: str,
             comparison: Literal[">=", "<="], source: str, missing_note: str) -> Check | None:
    """A check against an optional bound: no bound in the profile → no check at all."""
    if bound is None:
        return None
    if measured is None:
        return Check(name=name, kind=kind, measured=None, bound=bound, unit=unit, comparison=comparison,
                     passed=None, note=missing_note, source=source)
    passed = measured >= bound if comparison == ">=" else measured <= bound
    return Check(name=name, kind=kind, measured=measured, bound=bound, unit=unit, comparison=comparison,
                 passed=passed, source=source)


def sanity_checks(record: RunRecord) -> list[Check]:
    """The run must have completed with finite losses before its speed means anything."""
    completed = Check(name="run completed", kind="sanity", measured=None, bound=None, unit="", comparison="==",
                      passed=record.status in ("ok", "invalid"),
                      note=record.failure.reason if record.failure and record.status not in ("ok", "invalid") else "")
    checks = [completed]
    if completed.passed:
        checks.append(Check(name="loss finite", kind="sanity", measured=None, bound=None, unit="", comparison="==",
                            passed=bool(record.loss_finite),
                            note="" if record.loss_finite else (record.failure.reason if record.failure else
                                                                "non-finite loss")))
    return checks


def health_checks(record: RunRecord, bounds: CaseBounds, telemetry_note: str) -> list[Check]:
    checks = []
    if record.world_size > 1:
        checks.append(_bounded("straggler ratio (slowest/fastest rank)", "health", record.straggler_ratio,
                               bounds.max_straggler_ratio, "", "<=", bounds.source, "no per-rank timing"))
    cv = record.step_time_ms.cv if record.step_time_ms else None
    checks.append(_bounded("step-time CV", "health", cv, bounds.max_step_time_cv, "", "<=", bounds.source,
                           "no step times"))
    checks.append(_bounded("mean GPU utilization", "health", None, bounds.min_gpu_utilization_pct, "%", ">=",
                           bounds.source, telemetry_note))
    return [c for c in checks if c is not None]


def weak_scaling_checks(record: RunRecord, baseline: RunRecord | None, bounds: CaseBounds, *,
                        telemetry_note: str) -> list[Check]:
    """Per-GPU throughput, efficiency against the 1-GPU run of the same model and precision, health."""
    checks = sanity_checks(record)
    if not all(c.passed for c in checks):
        return checks
    throughput = _bounded("per-GPU throughput", "performance", record.throughput_per_gpu,
                          bounds.min_samples_per_sec_per_gpu, f"{record.sample_unit}/s", ">=", bounds.source,
                          "no measurement")
    checks += [throughput] if throughput is not None else []
    if record.world_size > 1:
        efficiency, note = weak_efficiency(record, baseline)
        checks.append(_scaling_check("weak-scaling efficiency", efficiency, note, bounds.min_weak_efficiency,
                                     record.world_size, bounds.source))
    return checks + health_checks(record, bounds, telemetry_note)


def strong_scaling_checks(record: RunRecord, baseline: RunRecord | None, bounds: CaseBounds, *,
                          telemetry_note: str) -> list[Check]:
    """Speedup and parallel efficiency at a fixed global batch, against the 1-GPU run of that batch."""
    checks = sanity_checks(record)
    if not all(c.passed for c in checks):
        return checks
    speedup, note = strong_speedup(record, baseline)
    efficiency = speedup / record.world_size if speedup is not None else None
    checks.append(_scaling_check("strong-scaling efficiency", efficiency, note, bounds.min_strong_efficiency,
                                 record.world_size, bounds.source))
    return checks + health_checks(record, bounds, telemetry_note)


def _scaling_check(name: str, measured: float | None, note: str, bound_by_gpus: dict[int, float],
                   world_size: int, source: str) -> Check:
    """An efficiency check; a GPU count the profile has no bound for is reported, never passed."""
    check = _bounded(name, "performance", measured, bound_by_gpus.get(world_size), "", ">=", source, note)
    if check is not None:
        return check
    return Check(name=name, kind="performance", measured=measured, bound=None, unit="", comparison=">=",
                 passed=None, source=source, note=f"the profile has no bound for {world_size} GPUs")


def _ratio_to_baseline(value: float | None, baseline: RunRecord | None, baseline_value: str) -> tuple[float | None, str]:
    if baseline is None or not baseline.ok or not getattr(baseline, baseline_value):
        why = baseline.failure.reason if baseline is not None and baseline.failure else "no 1-GPU baseline"
        return None, f"1-GPU baseline unavailable ({why})"
    if value is None:
        return None, "no measurement"
    return value / getattr(baseline, baseline_value), ""


def weak_efficiency(record: RunRecord, baseline: RunRecord | None) -> tuple[float | None, str]:
    """Per-GPU throughput at N / at 1 GPU (same model, precision and per-GPU batch)."""
    return _ratio_to_baseline(record.throughput_per_gpu, baseline, "throughput_per_gpu")


def strong_speedup(record: RunRecord, baseline: RunRecord | None) -> tuple[float | None, str]:
    """Time per global batch at 1 GPU / at N GPUs (= total throughput ratio at equal global batch)."""
    return _ratio_to_baseline(record.throughput_total, baseline, "throughput_total")


def failed_checks(checks: list[Check]) -> list[Check]:
    return [c for c in checks if c.passed is False]
