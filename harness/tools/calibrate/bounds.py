"""From measurements to bounds (pure): the repeats of each case summarised per GPU count, the bounds
derived with stated margins and rounding, and warnings where the repeats disagree by more than the
margins are meant to absorb. The package docstring states the statistics; docs/calibration.md says why."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Mapping, Sequence

from harness.records import RunRecord
from harness.tools.calibrate import CalibrationError
from harness.tools.calibrate.health import CV_MARGIN, STRAGGLER_EXCESS_FACTOR, round_down


@dataclass(frozen=True, kw_only=True, slots=True)
class Margins:
    """How far below (above) the measured values the bounds sit. docs/calibration.md justifies the defaults."""

    throughput: float = 0.10
    """Fraction: throughput bound = lowest median x (1 - throughput). Covers GPU-to-GPU spread within a
    SKU (up to 8 %, SC22) plus run-to-run spread (0.3 % on H200)."""
    efficiency: float = 0.03
    """Points (0.03 = 3 points): efficiency bound = median - efficiency."""
    straggler_factor: float | None = STRAGGLER_EXCESS_FACTOR
    """Straggler bound = 1 + straggler_factor x (highest measured ratio - 1) (harness/tools/calibrate/health.py);
    None: no straggler bound."""
    step_time_cv: float | None = CV_MARGIN
    """CV points: step-time CV bound = highest measured CV + step_time_cv; None: no CV bound (a shared CPU's
    step-time jitter says nothing about the hardware)."""

    def __post_init__(self) -> None:
        if not 0 <= self.throughput < 1:
            raise ValueError(f"throughput margin must be a fraction in [0, 1), got {self.throughput}")
        if not 0 <= self.efficiency < 1:
            raise ValueError(f"efficiency margin must be in [0, 1) (fraction units: 0.03 = 3 points), got "
                             f"{self.efficiency}")
        if self.straggler_factor is not None and not (1 <= self.straggler_factor and
                                                      math.isfinite(self.straggler_factor)):
            raise ValueError(f"straggler factor must be >= 1 (2: a highest ratio of 1.022 gives 1.044), got "
                             f"{self.straggler_factor}")
        if self.step_time_cv is not None and not 0 <= self.step_time_cv <= 1:
            raise ValueError(f"step-time CV margin must be in [0, 1] (fraction units: 0.04 = 4 points), got "
                             f"{self.step_time_cv}")


@dataclass(frozen=True, kw_only=True, slots=True)
class BatchChoice:
    batch_size: int
    how: str
    """"given with --batch-size", or what find-max-bs measured."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CountMeasurement:
    """One model x precision at one GPU count, over the repeats (in repeat order)."""

    gpus: int
    throughput_per_gpu: tuple[float, ...]
    efficiency: tuple[float, ...]
    """Per repeat: per-GPU throughput here / at 1 GPU in the same repeat; empty at 1 GPU."""
    straggler_ratio_max: float | None
    step_time_cv_max: float
    ci95_rel_max: float | None
    launch_s_max: float

    @property
    def median(self) -> float:
        return statistics.median(self.throughput_per_gpu)

    @property
    def spread(self) -> float:
        """(max - min) / median of the per-GPU throughput over the repeats."""
        return (max(self.throughput_per_gpu) - min(self.throughput_per_gpu)) / self.median

    @property
    def efficiency_median(self) -> float | None:
        return statistics.median(self.efficiency) if self.efficiency else None

    @property
    def efficiency_spread(self) -> float | None:
        """max - min of the efficiency over the repeats, in fraction units (points / 100)."""
        return max(self.efficiency) - min(self.efficiency) if self.efficiency else None


@dataclass(frozen=True, kw_only=True, slots=True)
class CaseMeasurement:
    model: str
    precision: str
    batch: BatchChoice
    sample_unit: str
    counts: tuple[CountMeasurement, ...]
    """Sorted by GPU count; the first is 1 GPU."""


@dataclass(frozen=True, kw_only=True, slots=True)
class DerivedBounds:
    min_samples_per_sec_per_gpu: float
    min_weak_efficiency: dict[int, float]
    notes: tuple[str, ...] = ()
    """Where a bound had to be clamped to the schema's range."""


def _throughput_per_gpu(record: RunRecord) -> float:
    if record.throughput_per_gpu is None:
        raise ValueError(f"run {record.run_id} ({record.status}) has no throughput: only successful runs are measured")
    return record.throughput_per_gpu


def measure_case(model: str, precision: str, batch: BatchChoice,
                 records_by_count: Mapping[int, Sequence[RunRecord]]) -> CaseMeasurement:
    """The repeats of one model x precision, per GPU count; every record must be ok (checked by the caller)."""
    if 1 not in records_by_count:
        raise ValueError("the 1-GPU runs are needed: efficiency is measured against them")
    baseline = [_throughput_per_gpu(r) for r in records_by_count[1]]
    counts = []
    for gpus in sorted(records_by_count):
        records = records_by_count[gpus]
        if len(records) != len(baseline):
            raise ValueError(f"{model} {precision}: {len(records)} runs at {gpus} GPUs but {len(baseline)} at 1 GPU")
        throughput = tuple(_throughput_per_gpu(r) for r in records)
        stragglers = [r.straggler_ratio for r in records if r.straggler_ratio is not None]
        cis = [r.throughput_ci95_rel for r in records if r.throughput_ci95_rel is not None]
        counts.append(CountMeasurement(
            gpus=gpus, throughput_per_gpu=throughput,
            efficiency=tuple(t / b for t, b in zip(throughput, baseline, strict=True)) if gpus > 1 else (),
            straggler_ratio_max=max(stragglers) if gpus > 1 and stragglers else None,
            step_time_cv_max=max(r.step_time_ms.cv for r in records if r.step_time_ms is not None),
            ci95_rel_max=max(cis) if cis else None,
            launch_s_max=max(r.phases_s.get("launch_total", 0.0) for r in records)))
    return CaseMeasurement(model=model, precision=precision, batch=batch,
                           sample_unit=records_by_count[1][0].sample_unit, counts=tuple(counts))


def round_down_significant(value: float, digits: int = 3) -> float:
    """Rounded down to at least ``digits`` significant digits: 4176.63 -> 4176, 22.87 -> 22.8."""
    if value <= 0:
        raise ValueError(f"expected a positive value, got {value}")
    decimals = max(0, digits - 1 - math.floor(math.log10(value)))
    return round_down(value, decimals)


def derive_bounds(case: CaseMeasurement, margins: Margins) -> DerivedBounds:
    """The case's bounds from its measurements, with the margins; raises CalibrationError when a margin
    leaves no valid bound."""
    notes = []
    lowest = min(case.counts, key=lambda c: c.median)
    throughput_bound = round_down_significant(lowest.median * (1 - margins.throughput))
    efficiency = {}
    for count in case.counts:
        if count.efficiency_median is None:
            continue
        bound = round_down(count.efficiency_median - margins.efficiency, 3)
        if bound <= 0:
            raise CalibrationError(
                f"{case.model} {case.precision} at {count.gpus} GPUs: efficiency median {count.efficiency_median:.3f} "
                f"- margin {margins.efficiency} leaves no bound > 0; lower --efficiency-margin")
        if bound > 1:
            notes.append(f"efficiency at {count.gpus} GPUs: median {count.efficiency_median:.3f} - "
                         f"{margins.efficiency} > 1, bound set to 1.0 (the schema's maximum)")
            bound = 1.0
        efficiency[count.gpus] = bound
    return DerivedBounds(min_samples_per_sec_per_gpu=throughput_bound, min_weak_efficiency=efficiency,
                         notes=tuple(notes))


def spread_warnings(case: CaseMeasurement, margins: Margins) -> list[str]:
    """Where repeats disagree by more than the margin that is meant to absorb their disagreement."""
    warnings = []
    for count in case.counts:
        where = f"{case.model} {case.precision} at {count.gpus} GPU{'s' if count.gpus > 1 else ''}"
        if len(count.throughput_per_gpu) > 1 and count.spread > margins.throughput:
            runs = ", ".join(f"{t:,.1f}" for t in count.throughput_per_gpu)
            warnings.append(f"{where}: repeats disagree by {count.spread:.1%} (> throughput margin "
                            f"{margins.throughput:.0%}): {runs} {case.sample_unit}/s per GPU; the node is not "
                            "steady, and bounds from it may fail healthy nodes or pass slow ones")
        if (count.efficiency_spread is not None and len(count.efficiency) > 1
                and count.efficiency_spread > margins.efficiency):
            runs = ", ".join(f"{e:.3f}" for e in count.efficiency)
            warnings.append(f"{where}: weak-scaling efficiency differs by {count.efficiency_spread * 100:.1f} points "
                            f"between repeats (> efficiency margin {margins.efficiency * 100:.1f} points): {runs}")
    return warnings


def format_measurements(cases: Sequence[CaseMeasurement]) -> str:
    """The spread of every case, for the terminal."""
    header = (f"{'case':28} {'GPUs':>4} {'median /s':>11} {'min .. max':>23} {'spread':>7} "
              f"{'efficiency (min .. max)':>24} {'straggler':>9} {'CV max':>7}")
    lines = [header, "-" * len(header)]
    for case in cases:
        label = f"{case.model} {case.precision} b{case.batch.batch_size}"
        for count in case.counts:
            low, high = min(count.throughput_per_gpu), max(count.throughput_per_gpu)
            efficiency = "—"
            if count.efficiency:
                efficiency = (f"{count.efficiency_median:.3f} ({min(count.efficiency):.3f} .. "
                              f"{max(count.efficiency):.3f})")
            straggler = f"{count.straggler_ratio_max:.3f}" if count.straggler_ratio_max is not None else "—"
            lines.append(f"{label:28} {count.gpus:>4} {count.median:>11,.1f} {f'{low:,.1f} .. {high:,.1f}':>23} "
                         f"{count.spread:>7.1%} {efficiency:>24} {straggler:>9} {count.step_time_cv_max:>7.2%}")
            label = ""
    return "\n".join(lines)
