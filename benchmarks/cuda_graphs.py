"""Does capturing the step in CUDA graphs make a launch-bound case faster, and is it the same work? (issue 17 item 2)

One GPU, the harness's own training step (harness/workloads/recipe.py ``TrainStep``: fused SGD with
zeroed momentum, GradScaler for fp16, autocast, channels_last, cudnn.benchmark), four ways of
running its forward + backward, the optimizer step always eager as in the harness:

- ``eager``: what the harness times;
- ``cudagraphs``: ``torch.compile(backend="cudagraphs")``, the same aten kernels replayed from CUDA
  graphs, no Inductor fusion: what "CUDA graphs for the step" means without changing the kernels;
- ``compile``: ``torch.compile`` default (Inductor: fused, generated kernels, no graphs);
- ``reduce-overhead``: Inductor + CUDA graphs.

Each mode starts from the same seed, warms up (compilation and capture included), then is timed with
CUDA events over ``--steps`` steps, synchronising only at the window's ends. Same work: each mode's
loss after warm-up + window from the same initial weights, and the number of GPU kernels one step
runs (torch.profiler, outside the window; kernels replayed from a graph are counted too).

    python benchmarks/cuda_graphs.py --configs resnet50:fp16:256 resnet50:fp16:32 --steps 100

Prints one JSON line per (config, mode): images/s, the ratio to eager, loss, kernels per step.
What it printed on H100 and H200, and why the harness keeps timing the eager step: docs/measurements.md
"CUDA graphs for the step".
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

MODES = ("eager", "cudagraphs", "compile", "reduce-overhead")
SEED = 1234


def forward_of(model: torch.nn.Module, mode: str):
    if mode == "eager":
        return model
    if mode == "cudagraphs":
        return torch.compile(model, backend="cudagraphs")
    return torch.compile(model, mode=None if mode == "compile" else mode)


def kernels_per_step(step, steps: int = 3) -> float:
    """GPU kernels one step launches, from a short profiler trace (after warm-up, outside the window)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as trace:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    kernels = [e for e in trace.events() if e.device_type == torch.autograd.DeviceType.CUDA
               and "memcpy" not in e.name.lower() and "memset" not in e.name.lower()]
    return round(len(kernels) / steps, 1)


def measure(model_name: str, precision: str, batch: int, mode: str, steps: int, warmup: int) -> dict:
    device = torch.device("cuda", 0)
    spec = get_model(model_name)
    torch.manual_seed(SEED)
    model = recipe.build_model(spec, device)
    torch.manual_seed(SEED)
    step = recipe.TrainStep(forward_of(model, mode), model.parameters(), spec, precision, device, batch)
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
    loss_after = float(loss.float().item())
    return {"model": model_name, "precision": precision, "batch": batch, "mode": mode, "steps": steps,
            "window_s": round(seconds, 3), "warmup_s": round(warmup_s, 1),
            "images_per_s": round(batch * steps / seconds, 1), "loss_after_window": round(loss_after, 5),
            "kernels_per_step": kernels_per_step(step), "gpu": torch.cuda.get_device_name(device),
            "torch": torch.__version__}


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
            try:
                result = measure(model_name, precision, int(batch), mode, ns.steps, ns.warmup)
            except Exception as exc:  # a mode that cannot capture this step is a finding, not a crash
                result = {"model": model_name, "precision": precision, "batch": int(batch), "mode": mode,
                          "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
            if mode == "eager" and "images_per_s" in result:
                eager = result["images_per_s"]
            if eager and "images_per_s" in result:
                result["vs_eager"] = round(result["images_per_s"] / eager, 4)
            print(json.dumps(result), flush=True)
            torch.compiler.reset()
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
