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

Only 1-GPU records are read (each GPU's own figures); a straggler bound needs several GPUs. The rules
and their margins live in harness/tools/calibrate/health.py, which `harness calibrate` applies too.

    python benchmarks/health_bounds.py docs/data/2026-11-24-h100x1-health/records.jsonl.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from harness.tools.calibrate.health import case_bounds, summarize  # noqa: E402


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
