"""A foreign compute load for `harness selftest`: it starts once the session's case is running.

    python -m harness.selftest.foreign_load --device cuda --watch DIR --case CASE --seconds 300 --started FILE
    python -m harness.selftest.foreign_load --device cpu --cores 0,1 --per-core 8 --watch DIR ...

It waits until a rank phase file under ``--watch`` (the session's report directory) says warmup,
probe or measure (with ``--case``, only that case's: its log directory's name, so that the 1-GPU reference the
launch runs seconds before it is measured unloaded, as on a node where the load comes later), waits ``--delay``
seconds more, then loads for at most ``--seconds``: on a GPU a
matmul loop (the GPU of ``CUDA_VISIBLE_DEVICES``), on CPU ``--per-core`` busy processes
pinned to each core of ``--cores``, each in a session of its own. It writes ``--started`` (its pids)
once the load runs, so the selftest knows it landed; SIGTERM ends it and its children, and they
die with it.

On a GPU the CUDA context is made once any case of the session runs, not before (the session refuses to start
while a foreign process holds a GPU), and with ``--case`` not at that case's own start either: making a context
and its matrices takes seconds, and a hot 2-GPU case (1 s warm-up, 2 s window) had ended before the load began
(nvidia-h200-x2, 2026-11-28: the degradation PASSED). So the context is made, idle, while the launch's earlier
cases run, and the loop begins within a poll of the case's warm-up.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

from harness.rank import die_with_parent

RUNNING_PHASES = ("warmup", "probe", "measure")
POLL_S = 0.1
MATMUL_SIZE = 8192
"""Square fp16 matrices: about 1.1 TFLOP a product, milliseconds on any data-centre GPU, so the loop
keeps the GPU's SMs busy the whole time (the point is to compete, not to measure)."""


def case_running(watch: Path, case: str | None = None) -> bool:
    """Whether any rank phase file under ``watch`` (of the case whose log directory is named ``case``, when given)
    shows a case past its start-up."""
    for path in watch.rglob("rank*.phase"):
        if case is not None and path.parent.name != case:
            continue
        try:
            if json.loads(path.read_text()).get("phase") in RUNNING_PHASES:
                return True
        except (OSError, ValueError):
            continue  # being replaced: read it at the next poll
    return False


def wait_for_case(watch: Path, deadline: float, case: str | None = None) -> bool:
    while time.monotonic() < deadline:
        if case_running(watch, case):
            return True
        time.sleep(POLL_S)
    return False


def _write_started(path: Path, pids: list[int], device: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"pids": pids, "device": device, "started_at": time.time()}))
    tmp.replace(path)


def gpu_ready():
    """The matmul operands on the GPU: the CUDA context made, nothing running on it yet."""
    import torch  # late: the CPU load never pays for torch

    device = torch.device("cuda", 0)
    a = torch.randn(MATMUL_SIZE, MATMUL_SIZE, device=device, dtype=torch.float16)
    b = torch.randn(MATMUL_SIZE, MATMUL_SIZE, device=device, dtype=torch.float16)
    torch.cuda.synchronize(device)
    return a, b


def gpu_load(operands, seconds: float, started: Path) -> None:
    import torch

    a, b = operands
    device = a.device
    _write_started(started, [os.getpid()], "cuda")
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(20):
            a = torch.matmul(a, b).clamp_(-1, 1)
        torch.cuda.synchronize(device)  # a bounded queue, so the loop ends on time


def _spin(core: int, end: float) -> None:
    # A session of its own: with sched_autogroup (on in most distributions' kernels) the scheduler shares a
    # core between sessions first, so busy processes of one session together weigh no more than one
    # rank (each rank is a session of its own under torchrun); measured, docs/selftest.md.
    os.setsid()
    die_with_parent()  # no orphan burning a core if this load is killed outright
    os.sched_setaffinity(0, {core})
    while time.monotonic() < end:
        pass
    os._exit(0)


def cpu_load(cores: list[int], per_core: int, seconds: float, started: Path) -> None:
    end = time.monotonic() + seconds
    children = []
    for core in cores:
        for _ in range(per_core):
            pid = os.fork()
            if pid == 0:
                _spin(core, end)
            children.append(pid)

    def stop(signum: int, frame: object) -> None:
        for child in children:
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    _write_started(started, children, "cpu")
    for child in children:
        os.waitpid(child, 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.selftest.foreign_load", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cuda", "cpu"), required=True)
    parser.add_argument("--watch", type=Path, required=True, help="the session's report directory")
    parser.add_argument("--case", default=None, help="wait for this case (its log directory's name) only")
    parser.add_argument("--seconds", type=float, default=300.0, help="longest time to wait plus load (default 300)")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds to wait after the case is running")
    parser.add_argument("--started", type=Path, required=True, help="written (JSON: pids) once the load runs")
    parser.add_argument("--cores", default="", help="cpu: the cores to load, e.g. 0,1")
    parser.add_argument("--per-core", type=int, default=1, help="cpu: busy processes per core")
    ns = parser.parse_args(argv)
    deadline = time.monotonic() + ns.seconds
    operands = None
    if ns.device == "cuda":
        # Made once the session's launch runs a case (its busy-GPU check is behind it), before ``--case`` starts.
        if not wait_for_case(ns.watch, deadline):
            print(f"foreign_load: no case started under {ns.watch} within {ns.seconds:g} s; nothing loaded", flush=True)
            return 1
        operands = gpu_ready()
    if not wait_for_case(ns.watch, deadline, ns.case):
        print(f"foreign_load: no case started under {ns.watch} within {ns.seconds:g} s; nothing loaded", flush=True)
        return 1
    time.sleep(ns.delay)
    remaining = max(0.0, deadline - time.monotonic())
    print(f"foreign_load: case running; loading {ns.device} for up to {remaining:.0f} s (pid {os.getpid()})",
          flush=True)
    if operands is not None:
        gpu_load(operands, remaining, ns.started)
    else:
        cores = [int(c) for c in ns.cores.split(",") if c.strip()] or sorted(os.sched_getaffinity(0))
        cpu_load(cores, max(1, ns.per_core), remaining, ns.started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
