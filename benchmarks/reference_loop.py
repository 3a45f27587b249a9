"""A minimal hand-written DDP training loop: the yardstick the harness's throughput is held to.

No harness machinery: build the model, warm up a fixed number of steps, then time a fixed number
of steps with one synchronize before and one after (host clock). Several configurations run in
one torchrun launch, one after the other, to keep process start-up out of the yardstick's cost.

    torchrun --standalone --nproc-per-node=4 benchmarks/reference_loop.py \
        --configs resnet50:bf16:256 vit_b_16:fp16:256 --seconds 5 --output ref-4gpu.json

It uses the same model builders and the same recipe pieces as the worker (harness/workloads/recipe.py:
optimizer, scaler, autocast; channels_last for CNNs, cudnn.benchmark), so the only difference left is
the measuring. Its step loop is written out here on purpose, not taken from recipe.TrainStep: a
yardstick should not share the code it measures.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from harness.workloads import recipe  # noqa: E402
from harness.workloads.models import get_model  # noqa: E402


def measure(model_name: str, precision: str, batch: int, seconds: float, warmup_steps: int, device) -> dict:
    spec = get_model(model_name)
    model = spec.build().to(device)
    if spec.channels_last:
        model = model.to(memory_format=torch.channels_last)
    ddp = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None,
                                  gradient_as_bucket_view=True)
    optimizer = recipe.make_optimizer(ddp.parameters(), precision)
    dtype = recipe.autocast_dtype(precision)
    scaler = recipe.make_scaler(precision, device)
    inputs, targets = spec.synthetic_batch(batch, device)

    def step():
        with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
            loss = spec.loss(ddp(inputs), targets)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        return loss

    for _ in range(warmup_steps):
        step()
    torch.cuda.synchronize(device)
    # Estimate the step time, then agree on one step count for every rank.
    t0 = time.perf_counter()
    for _ in range(5):
        step()
    torch.cuda.synchronize(device)
    est = torch.tensor([(time.perf_counter() - t0) / 5], device=device, dtype=torch.float64)
    dist.all_reduce(est, op=dist.ReduceOp.MAX)
    steps = max(20, int(seconds / est.item()))
    dist.barrier()
    torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step()
    torch.cuda.synchronize(device)
    elapsed = torch.tensor([time.perf_counter() - t0], device=device, dtype=torch.float64)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    world = dist.get_world_size()
    total = batch * world * steps / elapsed.item()
    result = {"model": model_name, "precision": precision, "batch_size_per_gpu": batch, "world_size": world,
              "steps": steps, "seconds": elapsed.item(), "throughput_total": total,
              "throughput_per_gpu": total / world, "loss": float(loss.item())}
    return result  # the model, optimizer and batch go with this frame; main empties the cache after


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", nargs="+", required=True, help="model:precision:batch_per_gpu")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--warmup-steps", type=int, default=30)
    parser.add_argument("--output", type=Path, required=True)
    ns = parser.parse_args()
    local_rank = int(os.environ["LOCAL_RANK"])
    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(device)
    torch.backends.cudnn.benchmark = True
    dist.init_process_group("nccl", device_id=device)
    results = []
    for config in ns.configs:
        model_name, precision, batch = config.split(":")
        results.append(measure(model_name, precision, int(batch), ns.seconds, ns.warmup_steps, device))
        torch.cuda.empty_cache()  # the last configuration's blocks: the next one must find the memory free
        if dist.get_rank() == 0:
            r = results[-1]
            print(f"reference {r['model']} {r['precision']} x{r['world_size']}: "
                  f"{r['throughput_per_gpu']:.1f}/s per GPU", flush=True)
            ns.output.write_text(json.dumps(results, indent=1))
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
