"""Run records × a profile's bounds → checks. Pure: no GPU, no files, no pytest.

A check is sanity (did the run run correctly?), performance (was it fast enough?) or health
(was the hardware behaving: stragglers, jitter, utilisation). A check whose measurement does not
exist (no telemetry on a CPU run, a failed baseline) is *not evaluated* — shown as such in the
report, never counted as passed, and it does not fail the test on its own.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from harness.results.check import Check, CheckKind
from harness.checks.shapes import bound_for, gpus_at_once, key_of_bound, reference_note, unmeasured
from harness.checks.telemetry_checks import telemetry_checks
from harness.checks.uniformity import (CPU_RANKS_NOTE, ONE_GPU_NOTE, describe_rate, gpu_rates, node_median,
                                      rate_locations)
from harness.profile.bounds import CaseBounds
from harness.records import RunRecord


def _bounded(key: str, name: str, kind: CheckKind, measured: float | None, bound: float | None, unit: str,
             comparison: Literal[">=", "<="], source: str, missing_note: str) -> Check | None:
    """A check against an optional bound: no bound in the profile → no check at all."""
    if bound is None:
        return None
    if measured is None:
        return Check(key=key, name=name, kind=kind, measured=None, bound=bound, unit=unit, comparison=comparison,
                     passed=None, note=missing_note, source=source)
    passed = measured >= bound if comparison == ">=" else measured <= bound
    return Check(key=key, name=name, kind=kind, measured=measured, bound=bound, unit=unit, comparison=comparison,
                 passed=passed, source=source)


def sanity_checks(record: RunRecord) -> list[Check]:
    """The run must have completed with finite losses before its speed means anything."""
    completed = Check(key="run_completed", name="run completed", kind="sanity", measured=None, bound=None, unit="",
                      comparison="==",
                      passed=record.status in ("ok", "invalid"),
                      note=record.failure.reason if record.failure and record.status not in ("ok", "invalid") else "")
    checks = [completed]
    if completed.passed:
        checks.append(Check(key="loss_finite", name="loss finite", kind="sanity", measured=None, bound=None, unit="",
                            comparison="==",
                            passed=bool(record.loss_finite),
                            note="" if record.loss_finite else (record.failure.reason if record.failure else
                                                                "non-finite loss")))
    return checks


def unmeasured_shape(key: str, name: str, kind: CheckKind, measured: float | None, unit: str,
                     comparison: Literal[">=", "<="], source: str, note: str) -> Check:
    """A check the profile bounds for other GPU counts only: shown, not evaluated."""
    return Check(key=key, name=name, kind=kind, measured=measured, bound=None, unit=unit, comparison=comparison,
                 passed=None, note=note, source=source)


def _shaped(key: str, name: str, kind: CheckKind, measured: float | None, bounds: CaseBounds, gpus: int,
            unit: str, comparison: Literal[">=", "<="], missing_note: str) -> Check | None:
    """``_bounded`` against the bound for this GPU count, with its reference in the note."""
    bound, why = bound_for(bounds, key_of_bound(key, comparison), gpus)
    if why:
        return unmeasured_shape(key, name, kind, measured, unit, comparison, bounds.source, why)
    check = _bounded(key, name, kind, measured, bound, unit, comparison, bounds.source, missing_note)
    note = reference_note(bounds, key_of_bound(key, comparison), gpus, measured)
    if check is not None and note and check.evaluated:
        check = replace(check, note=f"{check.note}; {note}" if check.note else note)
    return check


def health_checks(record: RunRecord, bounds: CaseBounds, telemetry_note: str) -> list[Check]:
    """Straggler, step-time CV and the telemetry of the window, each against the bound for this record's
    GPU count (a count the profile has no bound for is shown, not evaluated)."""
    gpus = gpus_at_once(record)
    checks = []
    if record.world_size > 1:
        checks.append(_shaped("straggler_ratio", "straggler ratio (slowest/fastest rank)", "health",
                              record.straggler_ratio, bounds, record.world_size * record.nodes, "", "<=",
                              "no per-rank timing"))
    cv = record.step_time_ms.cv if record.step_time_ms else None
    checks.append(_shaped("step_time_cv", "step-time CV", "health", cv, bounds, gpus, "", "<=", "no step times"))
    utilization, why_not_utilization = bound_for(bounds, "min_gpu_utilization_pct", gpus)
    power, why_not_power = bound_for(bounds, "min_power_fraction_of_limit", gpus)
    checks += [unmeasured_shape("gpu_utilization", "mean GPU utilization", "health", None, "%", ">=", bounds.source,
                                why_not_utilization) if why_not_utilization else None,
               unmeasured_shape("power_fraction_of_limit", "mean power / power limit", "health", None, "", ">=",
                                bounds.source, why_not_power) if why_not_power else None]
    checks += telemetry_checks(record.telemetry, min_gpu_utilization_pct=utilization,
                               min_power_fraction_of_limit=power,
                               max_temperature_c=bounds.max_temperature_c, source=bounds.source,
                               missing_note=telemetry_note)
    return [c for c in checks if c is not None]


def weak_scaling_checks(record: RunRecord, baseline: RunRecord | None, bounds: CaseBounds, *,
                        telemetry_note: str) -> list[Check]:
    """Per-GPU throughput, efficiency against the 1-GPU run of the same model and precision, health."""
    checks = sanity_checks(record)
    if not all(c.passed for c in checks):
        return checks
    throughput = per_gpu_throughput_check(record, bounds)
    checks += [throughput] if throughput is not None else []
    uniformity = gpu_uniformity_check(record, bounds)
    checks += [uniformity] if uniformity is not None else []
    if record.world_size > 1:
        efficiency, note = weak_efficiency(record, baseline)
        checks.append(_scaling_check("weak_efficiency", "weak-scaling efficiency", efficiency, note, bounds,
                                     record.world_size, bounds.source, record.nodes, _at_once(baseline)))
    return checks + health_checks(record, bounds, telemetry_note)


def per_gpu_throughput_check(record: RunRecord, bounds: CaseBounds) -> Check | None:
    """Every GPU's own rate in the 1-GPU case (each GPU its own model, every GPU at once) against the bound
    for that many GPUs at once; measured is the slowest GPU's, and a miss names it.

    Only the 1-GPU case has it: under DDP the same rate times the efficiency is what the efficiency check
    judges against this node's own 1-GPU figure, and a 1-GPU bound is never stretched to N GPUs. Records
    without per-rank rates are judged on ``throughput_per_gpu``.
    """
    if record.world_size > 1:
        return None
    unit = f"{record.sample_unit}/s"
    gpus = gpus_at_once(record)
    bound, why = bound_for(bounds, "min_samples_per_sec_per_gpu", gpus)
    if why:
        return unmeasured_shape("throughput_per_gpu", "per-GPU throughput", "performance", record.throughput_per_gpu,
                                unit, ">=", bounds.source, why)
    rates = gpu_rates(record)
    if bound is None or not rates:
        return _bounded("throughput_per_gpu", "per-GPU throughput", "performance", record.throughput_per_gpu,
                        bound, unit, ">=", bounds.source, "no measurement")
    several_hosts = len(record.hosts) > 1
    missed = [r for r in rates if r.throughput < bound]
    slowest = rates[0]
    if missed:
        note = "slowest: " + "; ".join(describe_rate(r, unit, several_hosts) for r in missed)
    else:
        note = f"slowest: {describe_rate(slowest, unit, several_hosts)}" if len(rates) > 1 else ""
    reference = reference_note(bounds, "min_samples_per_sec_per_gpu", gpus, slowest.throughput)
    return Check(key="throughput_per_gpu", name="per-GPU throughput", kind="performance", measured=slowest.throughput,
                 bound=bound, unit=unit, comparison=">=", passed=not missed,
                 note="; ".join(part for part in (note, reference) if part), source=bounds.source,
                 locations=rate_locations(missed or [slowest], several_hosts))


def gpu_uniformity_check(record: RunRecord, bounds: CaseBounds) -> Check | None:
    """The independent 1-GPU run: each GPU's rate / the node's median GPU's >= min_gpu_uniformity.

    Only a run where every GPU trained alone at once (``record.independent``) has it: under DDP the
    ranks wait for each other and the straggler probe speaks instead. Not evaluated, saying why, on
    one GPU, on CPU ranks, or without a bound for this many GPUs (the slowest GPU's fraction still shown).
    """
    if not record.independent:
        return None
    unit = f"{record.sample_unit}/s"
    rates = gpu_rates(record)
    bound, why = bound_for(bounds, "min_gpu_uniformity", len(rates))

    several_hosts = len(record.hosts) > 1

    def result(passed: bool | None, note: str, named: list | None = None) -> Check:
        return Check(key="gpu_uniformity", name="GPU uniformity (each GPU / the node's median)", kind="health",
                     measured=rates[0].fraction_of_median if rates else None, bound=bound, unit="",
                     comparison=">=", passed=passed, note=note, source=bounds.source,
                     locations=rate_locations(named if named is not None else rates[:1], several_hosts))

    if not rates:
        return result(None, "no per-GPU rates in the record")
    slowest = describe_rate(rates[0], unit, several_hosts)
    median = f"node median {node_median(rates):,.1f} {unit} over {len(rates)} GPUs"
    if record.device_kind == "cpu":
        return result(None, CPU_RANKS_NOTE)
    if len(rates) < 2:
        return result(None, ONE_GPU_NOTE)
    if bound is None:
        return result(None, f"{why or 'the profile has no min_gpu_uniformity (not yet measured on this hardware)'}; "
                            f"slowest: {slowest}, {median}")
    missed = [r for r in rates if r.fraction_of_median < bound]
    if missed:
        return result(False, "; ".join(describe_rate(r, unit, several_hosts) for r in missed) + f"; {median}", missed)
    return result(True, f"slowest: {slowest}, {median}")


def strong_scaling_checks(record: RunRecord, baseline: RunRecord | None, bounds: CaseBounds, *,
                          telemetry_note: str) -> list[Check]:
    """Speedup and parallel efficiency at a fixed global batch, against the 1-GPU run of that batch."""
    checks = sanity_checks(record)
    if not all(c.passed for c in checks):
        return checks
    speedup, note = strong_speedup(record, baseline)
    efficiency = speedup / record.world_size if speedup is not None else None
    checks.append(_scaling_check("strong_efficiency", "strong-scaling efficiency", efficiency, note, bounds,
                                 record.world_size, bounds.source, record.nodes, _at_once(baseline)))
    return checks + health_checks(record, bounds, telemetry_note)


def _at_once(baseline: RunRecord | None) -> int | None:
    """How many GPUs a case's 1-GPU reference ran on at once; None without a usable one."""
    return gpus_at_once(baseline) if baseline is not None and baseline.ok else None


def _scaling_check(key: str, name: str, measured: float | None, note: str, bounds: CaseBounds,
                   world_size: int, source: str, nodes: int = 1, reference_at_once: int | None = None) -> Check:
    """An efficiency check; a GPU count the profile has no bound for is reported, never passed, and so is a
    bound fitted where the 1-GPU reference ran on another number of GPUs at once (a node of another size:
    its reference, and with it the efficiency, is another shape). A multi-node case meets the bound of its
    GPU count, measured on one node: its note says so, as a fabric between nodes may be slower than the links
    inside one (docs/slurm.md)."""
    bound_key = key_of_bound(key, ">=")
    fitted = bounds.reference(bound_key, world_size)
    if fitted is not None and fitted.node_gpus is not None and reference_at_once is not None \
            and fitted.node_gpus != reference_at_once:
        return unmeasured_shape(key, name, "performance", measured, "", ">=", source,
                                unmeasured(f"{bound_key} bound measured for {world_size} GPUs with the 1-GPU "
                                           f"reference on {reference_at_once} GPUs at once (the profile's was measured "
                                           f"with it on {fitted.node_gpus}: nodes of {fitted.node_gpus} GPUs)"))
    bound_by_gpus = getattr(bounds, bound_key)
    check = _bounded(key, name, "performance", measured, bound_by_gpus.get(world_size), "", ">=", source, note)
    if check is not None:
        reference = reference_note(bounds, bound_key, world_size, measured)
        if reference and check.evaluated:
            check = replace(check, note=f"{check.note}; {reference}" if check.note else reference)
        if nodes > 1:
            across = (f"{nodes} nodes: judged against the profile's bound for {world_size} GPUs, measured on one node "
                      "(the profile has no multi-node bound)")
            check = replace(check, note=f"{check.note}; {across}" if check.note else across)
        return check
    return unmeasured_shape(key, name, "performance", measured, "", ">=", source,
                            unmeasured(f"bound measured for {world_size} GPUs"))


def _ratio_to_baseline(value: float | None, baseline: RunRecord | None,
                       baseline_value: str) -> tuple[float | None, str]:
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
