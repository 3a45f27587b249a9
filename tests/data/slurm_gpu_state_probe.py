"""Run inside a 2-node Slurm batch job (tests/test_slurm.py): the GPU-state probe of the other node
(harness/plugin/remote_gpu_state.py) through real ``srun``, as a cuda-profile session starts it, and
meanwhile a step shaped like a multi-node case's (harness.launch.slurm.srun_prefix: every CPU of each
node) that must start beside the probe step. Writes RUN_DIR/probe.json: the test ids, each GPU-state
result, the session summary, and the case-shaped step's exit status and output.

    python tests/data/slurm_gpu_state_probe.py RUN_DIR
"""

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from harness.launch.slurm import allocation_from_env, srun_prefix
from harness.kinds.gpu_state.params import gpu_state_params
from harness.kinds.gpu_state.runner import GpuStateChecks
from harness.plugin.gpu_state import GpuStateWatcher
from harness.kinds.shipped import load_shipped_profile

run_dir = Path(sys.argv[1])
run_dir.mkdir(parents=True, exist_ok=True)
alloc = allocation_from_env()
assert alloc is not None, "not in a Slurm job"
profile = load_shipped_profile(Path(__file__).resolve().parents[2] / "thresholds" / "h100-80gb.toml")
# A cuda-profile session on a node without NVML: the driver's own GPUs are none; the other node's
# probe must say NVML is unavailable, and its GPU-state test must not pass.
ctx = SimpleNamespace(device="cuda", hardware=SimpleNamespace(gpus=(), hostname=socket.gethostname()),
                      profile=profile, allocation=alloc, options=SimpleNamespace(level="standard", nodes=None),
                      run_dir=run_dir, expected_gpus=1,
                      expected_gpus_source="test", available_gpus=1, node_gpus=1)
runner = GpuStateWatcher(ctx=ctx)
runner.start()
case_step = subprocess.run([*srun_prefix(alloc, alloc.node_count), "hostname"], capture_output=True, text=True,
                           timeout=120, stdin=subprocess.DEVNULL)
# What the driver's fallback relies on: SIGUSR1 to srun reaches the task, whose handler runs (SIGTERM
# does not: srun then kills the tasks, status 137).
signal_file = run_dir / "sigusr1.txt"
handler = (f"import pathlib, signal, sys, time\n"
           f"done = pathlib.Path({str(signal_file)!r})\n"
           f"signal.signal(signal.SIGUSR1, lambda *_: (done.write_text('usr1'), sys.exit(0)))\n"
           f"pathlib.Path(str(done) + '.ready').write_text('ready')\n"
           f"time.sleep(60)\n")
sleeper = subprocess.Popen(["srun", "--nodes=1", "--ntasks=1", f"--nodelist={alloc.nodes[-1]}", "--overlap",
                            sys.executable, "-c", handler], stdin=subprocess.DEVNULL)
deadline = time.monotonic() + 60
while not Path(f"{signal_file}.ready").exists() and time.monotonic() < deadline:
    time.sleep(0.2)
sleeper.send_signal(signal.SIGUSR1)
sleeper_code = sleeper.wait(timeout=60)
params = gpu_state_params(ctx, runner.remote)  # type: ignore[arg-type]
results = {p.id: GpuStateChecks(ctx=ctx, watch=runner).check(p.values[0]).to_dict() for p in params}  # type: ignore[arg-type]
runner.stop()
(run_dir / "probe.json").write_text(json.dumps(
    {"ids": [p.id for p in params], "results": results, "summary": runner.summary(),
     "sigusr1": {"returncode": sleeper_code, "handled": signal_file.exists()},
     "case_step": {"returncode": case_step.returncode, "stdout": case_step.stdout, "stderr": case_step.stderr},
     "probe_step_returncode": runner.remote.process.poll() if runner.remote and runner.remote.process else None},
    indent=1, default=str))
