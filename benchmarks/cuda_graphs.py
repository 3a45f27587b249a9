"""Does capturing the step in CUDA graphs make a launch-bound case faster? (issue 17 item 2)

One GPU, the harness's recipe (harness/workloads/recipe.py: optimizer, scaler, autocast,
channels_last, cudnn.benchmark), three ways of running the same forward + backward + optimizer step:
eager (what the harness times), ``torch.compile`` default, and ``torch.compile(mode="reduce-overhead")``
(Inductor with CUDA graphs). Each is timed with CUDA events over a window of steps after a warm-up
that includes compilation and graph capture; the only synchronisation is at the window's ends.

    python benchmarks/cuda_graphs.py --configs resnet50:fp16:256 resnet50:bf16:256 --steps 100

Prints one JSON line per (config, mode): images/s and the ratio to eager.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from harness.workloads import recipe  # noqa: E402
from harness.workloads.models import get_model  # noqa: E402

MODES = ("eager", "compile", "reduce-overhead")


def measure(model_name: str, precision: str, batch: int, mode: str, steps: int, warmup: int) -> dict:
    device = torch.device("cuda", 0)
    spec = get_model(model_name)
    model = spec.build().to(device)
    if spec.channels_last:
        model = model.to(memory_format=torch.channels_last)
    optimizer = recipe.make_optimizer(model.parameters(), precision)
    dtype = recipe.autocast_dtype(precision)
    scaler = recipe.make_scaler(precision, device)
    inputs, targets = spec.synthetic_batch(batch, device)
    forward = model if mode == "eager" else torch.compile(model, mode=None if mode == "compile" else mode)

    def step():
        with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
            loss = spec.loss(forward(inputs), targets)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        return loss

    started = time.perf_counter()
    for _ in range(warmup):
        step()
    torch.cuda.synchronize(device)
    warmup_s = time.perf_counter() - started
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(steps):
        loss = step()
    end.record()
    end.synchronize()
    seconds = begin.elapsed_time(end) / 1e3
    return {"model": model_name, "precision": precision, "batch": batch, "mode": mode, "steps": steps,
            "window_s": round(seconds, 3), "warmup_s": round(warmup_s, 1),
            "images_per_s": round(batch * steps / seconds, 1), "loss_finite": bool(torch.isfinite(loss).item())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", nargs="+", required=True, help="model:precision:batch")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    ns = parser.parse_args()
    torch.backends.cudnn.benchmark = True
    for config in ns.configs:
        model_name, precision, batch = config.split(":")
        eager = None
        for mode in ns.modes:
            result = measure(model_name, precision, int(batch), mode, ns.steps, ns.warmup)
            eager = result["images_per_s"] if mode == "eager" else eager
            result["vs_eager"] = round(result["images_per_s"] / eager, 4) if eager else None
            print(json.dumps(result), flush=True)
            torch.compiler.reset()
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
