"""Run the harness over a matrix and, optionally, the minimal reference loop over the same cases.

Prints one table: harness vs reference throughput per GPU, their ratio, step CV, CI, MFU — the
evidence that the harness measures the training speed and adds nothing to it.

    python benchmarks/core_matrix.py --models resnet50 resnet152 vit_b_16 --precisions bf16 fp16 \
        --gpus 1 2 4 --batch resnet50=256 resnet152=256 vit_b_16=256 --reference --out out/
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from harness.launch.benchmark import run_benchmark  # noqa: E402
from harness.launch.spec import BenchmarkSpec, LaunchSettings  # noqa: E402
from harness.cli import summary_line  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="+", required=True)
    p.add_argument("--precisions", nargs="+", default=["bf16", "fp16"])
    p.add_argument("--gpus", nargs="+", type=int, default=[1, 2, 4])
    p.add_argument("--batch", nargs="+", default=[], help="model=batch_per_gpu")
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--warmup", type=float, default=3.0)
    p.add_argument("--peak-tflops", type=float, default=None)
    p.add_argument("--device", default="cuda")
    p.add_argument("--reference", action="store_true", help="also run benchmarks/reference_loop.py")
    p.add_argument("--sync-cost", help="model:precision:gpus — run this case again with a host sync every step")
    p.add_argument("--budget-s", type=float, default=1e9, help="skip what would start after this many seconds")
    p.add_argument("--out", type=Path, required=True)
    ns = p.parse_args()
    ns.out.mkdir(parents=True, exist_ok=True)
    batches = {k: int(v) for k, v in (item.split("=") for item in ns.batch)}
    started = time.time()
    records = []
    records_path = ns.out / "records.jsonl"

    def over_budget() -> bool:
        return time.time() - started > ns.budget_s

    for gpus in ns.gpus:
        for model in ns.models:
            for precision in ns.precisions:
                if over_budget():
                    print(f"SKIPPED (budget) {model} {precision} x{gpus}", flush=True)
                    continue
                spec = BenchmarkSpec(model=model, precision=precision, batch_size_per_gpu=batches.get(model, 64),
                                     warmup_seconds=ns.warmup, measure_seconds=ns.seconds, peak_tflops=ns.peak_tflops,
                                     launch=LaunchSettings(gpus_per_node=gpus, device=ns.device, timeout_s=300))
                record = run_benchmark(spec, ns.out / "runs" / spec.case_id)
                records.append(record)
                with records_path.open("a") as fh:
                    fh.write(json.dumps(record.to_dict()) + "\n")
                print(summary_line(record), flush=True)
    reference: dict[tuple, dict] = {}
    if ns.reference:
        for gpus in ns.gpus:
            if over_budget():
                print(f"SKIPPED (budget) reference x{gpus}", flush=True)
                continue
            configs = [f"{m}:{p}:{batches.get(m, 64)}" for m in ns.models for p in ns.precisions]
            out = ns.out / f"reference-{gpus}gpu.json"
            cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={gpus}",
                   str(ROOT / "benchmarks" / "reference_loop.py"), "--configs", *configs,
                   "--seconds", str(ns.seconds), "--output", str(out)]
            subprocess.run(cmd, check=False, timeout=600)
            if out.exists():
                for r in json.loads(out.read_text()):
                    reference[(r["model"], r["precision"], r["world_size"])] = r
    sync_rows = []
    if ns.sync_cost and not over_budget():
        model, precision, gpus = ns.sync_cost.split(":")
        for sync_each_step in (False, True):
            spec = BenchmarkSpec(model=model, precision=precision, batch_size_per_gpu=batches.get(model, 64),
                                 warmup_seconds=ns.warmup, measure_seconds=ns.seconds, sync_each_step=sync_each_step,
                                 launch=LaunchSettings(gpus_per_node=int(gpus), device=ns.device, timeout_s=300))
            record = run_benchmark(spec, ns.out / "runs" / f"{spec.case_id}-sync{int(sync_each_step)}")
            sync_rows.append((sync_each_step, record))
            print("sync-each-step" if sync_each_step else "no per-step sync", summary_line(record), flush=True)

    lines = ["| model | prec | GPUs | harness /s/GPU | reference /s/GPU | ratio | step CV | CI95 ± | MFU | straggler |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        if not r.ok:
            reason = r.failure.reason[:80] if r.failure else ""
            lines.append(f"| {r.model} | {r.precision} | {r.world_size} | {r.status}: {reason} |||||||")
            continue
        ref = reference.get((r.model, r.precision, r.world_size))
        ref_tp = f"{ref['throughput_per_gpu']:.1f}" if ref else "—"
        if ref and ref["loss"] != ref["loss"]:
            ref_tp += " (NaN loss)"
        ratio = f"{r.throughput_per_gpu / ref['throughput_per_gpu']:.3f}" if ref else "—"
        ci = f"{r.throughput_ci95_rel * 100:.2f} %" if r.throughput_ci95_rel is not None else "—"
        mfu = f"{r.mfu * 100:.1f} %" if r.mfu is not None else "—"
        lines.append(f"| {r.model} | {r.precision} | {r.world_size} | {r.throughput_per_gpu:.1f} | {ref_tp} | "
                     f"{ratio} | {r.step_time_ms.cv * 100:.2f} % | {ci} | {mfu} | {r.straggler_ratio:.3f} |")
    if len(sync_rows) == 2 and all(rec.ok for _, rec in sync_rows):
        base, synced = sync_rows[0][1], sync_rows[1][1]
        lines.append("")
        lines.append(f"per-step host sync ({ns.sync_cost}): {base.throughput_per_gpu:.1f} -> "
                     f"{synced.throughput_per_gpu:.1f} /s per GPU "
                     f"({(synced.throughput_per_gpu / base.throughput_per_gpu - 1) * 100:+.2f} %)")
    table = "\n".join(lines)
    (ns.out / "table.md").write_text(table + "\n")
    print(table)
    print(f"wall time {time.time() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
