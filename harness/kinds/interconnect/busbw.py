"""All-reduce arithmetic (pure, light to import): bus bandwidth, the sweep's message sizes and
iteration counts, and the size labels the report and ``harness compare`` print.

As NVIDIA/nccl-tests doc/PERFORMANCE.md defines them: ``algbw = bytes / time`` and
``busbw = algbw × 2(n − 1)/n``, which makes all-reduce numbers comparable across GPU counts (and
to the link speed). Bandwidth is GB/s = 10⁹ bytes/s; sizes are binary (MiB, GiB: harness/workloads/units.py,
which the components' launch shares).
"""

from __future__ import annotations

import math

from harness.workloads.units import GIB, MIB


def bus_bandwidth_gbps(size_bytes: float, seconds: float, world_size: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s of one all-reduce of ``size_bytes`` taking ``seconds`` on ``world_size`` ranks.

    nccl-tests' definitions: algbw = bytes / time; busbw = algbw × 2(n − 1)/n, the bytes each rank's
    link must carry in a ring (or any optimal) all-reduce, so busbw can be held against link speed.
    """
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    if not seconds > 0:
        raise ValueError(f"seconds must be > 0, got {seconds}")
    algbw = size_bytes / seconds / 1e9
    return algbw, algbw * 2 * (world_size - 1) / world_size


def message_sizes(min_bytes: int, max_bytes: int, factor: int = 2) -> list[int]:
    """min, min × factor, ... up to and including max (both powers of two times 4 bytes or more)."""
    if min_bytes < 4 or max_bytes < min_bytes or factor < 2:
        raise ValueError(f"need 4 <= min_bytes <= max_bytes and factor >= 2, got {min_bytes}, {max_bytes}, {factor}")
    sizes, size = [], min_bytes
    while size <= max_bytes:
        sizes.append(size)
        size *= factor
    return sizes


def default_max_bytes(device: str, gpu_memory_gib: float | None) -> int:
    """The sweep's largest message: 8 GiB on GPUs with room for it (the buffer and NCCL's own take
    under 1/8 of memory: 80 GiB or more), else the largest power of two under memory/8; 4 MiB on CPU."""
    if device != "cuda":
        return 4 * MIB
    if gpu_memory_gib is None:
        return 1 * GIB
    room = gpu_memory_gib * GIB / 8
    return max(64 * MIB, min(8 * GIB, 2 ** int(math.floor(math.log2(room)))))


def iterations_for(seconds_per_iter: float, target_seconds: float, *, min_iters: int = 5, max_iters: int = 200) -> int:
    return max(min_iters, min(max_iters, math.ceil(target_seconds / max(seconds_per_iter, 1e-9))))


def size_label(size_bytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size_bytes < 1024:
            return f"{size_bytes:g} {unit}"
        size_bytes /= 1024
    return f"{size_bytes:g} TiB"
