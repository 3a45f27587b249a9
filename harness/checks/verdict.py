"""Run records × a profile's bounds → checks. Pure: no GPU, no files, no pytest.

A check is sanity (did the run run correctly?), performance (was it fast enough?) or health
(was the hardware behaving: stragglers, jitter, utilisation). A check whose measurement does not
exist (no telemetry on a CPU run, a failed baseline) is *not evaluated* — shown as such in the
report, never counted as passed, and it does not fail the test on its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Callable, Literal

from harness import telemetry as tm
from harness.checks.shapes import bound_for, gpus_at_once, key_of_bound, reference_note
from harness.checks.uniformity import (CPU_RANKS_NOTE, ONE_GPU_NOTE, describe_rate, gpu_rates, node_median,
                                      rate_locations)
from harness.node.nvml import FAULT_REASONS
from harness.profile.bounds import CaseBounds
from harness.records import RunRecord
from harness.results.location import Location, gpu_location

CheckKind = Literal["sanity", "performance", "health"]

_NOT_KEY_CHARACTERS = re.compile(r"[^a-z0-9]+")
_KEY = re.compile(r"[a-z][a-z0-9]*(_[a-z0-9]+)*")


def key_of(name: str) -> str:
    """The snake_case slug of a check's name: ``per-GPU throughput`` -> ``per_gpu_throughput``."""
    return _NOT_KEY_CHARACTERS.sub("_", name.lower()).strip("_")


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
    key: str = ""
    """Stable machine name (snake_case), what the report and compare match checks by; empty: the
    slug of ``name``. Give one explicitly where the name may change (wording, a size in it)."""
    locations: tuple[Location, ...] = ()
    """Where it was judged or failed, as data (the GPUs, pids, XIDs, links, ranks its note names); the
    session verdict and the report read these, never the note. Empty: the run or node as a whole."""

    def __post_init__(self) -> None:
        if not self.key:
            object.__setattr__(self, "key", key_of(self.name))
        if not _KEY.fullmatch(self.key):
            raise ValueError(f"check key {self.key!r} (of {self.name!r}) must be snake_case: lower-case letters, "
                             "digits and single underscores, starting with a letter")

    @property
    def evaluated(self) -> bool:
        return self.passed is not None

    def describe(self, context: str) -> str:
        """One line, e.g. ``weak-scaling efficiency 0.912 < 0.960 (h200, resnet152 bf16, 4 GPUs)``."""
        if self.passed is None:
            return f"{self.name}: not evaluated — {self.note} ({context})"
        if self.measured is None or self.bound is None:
            outcome = "ok" if self.passed else "FAILED"
            return f"{self.name}: {outcome}{' — ' + self.note if self.note else ''} ({context})"
        holds = self.passed
        shown = {">=": ">=" if holds else "<", "<=": "<=" if holds else ">",
                 "==": "==" if holds else "!="}[self.comparison]
        unit = f" {self.unit}" if self.unit else ""
        where = f": {self.note}" if self.note else ""  # e.g. which GPU missed, for per-GPU checks
        return f"{self.name} {_fmt(self.measured)}{unit} {shown} {_fmt(self.bound)}{unit}{where} ({context})"

    def to_dict(self) -> dict:
        return {"key": self.key, "name": self.name, "kind": self.kind, "measured": self.measured, "bound": self.bound,
                "unit": self.unit, "comparison": self.comparison, "passed": self.passed, "note": self.note,
                "source": self.source, "locations": [location.to_dict() for location in self.locations]}


def _fmt(value: float) -> str:
    if abs(value) >= 100:
        return f"{value:,.1f}"
    return f"{value:.3f}"


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


# --- GPU telemetry of the measured window (harness/telemetry.py) -----------------------------


def telemetry_checks(telemetry: dict | None, *, min_gpu_utilization_pct: float | None = None,
                     min_power_fraction_of_limit: float | None = None, max_temperature_c: float | None = None,
                     source: str = "", missing_note: str) -> list[Check]:
    """Per-GPU health over the window: utilization, power, temperature (when the profile bounds them),
    no thermal or hardware-slowdown throttling and no new ECC errors (always).

    Each is judged per GPU and a miss names the GPU (index and UUID). Without telemetry every check
    is not evaluated, with the reason; a GPU that reported no value makes a check not evaluated
    rather than passed.
    """
    usable = telemetry if tm.is_ok(telemetry) else None
    note = tm.not_available_reason(telemetry, missing_note)
    checks = []
    if min_gpu_utilization_pct is not None:
        checks.append(_per_gpu_check("gpu_utilization", "mean GPU utilization", usable,
                                     lambda g: g["reduced"].get("util_pct"),
                                     min_gpu_utilization_pct, "%", ">=", source, note))
    if min_power_fraction_of_limit is not None:
        checks.append(_per_gpu_check("power_fraction_of_limit", "mean power / power limit", usable, _power_fraction,
                                     min_power_fraction_of_limit, "", ">=", source, note))
    if max_temperature_c is not None:
        checks.append(_per_gpu_check("gpu_temperature", "max GPU temperature", usable,
                                     lambda g: g["reduced"].get("temperature_c"),
                                     max_temperature_c, "°C", "<=", source, note))
    checks.append(_throttle_check(usable, note))
    checks.append(_ecc_check(usable, note))
    checks.append(_foreign_process_check(usable, note))
    return checks


def _power_fraction(gpu: dict) -> float | None:
    power, limit = gpu["reduced"].get("power_w"), gpu["reduced"].get("power_limit_w")
    return power / limit if power is not None and limit else None


def _gpu_name(gpu: dict) -> str:
    return tm.gpu_label(gpu.get("index"), gpu.get("uuid"))


def _at(gpus: list[dict]) -> tuple[Location, ...]:
    """The telemetry's GPUs as locations (a GPU the sampler could not name is left out)."""
    return tuple(location for location in (gpu_location(g.get("index"), g.get("uuid")) for g in gpus)
                 if location is not None)


def _per_gpu_check(key: str, name: str, telemetry: dict | None, value_of, bound: float, unit: str,
                   comparison: Literal[">=", "<="], source: str, note: str) -> Check:
    """The worst GPU against the bound; the note names every GPU that missed (or the worst one)."""
    def missing(why: str) -> Check:
        return Check(key=key, name=name, kind="health", measured=None, bound=bound, unit=unit, comparison=comparison,
                     passed=None, note=why, source=source)

    if telemetry is None:
        return missing(note)
    gpus = [g for g in telemetry.get("gpus", []) if isinstance(g, dict)]
    values = [(g, value_of(g)) for g in gpus]
    known = [(g, v) for g, v in values if v is not None]
    unknown = [g for g, v in values if v is None]
    if not known:
        return missing("NVML reported no value for any GPU" + _unsupported_note(gpus))
    holds = (lambda v: v >= bound) if comparison == ">=" else (lambda v: v <= bound)
    worst_gpu, worst = (min if comparison == ">=" else max)(known, key=lambda pair: pair[1])
    missed = [(g, v) for g, v in known if not holds(v)]
    shown_unit = f" {unit}" if unit else ""
    if missed:
        where = ", ".join(f"{_gpu_name(g)} {_fmt(v)}{shown_unit}" for g, v in missed)
        return Check(key=key, name=name, kind="health", measured=worst, bound=bound, unit=unit, comparison=comparison,
                     passed=False, note=where, source=source, locations=_at([g for g, _ in missed]))
    if unknown:
        return Check(key=key, name=name, kind="health", measured=worst, bound=bound, unit=unit, comparison=comparison,
                     passed=None, source=source, locations=_at(unknown),
                     note=f"no value from {', '.join(_gpu_name(g) for g in unknown)}" + _unsupported_note(unknown))
    return Check(key=key, name=name, kind="health", measured=worst, bound=bound, unit=unit, comparison=comparison,
                 passed=True, note=f"worst: {_gpu_name(worst_gpu)}", source=source, locations=_at([worst_gpu]))


def _unsupported_note(gpus: list[dict]) -> str:
    reasons = sorted({f"{key}: {why}" for g in gpus for key, why in (g.get("unsupported") or {}).items()} |
                     {f"{key}: {why}" for g in gpus for key, why in (g.get("errors") or {}).items()})
    return f" ({'; '.join(reasons[:4])})" if reasons else ""


def _rule_check(key: str, name: str, source: str) -> Callable[..., Check]:
    """The outcomes of a health rule without a bound from the profile (throttling, ECC)."""
    def result(passed: bool | None, why: str, locations: tuple[Location, ...] = ()) -> Check:
        return Check(key=key, name=name, kind="health", measured=None, bound=None, unit="", comparison="==",
                     passed=passed, note=why, source=source, locations=locations)

    return result


def _gpus_reading(telemetry: dict, keys: set[str]) -> tuple[list[dict], list[dict]]:
    """(every GPU of the telemetry, those whose reductions hold any of ``keys``)."""
    gpus = [g for g in telemetry.get("gpus", []) if isinstance(g, dict)]
    return gpus, [g for g in gpus if keys & set(g.get("reduced", {}))]


def reason_shares(gpu: dict, window_s: float | None) -> dict[str, str]:
    """Each clock-event reason of one GPU's window with its share: ``30 of 150 samples (20 %, ~3.0 s)``."""
    samples = gpu.get("samples") or 0
    shares = {}
    for reason, count in sorted((gpu.get("clock_events") or {}).items(), key=lambda item: -item[1]):
        fraction = count / samples if samples else None
        seconds = f", ~{fraction * window_s:.1f} s" if fraction is not None and window_s else ""
        percent = f" ({fraction:.0%}{seconds})" if fraction is not None else ""
        shares[reason] = f"{reason} in {count} of {samples or '?'} samples{percent}"
    return shares


def _window_seconds(telemetry: dict) -> float | None:
    seconds = (telemetry.get("window") or {}).get("seconds")
    return float(seconds) if isinstance(seconds, (int, float)) else None


def _throttle_check(telemetry: dict | None, note: str) -> Check:
    """Fault reasons (heat, a hardware slowdown, a power brake) fail; the rest, SW power cap above all
    (normal under full load on a healthy H100: 149 of 151 samples), are information only."""
    result = _rule_check("throttling", "no thermal / hardware-slowdown throttling",
                         "harness rule: a healthy GPU never slows itself for heat or a hardware signal")
    if telemetry is None:
        return result(None, note)
    gpus, read = _gpus_reading(telemetry, {"clock_event_reasons"})
    if not read:
        return result(None, "NVML reported no clock-event reasons" + _unsupported_note(gpus))
    window_s = _window_seconds(telemetry)
    faults: list[str] = []
    faulty: list[dict] = []
    benign: list[str] = []
    for gpu in read:
        shares = reason_shares(gpu, window_s)
        bad = [shares.get(r, r) for r in gpu["reduced"]["clock_event_reasons"] if r in FAULT_REASONS]
        if bad:
            faults.append(f"{_gpu_name(gpu)}: " + ", ".join(bad))
            faulty.append(gpu)
        info = [text for reason, text in shares.items() if reason not in FAULT_REASONS]
        if info:
            benign.append(f"{_gpu_name(gpu)}: " + ", ".join(info))
    also = f"not faults: {'; '.join(benign)}" if benign else ""
    if faults:
        return result(False, "; ".join(faults) + (f" (also {also})" if also else ""), _at(faulty))
    unread = [g for g in gpus if g not in read]
    if unread:
        return result(None, f"no clock-event reasons from {', '.join(_gpu_name(g) for g in unread)}", _at(unread))
    return result(True, also)


def _foreign_process_check(telemetry: dict | None, note: str) -> Check:
    """A compute process on a case's GPU that is not one of its ranks (nor anything this harness started)
    shares the GPU: its numbers are not the GPU's."""
    result = _rule_check("foreign_processes", "no foreign process on the GPUs during the window",
                         "harness rule: a GPU under acceptance runs the case's ranks and nothing else")
    if telemetry is None:
        return result(None, note)
    gpus = [g for g in telemetry.get("gpus", []) if isinstance(g, dict)]
    found = [f"{_gpu_name(g)}: " + ", ".join(describe_foreign(p) for p in g["foreign_processes"])
             for g in gpus if g.get("foreign_processes")]
    if found:
        return result(False, "; ".join(found), _foreign_locations(gpus))
    unlisted = [g for g in gpus if not g.get("process_checks")]
    if unlisted:
        return result(None, "NVML listed no processes on " + ", ".join(_gpu_name(g) for g in unlisted)
                      + _unsupported_note(unlisted), _at(unlisted))
    return result(True, "")


def _foreign_locations(gpus: list[dict]) -> tuple[Location, ...]:
    """Each foreign process (pid and name) on its GPU."""
    found = (gpu_location(g.get("index"), g.get("uuid"), pid=_whole(p.get("pid")),
                          detail=str(p["name"]) if p.get("name") else None)
             for g in gpus for p in g.get("foreign_processes") or [] if isinstance(p, dict))
    return tuple(location for location in found if location is not None)


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def describe_foreign(process: dict) -> str:
    """``pid 4242 (python3, 10,240 MiB, seen 3.0-9.0 s into the window)``."""
    memory = process.get("used_memory_mib")
    shown = f", {memory:,.0f} MiB" if isinstance(memory, (int, float)) else ""
    return (f"pid {process.get('pid')} ({process.get('name')}{shown}, seen {process.get('first_seen_s')}-"
            f"{process.get('last_seen_s')} s into the window)")


def _ecc_check(telemetry: dict | None, note: str) -> Check:
    result = _rule_check("ecc_errors", "no new ECC errors",
                         "harness rule: volatile ECC counters must not grow during the window")
    if telemetry is None:
        return result(None, note)
    gpus, read = _gpus_reading(telemetry, {"ecc_corrected", "ecc_uncorrected"})
    if not read:
        return result(None, "NVML reported no ECC counters (ECC off or not supported)" + _unsupported_note(gpus))
    grown, growing = [], []
    for gpu in read:
        corrected = gpu["reduced"].get("ecc_corrected")
        uncorrected = gpu["reduced"].get("ecc_uncorrected")
        if (corrected or 0) > 0 or (uncorrected or 0) > 0:
            growing.append(gpu)
            grown.append(f"{_gpu_name(gpu)}: {_count(corrected)} new corrected, {_count(uncorrected)} new "
                         "uncorrected volatile ECC errors during the window")
    if grown:
        return result(False, "; ".join(grown), _at(growing))
    unread = [g for g in gpus if g not in read]
    if unread:
        return result(None, f"no ECC counters from {', '.join(_gpu_name(g) for g in unread)}", _at(unread))
    return result(True, "")


def _count(value: Any) -> str:
    return "?" if value is None else str(value)


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
                                     record.world_size, bounds.source, record.nodes))
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
                                 record.world_size, bounds.source, record.nodes))
    return checks + health_checks(record, bounds, telemetry_note)


def _scaling_check(key: str, name: str, measured: float | None, note: str, bounds: CaseBounds,
                   world_size: int, source: str, nodes: int = 1) -> Check:
    """An efficiency check; a GPU count the profile has no bound for is reported, never passed. A multi-node
    case meets the bound of its GPU count, measured on one node: its note says so, as a fabric between
    nodes may be slower than the links inside one (docs/slurm.md)."""
    bound_key = key_of_bound(key, ">=")
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
    return Check(key=key, name=name, kind="performance", measured=measured, bound=None, unit="", comparison=">=",
                 passed=None, source=source, note=f"not evaluated: no bound measured for {world_size} GPUs")


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
