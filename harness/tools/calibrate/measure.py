"""Running a calibration (the I/O edge): the batch of every case (given, or found by find-max-bs),
the whole matrix ``repeats`` times over a launcher, then the bounds and the validated profile.

The launcher is ``harness.launch.benchmark.run_benchmark`` (the very launch the acceptance suite makes) and
the batch finder ``harness.tools.batchsize.probe.find_max_batch``; tests pass fakes of both."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from harness.launch.benchmark import run_benchmark
from harness.launch.spec import BenchmarkSpec, LaunchSettings
from harness.node.hardware import Hardware
from harness.records import RunRecord, write_record
from harness.tools.batchsize.probe import find_max_batch
from harness.tools.batchsize.search import SearchError, SearchResult, format_table, recommendation
from harness.tools.calibrate import CalibrationError
from harness.tools.calibrate.bounds import (BatchChoice, CaseMeasurement, DerivedBounds, derive_bounds,
                                            format_measurements, measure_case, spread_warnings)
from harness.tools.calibrate.plan import CalibrationPlan
from harness.tools.calibrate.components import (COMPONENT_MARGIN, Runner, component_bounds, components_spec,
                                                measure_components)
from harness.tools.calibrate.health import calibrated_health
from harness.tools.calibrate.profile_file import Measured, render_profile, write_profile
from harness.tools.calibrate.provenance import provenance

Launcher = Callable[..., RunRecord]
BatchFinder = Callable[..., SearchResult]


def choose_batches(plan: CalibrationPlan, find_batch: BatchFinder, echo: Callable[[str], None]) -> dict[
        tuple[str, str], BatchChoice]:
    """The per-GPU batch of every case: given, or the largest that fits (find-max-bs)."""
    choices = {}
    for model in plan.models:
        for precision in plan.precisions:
            if model in plan.batch_sizes:
                choices[(model, precision)] = BatchChoice(batch_size=plan.batch_sizes[model],
                                                          how="given with --batch-size")
            else:
                choices[(model, precision)] = _found_batch(plan, find_batch, model, precision, echo)
    return choices


def _found_batch(plan: CalibrationPlan, find_batch: BatchFinder, model: str, precision: str,
                 echo: Callable[[str], None]) -> BatchChoice:
    """find-max-bs for one case; CalibrationError when it fails or nothing fits."""
    echo(f"find-max-bs: {model} {precision} (fraction {plan.memory_fraction:g}, multiples of "
         f"{plan.batch_multiple})")
    log_dir = plan.records_dir / "find-max-bs" / f"{model}-{precision}"
    try:
        result = find_batch(model=model, precision=precision, device_kind=plan.device,
                            memory_fraction=plan.memory_fraction, start=plan.batch_multiple,
                            max_batch=plan.max_batch, multiple_of=plan.batch_multiple, log_dir=log_dir)
    except SearchError as exc:
        raise CalibrationError(f"find-max-bs for {model} {precision} failed: {exc} (probe logs: {log_dir}/); "
                               "no profile written") from None
    echo(format_table(result.probes))
    echo(recommendation(result, model, precision))
    if result.max_batch_size is None:
        raise CalibrationError(f"{recommendation(result, model, precision)}; no profile written")
    best = result.best
    if best is not None and best.limit_gib is not None:
        how = (f"find-max-bs: peak {best.result.peak_memory_gib:.1f} of "
               f"{best.result.total_memory_gib:.1f} GiB, "
               f"limit {plan.memory_fraction:g}")
    else:
        how = f"find-max-bs: capped by --max-batch {plan.max_batch}"
    return BatchChoice(batch_size=result.max_batch_size, how=how)


def _spec(plan: CalibrationPlan, model: str, precision: str, gpus: int, batch: int) -> BenchmarkSpec:
    """The case as the acceptance suite launches it: the 1-GPU case on every GPU at once, each its own model
    (``independent``: each GPU's own rate, their median the baseline, and the per-GPU rates uniformity needs)."""
    independent = gpus == 1
    return BenchmarkSpec(model=model, precision=precision, scaling="weak",
                         batch_size_per_gpu=batch, warmup_seconds=plan.warmup_seconds,
                         measure_seconds=plan.measure_seconds, peak_tflops=plan.peak_tflops.get(precision),
                         independent=independent,
                         launch=LaunchSettings(gpus_per_node=plan.independent_gpus if independent else gpus,
                                               device=plan.device, timeout_s=plan.timeout_s))


def run_matrix(plan: CalibrationPlan, batches: dict[tuple[str, str], BatchChoice], launcher: Launcher,
               echo: Callable[[str], None]) -> dict[tuple[str, str], dict[int, list[RunRecord]]]:
    """Every case ``repeats`` times, repeat by repeat (slow drift hits every case alike); the first failed
    run stops everything."""
    stamp = plan.records_dir.name
    results: dict[tuple[str, str], dict[int, list[RunRecord]]] = {}
    order = itertools.product(range(1, plan.repeats + 1), plan.models, plan.precisions, plan.gpu_counts)
    for done, (repeat, model, precision, gpus) in enumerate(order, start=1):
        batch = batches[(model, precision)].batch_size
        spec = _spec(plan, model, precision, gpus, batch)
        label = f"{spec.case_id}-r{repeat}"
        log_dir = plan.records_dir / "logs" / label
        record = launcher(spec, log_dir, run_id=f"{stamp}-{label}")
        write_record(plan.records_dir / "runs" / f"{label}.json", record)
        if not record.ok:
            reason = record.failure.reason if record.failure else "no reason recorded"
            raise CalibrationError(
                f"{model} {precision} at {gpus} {'GPU' if gpus == 1 else 'GPUs'}, repeat {repeat}: "
                f"{record.status}: {reason} (logs: {log_dir}/). No profile was written: bounds are never "
                "made from failed runs. Calibrate on a healthy node, or fix the cause and run again.")
        ci = f", CI95 +-{record.throughput_ci95_rel:.2%}" if record.throughput_ci95_rel is not None else ""
        echo(f"[{done}/{plan.launches}] repeat {repeat}: {spec.case_id} batch {batch}: "
             f"{record.throughput_per_gpu:,.1f} {record.sample_unit}/s per GPU{ci}")
        results.setdefault((model, precision), {}).setdefault(gpus, []).append(record)
    return results


@dataclass(frozen=True, kw_only=True, slots=True)
class CalibrationOutcome:
    path: Path
    text: str
    cases: tuple[CaseMeasurement, ...]
    bounds: dict[tuple[str, str], DerivedBounds]
    warnings: tuple[str, ...]


def run_calibration(plan: CalibrationPlan, hw: Hardware, *, launcher: Launcher | None = None,
                    find_batch: BatchFinder | None = None, run_components: Runner | None = None,
                    echo: Callable[[str], None] = print) -> CalibrationOutcome:
    """Batches, the repeated matrix, the statistics, the validated profile written to plan.output_path.

    ``launcher`` defaults to run_benchmark, ``find_batch`` to find_max_batch, ``run_components`` (with
    --components) to harness.kinds.components.launch.run_components."""
    batches = choose_batches(plan, find_batch or find_max_batch, echo)
    by_case = run_matrix(plan, batches, launcher or run_benchmark, echo)
    cases = tuple(measure_case(model, precision, batches[(model, precision)], by_case[(model, precision)])
                  for model in plan.models for precision in plan.precisions)
    bounds = {(case.model, case.precision): derive_bounds(case, plan.margins) for case in cases}
    warnings = [w for case in cases for w in spread_warnings(case, plan.margins)]
    if plan.repeats == 1:
        warnings.insert(0, "one repeat: no spread was measured, so nothing says the margins cover this node's noise; "
                           "use --repeats 3 or more")
    echo("")
    echo(format_measurements(cases))
    for warning in warnings:
        echo(f"WARNING: {warning}")
    for case in cases:
        for note in bounds[(case.model, case.precision)].notes:
            echo(f"note: {case.model} {case.precision}: {note}")
    records = [r for per_count in by_case.values() for runs in per_count.values() for r in runs]
    health = calibrated_health([r.to_dict() for r in records], device=plan.device, gpus=plan.independent_gpus,
                               cv_margin=plan.margins.step_time_cv, straggler_factor=plan.margins.straggler_factor)
    for bound in [*health.defaults, *(b for own in health.cases.values() for b in own)]:
        if bound.value is None:
            echo(f"note: {bound.text}")
    components = None
    if plan.components:
        runs = measure_components(components_spec(hw, plan.device, plan.timeout_s), plan.records_dir, plan.repeats,
                                  run_components, echo)
        components = component_bounds(runs, COMPONENT_MARGIN)
    measured = Measured(cases=cases, bounds=bounds, health=health, components=components)
    text = render_profile(plan, hw, measured, provenance(records, hw, plan), warnings)
    write_profile(text, plan.output_path, force=plan.force)
    return CalibrationOutcome(path=plan.output_path, text=text, cases=cases, bounds=bounds, warnings=tuple(warnings))
