"""The timed loops of the component benchmarks; torch is passed in (the worker imports it late).

Timing as everywhere in the harness: on a GPU two CUDA events around back-to-back operations, the
host waiting once at the end of a block; on CPU the host clock (every call there is synchronous).
A figure is the median of blocks of about ``block_seconds`` after a warm-up, so the GPU's settled
rate is reported, not the first burst before its power cap bites (docs/components.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from harness.kinds.components.arith import gemm_tflops, iterations_for, median, moved_gbps

Op = Callable[[], Any]


def seconds_for(torch: Any, device: Any, op: Op, iters: int) -> float:
    """Seconds for ``iters`` back-to-back calls of ``op``, queued on ``device``'s current stream."""
    if device.type == "cuda":
        with torch.cuda.device(device):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iters):
                op()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1000.0
    began = time.perf_counter()
    for _ in range(iters):
        op()
    return time.perf_counter() - began


def block_rates(torch: Any, device: Any, op: Op, rate: Callable[[int, float], float], *, warmup_s: float,
                measure_s: float, block_s: float) -> dict:
    """Warm up for ``warmup_s``, then time blocks of ~``block_s`` for ``measure_s``: every block's rate."""
    op()
    iters = iterations_for(seconds_for(torch, device, op, 1), block_s, at_least=1)
    warm_blocks: list[float] = []
    began = time.perf_counter()
    while time.perf_counter() - began < warmup_s:
        warm_blocks.append(rate(iters, seconds_for(torch, device, op, iters)))
    blocks: list[float] = []
    began = time.perf_counter()
    while not blocks or time.perf_counter() - began < measure_s:
        blocks.append(rate(iters, seconds_for(torch, device, op, iters)))
    return {"value": median(blocks), "blocks": blocks, "iters_per_block": iters,
            "first_warmup_block": warm_blocks[0] if warm_blocks else None, "warmup_blocks": len(warm_blocks)}


TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "tf32": "float32", "fp32": "float32"}


def gemm(torch: Any, device: Any, dtype: str, n: int, *, warmup_s: float, measure_s: float, block_s: float) -> dict:
    """Dense n^3 GEMM TFLOP/s in ``dtype`` (tf32: fp32 tensors with TF32 tensor-core math allowed)."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    kind = getattr(torch, TORCH_DTYPES[dtype])
    a = torch.randn(n, n, device=device, dtype=kind)
    b = torch.randn(n, n, device=device, dtype=kind)
    c = torch.empty_like(a)
    measured = block_rates(torch, device, lambda: torch.mm(a, b, out=c), lambda iters, s: gemm_tflops(n, iters, s),
                           warmup_s=warmup_s, measure_s=measure_s, block_s=block_s)
    return {"dtype": dtype, "n": n, "tflops": measured.pop("value"), **measured}


def _bandwidth(torch: Any, device: Any, op: Op, nbytes: int, seconds: float, touches: int) -> dict:
    measured = block_rates(torch, device, op, lambda iters, s: moved_gbps(nbytes, iters, s, touches=touches),
                           warmup_s=min(0.2, seconds / 4), measure_s=seconds, block_s=seconds / 5)
    return {"gbps": measured.pop("value"), "bytes": nbytes, **measured}


def hbm(torch: Any, device: Any, nbytes: int, seconds: float) -> dict:
    """Device memory bandwidth: a copy between two ``nbytes`` buffers, and an in-place multiply of one."""
    source = torch.zeros(nbytes, dtype=torch.uint8, device=device)
    target = torch.zeros_like(source)
    floats = source.view(torch.float32).fill_(1.0)
    copy = _bandwidth(torch, device, lambda: target.copy_(source), nbytes, seconds, touches=2)
    rmw = _bandwidth(torch, device, lambda: floats.mul_(1.0000001), nbytes, seconds, touches=2)
    return {"copy": copy, "rmw": rmw}


def host_link(torch: Any, device: Any, nbytes: int, seconds: float) -> dict:
    """Pinned host memory to the GPU and back, ``nbytes`` a copy, each direction on its own."""
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    gpu = torch.empty(nbytes, dtype=torch.uint8, device=device)
    h2d = _bandwidth(torch, device, lambda: gpu.copy_(host, non_blocking=True), nbytes, seconds, touches=1)
    d2h = _bandwidth(torch, device, lambda: host.copy_(gpu, non_blocking=True), nbytes, seconds, touches=1)
    return {"h2d": h2d, "d2h": d2h}


def peer_pair(torch: Any, source: Any, target: Any, *, nbytes: int, latency_bytes: int, seconds: float) -> dict:
    """One ordered pair: bandwidth of ``nbytes`` copies and the time of a ``latency_bytes`` copy, queued on
    the source device (torch copies between GPUs on the source's stream)."""
    big = torch.zeros(nbytes, dtype=torch.uint8, device=source)
    big_target = torch.empty(nbytes, dtype=torch.uint8, device=target)
    bandwidth = _bandwidth(torch, source, lambda: big_target.copy_(big, non_blocking=True), nbytes, seconds,
                           touches=1)
    small = torch.zeros(latency_bytes, dtype=torch.uint8, device=source)
    small_target = torch.empty(latency_bytes, dtype=torch.uint8, device=target)

    def op() -> Any:
        return small_target.copy_(small, non_blocking=True)

    op()
    iters = iterations_for(seconds_for(torch, source, op, 10) / 10, seconds / 2, at_least=10)
    latency_us = seconds_for(torch, source, op, iters) / iters * 1e6
    return {"gbps": bandwidth["gbps"], "blocks": bandwidth["blocks"], "latency_us": latency_us,
            "latency_iters": iters}


def peer_matrix(torch: Any, devices: list[Any], labels: list[dict], can_access: Callable[[int, int], bool], *,
                nbytes: int, latency_bytes: int, seconds: float) -> list[dict]:
    """Every ordered pair of ``devices`` (CPU tensors stand in for GPUs in the unit tests)."""
    rows = []
    for a, source in enumerate(devices):
        for b, target in enumerate(devices):
            if a != b:
                measured = peer_pair(torch, source, target, nbytes=nbytes, latency_bytes=latency_bytes,
                                     seconds=seconds)
                rows.append({"src": labels[a], "dst": labels[b], "p2p": bool(can_access(a, b)), **measured})
    return rows
