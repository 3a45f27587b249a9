"""How long a sign-off takes and how sure it is: the acceptance suite, timed, with every run's CI.

    python benchmarks/signoff_time.py --report-dir out/signoff                     # default matrix, once
    python benchmarks/signoff_time.py --times 3 --report-dir out/signoff -- -k "not soak"
    python benchmarks/signoff_time.py --report-dir out/fixed -- --harness-ci-target 0 \
        --harness-measure-seconds 60 -k "resnet50-bf16"                          # a fixed long window

Runs ``pytest acceptance`` (arguments after ``--`` are passed on) ``--times`` times and prints,
for each: the wall time; where the launches' time went (process start, imports, init, model build,
warmup, probe, measured window, summed over every run record); and per case the per-GPU
throughput, its 95 % CI half-width, the blocks and the reason the window stopped. With
``--times`` >= 2 it also prints whether every test's verdict was the same each time and the
spread of each case's throughput ((max - min) / median). A summary goes to REPORT_DIR/signoff.json.
Compare a run against a fixed-long-window run with ``harness compare A B``.

``--include RUN_DIR`` adds run directories written earlier (another call, another day) to the
stability analysis; ``--times 0 --include A --include B --include C`` only analyses them.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from harness.workloads.compilecache import summary as compile_cache_summary  # noqa: E402
PHASES = ("process_start", "import", "init", "build", "warmup", "probe", "measure", "gather")


def plugin_installed() -> bool:
    """Whether pytest loads the harness plugin by itself (installed) or needs ``-p harness.plugin``."""
    return any(ep.value.startswith("harness.plugin") for ep in importlib.metadata.entry_points(group="pytest11"))


def run_suite(report_dir: Path, pytest_args: list[str]) -> tuple[float, int, Path | None]:
    """(wall seconds, pytest exit status, the run directory it wrote)."""
    before = set(report_dir.glob("*/")) if report_dir.exists() else set()
    command = [sys.executable, "-m", "pytest", *([] if plugin_installed() else ["-p", "harness.plugin"]),
               "acceptance", f"--harness-report-dir={report_dir}", "-q", "-rfEs", *pytest_args]
    print("$ " + " ".join(command), flush=True)
    started = time.perf_counter()
    status = subprocess.call(command, cwd=ROOT)
    wall_s = time.perf_counter() - started
    after = [p for p in report_dir.glob("*/") if p not in before and p.name != "latest" and (p / "runs").is_dir()]
    return wall_s, status, max(after, key=lambda p: p.stat().st_mtime) if after else None


def read_run(run_dir: Path) -> dict:
    """Verdicts (test id -> outcome) and records (file stem -> record dict) of one session."""
    report_path = run_dir / "report.json"
    verdicts = {}
    if report_path.exists():
        for test in json.loads(report_path.read_text()).get("tests", []):
            verdicts[test["nodeid"].split("::", 1)[-1]] = test["outcome"]
    records = {path.stem: json.loads(path.read_text()) for path in sorted((run_dir / "runs").glob("*.json"))}
    return {"verdicts": verdicts, "records": records}


def phase_totals(records: dict[str, dict]) -> dict[str, float]:
    totals = {phase: 0.0 for phase in PHASES}
    for record in records.values():
        for phase in PHASES:
            totals[phase] += float(record.get("phases_s", {}).get(phase, 0.0) or 0.0)
    return totals


def print_run(index: int, wall_s: float, status: int, run: dict) -> None:
    records = run["records"]
    print(f"\n=== run {index}: {wall_s:.1f} s wall, pytest exit {status}, {len(records)} run records, "
          f"{sum(1 for v in run['verdicts'].values() if v == 'passed')} passed / "
          f"{sum(1 for v in run['verdicts'].values() if v == 'failed')} failed / "
          f"{sum(1 for v in run['verdicts'].values() if v == 'skipped')} skipped")
    totals = phase_totals(records)
    print("time in launches (s, summed over records): " +
          ", ".join(f"{phase} {seconds:.1f}" for phase, seconds in totals.items()) +
          f"; total {sum(totals.values()):.1f}")
    cis = {name: r["throughput_ci95_rel"] for name, r in records.items() if r.get("throughput_ci95_rel") is not None}
    if cis:
        worst = max(cis, key=cis.get)
        print(f"widest CI95: {cis[worst] * 100:.2f} % ({worst}); {len(cis)} of {len(records)} records have a CI")
    print(f"{'record':<42} {'per GPU':>12} {'CI95':>7} {'blocks':>6} {'stop':<10} {'measure s':>9} {'launch s':>8}")
    for name, record in records.items():
        settings = record.get("settings", {})
        per_gpu = record.get("throughput_per_gpu")
        ci = record.get("throughput_ci95_rel")
        print(f"{name:<42} {per_gpu if per_gpu is None else format(per_gpu, ',.1f'):>12} "
              f"{'-' if ci is None else format(ci * 100, '.2f') + ' %':>7} {record.get('ci_blocks') or '-':>6} "
              f"{settings.get('measure_stop_reason') or record.get('status') or '-':<10} "
              f"{record.get('measure_s') or 0:>9.2f} {record.get('phases_s', {}).get('launch_total', 0):>8.1f}"
              + (f"  compile {compile_cache_summary(record['compile_cache'])}" if record.get("compile_cache") else ""))


def run_summary(run_dir: Path, run: dict, **facts) -> dict:
    """One run's entry in signoff.json: where it is, the facts given, its verdicts, figures and CIs."""
    return {"run_dir": str(run_dir), **facts, "verdicts": run["verdicts"],
            "throughput_per_gpu": {k: r.get("throughput_per_gpu") for k, r in run["records"].items()},
            "ci95_rel": {k: r.get("throughput_ci95_rel") for k, r in run["records"].items()}}


def stability(runs: list[dict]) -> dict:
    """Same verdict every time per test, and each record's throughput spread over the runs."""
    tests = sorted(set().union(*(run["verdicts"] for run in runs)))
    unstable = {test: [run["verdicts"].get(test) for run in runs] for test in tests
                if len({run["verdicts"].get(test) for run in runs}) > 1}
    spread = {}
    for name in sorted(set().union(*(run["records"] for run in runs))):
        values = [run["records"][name]["throughput_per_gpu"] for run in runs
                  if name in run["records"] and run["records"][name].get("throughput_per_gpu")]
        if len(values) == len(runs):
            spread[name] = {"values": values, "spread_rel": (max(values) - min(values)) / statistics.median(values)}
    return {"tests": len(tests), "unstable": unstable, "spread": spread}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--times", type=int, default=1, help="run the suite this many times (>= 2: stability)")
    parser.add_argument("--report-dir", type=Path, default=ROOT / "reports" / "signoff")
    parser.add_argument("--include", type=Path, action="append", default=[], metavar="RUN_DIR",
                        help="a run directory from an earlier suite run to add to the stability analysis "
                             "(repeatable; with --times 0 nothing new is run)")
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER, help="after --: arguments for pytest")
    ns = parser.parse_args()
    if ns.times < 0 or (ns.times == 0 and not ns.include):
        parser.error(f"--times {ns.times}: expected a count >= 1 (0 only with --include)")
    for run_dir in ns.include:
        if not (run_dir / "runs").is_dir():
            parser.error(f"--include {run_dir}: not a run directory (no runs/ inside); "
                         "pass a directory such as reports/20261121-120000-host-h200")
    pytest_args = ns.pytest_args[1:] if ns.pytest_args[:1] == ["--"] else ns.pytest_args
    ns.report_dir = ns.report_dir.resolve()
    summary: dict = {"pytest_args": pytest_args, "runs": []}
    runs = []
    for index, run_dir in enumerate(ns.include, start=1):
        run_dir = run_dir.resolve()
        run = read_run(run_dir)
        runs.append(run)
        wall_file = run_dir / "signoff-wall.json"  # written beside the run by an earlier signoff_time.py
        earlier = json.loads(wall_file.read_text()) if wall_file.exists() else {}
        print(f"\n(included {run_dir})")
        print_run(index, earlier.get("wall_s", float("nan")), earlier.get("exit_status", -1), run)
        summary["runs"].append(run_summary(run_dir, run, included=True, wall_s=earlier.get("wall_s")))
    for index in range(len(runs) + 1, len(runs) + ns.times + 1):
        wall_s, status, run_dir = run_suite(ns.report_dir, pytest_args)
        if run_dir is None:
            print(f"run {index}: pytest exit {status} and no run directory under {ns.report_dir}: nothing to read")
            return 2
        (run_dir / "signoff-wall.json").write_text(json.dumps({"wall_s": wall_s, "exit_status": status}))
        run = read_run(run_dir)
        runs.append(run)
        print_run(index, wall_s, status, run)
        summary["runs"].append(run_summary(run_dir, run, wall_s=wall_s, exit_status=status,
                                           phase_totals_s=phase_totals(run["records"])))
    if len(runs) > 1:
        result = stability(runs)
        summary["stability"] = result
        print(f"\n=== stability over {len(runs)} runs: {result['tests']} tests, "
              f"{len(result['unstable'])} with a verdict that changed")
        for test, outcomes in result["unstable"].items():
            print(f"  CHANGED {test}: {' / '.join(map(str, outcomes))}")
        worst = sorted(result["spread"].items(), key=lambda item: -item[1]["spread_rel"])
        for name, item in worst:
            print(f"  {name:<42} spread {item['spread_rel'] * 100:.2f} %  "
                  f"({', '.join(format(v, ',.1f') for v in item['values'])})")
    ns.report_dir.mkdir(parents=True, exist_ok=True)
    (ns.report_dir / "signoff.json").write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
