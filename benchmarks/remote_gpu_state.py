"""The other-node GPU-state probe on this host, as the multi-node session's ``srun`` task runs it, judged
against a profile: what a healthy GPU node's probe says, and how long it takes.

    python benchmarks/remote_gpu_state.py --profile h100-80gb --watch-seconds 10 --out out/remote_gpu_state.json
    python benchmarks/remote_gpu_state.py --load session --watch-seconds 30       # the session's ranks on every GPU
    python benchmarks/remote_gpu_state.py --load session+foreign --watch-seconds 30   # and a foreign job on GPU 0

The driver's side (harness/plugin/remote_gpu_state.py) starts the probe with its srun prefix cut off
(no Slurm needed), waits for the start snapshot, lets it watch, stops it with the ``stop`` file and
judges every GPU with the GPU-state checks, throttling and foreign processes over the session included
(harness/checks/node_load.py). ``--load`` puts harness selftest's foreign matmul loop on the GPUs
meanwhile: ``session`` carries the session's owner tag (as every launch of a session does),
``foreign`` does not. On a healthy node every check passes, or is not evaluated where the profile's
``allow_unsupported`` says so; the same as ``test_gpu_state[<node>-gpuN]``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.kinds.gpu_state.checks import gpu_state_checks
from harness.launch.cleanup import owner_env
from harness.node.process_tags import OWNER_ENV
from harness.launch.slurm import SlurmAllocation
from harness.plugin.remote_gpu_state import RemoteGpuState
from harness.kinds.shipped import load_shipped_profile

REPO = Path(__file__).resolve().parents[1]


def local_task(command: list[str], **kwargs: Any) -> subprocess.Popen:
    """The probe step's task, started here: the command without its ``srun ...`` prefix."""
    return subprocess.Popen(command[command.index(sys.executable):], **kwargs)


LOAD = ("import sys; from pathlib import Path; from harness.selftest.foreign_load import gpu_load; "
        "gpu_load(float(sys.argv[1]), Path(sys.argv[2]))")
"""harness selftest's foreign matmul loop (harness/selftest/foreign_load.py) on the one GPU it is shown, for
N seconds: here a case's rank or a foreign job, by its environment."""


def start_loads(kind: str, gpus: list[int], seconds: float) -> list[subprocess.Popen]:
    """The session's load on every GPU (tagged as the session's launches are) and, for ``session+foreign``,
    an untagged one on the first GPU."""
    base = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    tagged = {**base, **owner_env(Path(tempfile.gettempdir()))}
    untagged = {key: value for key, value in base.items() if key != OWNER_ENV}
    started = Path(tempfile.mkdtemp(prefix="remote-gpu-state-load-"))

    def load(gpu: int, env: dict[str, str], name: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", LOAD, str(seconds), str(started / name)],
                                env={**env, "CUDA_VISIBLE_DEVICES": str(gpu)})

    loads = [load(gpu, tagged, f"session-{gpu}") for gpu in gpus] if kind in ("session", "session+foreign") else []
    if kind == "session+foreign":
        loads.append(load(gpus[0], untagged, "foreign"))
    return loads


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="h100-80gb", help="thresholds/<profile>.toml whose [gpu_state] judges")
    parser.add_argument("--watch-seconds", type=float, default=10.0, help="how long the probe watches for XIDs")
    parser.add_argument("--out", type=Path, default=None, help="write the snapshots and checks here as JSON")
    parser.add_argument("--load", choices=("none", "session", "session+foreign"), default="none",
                        help="GEMM loops on the GPUs while the probe watches (see above)")
    args = parser.parse_args()
    host = socket.gethostname()
    remote = RemoteGpuState(nodes=(host,), directory=Path(tempfile.mkdtemp(prefix="remote-gpu-state-")),
                            expected_gpus=None)
    started = time.monotonic()
    remote.launch(SlurmAllocation(job_id="0", nodes=("driver", host), gpus_per_node=None, cpus_per_node=None),
                  popen=local_task)
    start_s = time.monotonic() - started
    loads = start_loads(args.load, remote.gpu_indices(host), args.watch_seconds)
    time.sleep(args.watch_seconds)
    for load in loads:
        if load.wait(timeout=60) != 0:
            print(f"a GEMM load ended with status {load.returncode}", file=sys.stderr)
    stopping = time.monotonic()
    remote.finish()
    end_s = time.monotonic() - stopping
    bounds = load_shipped_profile(REPO / "thresholds" / f"{args.profile}.toml").gpu_state
    checks = {index: [c.to_dict() for c in gpu_state_checks(remote.gpu_input(host, index), bounds)]
              for index in remote.gpu_indices(host)}
    print(f"start snapshot after {start_s:.2f} s, end snapshot {end_s:.2f} s after `stop`; "
          f"start: {remote.problem(host, 'start') or 'ok'}; end: {remote.problem(host, 'end') or 'ok'}")
    print(f"processes on the GPUs at start: {remote.start.get(host, {}).get('processes')}; load: {args.load}")
    for index, judged in checks.items():
        for check in judged:
            print(f"GPU {index} {check['key']:17} {str(check['passed']):5} {check['note'][:220]}")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"start_s": start_s, "end_s": end_s, "probe": remote.summary(),
                                        "checks": checks}, indent=1, default=str))
    failed = [c for judged in checks.values() for c in judged if c["passed"] is False]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
