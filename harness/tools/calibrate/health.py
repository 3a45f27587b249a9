"""Health bounds from healthy runs (pure): the rules benchmarks/health_bounds.py prints and ``harness
calibrate`` writes, in one place. Records are read as JSON dicts (``RunRecord.to_dict()`` or a
records file), so the script reads docs/data/ without rebuilding records of older schemas.

The rules (issue 17: every health bound from >= 3 healthy runs, with its margin stated):

  min_gpu_utilization_pct      per case: its lowest mean utilization of any GPU - UTIL_CASE_MARGIN_PCT,
                               rounded down to a whole percent ([defaults] in the script: any case's
                               lowest - UTIL_MARGIN_PCT)
  max_step_time_cv             per case: its highest step-time CV + CV_MARGIN, rounded up to 0.001
  min_power_fraction_of_limit  the lowest mean power / enforced limit of any GPU in any case x POWER_MARGIN,
                               rounded down to 0.01
  max_temperature_c            the hottest reading + TEMPERATURE_MARGIN_C (printed by the script only: a
                               reading follows the site's cooling; thermal slowdown fails the throttling check)
  max_straggler_ratio          1 + STRAGGLER_EXCESS_FACTOR x (the highest ratio of any multi-GPU run - 1),
                               rounded up to 0.001
  min_gpu_uniformity           1 - UNIFORMITY_DEFICIT_FACTOR x the worst deficit (1 - slowest GPU / median
                               GPU of one run), rounded down to 0.001, on GPUs only
  [soak] max_throughput_decay  SOAK_DECAY_FACTOR x the highest decay of any healthy soak, rounded up to
                               0.001 (benchmarks/soak_bounds.py; none when no soak slowed at all)
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from harness.results.telemetry_summary import GpuTelemetry, read_telemetry

UTIL_MARGIN_PCT = 5.0
"""Points under the lowest healthy mean: a GPU idle 5 % more of the window is a real change."""
POWER_MARGIN = 0.85
"""15 % under the lowest healthy mean power fraction (power follows the model's arithmetic intensity)."""
TEMPERATURE_MARGIN_C = 10.0
"""Over the hottest healthy reading: room for a warmer data-centre aisle, not for a failing cooler."""
UTIL_CASE_MARGIN_PCT = 3.0
"""Points under a case's own lowest healthy mean: about twice the spread of one case's lowest figure
between hosts (ResNet-50 bf16: 95.8 on one H200 host, 97.5 on another), and small enough that a host
sync every step (fp16 ResNet-50: 92.5-92.8 % against 99.0-99.7 % healthy on H100) fails."""
CV_MARGIN = 0.04
"""Added to the highest healthy step-time CV (harness calibrate's default --cv-margin)."""
STRAGGLER_EXCESS_FACTOR = 2.0
"""The bound allows twice the worst healthy excess over 1: 155 healthy multi-GPU H200 records, highest
1.022, give 1.044 (thresholds/h200.toml)."""
UNIFORMITY_DEFICIT_FACTOR = 2.0
"""The bound allows twice the worst healthy deficit: 100 healthy multi-GPU H200 records, worst slowest /
median GPU 0.9891, give 0.978, which a GPU 5 % slower than its one peer fails (thresholds/h200.toml)."""
SOAK_DECAY_FACTOR = 2.0
"""The soak's throughput-decay bound allows twice the worst healthy decay (last window vs first), as the
straggler bound allows twice the worst healthy excess: a healthy GPU slows a little while it warms up
under its power limit (H100 0.32-0.45 % over 2 min), a throttling or sagging one slows more."""
MIN_RUNS = 3
"""Healthy runs a bound needs (issue 17): with fewer, calibrate leaves the key out and says so."""


# ---------------------------------------------------------------------------------------------
# Figures of one record


def telemetry_gpus(record: dict) -> list[GpuTelemetry]:
    """The GPUs of a successful record's telemetry (empty when there is none or it failed)."""
    telemetry = read_telemetry(record.get("telemetry"))
    if record.get("status") != "ok" or telemetry.status != "ok":
        return []
    return [gpu for gpu in telemetry.gpus if gpu.reduced]


def gpu_figures(gpu: GpuTelemetry) -> dict[str, float | None]:
    """One GPU's window: mean utilization %, mean power / enforced limit, highest temperature °C."""
    power, limit = gpu.value("power_w"), gpu.value("power_limit_w")
    return {"util_pct": gpu.value("util_pct"), "power_fraction": power / limit if power and limit else None,
            "temperature_c": gpu.value("temperature_c")}


def step_time_cv(record: dict) -> float | None:
    return (record.get("step_time_ms") or {}).get("cv")


def case_figures(record: dict) -> dict | None:
    """One 1-GPU record -> its health figures (its first GPU's); None when it has no telemetry or is not a
    1-GPU run (the script's reading)."""
    gpus = telemetry_gpus(record)
    if record.get("world_size") != 1 or not gpus:
        return None
    return {**gpu_figures(gpus[0]), "step_time_cv": step_time_cv(record)}


def slowest_gpu_fraction(record: dict) -> float | None:
    """Slowest GPU's own rate / the median GPU's in one successful GPU record of 2 or more GPUs; None otherwise.

    Independent 1-GPU runs (every GPU its own model at once) carry each GPU's rate; DDP runs each rank's
    unsynchronised compute step time (the straggler probe), whose inverse is its rate."""
    if record.get("status") != "ok" or record.get("device_kind") != "cuda":
        return None
    ranks = record.get("per_rank") or []
    if record.get("independent"):
        rates = [r["throughput"] for r in ranks if r.get("throughput")]
    elif (record.get("world_size") or 0) > 1:
        rates = [1.0 / r["compute_step_ms"] for r in ranks if r.get("compute_step_ms")]
    else:
        return None
    if len(rates) < 2:
        return None
    return min(rates) / statistics.median(rates)


# ---------------------------------------------------------------------------------------------
# The rules


def round_down(value: float, decimals: int) -> float:
    """Rounded down; round() first so that float noise (0.97 x 100 = 96.99999...) does not cost a step."""
    scale = 10**decimals
    return math.floor(round(value * scale, 6)) / scale


def round_up(value: float, decimals: int) -> float:
    """Rounded up; round() first so that float noise (0.011 + 0.04 = 0.05100...01) does not add a step."""
    scale = 10**decimals
    return math.ceil(round(value * scale, 6)) / scale


def util_bound(values: Iterable[float], margin_pct: float = UTIL_CASE_MARGIN_PCT) -> int:
    return int(round_down(min(values) - margin_pct, 0))


def cv_bound(values: Iterable[float], margin: float = CV_MARGIN) -> float:
    return round_up(max(values) + margin, 3)


def power_bound(values: Iterable[float]) -> float:
    return round_down(min(values) * POWER_MARGIN, 2)


def temperature_bound(values: Iterable[float]) -> int:
    return int(round_up(max(values) + TEMPERATURE_MARGIN_C, 0))


def straggler_bound(ratios: Iterable[float], factor: float = STRAGGLER_EXCESS_FACTOR) -> float:
    return max(1.0, round_up(1 + factor * (max(ratios) - 1), 3))


def uniformity_bound(fractions: Iterable[float], factor: float = UNIFORMITY_DEFICIT_FACTOR) -> float:
    return round_down(1 - factor * (1 - min(fractions)), 3)


def soak_decay_bound(decays: Iterable[float], factor: float = SOAK_DECAY_FACTOR) -> float | None:
    """[soak] max_throughput_decay from healthy soaks' decays; None when none slowed (a rule of "twice
    the worst" then gives 0, which every soak's noise would fail: the profile needs other soaks)."""
    worst = max(decays)
    return round_up(factor * worst, 3) if worst > 0 else None


# ---------------------------------------------------------------------------------------------
# benchmarks/health_bounds.py: 1-GPU records, each case's figures and the [defaults] they give


def case_bounds(figures: dict[str, list[float]]) -> dict[str, float]:
    """One case's own utilization and step-time CV bounds, from its figures over the runs."""
    bounds: dict[str, float] = {}
    if figures.get("util_pct"):
        bounds["min_gpu_utilization_pct"] = util_bound(figures["util_pct"], UTIL_CASE_MARGIN_PCT)
    if figures.get("step_time_cv"):
        bounds["max_step_time_cv"] = cv_bound(figures["step_time_cv"])
    return bounds


def summarize(records: Sequence[dict]) -> tuple[dict[str, dict[str, list[float]]], dict[str, float]]:
    """(case -> figure -> values over runs, the [defaults] bounds they give)."""
    cases: dict[str, dict[str, list[float]]] = {}
    for record in records:
        figures = case_figures(record)
        if figures is None:
            continue
        case = f"{record['model']} {record['precision']}"
        for name, value in figures.items():
            if value is not None:
                cases.setdefault(case, {}).setdefault(name, []).append(float(value))
    every = {name: [v for case in cases.values() for v in case.get(name, [])]
             for name in ("util_pct", "power_fraction", "temperature_c", "step_time_cv")}
    bounds: dict[str, Any] = {}
    if every["util_pct"]:
        bounds["min_gpu_utilization_pct"] = util_bound(every["util_pct"], UTIL_MARGIN_PCT)
    if every["power_fraction"]:
        bounds["min_power_fraction_of_limit"] = power_bound(every["power_fraction"])
    if every["temperature_c"]:
        bounds["max_temperature_c"] = temperature_bound(every["temperature_c"])
    if every["step_time_cv"]:
        bounds["max_step_time_cv"] = cv_bound(every["step_time_cv"])
    return cases, bounds


# ---------------------------------------------------------------------------------------------
# harness calibrate: every record of the calibration (every GPU count, every GPU), each bound or why not


@dataclass(frozen=True, kw_only=True, slots=True)
class HealthBound:
    """One health bound as calibrate writes it, or leaves it out (``value`` None) with the reason."""

    key: str
    value: float | None
    rule: str
    """How it was derived: the rule, the number of runs and the measured extreme; or why it is left out."""

    @property
    def text(self) -> str:
        """``max_straggler_ratio 1.044 = 1 + 2 x (highest 1.022 of 6 runs - 1)`` / ``... left out: why``."""
        if self.value is None:
            return f"{self.key} left out: {self.rule}"
        return f"{self.key} {self.value:g} = {self.rule}"


@dataclass(frozen=True, kw_only=True, slots=True)
class HealthBounds:
    defaults: tuple[HealthBound, ...]
    """Power, straggler ratio, GPU uniformity, temperature: over every case."""
    cases: dict[tuple[str, str], tuple[HealthBound, ...]]
    """(model, precision) -> its own utilization and step-time CV."""


def _too_few(what: str, runs: int) -> str:
    """``2 runs with GPU telemetry (utilization); a bound needs 3 or more (issue 17)``."""
    return f"{runs} run{'s' if runs != 1 else ''} with {what}; a bound needs {MIN_RUNS} or more (issue 17)"


def _per_gpu_values(records: Sequence[dict], figure: str) -> tuple[list[float], int]:
    """(the figure of every GPU of every record with telemetry, how many records gave one)."""
    values, runs = [], 0
    for record in records:
        own = [v for gpu in telemetry_gpus(record) if (v := gpu_figures(gpu)[figure]) is not None]
        values += own
        runs += bool(own)
    return values, runs


def _no_telemetry(device: str, runs: int, what: str) -> str:
    if device == "cpu":
        return "CPU ranks: no GPU telemetry (the check is not evaluated)"
    return _too_few(what, runs)


def case_health(records: Sequence[dict], device: str, cv_margin: float | None) -> tuple[HealthBound, ...]:
    """One case's utilization and step-time CV bounds from its successful records at every GPU count (the
    bounds hold at every count, so every count's runs are read)."""
    util, util_runs = _per_gpu_values(records, "util_pct")
    if util_runs >= MIN_RUNS:
        found = HealthBound(key="min_gpu_utilization_pct", value=util_bound(util, UTIL_CASE_MARGIN_PCT),
                            rule=f"lowest {min(util):.1f} % of {len(util)} GPU readings over {util_runs} runs - "
                                 f"{UTIL_CASE_MARGIN_PCT:g} points")
    else:
        found = HealthBound(key="min_gpu_utilization_pct", value=None,
                            rule=_no_telemetry(device, util_runs, "GPU telemetry (utilization)"))
    cvs = [value for record in records if (value := step_time_cv(record)) is not None]
    if cv_margin is None:
        cv = HealthBound(key="max_step_time_cv", value=None, rule="--cv-margin off")
    elif len(cvs) < MIN_RUNS:
        cv = HealthBound(key="max_step_time_cv", value=None, rule=_too_few("a step-time CV", len(cvs)))
    else:
        bound, note = cv_bound(cvs, cv_margin), ""
        if bound > 1:  # the schema's maximum: the node's step times are very noisy
            bound, note = 1.0, ", clamped to 1.0 (the schema's maximum): this node's step times are very noisy"
        cv = HealthBound(key="max_step_time_cv", value=bound,
                         rule=f"highest {max(cvs):.4f} over {len(cvs)} runs + {cv_margin:g}{note}")
    return found, cv


def node_health(records: Sequence[dict], device: str, gpus: int,
                straggler_factor: float | None) -> tuple[HealthBound, ...]:
    """The [defaults] health bounds from every successful record of the calibration."""
    power, power_runs = _per_gpu_values(records, "power_fraction")
    if power_runs >= MIN_RUNS:
        power_fraction = HealthBound(key="min_power_fraction_of_limit", value=power_bound(power),
                                   rule=f"lowest {min(power):.3f} of the limit ({len(power)} GPU readings over "
                                        f"{power_runs} runs) x {POWER_MARGIN:g}")
    else:
        power_fraction = HealthBound(key="min_power_fraction_of_limit", value=None,
                                   rule=_no_telemetry(device, power_runs, "GPU telemetry (power)"))
    ratios = [r["straggler_ratio"] for r in records
              if (r.get("world_size") or 0) > 1 and r.get("straggler_ratio") is not None]
    if straggler_factor is None:
        straggler = HealthBound(key="max_straggler_ratio", value=None, rule="--straggler-factor off")
    elif len(ratios) < MIN_RUNS:
        straggler = HealthBound(key="max_straggler_ratio", value=None,
                                rule=_too_few("2 or more GPUs (a straggler ratio)", len(ratios)))
    else:
        straggler = HealthBound(key="max_straggler_ratio", value=straggler_bound(ratios, straggler_factor),
                                rule=f"1 + {straggler_factor:g} x (highest {max(ratios):.4f} of {len(ratios)} "
                                     "multi-GPU runs - 1)")
    return power_fraction, straggler, _uniformity(records, device, gpus), HealthBound(
        key="max_temperature_c", value=None,
        rule="a reading follows the site's cooling, not the GPU's health; thermal slowdown fails the throttling "
             "check on its own")


def _uniformity(records: Sequence[dict], device: str, gpus: int) -> HealthBound:
    fractions = [f for record in records if (f := slowest_gpu_fraction(record)) is not None]
    if device == "cpu":
        why = "CPU ranks share the host's cores: uniformity is judged on GPUs only (not evaluated)"
    elif gpus < 2:
        why = "one GPU: no other GPU to compare it with (uniformity needs 2 or more; not evaluated)"
    elif len(fractions) < MIN_RUNS:
        why = _too_few("per-GPU rates of 2 or more GPUs", len(fractions))
    else:
        worst = min(fractions)
        return HealthBound(key="min_gpu_uniformity", value=uniformity_bound(fractions),
                           rule=f"1 - {UNIFORMITY_DEFICIT_FACTOR:g} x the worst deficit {1 - worst:.4f} (slowest GPU "
                                f"/ median GPU {worst:.4f} at worst over {len(fractions)} runs)")
    return HealthBound(key="min_gpu_uniformity", value=None, rule=why)


def calibrated_health(records: Sequence[dict], *, device: str, gpus: int, cv_margin: float | None,
                      straggler_factor: float | None) -> HealthBounds:
    """Every health bound calibrate writes, from the calibration's successful records (as dicts)."""
    ok = [r for r in records if r.get("status") == "ok"]
    by_case: dict[tuple[str, str], list[dict]] = {}
    for record in ok:
        by_case.setdefault((record["model"], record["precision"]), []).append(record)
    return HealthBounds(defaults=node_health(ok, device, gpus, straggler_factor),
                        cases={case: case_health(runs, device, cv_margin) for case, runs in by_case.items()})
