"""The benchmark's cases on one process group, inside torchrun (harness/workloads/ddp.py starts them).

Phases of each case: setup (model, data) → warmup (until steady, all ranks agreeing) → compute
probe (each rank's own speed, gradient sync off) → measured window (CUDA events each step, no host
sync inside; harness/workloads/window.py) → gather → rank 0 writes the case's record.json
(harness/workloads/ddp_record.py). Each case builds its model after the previous one was freed;
the launch's start-up is charged to its first case.

An *independent* case (``CasePlan.independent``: a 1-GPU case on every GPU at once) trains a bare
model on each rank, no DDP and no gradient all-reduce, through the same steps and timers; the
process group only votes on step counts at block boundaries and gathers the timings. The
processes of one node then compete only for the host's CPU (synthetic data lives on each GPU),
as the ranks of a DDP case do.
"""

from __future__ import annotations

import gc
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pynvml
import torch
import torch.distributed as dist

from harness import __version__
from harness.rank import SEED, ProcessGroup, Rank, RankFailure, case_subgroups, launch_epoch, start_process_group
from harness.records import Versions, write_record
from harness.workloads import compilecache, faults, recipe
from harness.workloads.ddp_record import build_record
from harness.workloads.models import get_model
from harness.workloads.plan import FOLLOW_ON_FILE, RECORD_FILE, BenchmarkPlan, CasePlan, read_plan, wait_for_plan
from harness.workloads.window import fixed_window_steps, measure_adaptively, warm_up, window_timer


def run_cases(plan: BenchmarkPlan, rank: Rank, *, process_start_s: float, startup_s: dict[str, float],
              plan_dir: Path | None = None) -> None:
    """Every case of the plan in order, on one process group; ``startup_s`` is what the launch spent
    before it (process start, imports), ``process_start_s`` when this process started.

    A case on fewer ranks than the launch (a 2-GPU case of a 4-GPU node) runs on ranks 0 .. n-1 in a
    subgroup; the other ranks wait for it at the launch-wide barrier after each case, so the 1-GPU
    reference and the N-GPU cases of one model run back to back in the same processes. A plan that holds
    (``hold_s``) then runs the launcher's follow-on plans in ``plan_dir`` (more1.json, ...) on the same
    processes, until one has no cases or none comes in time."""
    if plan.cases[0].device == "cuda":
        torch.backends.cudnn.benchmark = True  # autotuned convolutions, as training jobs run them
    group = start_process_group(plan.cases[0].device, rank)
    subgroups = case_subgroups(group, [case.ranks for case in plan.cases])
    launch = LaunchCases(group=group, subgroups=subgroups, rank=rank, process_start_s=process_start_s,
                         startup_s={**startup_s, "init": group.init_s})
    launch.run(plan.cases)
    number = 1
    while plan.hold_s > 0 and plan_dir is not None:
        cases = follow_on(plan_dir, number, plan.hold_s, launch)
        if not cases:
            break
        launch.subgroups.update(case_subgroups(group, [case.ranks for case in cases
                                                      if case.ranks not in launch.subgroups]))
        launch.run(cases, follow_on=number)
        number += 1
    group.dist.destroy_process_group()
    rank.phase.enter_case(None, launch.index)


@dataclass(kw_only=True)
class LaunchCases:
    """What the cases of one launch share: the process group and its subgroups, and what this rank has trained."""

    group: ProcessGroup
    subgroups: dict[int, Any]
    rank: Rank
    process_start_s: float
    startup_s: dict[str, float]
    """The launch's fixed costs: charged to its first case, later cases start at "build"."""
    settled: set[tuple] = field(default_factory=set)
    """What this rank has trained in this launch: a case of the same work starts hot (settle_key)."""
    index: int = 0
    """Cases run so far, follow-ons included: the next case's index in the launch."""

    def run(self, cases: tuple[CasePlan, ...], follow_on: int = 0) -> None:
        group, rank = self.group, self.rank
        for case in cases:
            index, self.index = self.index, self.index + 1
            if rank.rank >= case.ranks:
                # Not one of this case's ranks: wait at the barrier below (no expected time: the setup bound holds).
                rank.phase.enter_case(None, index)
                rank.phase.write("idle")
                group.barrier()
                continue
            case.run_dir.mkdir(parents=True, exist_ok=True)
            rank.phase.enter_case(case.run_dir, index)
            print(f"[harness worker] case {index + 1}{f' (follow-on {follow_on})' if follow_on else ''}: "
                  f"{case.run_id}", flush=True)
            hot = settle_key(case) in self.settled
            run_case(case, rank, group.narrowed(case.ranks, self.subgroups.get(case.ranks)),
                     startup_s=self.startup_s if index == 0 else {key: 0.0 for key in self.startup_s},
                     launch={"cases": len(cases) if not follow_on else index + 1, "index": index, "ranks": case.ranks,
                             "launch_ranks": group.size, **({"follow_on": follow_on} if follow_on else {})},
                     process_start_s=self.process_start_s, hot=hot)
            self.settled.add(settle_key(case))
            rank.phase.write("done")
            group.barrier()  # the launch's every rank: the next case starts with all of them free


def follow_on(plan_dir: Path, number: int, hold_s: float, launch: LaunchCases) -> tuple[CasePlan, ...]:
    """The cases of follow-on plan ``number``, once the launcher has written it; () when it has none, or when
    any rank saw none within ``hold_s`` (the launcher is gone). Every rank waits on the file without a
    collective in flight, then they agree: all run the plan or none does."""
    rank = launch.rank
    rank.phase.enter_case(None, launch.index)
    rank.phase.write("waiting", expected_s=hold_s)
    path = plan_dir / FOLLOW_ON_FILE.format(number=number)
    cases = read_plan(path, BenchmarkPlan).cases if wait_for_plan(path, hold_s) else ()
    agreed = launch.group.across_ranks(1.0 if cases else 0.0, dist.ReduceOp.MIN)
    return cases if agreed > 0 else ()


def settle_key(case: CasePlan) -> tuple:
    """What a case's one-time costs depend on: cuDNN's autotuned algorithms are kept per process and per
    convolution shape, compiled graphs per model, so a later case of the same work on the same rank
    skips them (its GPU is hot too: the previous case ended a moment ago)."""
    return case.model, case.precision, case.batch_size_per_gpu, case.compile


def check_batch(case: CasePlan, world_size: int) -> None:
    if case.scaling == "strong" and case.global_batch_size % world_size:
        raise RankFailure(
            f"strong scaling needs a global batch divisible by the world size: {case.global_batch_size} "
            f"is not divisible by {world_size}", "setup")
    if case.batch_size_per_gpu * world_size != case.global_batch_size:
        raise RankFailure(
            f"batch size per GPU {case.batch_size_per_gpu} x world size {world_size} != global batch "
            f"{case.global_batch_size}", "setup")


@dataclass(frozen=True, kw_only=True, slots=True)
class Window:
    """One rank's measured window."""

    step_times_ms: list[float]
    ci_block_steps: int | None
    """Steps per block of the adaptive window (None: a fixed window)."""
    stop_reason: str
    window_s: float


def run_case(case: CasePlan, rank: Rank, group: ProcessGroup, *, startup_s: dict[str, float], launch: dict,
             process_start_s: float, hot: bool = False) -> None:
    """Build, warm up, probe, measure and record one case on an initialised process group (the case's ranks).
    ``hot``: this rank ran the same work earlier in the launch (settle_key), so its warm-up settles sooner."""
    t_case = time.time()
    rank.phase.write("setup")
    training_world_size = 1 if case.independent else group.size
    check_batch(case, training_world_size)
    if launch["index"] > 0:
        gc.collect()  # DDP's reducer holds reference cycles: the previous case's model goes only now
        if group.cuda:
            torch.cuda.empty_cache()  # and its cached blocks: this case's batch must find the memory free
    run = CaseRun(case, rank, group)
    t_built = time.time()
    warmup_steps, block_ms, warmup_s = run.warm_up(hot)
    t_warm = time.time()
    compute_step_ms = run.probe(block_ms)
    t_probed = time.time()
    window = run.measure(block_ms)
    t_measured = time.time()
    gathered = run.gather(window, compute_step_ms)
    t_gathered = time.time()
    if rank.rank == 0:
        phases_s = {**startup_s, "build": t_built - t_case, "warmup": t_warm - t_built, "probe": t_probed - t_warm,
                    "measure": t_measured - t_probed, "gather": t_gathered - t_measured}
        record = build_record(
            case, spec=run.model, world_size=training_world_size, gathered=gathered, warmup_steps=warmup_steps,
            warmup_s=warmup_s, measured_steps=len(window.step_times_ms), phases_s=phases_s, versions=versions(),
            nodes=int(os.environ.get("HARNESS_NODES", os.environ.get("GROUP_WORLD_SIZE", "1"))),
            launch={**launch, "settle": "hot" if hot else "cold"}, started_at=launch_epoch(process_start_s))
        write_record(case.run_dir / RECORD_FILE, record)
        print(f"[harness worker] record written: {record.status} "
              f"{record.throughput_per_gpu} {run.model.sample_unit}/s per GPU", flush=True)
    group.barrier()
    del run  # free this case's model, optimizer state and batch before the next case builds its own


class CaseRun:
    """One case's model, optimizer and batch on this rank, and the steps it trains."""

    def __init__(self, case: CasePlan, rank: Rank, group: ProcessGroup):
        self.case, self.rank, self.group = case, rank, group
        self.model = get_model(case.model)
        self.fault = faults.fault_from_env()
        torch.manual_seed(SEED + rank.rank)
        # Compilation happens in the first warmup steps; counting over the whole case says whether it was
        # compiled or found in the caches (on which ranks), which is most of a compiled case's wall time.
        self.cache_lookups_before = compilecache.lookups() if case.compile else None
        # Independent: this GPU's own model, no gradient all-reduce (the 1-GPU case on every GPU at once).
        self.ddp = None if case.independent else recipe.build_ddp(self.model, group.device, group.subgroup)
        self.module = self.ddp if self.ddp is not None else recipe.build_model(self.model, group.device)
        self.step_fn = recipe.TrainStep(torch.compile(self.module) if case.compile else self.module,
                                        self.module.parameters(), self.model, case.precision, group.device,
                                        case.batch_size_per_gpu)
        self.loss_sum = torch.zeros((), device=group.device, dtype=torch.float32)
        """The loss summed on the device every step; read once at the end of warmup and of the window."""

    def train_step(self, phase_name: str, step: int) -> None:
        poison = False
        if self.fault is not None and self.fault.due(self.rank.rank, phase_name, step, self.case.model):
            if self.fault.kind == "nan":
                poison = True
            else:
                faults.trigger(self.fault)
        self.loss_sum.add_(self.step_fn(poison))
        if self.fault is not None and self.fault.due(self.rank.rank, phase_name, step, self.case.model):
            faults.after_step(self.fault, self.group.device)  # host_sync: a degradation `harness selftest` injects

    def warm_up(self, hot: bool) -> tuple[int, float, float]:
        """Blocks until the minimum steps and seconds have passed and block times are steady."""
        self.rank.phase.write("warmup")
        try:
            result = warm_up(self.case, self.train_step, self.group.sync, self.group.across_ranks,
                             dist.ReduceOp.MIN, self.rank.phase, hot=hot)
        except torch.OutOfMemoryError as exc:
            raise self.out_of_memory("warmup", exc) from None
        self.check_finite("warmup")
        return result

    def probe(self, block_ms: float) -> float | None:
        """Each rank's own step time with gradient sync off (the synced steps hide a slow GPU)."""
        case = self.case
        if self.ddp is None or self.group.size == 1 or case.compile or case.compute_probe_steps <= 0:
            return None  # independent ranks (no DDP) are timed on their own already: their window is the probe
        self.rank.phase.write("probe", expected_s=case.compute_probe_steps * block_ms / 1000.0)
        self.group.sync()
        timer = window_timer(self.group.cuda, 1, torch)
        timer.start()
        with self.ddp.no_sync():
            for _ in range(case.compute_probe_steps):
                self.step_fn.forward_backward()
        timer.mark()
        elapsed_ms = timer.finish()[0]
        self.step_fn.optimizer.zero_grad(set_to_none=True)  # the probe's gradients were never synchronised: drop them
        return elapsed_ms / case.compute_probe_steps

    def run_steps(self, first_step: int, steps: int) -> list[float]:
        """``steps`` training steps, a timing mark after each; the only sync is the timer's, at the end."""
        timer = window_timer(self.group.cuda, steps, torch)
        timer.start()
        for step in range(first_step, first_step + steps):
            self.train_step("measure", step)
            if self.case.sync_each_step:
                self.loss_sum.item()  # the anti-pattern we measure the cost of: a host sync every step
            timer.mark()
        return timer.finish()

    def measure(self, block_ms: float) -> Window:
        """The measured window: all ranks run the same number of steps, from the slowest rank's estimate."""
        case, group = self.case, self.group
        estimated_step_s = group.across_ranks(block_ms / 1000.0, dist.ReduceOp.MAX)
        self.loss_sum.zero_()
        if group.cuda:
            torch.cuda.reset_peak_memory_stats(group.device)
        group.barrier()
        group.sync()
        window = window_timer(group.cuda, 1, torch)  # brackets the whole window: gaps between adaptive blocks count
        try:
            if case.ci_target > 0:
                self.rank.phase.write("measure", expected_s=case.max_measure_seconds)
                window.start()
                step_times_ms, blocks, stop_reason = measure_adaptively(
                    case, self.run_steps, estimated_step_s, group.across_ranks, dist.ReduceOp.MIN, self.rank.phase)
            else:
                steps = fixed_window_steps(case, estimated_step_s)
                self.rank.phase.write("measure", expected_s=steps * estimated_step_s)
                window.start()
                step_times_ms, blocks, stop_reason = self.run_steps(0, steps), None, "fixed window"
            window.mark()
            window_s = window.finish()[0] / 1000.0
        except torch.OutOfMemoryError as exc:
            raise self.out_of_memory("measure", exc) from None
        return Window(step_times_ms=step_times_ms, ci_block_steps=blocks, stop_reason=stop_reason, window_s=window_s)

    def gather(self, window: Window, compute_step_ms: float | None) -> list[dict]:
        """Every rank's raw facts of the window, on every rank (rank 0 builds the record from them)."""
        group = self.group
        loss_finite = bool(torch.isfinite(self.loss_sum).item())
        final_loss = float(self.loss_sum.item()) / len(window.step_times_ms) if loss_finite else float("nan")
        # Independent ranks finish their windows apart (a fast GPU first): one may wait here for the slowest.
        self.rank.phase.write("gather", expected_s=1.0 + (self.case.measure_seconds if self.case.independent else 0.0))
        mine = {
            "rank": self.rank.rank, "local_rank": self.rank.local_rank, "host": group.host,
            "gpu_index": group.gpu_index, "gpu_uuid": group.gpu_uuid, "device_name": group.device_name,
            "step_times_ms": window.step_times_ms, "window_s": window.window_s, "compute_step_ms": compute_step_ms,
            "peak_memory_gib": torch.cuda.max_memory_allocated(group.device) / 2**30 if group.cuda else None,
            "loss_finite": loss_finite, "final_loss": final_loss, "ci_block_steps": window.ci_block_steps,
            "stop_reason": window.stop_reason,
            "compile_cache": (compilecache.delta(self.cache_lookups_before, compilecache.lookups())
                              if self.case.compile else None),
        }
        gathered: list[Any] = [None] * group.size
        dist.all_gather_object(gathered, mine, group=group.subgroup)
        return gathered

    def check_finite(self, phase_name: str) -> None:
        if not bool(torch.isfinite(self.loss_sum).item()):
            raise RankFailure(f"non-finite loss on rank {self.rank.rank} during {phase_name}: the run is invalid, "
                              "whatever its speed", phase_name, status="invalid")

    def out_of_memory(self, phase_name: str, exc: Exception) -> RankFailure:
        group, case = self.group, self.case
        where = f"{group.device_name}" + (f" (GPU {group.gpu_index})" if group.gpu_index is not None else "")
        return RankFailure(
            f"out of memory at batch {case.batch_size_per_gpu} per GPU on {where}; find the largest batch that fits "
            f"with `harness find-max-bs --model {case.model} --precision {case.precision}` "
            f"({str(exc).splitlines()[0][:200]})", phase_name)


def versions() -> Versions:
    nccl = None
    driver = None
    if torch.cuda.is_available():
        try:
            nccl = ".".join(str(part) for part in torch.cuda.nccl.version())
        except (AttributeError, RuntimeError, TypeError):
            nccl = None
        driver = _driver_version()
    return Versions(torch=torch.__version__, cuda=torch.version.cuda, nccl=nccl, driver=driver,
                    python=platform.python_version(), harness=__version__)


def _driver_version() -> str | None:
    try:
        pynvml.nvmlInit()
        try:
            driver = pynvml.nvmlSystemGetDriverVersion()
            return driver.decode() if isinstance(driver, bytes) else driver
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - the driver version is informative, never fatal
        return None
