"""The torchrun command of a launch and its environment; on several nodes, the Slurm srun prefix and
the c10d rendezvous.

Every worker module is started the same way: ``python -m torch.distributed.run ... -m <module>
--plan <run_dir>/plan.json``, the spec's plan written once beside it (harness/workloads/plan.py); a spec of any
kind says its module and its plan (harness/launch/spec.py ``LaunchedSpec``), so nothing here names a kind.
Every process of a launch carries ``HARNESS_RUN_ID`` in its environment: the cleanup finds them
by it (harness/launch/cleanup.py).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from harness.launch import slurm
from harness.node.process_tags import RUN_ID_ENV
from harness.results.overrides import HARNESS_SET_ENV
from harness.launch.spec import BenchmarkSpec, LaunchedSpec, LaunchSettings
from harness.workloads.plan import PLAN_FILE, write_plan

PACKAGE_ROOT = Path(__file__).resolve().parents[2]
"""The directory holding ``harness/``: on the workers' PYTHONPATH, so a source checkout runs uninstalled."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Rendezvous:
    """Multi-node: torchrun's c10d rendezvous on a host every node can reach (e.g. Slurm's first node)."""

    endpoint: str
    """host:port of the rendezvous store."""
    run_id: str


def make_run_id(spec: LaunchedSpec) -> str:
    return f"{spec.case_id}-{datetime.now().strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"


def torchrun_prefix(gpus_per_node: int, nodes: int = 1, rendezvous: Rendezvous | None = None) -> list[str]:
    """``python -m torch.distributed.run ...`` up to the module it runs: shared by every worker module."""
    if rendezvous is None:
        topology = ["--standalone", "--nnodes=1"]
    else:
        topology = [f"--nnodes={nodes}", "--rdzv-backend=c10d", f"--rdzv-endpoint={rendezvous.endpoint}",
                    f"--rdzv-id={rendezvous.run_id}"]
    return [sys.executable, "-m", "torch.distributed.run", *topology,
            f"--nproc-per-node={gpus_per_node}", "--max-restarts=0"]


def worker_command(module: str, plan_path: Path, launch: LaunchSettings,
                   rendezvous: Rendezvous | None = None) -> list[str]:
    """torchrun running ``python -m <module> --plan <plan_path>`` on every rank of ``launch``."""
    return [*torchrun_prefix(launch.gpus_per_node, launch.nodes, rendezvous), "-m", module, "--plan", str(plan_path)]


def launch_command(spec: LaunchedSpec, run_dir: Path,
                   rendezvous: Rendezvous | None = None) -> list[str]:
    """The torchrun command that runs the plan <run_dir>/plan.json of ``spec`` (written by prepare_launch, or
    later for a launch started before its turn: harness/launch/prestart.py)."""
    return worker_command(spec.worker_module, Path(run_dir) / PLAN_FILE, spec.launch, rendezvous)


def prepare_launch(spec: LaunchedSpec, run_dir: Path, run_id: str,
                   rendezvous: Rendezvous | None = None) -> list[str]:
    """Write ``spec``'s plan to <run_dir>/plan.json and return the torchrun command that runs it."""
    write_plan(Path(run_dir) / PLAN_FILE, spec.plan(Path(run_dir), run_id))
    return launch_command(spec, run_dir, rendezvous)


def group_launch_command(launch_dir: Path, launch: LaunchSettings) -> list[str]:
    """Several benchmark cases in one launch: the command that runs the plan <launch_dir>/plan.json (the caller
    writes it: a launch started early begins its cases when it appears, harness/launch/prestart.py)."""
    return worker_command(BenchmarkSpec.worker_module, Path(launch_dir) / PLAN_FILE, launch)


PR_SET_PDEATHSIG = 1
"""prctl(2) option: the signal this process gets when the thread that forked it exits."""


def die_with_launcher(launcher_pid: int, signum: int = signal.SIGKILL) -> Callable[[], None]:
    """Popen's preexec_fn for torchrun: SIGKILL it when the launcher dies, even by SIGKILL (the OOM
    killer, a CI runner's hard kill), so no launch outlives its session and holds the GPUs.

    Linux sends the signal when the *thread* that forked exits: ``run_job`` starts torchrun from the
    thread that waits for it and cleans it up (the session's main thread), so the signal comes only
    when that thread, and so the launcher, is gone. The workers die with torchrun
    (harness/rank.py die_with_parent). SIGKILL, not SIGTERM: nobody is left to read a graceful
    stop's output, and what a worker spawned is found by the next session's sweep
    (harness/launch/cleanup.py find_orphans). Not Linux/glibc: the sweep alone applies. ``signum``
    SIGTERM for a child that stops its own children on it (selftest's session and foreign load).
    """
    def set_parent_death_signal() -> None:
        try:
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
        except OSError:
            return
        libc.prctl(PR_SET_PDEATHSIG, signum)
        if os.getppid() != launcher_pid:  # the launcher died before prctl: nothing would signal us
            os.kill(os.getpid(), signum)
    return set_parent_death_signal


def usable_cpu_cores() -> int:
    """The cores this process may run on (its affinity mask: a cgroup or taskset limit counts), not
    the machine's count."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def launch_env(launch: LaunchSettings, run_id: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(launch.extra_env)
    env[RUN_ID_ENV] = run_id
    env["HARNESS_LAUNCH_EPOCH"] = repr(time.time())
    env["HARNESS_NODES"] = str(launch.nodes)
    env.setdefault("PYTHONUNBUFFERED", "1")
    # CUDA numbers GPUs fastest-first by default; NVML (and nvidia-smi, and our detection) by PCI
    # bus. The same order everywhere makes "GPU 3" in a verdict the GPU an operator pulls.
    env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    if "OMP_NUM_THREADS" not in env:
        # torchrun would set 1 thread per rank; on CPU give each rank its share of the cores instead. Set
        # here and named as the harness's own, so that a record lists only the user's OMP_NUM_THREADS.
        threads = max(1, usable_cpu_cores() // launch.gpus_per_node) if launch.device == "cpu" else 1
        env["OMP_NUM_THREADS"] = str(threads)
        env[HARNESS_SET_ENV] = ",".join(filter(None, (env.get(HARNESS_SET_ENV), "OMP_NUM_THREADS")))
    if launch.device == "cpu":
        env.setdefault("CUDA_VISIBLE_DEVICES", "")  # a CPU run must not touch a GPU that happens to be there
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PACKAGE_ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def slurm_launch(launch: LaunchSettings, run_id: str) -> tuple[list[str], Rendezvous]:
    """A multi-node launch in the Slurm job we run in: the srun prefix and the c10d rendezvous.

    srun starts one torchrun agent per node (under HARNESS_STEP_WRAPPER, e.g. apptainer exec,
    when set); the agents meet on the allocation's first node (docs/slurm.md).
    """
    alloc = slurm.allocation_from_env()
    if alloc is None:
        raise ValueError(f"a {launch.nodes}-node run needs a Slurm allocation of {launch.nodes} nodes "
                         "(run it in a batch job: slurm/acceptance.sbatch); SLURM_JOB_ID is not set")
    prefix = slurm.srun_prefix(alloc, launch.nodes, extra=slurm.step_wrapper())
    return prefix, Rendezvous(endpoint=slurm.rendezvous_endpoint(alloc, slurm.rendezvous_port(alloc)), run_id=run_id)
