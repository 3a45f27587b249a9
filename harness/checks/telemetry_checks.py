"""The GPU telemetry of a measured window → checks, per GPU (harness/telemetry.py samples it): utilization,
power, temperature against the profile's bounds, and the rules with no bound: no thermal or hardware
throttling, no new ECC errors, no foreign process. Pure.
"""

from __future__ import annotations

from typing import Any, Callable, Literal, Mapping

from harness import telemetry as tm
from harness.results.check import Check, _fmt
from harness.node.nvml import FAULT_REASONS
from harness.results.location import Location, gpu_location
from harness.results.telemetry_summary import GpuTelemetry, TelemetrySummary, read_telemetry


def telemetry_checks(telemetry: TelemetrySummary | dict | None, *, min_gpu_utilization_pct: float | None = None,
                     min_power_fraction_of_limit: float | None = None, max_temperature_c: float | None = None,
                     source: str = "", missing_note: str) -> list[Check]:
    """Per-GPU health over the window: utilization, power, temperature (when the profile bounds them),
    no thermal or hardware-slowdown throttling and no new ECC errors (always).

    Each is judged per GPU and a miss names the GPU (index and UUID). Without telemetry every check
    is not evaluated, with the reason; a GPU that reported no value makes a check not evaluated
    rather than passed.
    """
    summary = read_telemetry(telemetry)
    usable = summary if summary.ok else None
    note = summary.why_not(missing_note)
    checks = []
    if min_gpu_utilization_pct is not None:
        checks.append(_per_gpu_check("gpu_utilization", "mean GPU utilization", usable,
                                     lambda g: g.value("util_pct"),
                                     min_gpu_utilization_pct, "%", ">=", source, note))
    if min_power_fraction_of_limit is not None:
        checks.append(_per_gpu_check("power_fraction_of_limit", "mean power / power limit", usable, _power_fraction,
                                     min_power_fraction_of_limit, "", ">=", source, note))
    if max_temperature_c is not None:
        checks.append(_per_gpu_check("gpu_temperature", "max GPU temperature", usable,
                                     lambda g: g.value("temperature_c"),
                                     max_temperature_c, "°C", "<=", source, note))
    checks.append(_throttle_check(usable, note))
    checks.append(_ecc_check(usable, note))
    checks.append(_foreign_process_check(usable, note))
    return checks


def _power_fraction(gpu: GpuTelemetry) -> float | None:
    power, limit = gpu.value("power_w"), gpu.value("power_limit_w")
    return power / limit if power is not None and limit else None


def _gpu_name(gpu: GpuTelemetry) -> str:
    return tm.gpu_label(gpu.index, gpu.uuid)


def _at(gpus: list[GpuTelemetry]) -> tuple[Location, ...]:
    """The telemetry's GPUs as locations (a GPU the sampler could not name is left out)."""
    return tuple(location for location in (gpu_location(g.index, g.uuid) for g in gpus) if location is not None)


def _per_gpu_check(key: str, name: str, telemetry: TelemetrySummary | None,
                   value_of: Callable[[GpuTelemetry], float | None], bound: float, unit: str,
                   comparison: Literal[">=", "<="], source: str, note: str) -> Check:
    """The worst GPU against the bound; the note names every GPU that missed (or the worst one)."""
    def missing(why: str) -> Check:
        return Check(key=key, name=name, kind="health", measured=None, bound=bound, unit=unit, comparison=comparison,
                     passed=None, note=why, source=source)

    if telemetry is None:
        return missing(note)
    gpus = list(telemetry.gpus)
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


def _unsupported_note(gpus: list[GpuTelemetry]) -> str:
    reasons = sorted({f"{key}: {why}" for g in gpus for key, why in g.unsupported.items()} |
                     {f"{key}: {why}" for g in gpus for key, why in g.errors.items()})
    return f" ({'; '.join(reasons[:4])})" if reasons else ""


def _rule_check(key: str, name: str, source: str) -> Callable[..., Check]:
    """The outcomes of a health rule without a bound from the profile (throttling, ECC)."""
    def result(passed: bool | None, why: str, locations: tuple[Location, ...] = ()) -> Check:
        return Check(key=key, name=name, kind="health", measured=None, bound=None, unit="", comparison="==",
                     passed=passed, note=why, source=source, locations=locations)

    return result


def _gpus_reading(telemetry: TelemetrySummary, keys: set[str]) -> tuple[list[GpuTelemetry], list[GpuTelemetry]]:
    """(every GPU of the telemetry, those whose reductions hold any of ``keys``)."""
    gpus = list(telemetry.gpus)
    return gpus, [g for g in gpus if keys & set(g.reduced)]


def reason_shares(gpu: GpuTelemetry, window_s: float | None) -> dict[str, str]:
    """Each clock-event reason of one GPU's window with its share: ``30 of 150 samples (20 %, ~3.0 s)``."""
    samples = gpu.samples
    shares = {}
    for reason, count in sorted(gpu.clock_events.items(), key=lambda item: -item[1]):
        fraction = count / samples if samples else None
        seconds = f", ~{fraction * window_s:.1f} s" if fraction is not None and window_s else ""
        percent = f" ({fraction:.0%}{seconds})" if fraction is not None else ""
        shares[reason] = f"{reason} in {count} of {samples or '?'} samples{percent}"
    return shares


def _throttle_check(telemetry: TelemetrySummary | None, note: str) -> Check:
    """Fault reasons (heat, a hardware slowdown, a power brake) fail; the rest, SW power cap above all
    (normal under full load on a healthy H100: 149 of 151 samples), are information only."""
    result = _rule_check("throttling", "no thermal / hardware-slowdown throttling",
                         "harness rule: a healthy GPU never slows itself for heat or a hardware signal")
    if telemetry is None:
        return result(None, note)
    gpus, read = _gpus_reading(telemetry, {"clock_event_reasons"})
    if not read:
        return result(None, "NVML reported no clock-event reasons" + _unsupported_note(gpus))
    window_s = telemetry.window_s
    faults: list[str] = []
    faulty: list[GpuTelemetry] = []
    benign: list[str] = []
    for gpu in read:
        shares = reason_shares(gpu, window_s)
        bad = [shares.get(r, r) for r in gpu.reduced["clock_event_reasons"] if r in FAULT_REASONS]
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


def _foreign_process_check(telemetry: TelemetrySummary | None, note: str) -> Check:
    """A compute process on a case's GPU that is not one of its ranks (nor anything this harness started)
    shares the GPU: its numbers are not the GPU's."""
    result = _rule_check("foreign_processes", "no foreign process on the GPUs during the window",
                         "harness rule: a GPU under acceptance runs the case's ranks and nothing else")
    if telemetry is None:
        return result(None, note)
    gpus = list(telemetry.gpus)
    found = [f"{_gpu_name(g)}: " + ", ".join(describe_foreign(p) for p in g.foreign_processes)
             for g in gpus if g.foreign_processes]
    if found:
        return result(False, "; ".join(found), _foreign_locations(gpus))
    unlisted = [g for g in gpus if not g.process_checks]
    if unlisted:
        return result(None, "NVML listed no processes on " + ", ".join(_gpu_name(g) for g in unlisted)
                      + _unsupported_note(unlisted), _at(unlisted))
    return result(True, "")


def _foreign_locations(gpus: list[GpuTelemetry]) -> tuple[Location, ...]:
    """Each foreign process (pid and name) on its GPU."""
    found = (gpu_location(g.index, g.uuid, pid=_whole(p.get("pid")), detail=str(p["name"]) if p.get("name") else None)
             for g in gpus for p in g.foreign_processes)
    return tuple(location for location in found if location is not None)


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def describe_foreign(process: Mapping[str, Any]) -> str:
    """``pid 4242 (python3, 10,240 MiB, seen 3.0-9.0 s into the window)``."""
    memory = process.get("used_memory_mib")
    shown = f", {memory:,.0f} MiB" if isinstance(memory, (int, float)) else ""
    return (f"pid {process.get('pid')} ({process.get('name')}{shown}, seen {process.get('first_seen_s')}-"
            f"{process.get('last_seen_s')} s into the window)")


def _ecc_check(telemetry: TelemetrySummary | None, note: str) -> Check:
    result = _rule_check("ecc_errors", "no new ECC errors",
                         "harness rule: volatile ECC counters must not grow during the window")
    if telemetry is None:
        return result(None, note)
    gpus, read = _gpus_reading(telemetry, {"ecc_corrected", "ecc_uncorrected"})
    if not read:
        return result(None, "NVML reported no ECC counters (ECC off or not supported)" + _unsupported_note(gpus))
    grown, growing = [], []
    for gpu in read:
        corrected = gpu.reduced.get("ecc_corrected")
        uncorrected = gpu.reduced.get("ecc_uncorrected")
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
