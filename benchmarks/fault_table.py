"""Run the launcher-level rows of the fault table and print what each produced.

    python benchmarks/fault_table.py --device cpu                 # CPU (gloo), as CI does
    python benchmarks/fault_table.py --device cuda --model resnet50 --batch 256 --foreign-load

Each row is one launch with a fault injected through HARNESS_FAULT (see harness/workloads/faults.py), except
"oom-real" (a batch that cannot fit, GPU only) and "foreign" (a CUDA process started on GPU 0
before the check, GPU only). Prints status, verdict message, seconds, and whether any process of
the launch survived — the observed outcomes recorded in docs/reliability.md.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from harness.launch.benchmark import run_benchmark  # noqa: E402
from harness.launch.cleanup import tagged_pids  # noqa: E402
from harness.launch.spec import BenchmarkSpec, LaunchSettings  # noqa: E402

FAULTS = {
    "kill": "kind=kill,rank=1,phase=measure,step=3",
    "hang": "kind=hang,rank=1,phase=measure,step=3",
    "crash": "kind=crash,rank=1,phase=measure,step=3",
    "nan": "kind=nan,rank=0,phase=measure,step=3",
    "oom-injected": "kind=oom,rank=1,phase=warmup,step=1",
}

FOREIGN_LOAD = ("import torch, time; x = torch.randn(8192, 8192, device='cuda:0'); "
                "t = time.time()\nwhile time.time() - t < 120: x = (x @ x).tanh()")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--model", default="tiny_bert")
    p.add_argument("--precision", default="bf16")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--oom-batch", type=int, default=65536, help="GPU only: a per-GPU batch that cannot fit")
    p.add_argument("--stall-floor", type=float, default=5.0)
    p.add_argument("--foreign-load", action="store_true", help="GPU only: also check a foreign process on GPU 0")
    p.add_argument("--out", type=Path, default=Path("/tmp/fault-table"))
    ns = p.parse_args()
    rows = []

    def launch(name: str, batch: int, env: dict[str, str]) -> None:
        spec = BenchmarkSpec(model=ns.model, precision=ns.precision, batch_size_per_gpu=batch, warmup_seconds=1,
                             measure_seconds=3, min_warmup_steps=5,
                             launch=LaunchSettings(gpus_per_node=2, device=ns.device, timeout_s=300,
                                                   stall_floor_s=ns.stall_floor, extra_env=env))
        started = time.time()
        record = run_benchmark(spec, ns.out / name)
        left = tagged_pids(record.run_id)
        reason = record.failure.reason if record.failure else ""
        rows.append((name, record.status, f"{time.time() - started:.0f}", "none" if not left else str(left), reason))
        print(f"{name}: {record.status} in {time.time() - started:.0f} s; processes left: {left or 'none'}\n  {reason}",
              flush=True)

    for name, fault in FAULTS.items():
        launch(name, ns.batch, {"HARNESS_FAULT": fault})
    if ns.device == "cuda":
        launch("oom-real", ns.oom_batch, {})
    if ns.foreign_load and ns.device == "cuda":
        from harness.node.hardware import detect
        from harness.node.processes import busy_gpu_message, gpu_processes

        load = subprocess.Popen([sys.executable, "-c", FOREIGN_LOAD])
        try:
            time.sleep(15)  # CUDA context creation and the first allocation
            busy = gpu_processes(detect().gpus)
            message = busy_gpu_message(busy) if busy else "NOT DETECTED"
            rows.append(("foreign", "refused" if busy else "MISSED", "-", "-", message.replace("\n", " ")))
            print(f"foreign: {message}", flush=True)
        finally:
            load.kill()
            load.wait()
    print("\n| fault | status | seconds | processes left | message |\n|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
