"""The largest per-GPU batch that fits: ``harness find-max-bs``.

Two halves, kept apart so the search is tested without a GPU:

* ``search_max_batch(probe, ...)`` is pure: it asks a ``probe(batch) -> ProbeResult`` callable
  about batch sizes, doubling from ``start`` until a batch does not fit (or ``max_batch`` is
  reached), then bisecting between the last batch that fit and the first that did not.
* ``subprocess_probe(...)`` is the I/O edge: each probe is a fresh Python process that builds the
  model and runs a few full training steps with the harness recipe (``harness/workloads/recipe.py``: the same
  optimizer, loss scaler, autocast, channels_last for CNNs, DDP with ``gradient_as_bucket_view``
  as the worker), then reports the peak memory. A fresh process per probe, because an OOM can leave
  the CUDA caching allocator fragmented: the next probe in the same process would measure the
  wreckage, not the batch.

A probe *fits* when it ran and its peak memory ``torch.cuda.max_memory_allocated`` is at most
``memory_fraction`` × the GPU's total memory. That peak counts tensors only: the CUDA context,
NCCL's buffers and the allocator's cached-but-free blocks are not in it, which is what the
fraction leaves room for. An OOM is an expected answer ("too big"), not a crash; any other failure
stops the search, because it says nothing about memory.

On CPU there is no device memory to fill: a probe that runs fits, the search is capped by
``--max`` (required there), and the peak shown is the probe process's peak resident set size
(host memory), for information only.

The search assumes memory grows with the batch (fits(b) implies fits(b') for b' < b); it warns
when the measured peaks say otherwise (cuDNN may choose other algorithms at other batch sizes).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal

GIB_BYTES = 1024**3
"""GiB is 1024³ bytes, as torch.cuda and NVML report memory."""

DEFAULT_MEMORY_FRACTION = 0.9
DEFAULT_START = 8
DEFAULT_PROBE_STEPS = 3
"""Step 1 creates the optimizer's momentum buffers after its backward pass; step 2 is the first to
hold activations, gradients and momentum at once (the steady peak); step 3 confirms it."""
DEFAULT_PROBE_TIMEOUT_S = 600.0
MAX_PROBES = 40
"""Doubling from 1 reaches 2^20 in 20 probes and bisection needs at most as many again."""
MONOTONE_TOLERANCE = 0.02
"""Peak memory may wobble by this fraction between batch sizes before it counts as falling."""

ProbeOutcome = Literal["ran", "oom", "error"]
Verdict = Literal["fits", "oom", "over_fraction", "error"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ProbeResult:
    """What one probe reported: did a training step at this batch run, and how much memory it took."""

    batch_size: int
    outcome: ProbeOutcome
    """``ran``: the steps completed; ``oom``: out of memory; ``error``: any other failure."""
    peak_memory_gib: float | None = None
    """Peak memory allocated by tensors (``torch.cuda.max_memory_allocated``) on cuda; the probe
    process's peak resident set size (host memory, informational) on cpu."""
    reserved_memory_gib: float | None = None
    """Peak memory held by the CUDA caching allocator (``max_memory_reserved``); None on cpu."""
    total_memory_gib: float | None = None
    """The device's total memory; None on cpu, where no device memory limit applies."""
    device_name: str | None = None
    detail: str = ""
    """Why it did not run (the error's first line), or where its log is."""


@dataclass(frozen=True, kw_only=True, slots=True)
class JudgedProbe:
    """A probe result and the search's verdict on it."""

    result: ProbeResult
    verdict: Verdict
    limit_gib: float | None
    """memory_fraction × total memory; None when no limit applies (cpu)."""

    @property
    def batch_size(self) -> int:
        return self.result.batch_size

    @property
    def fits(self) -> bool:
        return self.verdict == "fits"

    def describe_verdict(self) -> str:
        if self.verdict == "over_fraction":
            return f"over the limit ({self.limit_gib:.2f} GiB)"
        if self.verdict == "oom":
            return "OOM"
        if self.verdict == "error":
            return f"error: {self.result.detail}"
        return "fits"


@dataclass(frozen=True, kw_only=True, slots=True)
class SearchResult:
    max_batch_size: int | None
    """The largest batch that fit; None when not even batch 1 fit."""
    probes: tuple[JudgedProbe, ...]
    """In the order they ran."""
    memory_fraction: float
    capped: bool
    """True when the search stopped at ``max_batch`` with that batch fitting: larger ones may fit too."""
    warnings: tuple[str, ...] = ()

    @property
    def best(self) -> JudgedProbe | None:
        for probe in self.probes:
            if probe.fits and probe.batch_size == self.max_batch_size:
                return probe
        return None


class SearchError(Exception):
    """The search could not finish: a probe failed for a reason other than memory, or the inputs are
    wrong. ``probes`` holds what ran before, so the table can still be shown."""

    def __init__(self, message: str, probes: tuple[JudgedProbe, ...] = ()):
        super().__init__(message)
        self.probes = probes


# ---------------------------------------------------------------------------------------------
# The search (pure)


def judge(result: ProbeResult, memory_fraction: float) -> JudgedProbe:
    """Fits when it ran and its peak is within memory_fraction × total (no total: no limit)."""
    limit = result.total_memory_gib * memory_fraction if result.total_memory_gib is not None else None
    if result.outcome == "error":
        verdict: Verdict = "error"
    elif result.outcome == "oom":
        verdict = "oom"
    elif limit is not None and (result.peak_memory_gib is None or result.peak_memory_gib > limit):
        verdict = "over_fraction"
    else:
        verdict = "fits"
    return JudgedProbe(result=result, verdict=verdict, limit_gib=limit)


def search_max_batch(probe: Callable[[int], ProbeResult], *, start: int = DEFAULT_START,
                     max_batch: int | None = None, memory_fraction: float = DEFAULT_MEMORY_FRACTION,
                     multiple_of: int = 1, max_probes: int = MAX_PROBES,
                     on_probe: Callable[[JudgedProbe], None] | None = None) -> SearchResult:
    """The largest batch for which ``probe`` fits: doubling from ``start``, then bisection.

    Above ``multiple_of`` only its multiples are probed (the answer is the largest fitting multiple);
    below it, when even ``start`` does not fit, the search goes down to batch 1.
    ``on_probe`` sees each judged probe as soon as it is known (for live output).
    Raises SearchError when a probe fails for a reason other than memory.
    """
    if start < 1:
        raise ValueError(f"start must be >= 1, got {start}")
    if multiple_of < 1:
        raise ValueError(f"multiple_of must be >= 1, got {multiple_of}")
    if start % multiple_of:
        raise ValueError(f"start {start} is not a multiple of multiple_of {multiple_of}")
    if max_batch is not None and max_batch < start:
        raise ValueError(f"max_batch {max_batch} is below start {start}")
    if not 0 < memory_fraction <= 1:
        raise ValueError(f"memory_fraction must be in (0, 1], got {memory_fraction}")
    probes: list[JudgedProbe] = []

    def fits(batch: int) -> bool:
        if len(probes) >= max_probes:
            raise SearchError(f"{max_probes} probes without an answer; the memory model is not monotone or the "
                              "limit is far away: pass --max", tuple(probes))
        result = probe(batch)
        if result.batch_size != batch:
            raise SearchError(f"asked to probe batch {batch}, the probe answered for batch {result.batch_size}",
                              tuple(probes))
        judged = judge(result, memory_fraction)
        probes.append(judged)
        if on_probe is not None:
            on_probe(judged)
        if judged.verdict == "error":
            raise SearchError(f"the probe at batch {batch} failed for a reason other than memory: "
                              f"{result.detail or 'no detail'}", tuple(probes))
        if judged.fits and judged.limit_gib is None and max_batch is None:
            raise SearchError("no device memory limit applies (cpu): the search needs a cap; pass --max",
                              tuple(probes))
        return judged.fits

    # Doubling: lo is the largest batch known to fit (0: none yet), hi the smallest known not to.
    lo, hi = 0, None
    batch = start
    capped = False
    while True:
        if fits(batch):
            lo = batch
            if max_batch is not None and batch >= max_batch:
                capped = True
                break
            batch = batch * 2 if max_batch is None else min(batch * 2, max_batch)
        else:
            hi = batch
            break
    # Bisection between lo (fits) and hi (does not).
    while hi is not None:
        step = multiple_of if lo >= multiple_of else 1
        mid = (lo + hi) // 2 // step * step
        if mid <= lo:
            break
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return SearchResult(max_batch_size=lo or None, probes=tuple(probes), memory_fraction=memory_fraction,
                        capped=capped, warnings=tuple(monotonicity_warnings(probes)))


def monotonicity_warnings(probes: list[JudgedProbe] | tuple[JudgedProbe, ...]) -> list[str]:
    """Where measured peak memory falls as the batch grows: the bisection assumes it never does."""
    measured = sorted((p for p in probes if p.result.outcome == "ran" and p.result.peak_memory_gib is not None),
                      key=lambda p: p.batch_size)
    warnings = []
    for smaller, larger in zip(measured, measured[1:]):
        low, high = smaller.result.peak_memory_gib, larger.result.peak_memory_gib
        if larger.batch_size > smaller.batch_size and high < low * (1 - MONOTONE_TOLERANCE):
            warnings.append(
                f"peak memory fell from {low:.2f} GiB at batch {smaller.batch_size} to {high:.2f} GiB at batch "
                f"{larger.batch_size}: the search assumes memory grows with the batch (cuDNN may pick other "
                "algorithms at other sizes); confirm the recommendation with `harness run`")
    return warnings


# ---------------------------------------------------------------------------------------------
# Output


def format_table(probes: tuple[JudgedProbe, ...] | list[JudgedProbe]) -> str:
    lines = [format_header()]
    lines.extend(format_row(p) for p in sorted(probes, key=lambda p: p.batch_size))
    return "\n".join(lines)


def format_header() -> str:
    return f"{'batch':>7}  {'peak GiB':>9}  {'reserved GiB':>12}  result"


def format_row(probe: JudgedProbe) -> str:
    def gib(value: float | None) -> str:
        return f"{value:.2f}" if value is not None else "—"

    return (f"{probe.batch_size:>7}  {gib(probe.result.peak_memory_gib):>9}  "
            f"{gib(probe.result.reserved_memory_gib):>12}  {probe.describe_verdict()}")


def recommendation(result: SearchResult, model: str, precision: str) -> str:
    best = result.best
    if result.max_batch_size is None or best is None:
        smallest = min((p for p in result.probes), key=lambda p: p.batch_size, default=None)
        why = f" (batch {smallest.batch_size}: {smallest.describe_verdict()})" if smallest is not None else ""
        return (f"even batch 1 does not fit for {model} {precision}{why}: the model's weights, gradients and "
                "optimizer state alone exceed the limit; use a GPU with more memory or a smaller model")
    device = best.result.device_name or "this device"
    text = f"largest batch per GPU for {model} {precision} on {device}: {result.max_batch_size}"
    if best.limit_gib is not None and best.result.total_memory_gib:
        used = best.result.peak_memory_gib / best.result.total_memory_gib
        text += (f" (peak {best.result.peak_memory_gib:.2f} GiB of {best.result.total_memory_gib:.1f} GiB = "
                 f"{used:.0%}; limit {result.memory_fraction:.0%})")
    else:
        text += " (no device memory limit on cpu: capped by --max)"
    if result.capped and best.limit_gib is not None:
        text += "; reached --max, larger batches were not probed"
    return text


# ---------------------------------------------------------------------------------------------
# The probe: a fresh process running a few training steps


def _looks_like_oom(message: str) -> bool:
    lowered = message.lower()
    return any(marker in lowered for marker in (
        "out of memory", "can't allocate memory", "cublas_status_alloc_failed", "cudnn_status_alloc_failed",
        "failed to allocate"))


def run_probe_steps(*, model: str, precision: str, batch_size: int, device_kind: str, steps: int,
                    store_path: Path) -> ProbeResult:
    """In this (fresh) process: build, wrap and train ``steps`` steps as the worker does; report memory.

    The step is the worker's train_step: autocast forward, scaled backward, scaler.step, update,
    zero_grad; DDP (world size 1) with gradient_as_bucket_view, so the gradient buckets are there.
    """
    import resource

    import torch
    import torch.distributed as dist

    from harness.workloads import recipe
    from harness.workloads.models import get_model

    spec = get_model(model)
    device_name = None
    try:
        if device_kind == "cuda":
            if not torch.cuda.is_available():
                return ProbeResult(batch_size=batch_size, outcome="error", detail="--device cuda but torch sees no GPU")
            device = torch.device("cuda", 0)
            torch.cuda.set_device(device)
            torch.backends.cudnn.benchmark = True
            device_name = torch.cuda.get_device_name(device)
            dist.init_process_group("nccl", store=dist.FileStore(str(store_path), 1), rank=0, world_size=1,
                                    device_id=device)
        else:
            device = torch.device("cpu")
            dist.init_process_group("gloo", store=dist.FileStore(str(store_path), 1), rank=0, world_size=1)
        ddp = recipe.build_ddp(spec, device)
        step = recipe.TrainStep(ddp, ddp.parameters(), spec, precision, device, batch_size)
        for _ in range(steps):
            step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            total = torch.cuda.get_device_properties(device).total_memory / GIB_BYTES
            return ProbeResult(batch_size=batch_size, outcome="ran",
                               peak_memory_gib=torch.cuda.max_memory_allocated(device) / GIB_BYTES,
                               reserved_memory_gib=torch.cuda.max_memory_reserved(device) / GIB_BYTES,
                               total_memory_gib=total, device_name=device_name)
        peak_rss_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GIB_BYTES  # Linux: KiB
        return ProbeResult(batch_size=batch_size, outcome="ran", peak_memory_gib=peak_rss_gib,
                           device_name="cpu")
    except torch.OutOfMemoryError as exc:
        return ProbeResult(batch_size=batch_size, outcome="oom", device_name=device_name,
                           detail=str(exc).strip().splitlines()[0][:300] if str(exc).strip() else "out of memory")
    except RuntimeError as exc:
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        outcome: ProbeOutcome = "oom" if _looks_like_oom(str(exc)) else "error"
        return ProbeResult(batch_size=batch_size, outcome=outcome, device_name=device_name,
                           detail=f"{type(exc).__name__}: {first_line}")
    except Exception as exc:  # noqa: BLE001 - any other failure is reported, and stops the search
        first_line = (str(exc).strip().splitlines() or [""])[0][:300]
        return ProbeResult(batch_size=batch_size, outcome="error", device_name=device_name,
                           detail=f"{type(exc).__name__}: {first_line}")
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def probe_command(*, model: str, precision: str, batch_size: int, device_kind: str, steps: int,
                  result_path: Path) -> list[str]:
    return [sys.executable, "-m", "harness.tools.batchsize", "--model", model, "--precision", precision,
            "--batch-size", str(batch_size), "--device", device_kind, "--steps", str(steps),
            "--result", str(result_path)]


def subprocess_probe(*, model: str, precision: str, device_kind: str, log_dir: Path,
                     steps: int = DEFAULT_PROBE_STEPS, timeout_s: float = DEFAULT_PROBE_TIMEOUT_S,
                     extra_env: dict[str, str] | None = None) -> Callable[[int], ProbeResult]:
    """A ``probe(batch)`` that runs each batch in a fresh process; its log is ``log_dir/probe-<batch>.log``."""
    package_root = str(Path(__file__).resolve().parents[2])
    log_dir.mkdir(parents=True, exist_ok=True)

    def probe(batch_size: int) -> ProbeResult:
        result_path = log_dir / f"probe-{batch_size}.json"
        log_path = log_dir / f"probe-{batch_size}.log"
        result_path.unlink(missing_ok=True)
        env = dict(os.environ)
        env.update(extra_env or {})
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
        env.setdefault("PYTHONUNBUFFERED", "1")
        if device_kind == "cpu":
            env["CUDA_VISIBLE_DEVICES"] = ""  # a CPU probe must not touch a GPU that happens to be there
        command = probe_command(model=model, precision=precision, batch_size=batch_size, device_kind=device_kind,
                                steps=steps, result_path=result_path)
        with open(log_path, "w") as log:
            proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
            try:
                returncode = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                return ProbeResult(batch_size=batch_size, outcome="error",
                                   detail=f"timed out after {timeout_s:.0f} s (log: {log_path})")
            except BaseException:
                _kill_group(proc)
                raise
        if result_path.exists():
            data = json.loads(result_path.read_text())
            return ProbeResult(**data)
        if returncode < 0:
            how = f"killed by {signal.Signals(-returncode).name}"
            if -returncode == signal.SIGKILL:
                how += " (the kernel's OOM killer, if host memory ran out: see dmesg)"
        else:
            how = f"exited with code {returncode}"
        tail = log_path.read_text(errors="replace").strip().splitlines()[-1:] if log_path.exists() else []
        return ProbeResult(batch_size=batch_size, outcome="error",
                           detail=f"probe process {how} without a result{': ' + tail[0][:200] if tail else ''} "
                                  f"(log: {log_path})")

    return probe


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def find_max_batch(*, model: str, precision: str, device_kind: str, memory_fraction: float = DEFAULT_MEMORY_FRACTION,
                   start: int = DEFAULT_START, max_batch: int | None = None, multiple_of: int = 1,
                   steps: int = DEFAULT_PROBE_STEPS, timeout_s: float = DEFAULT_PROBE_TIMEOUT_S,
                   log_dir: Path, on_probe: Callable[[JudgedProbe], None] | None = None) -> SearchResult:
    """The search with real probes (one fresh process each)."""
    probe = subprocess_probe(model=model, precision=precision, device_kind=device_kind, log_dir=log_dir,
                             steps=steps, timeout_s=timeout_s)
    return search_max_batch(probe, start=start, max_batch=max_batch, memory_fraction=memory_fraction,
                            multiple_of=multiple_of, on_probe=on_probe)


# ---------------------------------------------------------------------------------------------
# Command line


def add_find_max_bs_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "find-max-bs", help="find the largest per-GPU batch that fits in memory",
        description="Find the largest per-GPU batch whose training step (harness recipe) fits within a fraction of "
                    "the GPU's memory: doubling, then bisection, each probe a fresh process.")
    # Names, not choices from harness.workloads.models: importing it imports torch, and `harness --help` should be quick.
    p.add_argument("--model", required=True, help="a registry model, e.g. resnet50, vit_b_16, bert_large, tiny_bert")
    p.add_argument("--precision", required=True, choices=("fp32", "fp16", "bf16"))
    p.add_argument("--memory-fraction", type=float, default=DEFAULT_MEMORY_FRACTION,
                   help="a probe fits when its peak allocated memory is at most this fraction of the GPU's total "
                        f"(default {DEFAULT_MEMORY_FRACTION}; the rest is for the CUDA context, NCCL and the "
                        "allocator)")
    p.add_argument("--device", choices=("cuda", "cpu"), help="default: cuda when a GPU is present, else cpu")
    p.add_argument("--start", type=int, default=DEFAULT_START, help=f"first batch probed (default {DEFAULT_START})")
    p.add_argument("--max", type=int, dest="max_batch", help="largest batch probed (required on cpu)")
    p.add_argument("--multiple-of", type=int, default=1,
                   help="above this, probe only its multiples (default 1: the exact largest batch)")
    p.add_argument("--steps", type=int, default=DEFAULT_PROBE_STEPS,
                   help=f"training steps per probe (default {DEFAULT_PROBE_STEPS}; the peak is reached at step 2)")
    p.add_argument("--timeout", type=float, default=DEFAULT_PROBE_TIMEOUT_S, help="seconds per probe (default 600)")
    p.add_argument("--log-dir", type=Path, help="keep each probe's log here (default: a temporary directory, "
                                                "kept only when a probe fails)")
    return p


def _default_device() -> str:
    from harness.node.hardware import detect

    return detect().device


def cli_find_max_bs(ns: argparse.Namespace) -> int:
    """``harness find-max-bs``: 0 with a recommendation, 1 when nothing fits or a probe failed, 2 on bad input."""
    from harness.catalog import MODELS

    if ns.model not in MODELS:
        print(f"harness find-max-bs: --model {ns.model}: unknown; known models: {', '.join(MODELS)}", file=sys.stderr)
        return 2
    device = ns.device or _default_device()
    if device == "cpu" and ns.max_batch is None:
        print("harness find-max-bs: on cpu there is no device memory to fill, so the search needs a cap: pass --max N",
              file=sys.stderr)
        return 2
    if not 0 < ns.memory_fraction <= 1:
        print(f"harness find-max-bs: --memory-fraction {ns.memory_fraction}: a fraction in (0, 1], e.g. 0.9",
              file=sys.stderr)
        return 2
    if ns.steps < 2:
        print(f"harness find-max-bs: --steps {ns.steps}: at least 2 (the optimizer state exists from step 2 on)",
              file=sys.stderr)
        return 2
    keep_logs = ns.log_dir is not None
    log_dir = ns.log_dir or Path(tempfile.mkdtemp(prefix="harness-find-max-bs-"))
    where = ("cuda:0 (pin the GPU with CUDA_VISIBLE_DEVICES)" if device == "cuda" else
             "cpu (no device memory limit: capped by --max; peak = the probe's peak RSS, host memory)")
    rule = (f"fits = ran and peak allocated <= {ns.memory_fraction:g} x total memory" if device == "cuda" else
            "fits = ran")
    print(f"find-max-bs: {ns.model} {ns.precision} on {where}; each probe: a fresh process, {ns.steps} training "
          f"steps (harness recipe); {rule}")
    print(format_header(), flush=True)
    started = time.time()
    try:
        result = find_max_batch(model=ns.model, precision=ns.precision, device_kind=device,
                                memory_fraction=ns.memory_fraction, start=ns.start, max_batch=ns.max_batch,
                                multiple_of=ns.multiple_of, steps=ns.steps, timeout_s=ns.timeout, log_dir=log_dir,
                                on_probe=lambda probe: print(format_row(probe), flush=True))
    except ValueError as exc:
        print(f"harness find-max-bs: {exc}", file=sys.stderr)
        return 2
    except SearchError as exc:
        print(f"harness find-max-bs: {exc}; probe logs: {log_dir}/", file=sys.stderr)
        return 1
    print(f"\n{len(result.probes)} probes in {time.time() - started:.0f} s; sorted by batch:")
    print(format_table(result.probes))
    for warning in result.warnings:
        print(f"WARNING: {warning}")
    print(recommendation(result, ns.model, ns.precision))
    if not keep_logs:
        shutil.rmtree(log_dir, ignore_errors=True)
    return 0 if result.max_batch_size is not None else 1


# ---------------------------------------------------------------------------------------------
# The probe process's entry point: python -m harness.tools.batchsize --model ... --result PATH


def _probe_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.tools.batchsize",
                                     description="one find-max-bs probe (run by harness find-max-bs, not by hand)")
    parser.add_argument("--model", required=True)
    parser.add_argument("--precision", required=True, choices=("fp32", "fp16", "bf16"))
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--device", required=True, choices=("cuda", "cpu"))
    parser.add_argument("--steps", type=int, default=DEFAULT_PROBE_STEPS)
    parser.add_argument("--result", type=Path, required=True)
    ns = parser.parse_args(argv)
    from dataclasses import asdict

    from harness.records import write_json_atomic
    from harness.workloads.ddp import _die_with_parent

    # The probe runs in a session of its own (so a timeout can kill its group): should find-max-bs
    # die without a chance to clean up (SIGKILL), the kernel ends the probe too. A probe orphaned on
    # an H200 once held 132 GB of a GPU after its parent was gone.
    _die_with_parent()

    with tempfile.TemporaryDirectory(prefix="harness-probe-") as scratch:
        result = run_probe_steps(model=ns.model, precision=ns.precision, batch_size=ns.batch_size,
                                 device_kind=ns.device, steps=ns.steps, store_path=Path(scratch) / "store")
    write_json_atomic(ns.result, json.dumps(asdict(result)))
    print(f"[find-max-bs probe] batch {ns.batch_size}: {result.outcome} peak {result.peak_memory_gib} GiB "
          f"{result.detail}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_probe_main())
