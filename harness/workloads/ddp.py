"""The DDP benchmark worker: one process per GPU (or per CPU rank with gloo), run by torchrun.

Phases: setup (process group, model, data) → warmup (until steady, all ranks agreeing) →
compute probe (each rank's own speed, gradient sync off) → measured window (CUDA events each
step, no host sync inside) → gather → rank 0 writes the run record.

Files in the run directory (the launcher reads them):
  rank<R>.log           this rank's stdout and stderr (file descriptors redirected, so NCCL's too)
  rank<R>.phase         the phase this rank is in, for "timed out in phase ..." verdicts
  rank<R>.failure.json  why this rank gave up, when it could say so (OOM, NaN, bad input)
  record.json           the run record, written atomically by rank 0

``--plan PLAN.json`` runs several cases of one GPU count in one launch (harness.launch.run.
run_benchmark_group): the process start, imports and process-group init are paid once. The
launch directory (PLAN.json's) holds the logs and the phase files the launcher watches; each
case's own directory gets its record, a copy of its phase files (the telemetry sampler opens and
closes its window on them) and, on failure, the failure files. The first failure ends the launch;
the launcher runs the cases after it again.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import platform
import signal
import socket
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

_PROCESS_START = time.time()


@dataclass(frozen=True, kw_only=True, slots=True)
class WorkerArgs:
    model: str
    precision: str
    scaling: str
    batch_size_per_gpu: int
    global_batch_size: int
    device: str
    warmup_seconds: float
    max_warmup_seconds: float
    min_warmup_steps: int
    warmup_block_steps: int
    measure_seconds: float
    min_measure_steps: int
    compute_probe_steps: int
    compile: bool
    peak_tflops: float | None
    sync_each_step: bool
    ci_target: float
    """Adaptive window: stop once the 95 % CI half-width of throughput is at most this (relative),
    after ``measure_seconds`` at least; 0 = a fixed window of ``measure_seconds``."""
    max_measure_seconds: float
    ci_block_seconds: float
    run_dir: Path
    run_id: str


def parse_args(argv: list[str] | None = None) -> WorkerArgs:
    parser = argparse.ArgumentParser(prog="python -m harness.workloads.ddp", description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--precision", required=True, choices=("fp32", "fp16", "bf16"))
    parser.add_argument("--scaling", default="weak", choices=("weak", "strong"))
    parser.add_argument("--batch-size-per-gpu", type=int, required=True)
    parser.add_argument("--global-batch-size", type=int, required=True)
    parser.add_argument("--device", required=True, choices=("cuda", "cpu"))
    parser.add_argument("--warmup-seconds", type=float, default=5.0)
    parser.add_argument("--max-warmup-seconds", type=float, default=None)
    parser.add_argument("--min-warmup-steps", type=int, default=10)
    parser.add_argument("--warmup-block-steps", type=int, default=5)
    parser.add_argument("--measure-seconds", type=float, default=10.0)
    parser.add_argument("--min-measure-steps", type=int, default=20)
    parser.add_argument("--compute-probe-steps", type=int, default=10)
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--peak-tflops", type=float, default=None)
    parser.add_argument("--sync-each-step", action="store_true",
                        help="diagnostic: read the loss on the host every step (to measure what that costs)")
    parser.add_argument("--ci-target", type=float, default=0.0,
                        help="adaptive window: stop at this relative CI95 half-width (e.g. 0.01); 0 = fixed window")
    parser.add_argument("--max-measure-seconds", type=float, default=None,
                        help="adaptive window: stop here whatever the CI (default 6 x measure + 10)")
    parser.add_argument("--ci-block-seconds", type=float, default=0.5,
                        help="adaptive window: about this long per block (>= 10 steps)")
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--run-id", required=True)
    ns = parser.parse_args(argv)
    max_warmup = ns.max_warmup_seconds if ns.max_warmup_seconds is not None else 2 * ns.warmup_seconds + 5
    return WorkerArgs(
        model=ns.model, precision=ns.precision, scaling=ns.scaling,
        batch_size_per_gpu=ns.batch_size_per_gpu, global_batch_size=ns.global_batch_size, device=ns.device,
        warmup_seconds=ns.warmup_seconds, max_warmup_seconds=max_warmup, min_warmup_steps=ns.min_warmup_steps,
        warmup_block_steps=ns.warmup_block_steps, measure_seconds=ns.measure_seconds,
        min_measure_steps=ns.min_measure_steps, compute_probe_steps=ns.compute_probe_steps, compile=ns.compile,
        peak_tflops=ns.peak_tflops, sync_each_step=ns.sync_each_step, ci_target=ns.ci_target,
        max_measure_seconds=ns.max_measure_seconds if ns.max_measure_seconds is not None else 6 * ns.measure_seconds + 10,
        ci_block_seconds=ns.ci_block_seconds, run_dir=ns.run_dir, run_id=ns.run_id,
    )


class WorkerFailure(Exception):
    """A failure this rank can explain in one line (written to rank<R>.failure.json)."""

    def __init__(self, reason: str, phase: str, status: str = "failed"):
        super().__init__(reason)
        self.reason = reason
        self.phase = phase
        self.status = status


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL us when torchrun dies, so a killed launcher leaves no orphan worker."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    except OSError:
        pass  # not Linux/glibc: the launcher's process-tree kill still applies


def _redirect_output(log_path: Path) -> None:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)


class Phase:
    """Writes the current phase to rank<R>.phase (host side, at phase changes only)."""

    def __init__(self, run_dir: Path, rank: int):
        self.path = run_dir / f"rank{rank}.phase"
        self.rank = rank
        self.mirror: Path | None = None
        """The current case's copy (plan launches): the telemetry sampler of that case reads it."""
        self.name = "setup"
        # Who this rank is, so a launcher that finds it dead or stuck can name the host and GPU.
        self.identity: dict = {"rank": rank, "host": socket.gethostname()}
        self.write("setup")

    def enter_case(self, case_dir: Path | None, index: int) -> None:
        """Plan launches: later phases are copied to ``case_dir`` and carry the case's index."""
        self.identity["case"] = index
        self.mirror = case_dir / f"rank{self.rank}.phase" if case_dir is not None and case_dir != self.path.parent else None

    def write(self, name: str, expected_s: float | None = None) -> None:
        """Enter (or stay in) a phase; ``expected_s`` is how long it should take from now.

        The launcher turns ``expected_s`` into a stall bound (factor × expected + floor) and
        kills the run once a rank has shown no progress for longer; None means "unknown" and
        the launcher's setup bound applies (imports, NCCL init, the first cuDNN/compile step).
        """
        self.name = name
        record = {**self.identity, "phase": name, "since": time.time(), "expected_s": expected_s, "pid": os.getpid()}
        for path in (self.path, self.mirror) if self.mirror is not None else (self.path,):
            tmp = path.with_suffix(".phase.tmp")
            tmp.write_text(json.dumps(record))
            os.replace(tmp, path)  # the launcher polls this file: never let it read half of it


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    plan_path = _plan_path(argv)
    if plan_path is None:
        cases = [parse_args(argv)]
        launch_dir = cases[0].run_dir
    else:
        cases = [parse_args(entry["argv"]) for entry in json.loads(plan_path.read_text())["cases"]]
        launch_dir = plan_path.parent
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    launch_dir.mkdir(parents=True, exist_ok=True)
    _redirect_output(launch_dir / f"rank{rank}.log")
    _die_with_parent()
    (launch_dir / f"rank{rank}.pid").write_text(str(os.getpid()))
    phase = Phase(launch_dir, rank)
    print(f"[harness worker] rank {rank}/{world_size} local_rank {local_rank} host {socket.gethostname()} "
          f"pid {os.getpid()} args {argv}", flush=True)
    case_dir = None
    try:
        ctx = setup(cases[0].device, rank=rank, local_rank=local_rank, world_size=world_size, phase=phase)
        for index, args in enumerate(cases):
            case_dir = args.run_dir
            case_dir.mkdir(parents=True, exist_ok=True)
            phase.enter_case(case_dir, index)
            if len(cases) > 1:
                print(f"[harness worker] case {index + 1}/{len(cases)}: {args.run_id}", flush=True)
            run_case(args, ctx, phase=phase, launch_cases=len(cases), case_index=index)
            phase.write("done")
        ctx.dist.destroy_process_group()
    except WorkerFailure as failure:
        for directory in {launch_dir, case_dir or launch_dir}:
            _write_failure(directory, rank, failure.reason, failure.phase, failure.status)
        print(f"[harness worker] rank {rank} failed in {failure.phase}: {failure.reason}", flush=True)
        return 3
    except BaseException as exc:  # noqa: BLE001 - every way out must leave a reason behind
        import traceback

        traceback.print_exc()
        for directory in {launch_dir, case_dir or launch_dir}:
            _write_failure(directory, rank, f"{type(exc).__name__}: {exc}", phase.name)
        return 1
    phase.enter_case(None, len(cases))
    phase.write("done")
    return 0


def _plan_path(argv: list[str]) -> Path | None:
    """``--plan FILE`` (a launch of several cases), or None for the one case on the command line."""
    if "--plan" not in argv:
        return None
    if len(argv) != 2 or argv[0] != "--plan":
        raise SystemExit("python -m harness.workloads.ddp --plan PLAN.json takes no other arguments")
    return Path(argv[1])


def _write_failure(run_dir: Path, rank: int, reason: str, phase: str, status: str = "failed") -> None:
    from harness.records import write_json_atomic

    write_json_atomic(run_dir / f"rank{rank}.failure.json", json.dumps(
        {"rank": rank, "reason": reason, "phase": phase, "status": status, "host": socket.gethostname(),
         "time": time.time()}))


@dataclass(kw_only=True, slots=True)
class Distributed:
    """What a launch sets up once and every case of it shares: torch, the process group, this rank's device."""

    torch: object
    dist: object
    device: object
    device_name: str
    gpu_uuid: str | None
    gpu_index: int | None
    host: str
    rank: int
    local_rank: int
    world_size: int
    phases_s: dict[str, float]
    """Process start, imports and init of the launch (seconds): charged to its first case."""


def setup(device_kind: str, *, rank: int, local_rank: int, world_size: int, phase: Phase) -> Distributed:
    t_start = time.time()
    import torch
    import torch.distributed as dist

    import harness.workloads.models  # noqa: F401 - torchvision's import belongs to "import", not to the first build

    t_imported = time.time()
    if device_kind == "cuda":
        if not torch.cuda.is_available():
            raise WorkerFailure("--device cuda but torch sees no CUDA device", "setup")
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        torch.backends.cudnn.benchmark = True
        dist.init_process_group("nccl", device_id=device)
        device_name = torch.cuda.get_device_name(device)
        gpu_uuid = _gpu_uuid(torch, device)
        gpu_index = _physical_gpu_index(local_rank)
        phase.identity.update(gpu_index=gpu_index, gpu_uuid=gpu_uuid, device_name=device_name)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
        device_name = platform.processor() or platform.machine() or "cpu"
        gpu_uuid, gpu_index = None, None
    t_initialised = time.time()
    return Distributed(torch=torch, dist=dist, device=device, device_name=device_name, gpu_uuid=gpu_uuid,
                       gpu_index=gpu_index, host=socket.gethostname(), rank=rank, local_rank=local_rank,
                       world_size=world_size,
                       phases_s={"process_start": t_start - _launch_epoch(t_start), "import": t_imported - t_start,
                                 "init": t_initialised - t_imported})


def run_case(args: WorkerArgs, ctx: Distributed, *, phase: Phase, launch_cases: int = 1, case_index: int = 0) -> None:
    """Build, warm up, probe, measure and record one case on an initialised process group."""
    t_case = time.time()
    torch, dist, device = ctx.torch, ctx.dist, ctx.device
    rank, local_rank, world_size = ctx.rank, ctx.local_rank, ctx.world_size
    device_name, gpu_uuid, gpu_index, host = ctx.device_name, ctx.gpu_uuid, ctx.gpu_index, ctx.host
    from harness.workloads import faults
    from harness.workloads import recipe
    from harness.workloads.models import get_model

    phase.write("setup")
    spec = get_model(args.model)
    fault = faults.fault_from_env()
    if args.scaling == "strong" and args.global_batch_size % world_size:
        raise WorkerFailure(
            f"strong scaling needs a global batch divisible by the world size: {args.global_batch_size} "
            f"is not divisible by {world_size}", "setup")
    if args.batch_size_per_gpu * world_size != args.global_batch_size:
        raise WorkerFailure(
            f"batch size per GPU {args.batch_size_per_gpu} x world size {world_size} != global batch "
            f"{args.global_batch_size}", "setup")
    if case_index > 0:
        import gc

        gc.collect()  # DDP's reducer holds reference cycles: the previous case's model goes only now
        if device.type == "cuda":
            torch.cuda.empty_cache()  # and its cached blocks: this case's batch must find the memory free

    torch.manual_seed(1234 + rank)
    from harness.workloads import compilecache

    # Compilation happens in the first warmup steps; counting over the whole case says whether it was
    # compiled or found in the caches (on which ranks), which is most of a compiled case's wall time.
    cache_lookups_before = compilecache.lookups() if args.compile else None
    ddp = recipe.build_ddp(spec, device)
    step_fn = recipe.TrainStep(torch.compile(ddp) if args.compile else ddp, ddp.parameters(), spec, args.precision,
                               device, args.batch_size_per_gpu)
    loss_sum = torch.zeros((), device=device, dtype=torch.float32)

    def train_step(phase_name: str, step: int) -> torch.Tensor:
        poison = False
        if fault is not None and fault.due(rank, phase_name, step, args.model):
            if fault.kind == "nan":
                poison = True
            else:
                faults.trigger(fault)
        return step_fn(poison)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    def all_reduce(value: float, op) -> float:
        tensor = torch.tensor([value], dtype=torch.float64, device=device)
        dist.all_reduce(tensor, op=op)
        return float(tensor.item())

    t_built = time.time()

    # --- warmup: blocks until the minimum steps and seconds have passed and block times are steady.
    phase.write("warmup")
    try:
        warmup_steps, block_ms, warmup_s = _warm_up(args, train_step, sync, all_reduce, dist, loss_sum, phase)
    except torch.OutOfMemoryError as exc:
        raise _oom(args, device_name, gpu_index, "warmup", exc) from None
    _check_finite(loss_sum, "warmup", rank)
    t_warm = time.time()

    # --- compute probe: each rank's own speed with gradient sync off (the synced steps hide it).
    compute_step_ms = None
    if world_size > 1 and not args.compile and args.compute_probe_steps > 0:
        phase.write("probe", expected_s=args.compute_probe_steps * block_ms / 1000.0)
        compute_step_ms = _compute_probe(args.compute_probe_steps, ddp, step_fn, sync, device)
    t_probed = time.time()

    # --- measured window: all ranks run the same number of steps, derived from the slowest estimate.
    estimated_step_s = all_reduce(block_ms / 1000.0, dist.ReduceOp.MAX)
    loss_sum.zero_()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    new_timer = (lambda n: CudaWindowTimer(n, torch)) if device.type == "cuda" else HostWindowTimer

    def run_steps(first_step: int, steps: int) -> list[float]:
        """``steps`` training steps, a timing mark after each; the only sync is the timer's, at the end."""
        timer = new_timer(steps)
        timer.start()
        for step in range(first_step, first_step + steps):
            loss_sum.add_(train_step("measure", step))
            if args.sync_each_step:
                loss_sum.item()  # the anti-pattern we measure the cost of: a host sync every step
            timer.mark()
        return timer.finish()

    dist.barrier()
    sync()
    window = new_timer(1)  # brackets the whole window, so gaps between adaptive blocks count too
    try:
        if args.ci_target > 0:
            phase.write("measure", expected_s=args.max_measure_seconds)
            window.start()
            step_times_ms, blocks, stop_reason = _measure_adaptively(args, run_steps, estimated_step_s, all_reduce,
                                                                     dist, phase)
        else:
            measured_steps = max(args.min_measure_steps, math.ceil(args.measure_seconds / max(estimated_step_s, 1e-6)))
            phase.write("measure", expected_s=measured_steps * estimated_step_s)
            window.start()
            step_times_ms, blocks, stop_reason = run_steps(0, measured_steps), None, "fixed window"
        window.mark()
        window_s = window.finish()[0] / 1000.0
    except torch.OutOfMemoryError as exc:
        raise _oom(args, device_name, gpu_index, "measure", exc) from None
    measured_steps = len(step_times_ms)
    t_measured = time.time()
    loss_finite = bool(torch.isfinite(loss_sum).item())
    final_loss = float(loss_sum.item()) / measured_steps if loss_finite else float("nan")

    phase.write("gather", expected_s=1.0)
    peak_memory_gib = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None
    mine = {
        "rank": rank, "local_rank": local_rank, "host": host, "gpu_index": gpu_index, "gpu_uuid": gpu_uuid,
        "device_name": device_name, "step_times_ms": step_times_ms, "window_s": window_s,
        "compute_step_ms": compute_step_ms, "peak_memory_gib": peak_memory_gib,
        "loss_finite": loss_finite, "final_loss": final_loss, "ci_block_steps": blocks, "stop_reason": stop_reason,
        "compile_cache": compilecache.delta(cache_lookups_before, compilecache.lookups()) if args.compile else None,
    }
    gathered: list[dict] = [None] * world_size  # type: ignore[list-item]
    dist.all_gather_object(gathered, mine)
    t_gathered = time.time()

    if rank == 0:
        from harness.records import write_record

        # The launch's fixed costs go to its first case; later cases of a plan launch start at "build".
        shared = ctx.phases_s if case_index == 0 else {key: 0.0 for key in ctx.phases_s}
        phases_s = {
            **shared,
            "build": t_built - t_case,
            "warmup": t_warm - t_built,
            "probe": t_probed - t_warm,
            "measure": t_measured - t_probed,
            "gather": t_gathered - t_measured,
        }
        record = build_record(
            args, spec=spec, world_size=world_size, gathered=gathered, warmup_steps=warmup_steps,
            warmup_s=warmup_s, measured_steps=measured_steps, phases_s=phases_s, versions=_versions(torch),
            nodes=int(os.environ.get("HARNESS_NODES", os.environ.get("GROUP_WORLD_SIZE", "1"))),
            launch={"cases": launch_cases, "index": case_index},
        )
        write_record(args.run_dir / "record.json", record)
        print(f"[harness worker] record written: {record.status} "
              f"{record.throughput_per_gpu} {spec.sample_unit}/s per GPU", flush=True)
    dist.barrier()
    del step_fn, ddp  # free this case's model, optimizer state and batch before the next case builds its own


def warmup_done(*, steps: int, block_means_ms: list[float], since_first_block_s: float, min_steps: int,
                warmup_s: float, max_warmup_s: float, steady_tolerance: float = 0.05) -> bool:
    """Whether this rank would stop warming up (pure, unit-tested).

    The first block holds the one-time costs (cuDNN autotuning, torch.compile, allocator growth),
    so the clocks start after it: at least ``warmup_s`` more and ``min_steps`` in total, until two
    consecutive blocks agree within ``steady_tolerance``; but never more than ``max_warmup_s``
    after the first block, because a noisy host (a shared CPU) may never look steady.
    """
    if since_first_block_s >= max_warmup_s:
        return True
    if steps < min_steps or since_first_block_s < warmup_s or len(block_means_ms) < 3:
        return False
    previous, last = block_means_ms[-2], block_means_ms[-1]
    return abs(last - previous) <= steady_tolerance * previous


def _warm_up(args: WorkerArgs, train_step, sync, all_reduce, dist, loss_sum, phase: Phase) -> tuple[int, float, float]:
    """Run warmup blocks until every rank agrees it is done; return (steps, last block ms/step, s)."""
    steps = 0
    block_means_ms: list[float] = []
    sync()
    start = time.perf_counter()
    first_block_end = None
    while True:
        block_start = time.perf_counter()
        for _ in range(args.warmup_block_steps):
            loss_sum += train_step("warmup", steps)
            steps += 1
        sync()  # warmup is not measured: a sync per block is how we see time pass
        now = time.perf_counter()
        block_means_ms.append((now - block_start) * 1000.0 / args.warmup_block_steps)
        first_block_end = first_block_end or now
        phase.write("warmup", expected_s=now - block_start)  # heartbeat: the next block should take as long
        done_here = warmup_done(steps=steps, block_means_ms=block_means_ms, since_first_block_s=now - first_block_end,
                                min_steps=args.min_warmup_steps, warmup_s=args.warmup_seconds,
                                max_warmup_s=args.max_warmup_seconds)
        # Every rank must run the same number of steps, or DDP's all-reduces stop pairing up.
        if all_reduce(1.0 if done_here else 0.0, dist.ReduceOp.MIN) >= 1.0:
            return steps, block_means_ms[-1], now - start


def measurement_done(step_times_ms: list[float], *, block_steps: int, elapsed_s: float, ci_target: float,
                     min_seconds: float, max_seconds: float) -> str | None:
    """Why the adaptive window may stop now, or None to go on (pure, unit-tested).

    The 95 % CI of throughput comes from block means (harness.workloads.stats), so a drift between blocks
    widens it and keeps the window open until ``max_seconds``; steady blocks close it as soon as
    ``min_seconds`` have passed.
    """
    from harness.workloads.stats import throughput_ci95_rel

    if elapsed_s >= max_seconds:
        return "max time"
    if elapsed_s < min_seconds:
        return None
    ci_rel, blocks = throughput_ci95_rel(step_times_ms, block_steps=block_steps)
    if ci_rel is not None and blocks >= 3 and ci_rel <= ci_target:
        return "CI target"
    return None


def _measure_adaptively(args: WorkerArgs, run_steps, estimated_step_s: float, all_reduce, dist,
                        phase: Phase) -> tuple[list[float], int, str]:
    """Blocks of ~ci_block_seconds until every rank agrees the CI target (or the time cap) is met.

    One sync per block (reading its events) and one tiny all-reduce: the host waits only at block
    boundaries, never inside a block.
    """
    block_steps = max(10, math.ceil(args.ci_block_seconds / max(estimated_step_s, 1e-6)))
    step_times_ms: list[float] = []
    start = time.perf_counter()
    while True:
        step_times_ms += run_steps(len(step_times_ms), block_steps)
        reason = measurement_done(step_times_ms, block_steps=block_steps, elapsed_s=time.perf_counter() - start,
                                  ci_target=args.ci_target, min_seconds=args.measure_seconds,
                                  max_seconds=args.max_measure_seconds)
        phase.write("measure", expected_s=args.max_measure_seconds)  # heartbeat for the stall detector
        if all_reduce(1.0 if reason else 0.0, dist.ReduceOp.MIN) >= 1.0:
            return step_times_ms, block_steps, reason or "max time"


def _compute_probe(steps: int, ddp, step_fn, sync, device) -> float:
    import torch

    sync()
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
    host_start = time.perf_counter()
    with ddp.no_sync():
        for _ in range(steps):
            step_fn.forward_backward()
    if device.type == "cuda":
        end.record()
        end.synchronize()
        elapsed_ms = start.elapsed_time(end)
    else:
        elapsed_ms = (time.perf_counter() - host_start) * 1000.0
    step_fn.optimizer.zero_grad(set_to_none=True)  # the probe's gradients were never synchronised: drop them
    return elapsed_ms / steps


class CudaWindowTimer:
    """CUDA events recorded after every step; read only after the window (one sync at the end)."""

    def __init__(self, steps: int, torch):
        self._events = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
        self._marks = 0

    def start(self) -> None:
        self._events[0].record()

    def mark(self) -> None:
        self._marks += 1
        self._events[self._marks].record()

    def finish(self) -> list[float]:
        self._events[self._marks].synchronize()
        return [self._events[i].elapsed_time(self._events[i + 1]) for i in range(self._marks)]


class HostWindowTimer:
    """CPU (gloo) steps are synchronous, so the host clock after each step is the step's end."""

    def __init__(self, steps: int):
        self._stamps: list[float] = []

    def start(self) -> None:
        self._stamps = [time.perf_counter()]

    def mark(self) -> None:
        self._stamps.append(time.perf_counter())

    def finish(self) -> list[float]:
        return [(b - a) * 1000.0 for a, b in zip(self._stamps, self._stamps[1:])]


def _check_finite(loss_sum, phase_name: str, rank: int) -> None:
    import torch

    if not bool(torch.isfinite(loss_sum).item()):
        raise WorkerFailure(f"non-finite loss on rank {rank} during {phase_name}: the run is invalid, whatever its speed",
                            phase_name, status="invalid")


def _oom(args: WorkerArgs, device_name: str, gpu_index: int | None, phase_name: str, exc: Exception) -> WorkerFailure:
    where = f"{device_name}" + (f" (GPU {gpu_index})" if gpu_index is not None else "")
    return WorkerFailure(
        f"out of memory at batch {args.batch_size_per_gpu} per GPU on {where}; find the largest batch that fits "
        f"with `harness find-max-bs --model {args.model} --precision {args.precision}` ({str(exc).splitlines()[0][:200]})",
        phase_name)


def _launch_epoch(default: float) -> float:
    try:
        return float(os.environ["HARNESS_LAUNCH_EPOCH"])
    except (KeyError, ValueError):
        return default


def _physical_gpu_index(local_rank: int) -> int | None:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return local_rank
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    if local_rank < len(entries) and entries[local_rank].isdigit():
        return int(entries[local_rank])
    return None  # given as UUIDs: the UUID names the GPU instead


def _gpu_uuid(torch, device) -> str | None:
    uuid = getattr(torch.cuda.get_device_properties(device), "uuid", None)
    if uuid is None:
        return None
    text = str(uuid)
    return text if text.startswith("GPU-") else f"GPU-{text}"


def _versions(torch):
    from harness import __version__
    from harness.records import Versions

    nccl = None
    driver = None
    if torch.cuda.is_available():
        try:
            nccl = ".".join(str(part) for part in torch.cuda.nccl.version())
        except (AttributeError, RuntimeError, TypeError):
            nccl = None
        try:
            import pynvml

            pynvml.nvmlInit()
            try:
                driver = pynvml.nvmlSystemGetDriverVersion()
                driver = driver.decode() if isinstance(driver, bytes) else driver
            finally:
                pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - the driver version is informative, never fatal
            driver = None
    return Versions(torch=torch.__version__, cuda=torch.version.cuda, nccl=nccl, driver=driver,
                    python=platform.python_version(), harness=__version__)


def build_record(args: WorkerArgs, *, spec, world_size: int, gathered: list[dict], warmup_steps: int,
                 warmup_s: float, measured_steps: int, phases_s: dict[str, float], versions, nodes: int,
                 launch: dict | None = None):
    """Turn every rank's raw timings into the run record (pure: no torch, unit-testable)."""
    from harness.workloads import compilecache
    from harness.workloads import recipe
    from harness.records import RankStats, RunRecord
    from harness.workloads.stats import step_time_stats, straggler, throughput_ci95_rel

    per_rank = tuple(
        RankStats(
            rank=g["rank"], local_rank=g["local_rank"], host=g["host"], gpu_index=g["gpu_index"],
            gpu_uuid=g["gpu_uuid"], device_name=g["device_name"], step_time=step_time_stats(g["step_times_ms"]),
            window_s=g["window_s"], compute_step_ms=g["compute_step_ms"], peak_memory_gib=g["peak_memory_gib"],
        )
        for g in sorted(gathered, key=lambda g: g["rank"])
    )
    slowest = max(gathered, key=lambda g: g["window_s"])
    window_s = slowest["window_s"]
    throughput_total = args.global_batch_size * measured_steps / window_s
    ci_rel, ci_blocks = throughput_ci95_rel(slowest["step_times_ms"], block_steps=slowest.get("ci_block_steps"))
    pooled = [t for g in gathered for t in g["step_times_ms"]]
    tflops = throughput_total / world_size * spec.train_flops_per_sample / 1e12
    loss_finite = all(g["loss_finite"] for g in gathered)
    lag = straggler(per_rank)
    memories = [g["peak_memory_gib"] for g in gathered if g["peak_memory_gib"] is not None]
    status = "ok" if loss_finite else "invalid"
    failure = None
    if not loss_finite:
        from harness.records import Failure

        bad = [g["rank"] for g in gathered if not g["loss_finite"]]
        failure = Failure(reason=f"non-finite loss on rank(s) {bad} during the measured window: the run is invalid, "
                                 "whatever its speed", phase="measure", rank=bad[0])
    return RunRecord(
        run_id=args.run_id, model=args.model, precision=args.precision, scaling=args.scaling,
        world_size=world_size, nodes=nodes, device_kind=args.device, batch_size_per_gpu=args.batch_size_per_gpu,
        global_batch_size=args.global_batch_size, compile=args.compile, status=status, failure=failure,
        sample_unit=spec.sample_unit, throughput_per_gpu=throughput_total / world_size,
        throughput_total=throughput_total, throughput_ci95_rel=ci_rel, ci_blocks=ci_blocks,
        step_time_ms=step_time_stats(pooled), per_rank=per_rank, straggler=lag,
        straggler_ratio=lag.ratio if lag else None, peak_memory_gib=max(memories) if memories else None,
        tflops_per_gpu=tflops, mfu=tflops / args.peak_tflops if args.peak_tflops else None,
        peak_tflops=args.peak_tflops, loss_finite=loss_finite,
        final_loss=gathered[0]["final_loss"] if math.isfinite(gathered[0]["final_loss"]) else None,
        warmup_steps=warmup_steps, warmup_s=warmup_s, measured_steps=measured_steps, measure_s=window_s,
        device_name=gathered[0]["device_name"], hosts=tuple(dict.fromkeys(g["host"] for g in gathered)),
        versions=versions, phases_s=phases_s,
        compile_cache=compilecache.combine([g.get("compile_cache") for g in sorted(gathered, key=lambda g: g["rank"])]),
        settings={
            "warmup_seconds": args.warmup_seconds, "max_warmup_seconds": args.max_warmup_seconds,
            "min_warmup_steps": args.min_warmup_steps, "measure_seconds": args.measure_seconds,
            "min_measure_steps": args.min_measure_steps, "compute_probe_steps": args.compute_probe_steps,
            "sync_each_step": args.sync_each_step, "optimizer": recipe.describe(args.precision),
            "ci_target": args.ci_target or None, "measure_stop_reason": slowest.get("stop_reason"),
            "max_measure_seconds": args.max_measure_seconds if args.ci_target else None,
            "launch": launch or {"cases": 1, "index": 0},
        },
        started_at=datetime.fromtimestamp(_launch_epoch(_PROCESS_START), timezone.utc).isoformat(timespec="seconds"),
        finished_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )


if __name__ == "__main__":
    sys.exit(main())
