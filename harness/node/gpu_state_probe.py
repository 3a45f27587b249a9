"""The GPU state of one node of a multi-node session, read on that node: the probe ``srun`` starts on
every node but the driver's (harness/plugin/remote_gpu_state.py), one task per node.

``python -m harness.node.gpu_state_probe watch --dir RUN/gpu_state_nodes --owner TAG`` writes
``<host>.start.json`` (this node's GPUs, their snapshot (harness/node/gpu_state.py) and the processes
already on them) at once. It then watches every GPU for XIDs (harness/node/xid.py) and reads its
clock-event reasons and processes under the session's load (harness/node/load_watch.py; TAG is the
session's owner tag) until ``stop`` appears in that directory (or the process gets SIGUSR1, SIGTERM or
SIGINT), then writes ``<host>.end.json``: the end snapshot, the XID watcher's events and status, and
the load record. The directory is in the run directory, which every node must see (docs/slurm.md).

A node whose NVML cannot be opened writes ``"status": "unavailable"`` with the reason and no GPU: the
driver then fails that node's tests, naming it. Launcher side: no torch, no CUDA context.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

from harness.node.gpu_state import read_gpu_states
from harness.node.hardware import GpuInfo, HardwareError, nvml_visible_indices, read_gpu
from harness.node.load_watch import PERIOD_S, LoadWatch
from harness.node.nvml import installed_pynvml
from harness.node.processes import gpu_processes
from harness.node.xid import XidWatcher
from harness.files import write_text_atomic

STOP_FILE = "stop"
"""Written by the driver into the probe directory when the session ends: every watcher then ends."""
STOP_POLL_S = 1.0
"""How often a watcher looks for the stop file: the driver waits at most this long plus the end snapshot."""


def node_file(directory: Path, host: str, phase: str) -> Path:
    """Where a node's ``start`` or ``end`` snapshot lies."""
    return directory / f"{host}.{phase}.json"


def list_gpus(nvml: Any = None) -> tuple[list[GpuInfo], str | None]:
    """This node's GPUs that CUDA_VISIBLE_DEVICES leaves visible (Slurm sets it for the step's GPUs);
    ([], why) where NVML cannot be opened or read."""
    try:
        nvml = nvml if nvml is not None else installed_pynvml()
    except ImportError as err:
        return [], f"NVML unavailable: pynvml (nvidia-ml-py) is not installed: {err}"
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as err:
        return [], f"NVML unavailable: {err}"
    try:
        visible = nvml_visible_indices(nvml, os.environ.get("CUDA_VISIBLE_DEVICES"), int(nvml.nvmlDeviceGetCount()))
        gpus = [read_gpu(nvml, index) for index in visible]  # as detect() reads the driver's node
    except (nvml.NVMLError, HardwareError) as err:
        return [], f"NVML opened but could not list the GPUs: {err}"
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass
    return gpus, None


def snapshot(phase: str, host: str, gpus: Sequence[GpuInfo], why: str | None, nvml: Any = None) -> dict[str, Any]:
    """One node's snapshot file: its GPUs and their state, or why there is none."""
    data: dict[str, Any] = {"host": host, "phase": phase, "taken_at": time.time(), "pid": os.getpid(),
                            "gpus": [asdict(gpu) for gpu in gpus]}
    if why is not None:
        return {**data, "status": "unavailable", "why": why, "states": []}
    states, problems = read_gpu_states(gpus, nvml)
    if not states and problems:
        return {**data, "status": "unavailable", "why": problems, "states": []}
    # At start, before any case: anything holding a GPU is foreign (the driver refuses to start then).
    busy = [asdict(process) for process in gpu_processes(gpus, nvml)] if phase == "start" else []
    return {**data, "status": "ok", "why": problems, "states": [s.to_dict() for s in states], "processes": busy}


def watch(directory: Path, host: str | None = None, nvml: Any = None, stop: threading.Event | None = None,
          poll_s: float = STOP_POLL_S, *, owner: str | None = None, load_period_s: float = PERIOD_S) -> int:
    """Start snapshot, XIDs and the load watch until ``stop`` (the file, a signal, or the event), end snapshot."""
    # The node's name as Slurm calls it (the driver looks for that file); a host name may be longer.
    host = host or os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    stop = stop or threading.Event()
    directory.mkdir(parents=True, exist_ok=True)
    gpus, why = list_gpus(nvml)
    # Whole or not at all (the driver reads a file as soon as it exists), in the run directory's one mode.
    start = snapshot("start", host, gpus, why, nvml)
    write_text_atomic(node_file(directory, host, "start"), json.dumps(start, indent=1))
    watcher = XidWatcher(gpus, nvml).start() if why is None else None
    load = LoadWatch(gpus, owner, nvml, period_s=load_period_s).start() if why is None else None
    while not stop.is_set() and not (directory / STOP_FILE).exists():
        stop.wait(poll_s)
    if watcher is not None:
        watcher.stop()
    if load is not None:
        load.stop()
    end = snapshot("end", host, gpus, why, nvml)
    end["xid"] = watcher.to_dict() if watcher is not None else {"failure": why, "status": {}, "events": []}
    end["load"] = load.to_dict() if load is not None else {"failure": why, "gpus": {}}
    write_text_atomic(node_file(directory, host, "end"), json.dumps(end, indent=1))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.node.gpu_state_probe",
                                     description="This node's GPU state at start and end, and its XIDs between.")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("watch", help="write <host>.start.json, watch XIDs until DIR/stop, write <host>.end.json")
    run.add_argument("--dir", type=Path, required=True, help="the probe directory (in the session's run directory)")
    run.add_argument("--owner", help="the session's owner tag (HARNESS_OWNER of its launches): a GPU process "
                                     "carrying it is the session's, any other is foreign")
    args = parser.parse_args(argv)
    stop = threading.Event()
    # SIGUSR1: the driver's stop through srun, which forwards it as it is (SIGTERM to srun kills the
    # tasks outright: tests/test_slurm.py). SIGTERM/SIGINT from elsewhere: still write the end snapshot.
    for signum in (signal.SIGUSR1, signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    try:
        return watch(args.dir, stop=stop, owner=args.owner)
    except OSError as err:
        print(f"gpu_state_probe on {socket.gethostname()}: cannot write into {args.dir}: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
