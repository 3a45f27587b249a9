"""What the telemetry sampler costs: one case launched with the sampler on and off, alternately.

    python benchmarks/telemetry_overhead.py --model resnet50 --precision bf16 --gpus 4 --batch 256 \
        --pairs 3 --seconds 10 --out out/overhead

Launches alternate in ABBA order (off, on, on, off, ...) so a slow drift (clocks, heat) falls on
both sides equally. Prints each launch's per-GPU throughput, the median with and without the
sampler, and the cost = 1 - median(on) / median(off); the requirement is a cost under 0.5 %. The
records (with the sampler's summary, including the CPU seconds it spent) go to OUT/records.jsonl.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from harness.launch.benchmark import run_benchmark  # noqa: E402
from harness.launch.spec import BenchmarkSpec, LaunchSettings  # noqa: E402

REQUIRED_MAX_COST = 0.005


def abba(pairs: int) -> list[bool]:
    """Sampler on (True) / off (False) per launch: off, on, on, off, off, on, ..."""
    order: list[bool] = []
    for index in range(pairs):
        order += [False, True] if index % 2 == 0 else [True, False]
    return order


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--precision", default="bf16")
    p.add_argument("--gpus", type=int, default=1)
    p.add_argument("--batch", type=int, required=True, help="per-GPU batch")
    p.add_argument("--device", default="cuda")
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--seconds", type=float, default=10.0, help="measured window of each launch")
    p.add_argument("--warmup", type=float, default=5.0)
    p.add_argument("--period", type=float, default=0.1, help="sampler period, seconds")
    p.add_argument("--out", type=Path, required=True)
    ns = p.parse_args()
    ns.out.mkdir(parents=True, exist_ok=True)
    throughput: dict[bool, list[float]] = {True: [], False: []}
    with open(ns.out / "records.jsonl", "w") as records:
        for index, sampler_on in enumerate(abba(ns.pairs)):
            spec = BenchmarkSpec(model=ns.model, precision=ns.precision, batch_size_per_gpu=ns.batch,
                                 warmup_seconds=ns.warmup, measure_seconds=ns.seconds,
                                 launch=LaunchSettings(gpus_per_node=ns.gpus, device=ns.device, timeout_s=600,
                                                       telemetry=sampler_on, telemetry_period_s=ns.period))
            record = run_benchmark(spec, ns.out / f"launch{index}-{'on' if sampler_on else 'off'}")
            records.write(json.dumps(record.to_dict()) + "\n")
            records.flush()
            if not record.ok or record.throughput_per_gpu is None:
                print(f"launch {index} ({'on' if sampler_on else 'off'}) failed: "
                      f"{record.failure.reason if record.failure else record.status}", flush=True)
                return 2
            throughput[sampler_on].append(record.throughput_per_gpu)
            tele = record.telemetry or {}
            extra = (f", {tele['window']['samples']} samples, sampler CPU {tele.get('sampler_cpu_s')} s"
                     if tele.get("status") == "ok" else f", telemetry {tele.get('status')}")
            print(f"launch {index}: sampler {'on ' if sampler_on else 'off'} {record.throughput_per_gpu:,.1f} "
                  f"{record.sample_unit}/s per GPU (CI95 ±{(record.throughput_ci95_rel or 0) * 100:.2f} %){extra}",
                  flush=True)
    on, off = statistics.median(throughput[True]), statistics.median(throughput[False])
    cost = 1.0 - on / off
    verdict = "PASS" if cost < REQUIRED_MAX_COST else "FAIL"
    print(f"median with sampler {on:,.1f}, without {off:,.1f}: cost {cost * 100:+.2f} % "
          f"({verdict}: must be < {REQUIRED_MAX_COST * 100:.1f} %)")
    (ns.out / "summary.json").write_text(json.dumps({"on": throughput[True], "off": throughput[False],
                                                     "median_on": on, "median_off": off, "cost": cost,
                                                     "verdict": verdict}, indent=1))
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
