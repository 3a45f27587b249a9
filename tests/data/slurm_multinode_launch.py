"""Run inside a Slurm batch job (tests/test_slurm.py): one short CPU benchmark on every node of the
allocation, launched as the harness documents it: harness.launch.slurm's srun prefix + the torchrun
command of harness.launch.command (its plan written beside it) with a c10d rendezvous on the first node.
Writes RUN_DIR/record.json (rank 0) and RUN_DIR/launch.json (what was run, and what the batch script saw).

    python tests/data/slurm_multinode_launch.py RUN_DIR
"""

import json
import socket
import subprocess
import sys
from pathlib import Path

from harness.launch.command import Rendezvous, launch_env, prepare_launch
from harness.launch.spec import BenchmarkSpec, LaunchSettings
from harness.launch.slurm import allocation_from_env, rendezvous_endpoint, rendezvous_port, srun_prefix

run_dir = Path(sys.argv[1])
run_dir.mkdir(parents=True, exist_ok=True)
alloc = allocation_from_env()
assert alloc is not None, "not in a Slurm job"
spec = BenchmarkSpec(model="tiny_bert", precision="fp32", batch_size_per_gpu=4, warmup_seconds=0.5,
                     measure_seconds=1.0, min_warmup_steps=2, min_measure_steps=5,
                     launch=LaunchSettings(gpus_per_node=1, nodes=alloc.node_count, device="cpu", timeout_s=120.0))
run_id = f"slurm-{alloc.job_id}"
rendezvous = Rendezvous(endpoint=rendezvous_endpoint(alloc, rendezvous_port(alloc)), run_id=run_id)
command = srun_prefix(alloc, spec.nodes) + prepare_launch(spec, run_dir, run_id, rendezvous)
(run_dir / "launch.json").write_text(json.dumps(
    {"allocation": alloc.to_dict(), "driver_host": socket.gethostname(), "command": command}, indent=1))
with open(run_dir / "torchrun.log", "w") as log:
    done = subprocess.run(command, env=launch_env(spec.launch, run_id), stdout=log, stderr=subprocess.STDOUT,
                          stdin=subprocess.DEVNULL, timeout=spec.launch.timeout_s)
sys.exit(done.returncode)
