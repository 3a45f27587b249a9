"""Interconnect: all-reduce bus bandwidth through torch.distributed, and the GPUs' wiring (NVML).

**Bandwidth.** ``python -m harness.workloads.allreduce`` runs under torchrun like the benchmark worker,
one process per GPU (NCCL), or per CPU rank (gloo). For each message size of a sweep (1 MiB up to
8 GiB on GPUs with the memory for it, 64 KiB to 4 MiB on CPU) every rank:

1. fills a float32 buffer with a pattern that depends on the rank and the element index, all-
   reduces it once and checks every element against the exact expected sum (integers small
   enough for float32 to add exactly, and a period of 1009, a prime, so a chunk landing at the
   wrong offset or a rank's contribution missing or doubled cannot go unnoticed);
2. times ``iters`` back-to-back all-reduces between two CUDA events (no host sync inside; a host
   clock around the loop on CPU, where gloo's all-reduce returns when it is done), after a few
   untimed ones, with ``iters`` chosen so each size takes about ``target_seconds``.

Time per all-reduce is the mean over ranks, as nccl-tests reports it (its ``-a 1`` default); the
slowest rank's time is kept too. Then, as NVIDIA/nccl-tests doc/PERFORMANCE.md defines them:
``algbw = bytes / time`` and ``busbw = algbw × 2(n − 1)/n``, which makes all-reduce numbers
comparable across GPU counts (and to the link speed). Bandwidth is GB/s = 10⁹ bytes/s.

**Topology.** From NVML in the launcher process (no CUDA context): NVLink links up per GPU
(``nvmlDeviceGetNvLinkState`` over its links), peer-to-peer read support between every pair
(``nvmlDeviceGetP2PStatus``), and PCIe link generation and width. PCIe links downtrain when a GPU
idles, so the generation and width that count are the highest the telemetry sampler saw while the
all-reduce sweep kept every GPU busy; the idle reading and the maximum the slot allows are kept as
context. The worker also records which pairs torch says can access each other
(``torch.cuda.can_device_access_peer``).

Launching reuses harness/launch/run.py: the same torchrun prefix, environment and ``HARNESS_RUN_ID``
tag, time limits, hang detection and process cleanup; the telemetry sampler runs beside it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

MIB = 1024**2
GIB = 1024**3
PATTERN_PERIOD = 1009
"""A prime: buffer sizes and chunk offsets are powers of two, so no misplaced chunk lines up with the pattern."""
RANK_STRIDE = 1024
RESULT_FILE = "allreduce.json"
CHECK_CHUNK_ELEMENTS = 64 * MIB
"""Elements filled and checked at a time: the index and expected-value temporaries of an 8 GiB
buffer would otherwise need another 24 GiB."""


# --- the arithmetic (pure) -------------------------------------------------------------------


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


def pattern_values(torch, start: int, end: int, rank: int, device) -> Any:
    """What rank ``rank`` puts in elements [start, end) before the checked all-reduce."""
    index = torch.arange(start, end, dtype=torch.int64, device=device)
    return (index % PATTERN_PERIOD).to(torch.float32) + float(RANK_STRIDE * rank)


def expected_sum(torch, start: int, end: int, world_size: int, device) -> Any:
    """The exact all-reduce (sum) of every rank's pattern over elements [start, end)."""
    index = torch.arange(start, end, dtype=torch.int64, device=device)
    offset = RANK_STRIDE * world_size * (world_size - 1) // 2
    return (index % PATTERN_PERIOD).to(torch.float32) * world_size + float(offset)


def fill_pattern(torch, buffer, rank: int) -> None:
    for start in range(0, buffer.numel(), CHECK_CHUNK_ELEMENTS):
        end = min(start + CHECK_CHUNK_ELEMENTS, buffer.numel())
        buffer[start:end] = pattern_values(torch, start, end, rank, buffer.device)


@dataclass(frozen=True, kw_only=True, slots=True)
class Correctness:
    mismatches: int
    first_bad_index: int | None = None
    got: float | None = None
    expected: float | None = None

    @property
    def ok(self) -> bool:
        return self.mismatches == 0

    def describe(self) -> str:
        if self.ok:
            return "every element equals the expected sum"
        return (f"{self.mismatches:,} elements differ from the expected sum; the first, element "
                f"{self.first_bad_index:,}, is {self.got!r} instead of {self.expected!r}")


def check_allreduce(torch, buffer, world_size: int) -> Correctness:
    """Compare an all-reduced pattern buffer with the exact expected sum, element by element."""
    mismatches, first = 0, None
    for start in range(0, buffer.numel(), CHECK_CHUNK_ELEMENTS):
        end = min(start + CHECK_CHUNK_ELEMENTS, buffer.numel())
        expected = expected_sum(torch, start, end, world_size, buffer.device)
        wrong = buffer[start:end] != expected
        count = int(wrong.sum().item())
        if count and first is None:
            offset = int(wrong.nonzero()[0].item())
            first = Correctness(mismatches=0, first_bad_index=start + offset,
                                got=float(buffer[start + offset].item()), expected=float(expected[offset].item()))
        mismatches += count
    if not mismatches:
        return Correctness(mismatches=0)
    assert first is not None
    return Correctness(mismatches=mismatches, first_bad_index=first.first_bad_index, got=first.got,
                       expected=first.expected)


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


# --- helpers for worker modules (this one and harness.workloads.soak) ----------------------------------


class RankPhase:
    """``rank<R>.phase`` as harness.workloads.ddp writes it: the launcher's hang detection and the
    telemetry sampler read it (phase, since, expected_s, pid, rank, host, gpu_index, gpu_uuid)."""

    def __init__(self, run_dir: Path, rank: int):
        self.path = run_dir / f"rank{rank}.phase"
        self.name = "setup"
        self.identity: dict = {"rank": rank, "host": socket.gethostname()}
        self.write("setup")

    def write(self, name: str, expected_s: float | None = None) -> None:
        self.name = name
        record = {**self.identity, "phase": name, "since": time.time(), "expected_s": expected_s, "pid": os.getpid()}
        tmp = self.path.with_suffix(".phase.tmp")
        tmp.write_text(json.dumps(record))
        os.replace(tmp, self.path)


def start_rank(run_dir: Path) -> tuple[int, int, int, RankPhase]:
    """(rank, local_rank, world_size, phase) of this torchrun worker; its output goes to rank<R>.log."""
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    from harness.workloads.ddp import _die_with_parent, _redirect_output

    _redirect_output(run_dir / f"rank{rank}.log")
    _die_with_parent()  # a killed launcher leaves no orphan sweep
    return rank, local_rank, world_size, RankPhase(run_dir, rank)


def write_rank_failure(run_dir: Path, rank: int, reason: str, phase: str, status: str = "failed") -> None:
    from harness.records import write_json_atomic

    write_json_atomic(run_dir / f"rank{rank}.failure.json", json.dumps(
        {"rank": rank, "reason": reason, "phase": phase, "status": status, "host": socket.gethostname(),
         "time": time.time()}))


def init_distributed(torch, device_kind: str, local_rank: int, phase: RankPhase):
    """The process group (NCCL on a GPU, gloo on CPU) and this rank's device; records the GPU's identity."""
    import torch.distributed as dist

    if device_kind == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("--device cuda but torch sees no CUDA device")
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
        uuid = getattr(torch.cuda.get_device_properties(device), "uuid", None)
        uuid = None if uuid is None else (str(uuid) if str(uuid).startswith("GPU-") else f"GPU-{uuid}")
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        entries = [e.strip() for e in visible.split(",") if e.strip()] if visible is not None else None
        index = local_rank if entries is None else (
            int(entries[local_rank]) if local_rank < len(entries) and entries[local_rank].isdigit() else None)
        phase.identity.update(gpu_index=index, gpu_uuid=uuid, device_name=torch.cuda.get_device_name(device))
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    return dist, device


# --- the worker (runs under torchrun) --------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m harness.workloads.allreduce",
                                     description="all-reduce bus bandwidth sweep (one process per GPU, under torchrun)")
    parser.add_argument("--device", required=True, choices=("cuda", "cpu"))
    parser.add_argument("--min-bytes", type=int, required=True)
    parser.add_argument("--max-bytes", type=int, required=True)
    parser.add_argument("--factor", type=int, default=2)
    parser.add_argument("--target-seconds", type=float, default=0.2, help="timed seconds per message size")
    parser.add_argument("--warmup-iters", type=int, default=3)
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--run-id", required=True)
    return parser.parse_args(argv)


def rank_main(label: str, body, args: argparse.Namespace) -> int:
    """Run ``body(args, rank=, local_rank=, world_size=, phase=)`` on this torchrun rank.

    Every way out leaves a reason behind (rank<R>.failure.json) for the launcher; the all-reduce
    sweep and the soak share this.
    """
    rank, local_rank, world_size, phase = start_rank(args.run_dir)
    print(f"[harness {label}] rank {rank}/{world_size} host {socket.gethostname()} pid {os.getpid()}", flush=True)
    try:
        body(args, rank=rank, local_rank=local_rank, world_size=world_size, phase=phase)
    except BaseException as exc:  # noqa: BLE001 - every way out must leave a reason behind
        import traceback

        traceback.print_exc()
        write_rank_failure(args.run_dir, rank, f"{type(exc).__name__}: {exc}", phase.name)
        return 1
    phase.write("done")
    return 0


def main(argv: list[str] | None = None) -> int:
    return rank_main("interconnect", sweep, parse_args(argv))


def sweep(args: argparse.Namespace, *, rank: int, local_rank: int, world_size: int, phase: RankPhase) -> None:
    import torch

    dist, device = init_distributed(torch, args.device, local_rank, phase)
    cuda = device.type == "cuda"

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(device)

    def timed(buffer, iters: int) -> float:
        """Seconds per all-reduce over ``iters`` back-to-back calls; the host waits only at the end."""
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iters):
                dist.all_reduce(buffer)
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1000.0 / iters
        began = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(buffer)
        return (time.perf_counter() - began) / iters

    def across_ranks(value: float, op) -> float:
        tensor = torch.tensor([value], dtype=torch.float64, device=device)
        dist.all_reduce(tensor, op=op)
        return float(tensor.item())

    rows = []
    sizes = message_sizes(args.min_bytes, args.max_bytes, args.factor)
    dist.barrier()
    sync()
    phase.write("measure", expected_s=None)
    for size in sizes:
        buffer = torch.empty(size // 4, dtype=torch.float32, device=device)
        fill_pattern(torch, buffer, rank)
        dist.all_reduce(buffer)
        correctness = check_allreduce(torch, buffer, world_size)
        buffer.zero_()  # timed calls reduce zeros: the same work, and nothing grows to inf
        estimate = timed(buffer, max(1, args.warmup_iters))
        iters = iterations_for(across_ranks(estimate, dist.ReduceOp.MAX), args.target_seconds)
        seconds = timed(buffer, iters)
        mean_s = across_ranks(seconds, dist.ReduceOp.SUM) / world_size
        slowest_s = across_ranks(seconds, dist.ReduceOp.MAX)
        bad = across_ranks(float(correctness.mismatches), dist.ReduceOp.SUM)
        algbw, busbw = bus_bandwidth_gbps(size, mean_s, world_size)
        rows.append({"size_bytes": size, "iters": iters, "time_us": mean_s * 1e6, "slowest_time_us": slowest_s * 1e6,
                     "algbw_gbps": algbw, "busbw_gbps": busbw, "correct": bad == 0, "mismatches": int(bad),
                     "rank0_check": correctness.describe() if rank == 0 else None})
        print(f"[harness interconnect] {size_label(size):>10}  {iters:4d} iters  {mean_s * 1e6:12.1f} us  "
              f"algbw {algbw:8.2f}  busbw {busbw:8.2f} GB/s  {'ok' if bad == 0 else 'WRONG'}", flush=True)
        phase.write("measure", expected_s=None)  # heartbeat: the next size has started
        del buffer
    phase.write("gather", expected_s=1.0)
    peers = None
    if cuda and rank == 0:
        count = torch.cuda.device_count()
        peers = {f"{a}-{b}": bool(torch.cuda.can_device_access_peer(a, b))
                 for a in range(count) for b in range(count) if a != b}
    identities: list[dict] = [None] * world_size  # type: ignore[list-item]
    dist.all_gather_object(identities, {**phase.identity})
    if rank == 0:
        from harness.records import write_json_atomic

        result = {"status": "ok" if all(r["correct"] for r in rows) else "invalid", "world_size": world_size,
                  "device": args.device, "backend": dist.get_backend(), "dtype": "float32", "op": "sum",
                  "rows": rows, "ranks": identities, "torch_peer_access": peers,
                  "torch": torch.__version__,
                  "nccl": ".".join(map(str, torch.cuda.nccl.version())) if cuda else None}
        write_json_atomic(args.run_dir / RESULT_FILE, json.dumps(result, indent=1))
    dist.barrier()
    dist.destroy_process_group()


# --- launching it ----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class AllReduceSpec:
    """One all-reduce sweep on ``gpus_per_node`` GPUs (or CPU ranks): the launch fields of BenchmarkSpec."""

    gpus_per_node: int
    device: str = "cuda"
    nodes: int = 1
    min_bytes: int = 1 * MIB
    max_bytes: int = 8 * GIB
    factor: int = 2
    target_seconds: float = 0.2
    timeout_s: float = 600.0
    setup_timeout_s: float = 300.0
    stall_factor: float = 3.0
    stall_floor_s: float = 30.0
    extra_env: dict[str, str] = field(default_factory=dict)
    telemetry: bool = True
    telemetry_period_s: float = 0.1

    def __post_init__(self) -> None:
        from harness.launch.run import check_launch_fields

        check_launch_fields(self, positive_seconds=("target_seconds", "timeout_s"))
        message_sizes(self.min_bytes, self.max_bytes, self.factor)  # raises ValueError naming the values

    @property
    def world_size(self) -> int:
        return self.gpus_per_node * self.nodes

    @property
    def case_id(self) -> str:
        return f"allreduce-{self.gpus_per_node}gpu"


def interconnect_command(spec: AllReduceSpec, run_dir: Path, run_id: str) -> list[str]:
    from harness.launch.run import torchrun_prefix

    return [*torchrun_prefix(spec.gpus_per_node, spec.nodes), "-m", "harness.workloads.allreduce",
            "--device", spec.device, "--min-bytes", str(spec.min_bytes), "--max-bytes", str(spec.max_bytes),
            "--factor", str(spec.factor), "--target-seconds", str(spec.target_seconds),
            "--run-dir", str(run_dir), "--run-id", run_id]


@dataclass(kw_only=True)
class AllReduceRun:
    """What one sweep measured, or why it has no measurement."""

    gpus: int
    run_id: str
    status: str
    """ok, invalid (a wrong sum), failed, timeout."""
    rows: list[dict] = field(default_factory=list)
    failure: str | None = None
    telemetry: dict | None = None
    result: dict = field(default_factory=dict)
    elapsed_s: float | None = None

    @property
    def largest(self) -> dict | None:
        return max(self.rows, key=lambda r: r["size_bytes"]) if self.rows else None

    def to_dict(self) -> dict:
        return {"gpus": self.gpus, "run_id": self.run_id, "status": self.status, "rows": self.rows,
                "failure": self.failure, "telemetry": self.telemetry, "elapsed_s": self.elapsed_s,
                "backend": self.result.get("backend"), "nccl": self.result.get("nccl"),
                "torch_peer_access": self.result.get("torch_peer_access"), "ranks": self.result.get("ranks")}


def run_allreduce(spec: AllReduceSpec, run_dir: Path, *, run_id: str) -> AllReduceRun:
    """Launch the sweep through torchrun (bounded, cleaned up) with the telemetry sampler beside it."""
    from harness.launch.run import explain_failure, supervise
    from harness.telemetry import sampler_for

    run_dir = Path(run_dir)
    (run_dir / RESULT_FILE).unlink(missing_ok=True)
    command = interconnect_command(spec, run_dir, run_id)
    sampler = sampler_for(spec.device, run_dir, enabled=spec.telemetry, period_s=spec.telemetry_period_s)
    outcome = supervise(spec, command, run_dir, run_id, sampler=sampler)
    result_path = run_dir / RESULT_FILE
    if outcome.stall is None and outcome.returncode == 0 and result_path.exists():
        result = json.loads(result_path.read_text())
        return AllReduceRun(gpus=spec.world_size, run_id=run_id, status=result["status"], rows=result["rows"],
                            telemetry=outcome.telemetry, result=result, elapsed_s=outcome.elapsed_s)
    status, failure = explain_failure(run_dir, returncode=outcome.returncode, stall=outcome.stall,
                                      elapsed_s=outcome.elapsed_s, phases=outcome.phases)
    return AllReduceRun(gpus=spec.world_size, run_id=run_id, status=status, failure=failure.reason,
                        telemetry=outcome.telemetry, elapsed_s=outcome.elapsed_s)


# --- checks ----------------------------------------------------------------------------------


def allreduce_checks(run: AllReduceRun, bounds, *, missing_note: str) -> list:
    """Sanity (the sweep ran, every sum was right), then bus bandwidth at the largest message vs
    the profile's bound for this GPU count, then the GPUs' health during the sweep."""
    from harness.checks.verdict import Check, telemetry_checks

    completed = Check(name="all-reduce sweep completed", kind="sanity", measured=None, bound=None, unit="",
                      comparison="==", passed=run.status in ("ok", "invalid"), note=run.failure or "")
    if not completed.passed:
        return [completed]
    wrong = [r for r in run.rows if not r.get("correct")]
    correct = Check(name="all-reduce results correct", kind="sanity", measured=None, bound=None, unit="",
                    comparison="==", passed=not wrong,
                    note=("every element of every size equals the expected sum" if not wrong else
                          "; ".join(f"{size_label(r['size_bytes'])}: {r['mismatches']:,} wrong elements over all ranks"
                                    + (f" ({r['rank0_check']})" if r.get("rank0_check") else "") for r in wrong)))
    checks = [completed, correct]
    if wrong:
        return checks
    largest = run.largest
    name = f"all-reduce bus bandwidth at {size_label(largest['size_bytes'])}" if largest else "all-reduce bus bandwidth"
    measured = largest["busbw_gbps"] if largest else None
    if bounds is None:
        checks.append(Check(name=name, kind="performance", measured=measured, bound=None, unit="GB/s",
                            comparison=">=", passed=None, note="the profile has no [interconnect] section"))
    else:
        bound = bounds.min_allreduce_busbw_gbps.get(run.gpus)
        if bound is None:
            checks.append(Check(name=name, kind="performance", measured=measured, bound=None, unit="GB/s",
                                comparison=">=", passed=None, source=bounds.source,
                                note=f"the profile has no bound for {run.gpus} GPUs"))
        else:
            checks.append(Check(name=name, kind="performance", measured=measured, bound=bound, unit="GB/s",
                                comparison=">=", passed=measured is not None and measured >= bound,
                                source=bounds.source))
    return checks + telemetry_checks(run.telemetry, missing_note=missing_note)


# --- topology (NVML, in the launcher process) ------------------------------------------------


def read_topology(gpus: Sequence[Any], nvml: Any = None) -> dict:
    """NVLink links up, P2P status of every pair, PCIe link (idle and the slot's maximum) per GPU.

    ``gpus`` are harness.node.hardware.GpuInfo (index, uuid). Unsupported queries are recorded as such.
    """
    if nvml is None:
        import pynvml as nvml
    nvml.nvmlInit()
    try:
        handles = {gpu.index: nvml.nvmlDeviceGetHandleByIndex(gpu.index) for gpu in gpus}
        per_gpu = []
        for gpu in gpus:
            handle = handles[gpu.index]
            entry: dict[str, Any] = {"index": gpu.index, "uuid": gpu.uuid, "unsupported": {}}
            active, links = 0, 0
            for link in range(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
                try:
                    state = nvml.nvmlDeviceGetNvLinkState(handle, link)
                except nvml.NVMLError as err:
                    if link == 0:
                        entry["unsupported"]["nvlink"] = str(err)
                    continue  # links past the GPU's count answer "not supported" or "invalid argument"
                links += 1
                active += 1 if state == getattr(nvml, "NVML_FEATURE_ENABLED", 1) else 0
            entry["nvlinks_active"] = active if links else None
            entry["nvlinks_reported"] = links
            for key, query in (("pcie_gen_idle", "nvmlDeviceGetCurrPcieLinkGeneration"),
                               ("pcie_width_idle", "nvmlDeviceGetCurrPcieLinkWidth"),
                               ("pcie_gen_max", "nvmlDeviceGetMaxPcieLinkGeneration"),
                               ("pcie_width_max", "nvmlDeviceGetMaxPcieLinkWidth")):
                try:
                    entry[key] = int(getattr(nvml, query)(handle))
                except nvml.NVMLError as err:
                    entry[key] = None
                    entry["unsupported"][key] = str(err)
            per_gpu.append(entry)
        p2p = {}
        ok = getattr(nvml, "NVML_P2P_STATUS_OK", 0)
        # nvml.h's NVML_P2P_CAPS_INDEX_READ is 0; nvidia-ml-py spells it `= 0,`, a tuple that ctypes
        # refuses ("Don't know how to convert parameter 3", seen on H200 with nvidia-ml-py 13).
        read = 0
        for a in gpus:
            for b in gpus:
                if a.index >= b.index:
                    continue
                try:
                    status = nvml.nvmlDeviceGetP2PStatus(handles[a.index], handles[b.index], read)
                    p2p[f"{a.index}-{b.index}"] = "ok" if status == ok else _p2p_status_name(nvml, status)
                except nvml.NVMLError as err:
                    p2p[f"{a.index}-{b.index}"] = f"unknown ({err})"
        return {"gpus": per_gpu, "p2p_read": p2p}
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass


def _p2p_status_name(nvml: Any, status: int) -> str:
    for name in dir(nvml):
        if name.startswith("NVML_P2P_STATUS_") and getattr(nvml, name) == status and "SUPPORED" not in name:
            return name.removeprefix("NVML_P2P_STATUS_").lower().replace("_", " ")
    return f"status {status}"


def pcie_under_load(telemetry: dict | None) -> dict[str, dict]:
    """uuid -> {"gen": ..., "width": ...}: the highest PCIe link the sampler saw while the GPU was busy."""
    from harness.telemetry import is_ok

    if not is_ok(telemetry):
        return {}
    def whole(value):
        return int(value) if value is not None else None

    return {gpu["uuid"]: {"gen": whole(gpu["reduced"].get("pcie_gen")), "width": whole(gpu["reduced"].get("pcie_width"))}
            for gpu in telemetry["gpus"] if gpu.get("uuid")}


def topology_checks(topology: dict, bounds, loaded: dict[str, dict], *, load_note: str) -> list:
    """Each [topology] key against every GPU; a miss names the GPU (index and UUID) or the pair."""
    from harness.telemetry import gpu_label
    from harness.checks.verdict import Check

    gpus = topology.get("gpus", [])
    label = {g["index"]: gpu_label(g["index"], g["uuid"]) for g in gpus}
    checks = []
    source = bounds.source
    if bounds.nvlinks_per_gpu is not None:
        counts = [(g, g.get("nvlinks_active")) for g in gpus]
        known = [(g, c) for g, c in counts if c is not None]
        name = "NVLink links up per GPU"
        if len(known) < len(counts):
            missing = [label[g["index"]] + f" ({g['unsupported'].get('nvlink', 'no reading')})"
                       for g, c in counts if c is None]
            passed = False if bounds.nvlinks_per_gpu > 0 else None
            checks.append(Check(name=name, kind="health", measured=None, bound=bounds.nvlinks_per_gpu, unit="",
                                comparison=">=", passed=passed, source=source,
                                note=f"NVML reports no NVLink on {', '.join(missing)}"))
        else:
            short = [f"{label[g['index']]}: {c} up" for g, c in known if c < bounds.nvlinks_per_gpu]
            fewest = min(c for _, c in known)
            checks.append(Check(name=name, kind="health", measured=float(fewest), bound=float(bounds.nvlinks_per_gpu),
                                unit="links", comparison=">=", passed=not short, source=source,
                                note="; ".join(short)))
    if bounds.p2p_all_pairs:
        pairs = topology.get("p2p_read", {})
        bad = []
        for pair, status in pairs.items():
            if status != "ok":
                a, b = (int(x) for x in pair.split("-"))
                bad.append(f"{label.get(a, a)} ↔ {label.get(b, b)}: {status}")
        note = "; ".join(bad) if bad else f"{len(pairs)} pairs"
        if len(gpus) < 2:
            checks.append(Check(name="peer-to-peer access between every GPU pair", kind="health", measured=None,
                                bound=None, unit="", comparison="==", passed=None, source=source,
                                note="one GPU: no pair to check"))
        else:
            checks.append(Check(name="peer-to-peer access between every GPU pair", kind="health", measured=None,
                                bound=None, unit="", comparison="==", passed=not bad, source=source, note=note))
    for key, expected, word in (("gen", bounds.pcie_generation, "generation"), ("width", bounds.pcie_width, "width")):
        if expected is None:
            continue
        name = f"PCIe link {word} under load"
        unit = "lanes" if key == "width" else ""
        values = [(g, loaded.get(g["uuid"], {}).get(key)) for g in gpus]
        if not loaded or any(v is None for _, v in values):
            checks.append(Check(name=name, kind="health", measured=None, bound=float(expected), unit=unit,
                                comparison=">=", passed=None, source=source, note=load_note))
            continue
        low = [f"{label[g['index']]}: {'Gen' if key == 'gen' else 'x'}{v} (the slot allows "
               f"{'Gen' if key == 'gen' else 'x'}{g.get('pcie_' + key + '_max')})" for g, v in values if v < expected]
        checks.append(Check(name=name, kind="health", measured=float(min(v for _, v in values)), bound=float(expected),
                            unit=unit, comparison=">=", passed=not low, source=source, note="; ".join(low)))
    return checks


# --- the session's summary for the report ----------------------------------------------------


def session_summary(runs: dict[int, AllReduceRun], topology: dict | None) -> dict:
    """``harness["interconnect"]`` of report.json / session.json (the shape docs/report.md describes)."""
    rows = [{"gpus": gpus, **{k: row[k] for k in ("size_bytes", "busbw_gbps", "algbw_gbps", "time_us", "correct")}}
            for gpus, run in sorted(runs.items()) for row in run.rows]
    return {"allreduce": rows, "runs": {str(g): {k: v for k, v in run.to_dict().items() if k != "telemetry"}
                                        for g, run in sorted(runs.items())},
            "topology": topology}


if __name__ == "__main__":
    sys.exit(main())
