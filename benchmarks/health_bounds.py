"""Health bounds of a profile from healthy runs: utilization, power, temperature and step-time CV.

Issue 17 item 3: every health bound in a measured profile comes from >= 3 runs on healthy GPUs,
with the median, the spread and a stated margin. This reads the run records of those runs
(run directories' ``runs/*.json``, ``records.jsonl[.gz]`` files as docs/data/ keeps them, or a
``session.json[.gz]``),
prints each case's figures over the runs, and the [defaults] bounds they give:

  min_gpu_utilization_pct      lowest mean utilization of any case in any run - UTIL_MARGIN_PCT,
                               rounded down to a whole percent; per case (its own table): the
                               case's lowest - UTIL_CASE_MARGIN_PCT
  min_power_fraction_of_limit  lowest mean power / enforced limit of any case x POWER_MARGIN, rounded
                               down to 0.01 (DCGM's targeted power test asks 0.75 of TDP under GEMM)
  max_temperature_c            highest temperature of any case + TEMPERATURE_MARGIN_C
  max_step_time_cv             highest step-time CV of any case + CV_MARGIN (harness calibrate's margin);
                               per case: the case's highest + CV_MARGIN

Only 1-GPU records are read (each GPU's own figures); a straggler bound needs several GPUs.

    python benchmarks/health_bounds.py docs/data/2026-11-24-h100x1-health/records.jsonl.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import statistics
import sys
from pathlib import Path

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
"""Added to the highest healthy step-time CV, as `harness calibrate` does (tools/calibrate/bounds.py)."""


def read_records(paths: list[Path]) -> list[dict]:
    records = []
    for path in paths:
        if path.is_dir():
            records += [json.loads(p.read_text()) for p in sorted(path.glob("**/runs/*.json"))]
            continue
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt") as handle:
            if path.name.startswith("session.json"):  # a session's results, each with its record
                results = json.load(handle).get("results", {}).values()
                records += [result["record"] for result in results if isinstance(result.get("record"), dict)]
            else:
                records += [json.loads(line) for line in handle if line.strip()]
    return records


def case_figures(record: dict) -> dict | None:
    """One 1-GPU record -> its health figures; None when it has no telemetry or is not a 1-GPU run."""
    telemetry = record.get("telemetry") or {}
    if record.get("world_size") != 1 or record.get("status") != "ok" or telemetry.get("status") != "ok":
        return None
    reduced = telemetry["gpus"][0]["reduced"]
    power, limit = reduced.get("power_w"), reduced.get("power_limit_w")
    return {"util_pct": reduced.get("util_pct"), "power_fraction": power / limit if power and limit else None,
            "temperature_c": reduced.get("temperature_c"), "step_time_cv": (record.get("step_time_ms") or {}).get("cv")}


def _util_bound(values: list[float], margin_pct: float) -> int:
    return math.floor(min(values) - margin_pct)


def _cv_bound(values: list[float]) -> float:
    return math.ceil((max(values) + CV_MARGIN) * 1000) / 1000


def case_bounds(figures: dict[str, list[float]]) -> dict[str, float]:
    """One case's own utilization and step-time CV bounds, from its figures over the runs."""
    bounds: dict[str, float] = {}
    if figures.get("util_pct"):
        bounds["min_gpu_utilization_pct"] = _util_bound(figures["util_pct"], UTIL_CASE_MARGIN_PCT)
    if figures.get("step_time_cv"):
        bounds["max_step_time_cv"] = _cv_bound(figures["step_time_cv"])
    return bounds


def summarize(records: list[dict]) -> tuple[dict[str, dict[str, list[float]]], dict[str, float]]:
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
    bounds = {}
    if every["util_pct"]:
        bounds["min_gpu_utilization_pct"] = _util_bound(every["util_pct"], UTIL_MARGIN_PCT)
    if every["power_fraction"]:
        bounds["min_power_fraction_of_limit"] = math.floor(min(every["power_fraction"]) * POWER_MARGIN * 100) / 100
    if every["temperature_c"]:
        bounds["max_temperature_c"] = math.ceil(max(every["temperature_c"]) + TEMPERATURE_MARGIN_C)
    if every["step_time_cv"]:
        bounds["max_step_time_cv"] = _cv_bound(every["step_time_cv"])
    return cases, bounds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path, help="run directories or records.jsonl[.gz] files")
    args = parser.parse_args(argv)
    missing = [str(p) for p in args.paths if not p.exists()]
    if missing:
        print(f"health_bounds: no such file or directory: {', '.join(missing)}", file=sys.stderr)
        return 2
    cases, bounds = summarize(read_records(args.paths))
    if not cases:
        print("health_bounds: no healthy 1-GPU record with telemetry in " + ", ".join(map(str, args.paths)),
              file=sys.stderr)
        return 1
    print("| case | runs | util % min/median/max | power/limit min/median | max temp °C | step CV max |")
    print("|---|---|---|---|---|---|")
    for case, figures in sorted(cases.items()):
        util, power = figures.get("util_pct", []), figures.get("power_fraction", [])
        temp, cv = figures.get("temperature_c", []), figures.get("step_time_cv", [])
        print(f"| {case} | {len(util)} | {min(util):.1f} / {statistics.median(util):.1f} / {max(util):.1f} | "
              f"{min(power):.3f} / {statistics.median(power):.3f} | {max(temp):.0f} | {max(cv):.4f} |")
    print("\n[defaults] bounds (margins in this script's docstring):")
    for key, value in bounds.items():
        print(f"{key} = {value}")
    print("\nper-case bounds:")
    for case, figures in sorted(cases.items()):
        model, precision = case.split()
        own = case_bounds(figures)
        print(f"[models.{model}.{precision}] " + ", ".join(f"{k} = {v}" for k, v in own.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
