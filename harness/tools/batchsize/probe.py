"""One find-max-bs probe: a fresh Python process that trains a few steps at one batch size and
reports its peak memory as JSON. Both sides of that protocol live here: the parent side
(``subprocess_probe``: start the process, wait, kill its group on timeout, read the result or explain
its death) and the child side (``python -m harness.tools.batchsize.probe``: ``run_probe_steps``).

A fresh process per probe, because an OOM can leave the CUDA caching allocator fragmented: the
next probe in the same process would measure the wreckage, not the batch.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Callable

from harness.files import write_json_atomic
from harness.tools.batchsize.search import (DEFAULT_MEMORY_FRACTION, DEFAULT_START, JudgedProbe, ProbeOutcome,
                                            ProbeResult, SearchResult, search_max_batch)
from harness.rank import die_with_parent

GIB_BYTES = 1024**3
"""GiB is 1024³ bytes, as torch.cuda and NVML report memory."""
DEFAULT_PROBE_STEPS = 3
"""Step 1 creates the optimizer's momentum buffers after its backward pass; step 2 is the first to
hold activations, gradients and momentum at once (the steady peak); step 3 confirms it."""
DEFAULT_PROBE_TIMEOUT_S = 600.0


# ---------------------------------------------------------------------------------------------
# The parent: one fresh process per probe, its death explained


def probe_command(*, model: str, precision: str, batch_size: int, device_kind: str, steps: int,
                  result_path: Path) -> list[str]:
    return [sys.executable, "-m", "harness.tools.batchsize.probe", "--model", model, "--precision", precision,
            "--batch-size", str(batch_size), "--device", device_kind, "--steps", str(steps),
            "--result", str(result_path)]


def subprocess_probe(*, model: str, precision: str, device_kind: str, log_dir: Path,
                     steps: int = DEFAULT_PROBE_STEPS, timeout_s: float = DEFAULT_PROBE_TIMEOUT_S,
                     extra_env: dict[str, str] | None = None) -> Callable[[int], ProbeResult]:
    """A ``probe(batch)`` that runs each batch in a fresh process; its log is ``log_dir/probe-<batch>.log``."""
    package_root = str(Path(__file__).resolve().parents[3])  # the directory holding harness/
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
# The child: python -m harness.tools.batchsize.probe --model ... --result PATH (one batch, a few steps)


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
    # Late: torch (and the recipe and models that import it) loads only in the child, after die_with_parent:
    # a parent killed during the slow import then leaves no orphan; and the parent never loads it.
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


def _probe_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.tools.batchsize.probe",
                                     description="one find-max-bs probe (run by harness find-max-bs, not by hand)")
    parser.add_argument("--model", required=True)
    parser.add_argument("--precision", required=True, choices=("fp32", "fp16", "bf16"))
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--device", required=True, choices=("cuda", "cpu"))
    parser.add_argument("--steps", type=int, default=DEFAULT_PROBE_STEPS)
    parser.add_argument("--result", type=Path, required=True)
    ns = parser.parse_args(argv)
    # The probe runs in a session of its own (so a timeout can kill its group): should find-max-bs
    # die without a chance to clean up (SIGKILL), the kernel ends the probe too. A probe orphaned on
    # an H200 once held 132 GB of a GPU after its parent was gone.
    die_with_parent()

    with tempfile.TemporaryDirectory(prefix="harness-probe-") as scratch:
        result = run_probe_steps(model=ns.model, precision=ns.precision, batch_size=ns.batch_size,
                                 device_kind=ns.device, steps=ns.steps, store_path=Path(scratch) / "store")
    write_json_atomic(ns.result, json.dumps(asdict(result)))
    print(f"[find-max-bs probe] batch {ns.batch_size}: {result.outcome} peak {result.peak_memory_gib} GiB "
          f"{result.detail}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_probe_main())
