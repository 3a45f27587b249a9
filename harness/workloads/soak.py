"""Burn-in (``--soak DURATION``): keep one compute-heavy case training on every GPU for a while.

A node can pass a ten-second benchmark and still fail under hours of load: it heats up and
throttles, its power delivery sags, memory starts to throw ECC errors. The soak runs one DDP
training job (the profile's case with the most FLOPs per sample) on every GPU for the whole
duration, in windows of equal step counts, with the telemetry sampler on throughout. It fails on
thermal or hardware-slowdown throttling, new ECC errors, a temperature above the profile's
bound, or throughput decay: the last window slower than the first by more than
``[soak] max_throughput_decay``.

``python -m harness.workloads.soak`` is the torchrun worker: the same model registry and training recipe
as harness/workloads/ddp.py, but a loop that runs for a duration and reports each window (one host sync
and one all-reduce per window, never per step). The launcher side reuses harness/launch/run.py.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

RESULT_FILE = "soak.json"
PROGRESS_FILE = "soak_windows.json"
"""Rank 0 rewrites it after every window, so a soak that dies still shows how far it got."""
MIN_WINDOWS = 2

_DURATION = re.compile(r"(?P<value>\d+(?:\.\d+)?)\s*(?P<unit>[hms]?)", re.I)


def parse_duration(text: str) -> float:
    """``"4h"``, ``"3m"``, ``"90s"``, ``"1h30m"`` or plain seconds -> seconds (> 0)."""
    cleaned = str(text).strip().replace(" ", "")
    position, total, parts = 0, 0.0, []
    for match in _DURATION.finditer(cleaned):
        if match.start() != position:
            break
        parts.append(match["unit"].lower())
        total += float(match["value"]) * {"h": 3600, "m": 60, "s": 1, "": 1}[parts[-1]]
        position = match.end()
    bare_number_among_units = len(parts) > 1 and "" in parts  # "3m4": 4 what?
    if not cleaned or position != len(cleaned) or total <= 0 or bare_number_among_units:
        raise ValueError(f"soak duration {text!r}: expected a positive duration such as 4h, 30m, 90s or 1h30m")
    return total


def window_seconds(duration_s: float) -> float:
    """Windows of 1/12 of the soak, between 5 s and 10 min: enough of them to see a trend, each long
    enough that one host sync per window costs nothing."""
    return min(600.0, max(5.0, duration_s / 12))


def throughput_decay(windows: list[dict]) -> float | None:
    """1 - last window's throughput / first window's: 0.05 = the node ended 5 % slower than it started."""
    if len(windows) < MIN_WINDOWS or not windows[0].get("throughput"):
        return None
    return 1.0 - windows[-1]["throughput"] / windows[0]["throughput"]


# --- the worker (runs under torchrun) --------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m harness.workloads.soak", description="burn-in training loop (under torchrun)")
    parser.add_argument("--model", required=True)
    parser.add_argument("--precision", required=True, choices=("fp32", "fp16", "bf16"))
    parser.add_argument("--batch-size-per-gpu", type=int, required=True)
    parser.add_argument("--device", required=True, choices=("cuda", "cpu"))
    parser.add_argument("--duration-seconds", type=float, required=True)
    parser.add_argument("--window-seconds", type=float, required=True)
    parser.add_argument("--warmup-seconds", type=float, default=5.0)
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--run-id", required=True)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from harness.workloads.allreduce import rank_main

    return rank_main("soak", soak, parse_args(argv))


def soak(args: argparse.Namespace, *, rank: int, local_rank: int, world_size: int, phase) -> None:
    import torch

    from harness.workloads import recipe
    from harness.workloads.allreduce import init_distributed
    from harness.workloads.models import get_model
    from harness.records import write_json_atomic

    dist, device = init_distributed(torch, args.device, local_rank, phase)
    cuda = device.type == "cuda"
    if cuda:
        torch.backends.cudnn.benchmark = True
    spec = get_model(args.model)
    torch.manual_seed(1234 + rank)
    ddp = recipe.build_ddp(spec, device)
    step = recipe.TrainStep(ddp, ddp.parameters(), spec, args.precision, device, args.batch_size_per_gpu)
    loss_sum = torch.zeros((), device=device, dtype=torch.float32)

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(device)

    def across_ranks(value: float, op) -> float:
        tensor = torch.tensor([value], dtype=torch.float64, device=device)
        dist.all_reduce(tensor, op=op)
        return float(tensor.item())

    # Warmup in synced blocks of 5 steps (not measured): at least 10 steps and warmup_seconds.
    phase.write("warmup")
    began, steps = time.perf_counter(), 0
    while steps < 10 or time.perf_counter() - began < args.warmup_seconds:
        block = time.perf_counter()
        for _ in range(5):
            step()
        sync()
        steps += 5
        phase.write("warmup", expected_s=time.perf_counter() - block)
    block = time.perf_counter()
    for _ in range(5):
        step()
    sync()
    step_s = across_ranks((time.perf_counter() - block) / 5, dist.ReduceOp.MAX)
    steps_per_window = max(5, math.ceil(args.window_seconds / step_s))
    windows = max(MIN_WINDOWS, round(args.duration_seconds / args.window_seconds))
    samples_per_window = args.batch_size_per_gpu * world_size * steps_per_window

    dist.barrier()
    sync()
    phase.write("measure", expected_s=steps_per_window * step_s)
    results: list[dict] = []
    last = time.perf_counter()
    for index in range(windows):
        for _ in range(steps_per_window):
            loss_sum += step()
        sync()
        mine = time.perf_counter() - last
        slowest = across_ranks(mine, dist.ReduceOp.MAX)
        last = time.perf_counter()  # the all-reduce above belongs to no window
        results.append({"window": index, "seconds": slowest, "throughput": samples_per_window / slowest,
                        "end_time": time.time()})
        phase.write("measure", expected_s=steps_per_window * step_s)  # heartbeat for hang detection
        if rank == 0:
            write_json_atomic(args.run_dir / PROGRESS_FILE, json.dumps(results))
            print(f"[harness soak] window {index + 1}/{windows}: {samples_per_window / slowest:,.1f} "
                  f"{spec.sample_unit}/s in {slowest:.1f} s", flush=True)
    finite = across_ranks(float(bool(torch.isfinite(loss_sum).item())), dist.ReduceOp.MIN) == 1.0
    phase.write("gather", expected_s=1.0)
    if rank == 0:
        write_json_atomic(args.run_dir / RESULT_FILE, json.dumps({
            "status": "ok" if finite else "invalid", "loss_finite": finite, "model": args.model,
            "precision": args.precision, "batch_size_per_gpu": args.batch_size_per_gpu, "world_size": world_size,
            "sample_unit": spec.sample_unit, "steps_per_window": steps_per_window, "estimated_step_s": step_s,
            "windows": results}, indent=1))
    dist.barrier()
    dist.destroy_process_group()


# --- launching it ----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class SoakSpec:
    """One soak: a case on ``gpus_per_node`` GPUs for ``duration_s``; the launch fields of BenchmarkSpec."""

    model: str
    precision: str
    batch_size_per_gpu: int
    gpus_per_node: int
    duration_s: float
    device: str = "cuda"
    nodes: int = 1
    warmup_seconds: float = 5.0
    window_s: float | None = None
    """None: window_seconds(duration_s)."""
    setup_timeout_s: float = 300.0
    stall_factor: float = 3.0
    stall_floor_s: float = 30.0
    extra_env: dict[str, str] = field(default_factory=dict)
    telemetry: bool = True
    telemetry_period_s: float = 0.1

    def __post_init__(self) -> None:
        from harness.launch.run import check_launch_fields, check_model_and_precision

        check_model_and_precision(self.model, self.precision)
        check_launch_fields(self, at_least_one=("batch_size_per_gpu",),
                            positive_seconds=("duration_s", "warmup_seconds"))

    @property
    def window(self) -> float:
        return self.window_s if self.window_s is not None else window_seconds(self.duration_s)

    @property
    def timeout_s(self) -> float:
        """The whole soak, its warmup, start-up and one window of slack (hang detection acts sooner)."""
        return self.duration_s + self.window + 4 * self.warmup_seconds + self.setup_timeout_s

    @property
    def world_size(self) -> int:
        return self.gpus_per_node * self.nodes

    @property
    def case_id(self) -> str:
        return f"soak-{self.model}-{self.precision}-{self.gpus_per_node}gpu"


def soak_command(spec: SoakSpec, run_dir: Path, run_id: str) -> list[str]:
    from harness.launch.run import torchrun_prefix

    return [*torchrun_prefix(spec.gpus_per_node, spec.nodes), "-m", "harness.workloads.soak",
            "--model", spec.model, "--precision", spec.precision,
            "--batch-size-per-gpu", str(spec.batch_size_per_gpu), "--device", spec.device,
            "--duration-seconds", str(spec.duration_s), "--window-seconds", str(spec.window),
            "--warmup-seconds", str(spec.warmup_seconds), "--run-dir", str(run_dir), "--run-id", run_id]


@dataclass(kw_only=True)
class SoakRun:
    spec: SoakSpec
    run_id: str
    status: str
    windows: list[dict] = field(default_factory=list)
    failure: str | None = None
    loss_finite: bool | None = None
    sample_unit: str = "samples"
    telemetry: dict | None = None
    elapsed_s: float | None = None

    @property
    def decay(self) -> float | None:
        return throughput_decay(self.windows)

    def to_dict(self) -> dict:
        return {"case": self.spec.case_id, "model": self.spec.model, "precision": self.spec.precision,
                "gpus": self.spec.world_size, "duration_s": self.spec.duration_s, "window_s": self.spec.window,
                "run_id": self.run_id, "status": self.status, "failure": self.failure,
                "loss_finite": self.loss_finite, "sample_unit": self.sample_unit, "windows": self.windows,
                "throughput_decay": self.decay, "elapsed_s": self.elapsed_s}


def run_soak(spec: SoakSpec, run_dir: Path, *, run_id: str) -> SoakRun:
    from harness.launch.run import explain_failure, supervise
    from harness.telemetry import sampler_for

    run_dir = Path(run_dir)
    for stale in (RESULT_FILE, PROGRESS_FILE):
        (run_dir / stale).unlink(missing_ok=True)
    sampler = sampler_for(spec.device, run_dir, enabled=spec.telemetry, period_s=spec.telemetry_period_s)
    outcome = supervise(spec, soak_command(spec, run_dir, run_id), run_dir, run_id, sampler=sampler)
    result_path = run_dir / RESULT_FILE
    if outcome.stall is None and outcome.returncode == 0 and result_path.exists():
        result = json.loads(result_path.read_text())
        return SoakRun(spec=spec, run_id=run_id, status=result["status"], windows=result["windows"],
                       loss_finite=result["loss_finite"], sample_unit=result["sample_unit"],
                       telemetry=outcome.telemetry, elapsed_s=outcome.elapsed_s,
                       failure=None if result["loss_finite"] else "non-finite loss during the soak")
    status, failure = explain_failure(run_dir, returncode=outcome.returncode, stall=outcome.stall,
                                      elapsed_s=outcome.elapsed_s, phases=outcome.phases)
    try:
        windows = json.loads((run_dir / PROGRESS_FILE).read_text())
    except (OSError, ValueError):
        windows = []
    return SoakRun(spec=spec, run_id=run_id, status=status, windows=windows, failure=failure.reason,
                   telemetry=outcome.telemetry, elapsed_s=outcome.elapsed_s)


def soak_checks(run: SoakRun, soak_bounds, case_bounds, *, missing_note: str) -> list:
    """Completed with a finite loss; throughput decay vs [soak]; temperature, throttling and ECC over the soak."""
    from harness.checks.verdict import Check, telemetry_checks

    ran = run.status in ("ok", "invalid")
    completed = Check(name="soak completed", kind="sanity", measured=None, bound=None, unit="", comparison="==",
                      passed=ran, note=f"{len(run.windows)} windows of about {run.spec.window:.0f} s" if ran
                      else (run.failure or "no reason recorded"))
    checks = [completed]
    if completed.passed:
        checks.append(Check(name="loss finite", kind="sanity", measured=None, bound=None, unit="", comparison="==",
                            passed=bool(run.loss_finite), note="" if run.loss_finite else "non-finite loss"))
    decay = run.decay
    name = "throughput decay (last window vs first)"
    note = (f"first window {run.windows[0]['throughput']:,.1f} {run.sample_unit}/s, last "
            f"{run.windows[-1]['throughput']:,.1f} {run.sample_unit}/s" if decay is not None else
            f"fewer than {MIN_WINDOWS} windows were measured")
    if soak_bounds is None:
        checks.append(Check(name=name, kind="health", measured=decay, bound=None, unit="", comparison="<=",
                            passed=None, note=f"the profile has no [soak] bound; {note}"))
    elif decay is None:
        checks.append(Check(name=name, kind="health", measured=None, bound=soak_bounds.max_throughput_decay,
                            unit="", comparison="<=", passed=None, note=note, source=soak_bounds.source))
    else:
        checks.append(Check(name=name, kind="health", measured=decay, bound=soak_bounds.max_throughput_decay,
                            unit="", comparison="<=", passed=decay <= soak_bounds.max_throughput_decay, note=note,
                            source=soak_bounds.source))
    temperature = case_bounds.max_temperature_c if case_bounds is not None else None
    return checks + telemetry_checks(run.telemetry, max_temperature_c=temperature,
                                     source=case_bounds.source if case_bounds is not None else "",
                                     missing_note=missing_note)


if __name__ == "__main__":
    sys.exit(main())
