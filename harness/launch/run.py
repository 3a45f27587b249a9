"""Launching one benchmark: the torchrun command, its environment, a timeout, and a record always.

torchrun starts each worker in a session of its own, so killing torchrun's process group does
not reach them. Every process of a launch therefore carries ``HARNESS_RUN_ID`` in its
environment, and the launcher sweeps /proc for that tag on timeout, on interrupt, and after a
normal exit: whatever the workers spawned (compile workers, NCCL proxies) goes with them.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from harness.cases import CaseId
from harness.records import Failure, RunRecord, write_record

RUN_ID_ENV = "HARNESS_RUN_ID"
LOG_TAIL_LINES = 40
KILL_GRACE_S = 5.0


def check_model_and_precision(model: str, precision: str) -> None:
    from harness.catalog import MODELS, PRECISIONS

    if model not in MODELS:
        raise ValueError(f"model {model!r} is unknown; known models: {', '.join(MODELS)}")
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r} is unknown; use one of {', '.join(PRECISIONS)}")


def check_launch_fields(spec, *, at_least_one: tuple[str, ...] = (), positive_seconds: tuple[str, ...] = ()) -> None:
    """The fields every torchrun launch has (device, gpus_per_node, nodes, the stall and setup bounds,
    the telemetry period), plus the caller's own: one ValueError naming the field and its value."""
    if spec.device not in ("cuda", "cpu"):
        raise ValueError(f"device {spec.device!r} is unknown; use cuda or cpu")
    for name in ("gpus_per_node", "nodes", *at_least_one):
        if getattr(spec, name) < 1:
            raise ValueError(f"{name} must be >= 1, got {getattr(spec, name)}")
    for name in ("stall_factor", "stall_floor_s", "setup_timeout_s", "telemetry_period_s", *positive_seconds):
        if not getattr(spec, name) > 0:
            raise ValueError(f"{name} must be > 0 seconds, got {getattr(spec, name)}")


@dataclass(frozen=True, kw_only=True, slots=True)
class BenchmarkSpec:
    """One benchmark launch: a model × precision × GPU count × scaling mode and how to measure it."""

    model: str
    precision: str
    gpus_per_node: int
    """Worker processes per node: GPUs on CUDA, ranks on CPU."""
    nodes: int = 1
    scaling: str = "weak"
    batch_size_per_gpu: int | None = None
    """Weak scaling: fixed per GPU."""
    global_batch_size: int | None = None
    """Strong scaling: fixed in total, split over the GPUs."""
    device: str = "cuda"
    warmup_seconds: float = 5.0
    measure_seconds: float = 10.0
    """Fixed window: its length. Adaptive window (ci_target > 0): the least it measures."""
    ci_target: float = 0.0
    """Adaptive window: stop once the throughput's 95 % CI half-width is at most this (0.01 = ±1 %),
    all ranks agreeing, after measure_seconds; 0 = a fixed window of measure_seconds."""
    max_measure_seconds: float | None = None
    """Adaptive window: stop here whatever the CI (the worker's default: 6 x measure_seconds + 10)."""
    ci_block_seconds: float = 0.5
    """Adaptive window: about this long per block of steps (batch means for the CI)."""
    min_warmup_steps: int = 10
    min_measure_steps: int = 20
    compile: bool = False
    peak_tflops: float | None = None
    sync_each_step: bool = False
    timeout_s: float = 600.0
    """Hard cap on the whole launch (seconds)."""
    stall_factor: float = 3.0
    stall_floor_s: float = 30.0
    """A rank that shows no progress for stall_factor × its phase's expected time + stall_floor_s
    is hung: the run is killed then, long before timeout_s."""
    setup_timeout_s: float = 300.0
    """Bound for what has no expected time: imports, NCCL init, model build, the first warmup block
    (cuDNN autotuning, torch.compile)."""
    extra_env: dict[str, str] = field(default_factory=dict)
    telemetry: bool = True
    """Sample the GPUs during the measured window (harness/telemetry.py); off to measure its cost."""
    telemetry_period_s: float = 0.1

    def __post_init__(self) -> None:
        check_model_and_precision(self.model, self.precision)
        if self.scaling not in ("weak", "strong"):
            raise ValueError(f"scaling {self.scaling!r} is unknown; use weak or strong")
        check_launch_fields(self, at_least_one=("min_warmup_steps", "min_measure_steps"),
                            positive_seconds=("warmup_seconds", "measure_seconds", "timeout_s", "ci_block_seconds"))
        if not 0 <= self.ci_target < 1:
            raise ValueError(f"ci_target must be a fraction in [0, 1) (0.01 = ±1 %; 0 = fixed window), got {self.ci_target}")
        if self.max_measure_seconds is not None and not self.max_measure_seconds >= self.measure_seconds:
            raise ValueError(f"max_measure_seconds ({self.max_measure_seconds}) must be >= measure_seconds "
                             f"({self.measure_seconds}): it caps the adaptive window that measure_seconds starts")
        if self.scaling == "weak":
            if self.batch_size_per_gpu is None or self.batch_size_per_gpu < 1:
                raise ValueError(f"weak scaling needs a batch size per GPU >= 1, got {self.batch_size_per_gpu}")
        else:
            if self.global_batch_size is None or self.global_batch_size < 1:
                raise ValueError(f"strong scaling needs a global batch size >= 1, got {self.global_batch_size}")
            if self.global_batch_size % self.world_size:
                raise ValueError(
                    f"strong scaling splits the global batch over the GPUs: {self.global_batch_size} is not "
                    f"divisible by {self.world_size} GPUs; pick a multiple of {self.world_size}")

    @property
    def world_size(self) -> int:
        return self.gpus_per_node * self.nodes

    @property
    def per_gpu_batch(self) -> int:
        if self.scaling == "weak":
            assert self.batch_size_per_gpu is not None
            return self.batch_size_per_gpu
        assert self.global_batch_size is not None
        return self.global_batch_size // self.world_size

    @property
    def case_id(self) -> str:
        return CaseId(model=self.model, precision=self.precision, gpus=self.gpus_per_node, scaling=self.scaling,
                      nodes=self.nodes).key


@dataclass(frozen=True, kw_only=True, slots=True)
class Rendezvous:
    """Multi-node: torchrun's c10d rendezvous on a host every node can reach (e.g. Slurm's first node)."""

    endpoint: str
    """host:port of the rendezvous store."""
    run_id: str


def make_run_id(spec: BenchmarkSpec) -> str:
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


def torchrun_command(spec: BenchmarkSpec, run_dir: Path, run_id: str, rendezvous: Rendezvous | None = None) -> list[str]:
    return [*torchrun_prefix(spec.gpus_per_node, spec.nodes, rendezvous), "-m", "harness.workloads.ddp",
            *worker_args(spec, run_dir, run_id)]


def worker_args(spec: BenchmarkSpec, run_dir: Path, run_id: str) -> list[str]:
    """harness.workloads.ddp's arguments for one case (its command line, or one entry of a plan)."""
    return [
        "--model", spec.model, "--precision", spec.precision, "--scaling", spec.scaling,
        "--batch-size-per-gpu", str(spec.per_gpu_batch),
        "--global-batch-size", str(spec.per_gpu_batch * spec.world_size),
        "--device", spec.device,
        "--warmup-seconds", str(spec.warmup_seconds), "--measure-seconds", str(spec.measure_seconds),
        "--min-warmup-steps", str(spec.min_warmup_steps), "--min-measure-steps", str(spec.min_measure_steps),
        *(["--compile"] if spec.compile else []),
        *(["--peak-tflops", str(spec.peak_tflops)] if spec.peak_tflops else []),
        *(["--sync-each-step"] if spec.sync_each_step else []),
        *(["--ci-target", str(spec.ci_target), "--ci-block-seconds", str(spec.ci_block_seconds)]
          if spec.ci_target > 0 else []),
        *(["--max-measure-seconds", str(spec.max_measure_seconds)]
          if spec.ci_target > 0 and spec.max_measure_seconds is not None else []),
        "--run-dir", str(run_dir), "--run-id", run_id,
    ]


def launch_env(spec: BenchmarkSpec, run_id: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(spec.extra_env)
    env[RUN_ID_ENV] = run_id
    env["HARNESS_LAUNCH_EPOCH"] = repr(time.time())
    env["HARNESS_NODES"] = str(spec.nodes)
    env.setdefault("PYTHONUNBUFFERED", "1")
    # CUDA numbers GPUs fastest-first by default; NVML (and nvidia-smi, and our detection) by PCI
    # bus. The same order everywhere makes "GPU 3" in a verdict the GPU an operator pulls.
    env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    if spec.device == "cpu":
        # torchrun would set 1 thread per rank; give each rank its share of the cores instead.
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        env.setdefault("OMP_NUM_THREADS", str(max(1, cores // spec.gpus_per_node)))
        env.setdefault("CUDA_VISIBLE_DEVICES", "")  # a CPU run must not touch a GPU that happens to be there
    # Make our package importable by the workers even when it is not installed (a source checkout).
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    return env


def slurm_launch(spec: BenchmarkSpec, run_id: str) -> tuple[list[str], Rendezvous]:
    """A multi-node launch in the Slurm job we run in: the srun prefix and the c10d rendezvous.

    srun starts one torchrun agent per node (under HARNESS_STEP_WRAPPER, e.g. apptainer exec,
    when set); the agents meet on the allocation's first node (docs/slurm.md).
    """
    from harness.launch import slurm

    alloc = slurm.allocation_from_env()
    if alloc is None:
        raise ValueError(f"a {spec.nodes}-node run needs a Slurm allocation of {spec.nodes} nodes "
                         "(run it in a batch job: slurm/acceptance.sbatch); SLURM_JOB_ID is not set")
    prefix = slurm.srun_prefix(alloc, spec.nodes, extra=slurm.step_wrapper())
    return prefix, Rendezvous(endpoint=slurm.rendezvous_endpoint(alloc, slurm.rendezvous_port(alloc)), run_id=run_id)


def run_benchmark(spec: BenchmarkSpec, run_dir: Path, *, run_id: str | None = None,
                  rendezvous: Rendezvous | None = None) -> RunRecord:
    """Launch, wait (bounded), clean up, and return the run record: a failure is a record, not an exception.

    One node: torchrun --standalone. Several: srun + torchrun with a c10d rendezvous in the Slurm
    job (slurm_launch), unless the caller gives the rendezvous.

    KeyboardInterrupt/SystemExit still propagate (after the processes are gone), because the user
    or the scheduler asked us to stop.
    """

    from harness.telemetry import sampler_for

    run_id = run_id or make_run_id(spec)
    run_dir = Path(run_dir)
    prefix: list[str] = []
    if spec.nodes > 1 and rendezvous is None:
        prefix, rendezvous = slurm_launch(spec, run_id)
    command = prefix + torchrun_command(spec, run_dir, run_id, rendezvous)
    sampler = sampler_for(spec.device, run_dir, enabled=spec.telemetry, period_s=spec.telemetry_period_s)
    outcome = supervise(spec, command, run_dir, run_id, sampler=sampler)
    return record_of_launch(spec, run_id, run_dir, outcome)


def record_of_launch(spec: BenchmarkSpec, run_id: str, run_dir: Path, outcome: "LaunchOutcome") -> RunRecord:
    """The record of one case launched alone: the worker's (with the launch's wall time and telemetry)
    when it finished, else a failure record (written to run_dir) saying why."""
    record_path = run_dir / "record.json"
    if outcome.stall is None and outcome.returncode == 0 and record_path.exists():
        from harness.records import read_record

        record = read_record(record_path)
        return dataclasses.replace(record, phases_s={**record.phases_s, "launch_total": outcome.elapsed_s},
                                   telemetry=outcome.telemetry)
    record = failure_record(spec, run_id, run_dir, returncode=outcome.returncode, stall=outcome.stall,
                            elapsed_s=outcome.elapsed_s, phases=outcome.phases)
    record = dataclasses.replace(record, telemetry=outcome.telemetry)
    write_record(record_path, record)
    return record


# Everything a launch of several cases must have in common: one torchrun, one environment.
_SHARED_LAUNCH_FIELDS = ("device", "gpus_per_node", "nodes", "extra_env", "telemetry", "telemetry_period_s",
                         "stall_factor", "stall_floor_s", "setup_timeout_s")


def run_benchmark_group(specs: list[BenchmarkSpec], run_dirs: list[Path], run_ids: list[str],
                        launch_dir: Path) -> list[RunRecord]:
    """Several cases of one GPU layout in one torchrun launch; one record per case, in order.

    What the single launch saves is the process start, imports and process-group init of every
    case but the first (about 6 s each on H200: docs/measurements.md). What each case keeps is
    its own: run directory, record, telemetry window (a sampler per case, opened and closed by
    that case's phase files), time bounds. The first failure ends the launch: that case gets the
    failure record, the cases before it keep theirs, and the cases after it run again in a new
    launch, so one bad case costs the others nothing but time.
    """
    if not (len(specs) == len(run_dirs) == len(run_ids)) or not specs:
        raise ValueError("run_benchmark_group needs one run directory and one run id per spec, and at least one spec")
    if len(specs) == 1:
        return [run_benchmark(specs[0], run_dirs[0], run_id=run_ids[0])]
    for name in _SHARED_LAUNCH_FIELDS:
        values = {repr(getattr(spec, name)) for spec in specs}
        if len(values) > 1:
            raise ValueError(f"the cases of one launch must share {name}; got {', '.join(sorted(values))}")
    if specs[0].nodes > 1:
        raise ValueError("a launch of several cases runs on one node; launch multi-node cases one at a time")
    from harness.records import write_json_atomic

    launch_dir = Path(launch_dir)
    launch_dir.mkdir(parents=True, exist_ok=True)
    for run_dir in run_dirs:
        clear_run_dir(Path(run_dir))
    plan = launch_dir / "plan.json"
    write_json_atomic(plan, json.dumps({"cases": [
        {"run_id": run_id, "argv": worker_args(spec, Path(run_dir), run_id)}
        for spec, run_dir, run_id in zip(specs, run_dirs, run_ids)]}, indent=1))
    launch_id = f"{launch_dir.name}-{os.getpid()}-{int(time.time())}"
    command = [*torchrun_prefix(specs[0].gpus_per_node), "-m", "harness.workloads.ddp", "--plan", str(plan)]
    # The stall rule bounds each case; the whole launch may take what its cases may take together.
    bounds = dataclasses.replace(specs[0], timeout_s=sum(spec.timeout_s for spec in specs))
    samplers = CaseSamplers([Path(d) for d in run_dirs], specs[0])
    outcome = supervise(bounds, command, launch_dir, launch_id, sampler=samplers)

    def case_telemetry(run_dir: Path) -> dict:
        from harness.telemetry import unavailable

        return (outcome.telemetry or {}).get(str(run_dir)) or unavailable(
            "the launch ended before this case began", period_s=specs[0].telemetry_period_s)

    records: list[RunRecord] = []
    previous_end = outcome.started
    for index, (spec, run_dir, run_id) in enumerate(zip(specs, run_dirs, run_ids)):
        run_dir = Path(run_dir)
        record_path = run_dir / "record.json"
        ended = _case_end(run_dir)
        if record_path.exists() and ended is not None:
            from harness.records import read_record

            record = read_record(record_path)
            record = dataclasses.replace(record, telemetry=case_telemetry(run_dir),
                                         phases_s={**record.phases_s, "launch_total": ended - previous_end})
            write_record(record_path, record)
            records.append(record)
            previous_end = ended
            continue
        # This case was running when the launch ended: the launch's failure is its failure.
        returncode = outcome.returncode if outcome.returncode not in (0, None) or outcome.stall else 1
        record = failure_record(spec, run_id, launch_dir, returncode=returncode, stall=outcome.stall,
                                elapsed_s=time.time() - previous_end if outcome.stall is None else outcome.elapsed_s,
                                phases=outcome.phases)
        record = dataclasses.replace(record, telemetry=case_telemetry(run_dir))
        write_record(record_path, record)
        records.append(record)
        rest = index + 1
        if rest < len(specs):
            records += run_benchmark_group(specs[rest:], run_dirs[rest:], run_ids[rest:],
                                           launch_dir.with_name(f"{launch_dir.name}-from-{rest}"))
        break
    return records


def _case_end(run_dir: Path) -> float | None:
    """When rank 0 finished this case (its phase file says done), or None."""
    info = read_phases(run_dir).get(0)
    return float(info["since"]) if info and info.get("phase") == "done" and "since" in info else None


class CaseSamplers:
    """One telemetry sampler per case of a plan launch, each started when its case begins.

    A sampler polls its own case directory, so it opens and closes on that case's measured window
    only; starting them lazily keeps one sampling thread busy at a time.
    """

    def __init__(self, run_dirs: list[Path], spec: BenchmarkSpec, *, factory=None, poll_s: float = 0.2):
        from harness.telemetry import sampler_for

        self.run_dirs = run_dirs
        self._factory = factory or (lambda run_dir: sampler_for(spec.device, run_dir, enabled=spec.telemetry,
                                                                period_s=spec.telemetry_period_s))
        self._started: dict[Path, object] = {}
        self._poll_s = poll_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "CaseSamplers":
        self._thread = threading.Thread(target=self._watch, name="harness-case-samplers", daemon=True)
        self._thread.start()
        return self

    def _watch(self) -> None:
        while not self._stop.is_set():
            self.poll()
            self._stop.wait(self._poll_s)

    def poll(self) -> None:
        for run_dir in self.run_dirs:
            if run_dir not in self._started and any(run_dir.glob("rank*.phase")):
                self._started[run_dir] = self._factory(run_dir).start()

    def stop(self) -> dict[str, dict]:
        """Every case's telemetry summary, keyed by its run directory (str)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10.0)
        self.poll()  # a case that began in the last moments still says why it has no samples
        return {str(run_dir): sampler.stop() for run_dir, sampler in self._started.items()}


@dataclass(frozen=True, kw_only=True, slots=True)
class LaunchOutcome:
    """How one torchrun launch ended, whatever it ran."""

    returncode: int | None
    stall: "Stall | None"
    """Set when the launch was killed: past its time limit, or a rank stopped making progress."""
    elapsed_s: float
    phases: dict[int, dict]
    """Each rank's last phase file, read before the processes were killed."""
    telemetry: dict | None = None
    """The sampler's summary, when one ran beside the launch."""
    started: float = 0.0
    """time.time() when the launch began."""


def clear_run_dir(run_dir: Path) -> None:
    """Make ``run_dir`` and remove what an earlier launch left in it (phase, failure and pid files,
    logs, the record), so nothing stale is read as this launch's."""
    run_dir.mkdir(parents=True, exist_ok=True)
    for stale in (*run_dir.glob("rank*"), run_dir / "record.json"):
        stale.unlink(missing_ok=True)


def stop_on_sigterm() -> None:
    """Turn SIGTERM (timeout(1), Slurm at a time limit, a CI runner cancelling) into KeyboardInterrupt,
    so the launcher's cleanup stops every process it started, as on Ctrl-C."""
    signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)


def _raise_keyboard_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def supervise(spec, command: list[str], run_dir: Path, run_id: str, *, sampler=None) -> LaunchOutcome:
    """Run ``command`` (a torchrun launch) bounded by ``spec``'s time limits; kill all of it afterwards.

    ``spec`` is a BenchmarkSpec or anything with its launch fields (gpus_per_node, nodes, device,
    extra_env, timeout_s, setup_timeout_s, stall_factor, stall_floor_s): the all-reduce test and
    the soak launch their own worker modules through here. ``sampler`` (harness/telemetry.py) is
    started before the launch and stopped before the processes are killed.
    """
    clear_run_dir(run_dir)
    (run_dir / "command.json").write_text(json.dumps(command))
    launcher_log = run_dir / "torchrun.log"
    started = time.time()
    stall: Stall | None = None
    telemetry = None
    if sampler is not None:
        sampler.start()
    with open(launcher_log, "w") as log:
        proc = subprocess.Popen(command, env=launch_env(spec, run_id), stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            next_check = started
            while proc.poll() is None:
                now = time.time()
                if now >= started + spec.timeout_s:
                    stall = Stall(reason=f"the launch exceeded its {spec.timeout_s:.0f} s limit")
                    break
                if now >= next_check:
                    stall = find_stall(spec, read_phases(run_dir), started, now)
                    if stall is not None:
                        break
                    next_check = now + 1.0
                time.sleep(0.2)
        finally:
            # Runs on timeout, on normal exit (stragglers) and on Ctrl-C / SIGTERM alike.
            phases = read_phases(run_dir)
            if sampler is not None:
                telemetry = sampler.stop()
            kill_run(proc, run_id)
    return LaunchOutcome(returncode=proc.returncode, stall=stall, elapsed_s=time.time() - started, phases=phases,
                         telemetry=telemetry, started=started)


# --- hang detection --------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Stall:
    reason: str
    """Why the run was judged hung, e.g. 'rank 1 (...) showed no progress for 41 s (bound ...)'."""
    phase: str | None = None
    ranks: tuple[int, ...] = ()


def find_stall(spec: BenchmarkSpec, phases: dict[int, dict], started: float, now: float) -> Stall | None:
    """The first rank that has shown no progress for longer than its phase allows, if any (pure)."""
    if not phases:
        if now - started > spec.setup_timeout_s:
            return Stall(reason=f"no rank started within {spec.setup_timeout_s:.0f} s", phase="setup")
        return None
    for rank, info in sorted(phases.items()):
        if info.get("phase") == "done":
            continue
        expected = info.get("expected_s")
        if expected is None:
            bound = spec.setup_timeout_s
            rule = f"setup bound {spec.setup_timeout_s:.0f} s"
        else:
            bound = spec.stall_factor * expected + spec.stall_floor_s
            rule = f"{spec.stall_factor:g} x expected {expected:.1f} s + {spec.stall_floor_s:.0f} s"
        silent = now - float(info.get("since", started))
        if silent > bound:
            phase = info.get("phase", "setup")
            stopped = [r for r, i in sorted(phases.items()) if _process_stopped(i.get("pid"))]
            culprit = (f"; {', '.join(_rank_identity(phases, r) for r in stopped)} is stopped (SIGSTOP)"
                       if stopped else "")
            return Stall(reason=f"{_rank_identity(phases, rank)} showed no progress for {silent:.0f} s "
                                f"(bound: {rule}){culprit}", phase=phase, ranks=tuple(stopped) or (rank,))
    return None


def _process_stopped(pid) -> bool:
    """Whether a local process is stopped (state T), as a SIGSTOPped or traced rank is."""
    if not pid:
        return False
    try:
        stat = Path(f"/proc/{int(pid)}/stat").read_text()
    except (OSError, ValueError):
        return False
    return stat.rsplit(")", 1)[-1].split()[0] in ("T", "t")


# --- process cleanup -------------------------------------------------------------------------


def tagged_pids(run_id: str) -> list[int]:
    """Processes whose environment carries HARNESS_RUN_ID=run_id (our launch's whole tree)."""
    needle = f"{RUN_ID_ENV}={run_id}".encode() + b"\0"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except (OSError, PermissionError):
            continue  # gone, or not ours
    return [pid for pid in found if pid != os.getpid()]


def kill_run(proc: subprocess.Popen, run_id: str, grace_s: float = KILL_GRACE_S) -> None:
    """SIGTERM everything of this launch, then SIGKILL what is left after the grace period."""
    own_group = os.getpgrp()

    def signal_all(sig: int) -> list[int]:
        pids = set(tagged_pids(run_id))
        if proc.poll() is None:
            pids.add(proc.pid)
        for pid in pids:
            for target in (lambda p: os.killpg(os.getpgid(p), sig) if os.getpgid(p) != own_group else None,
                           lambda p: os.kill(p, sig)):
                try:
                    target(pid)
                except (ProcessLookupError, PermissionError):
                    pass
        return sorted(pids)

    if not signal_all(signal.SIGTERM):
        proc.wait()
        return
    for pid in tagged_pids(run_id):
        try:
            os.kill(pid, signal.SIGCONT)  # a stopped process cannot act on SIGTERM until continued
        except ProcessLookupError:
            pass
    deadline = time.time() + grace_s
    while time.time() < deadline and (proc.poll() is None or tagged_pids(run_id)):
        time.sleep(0.1)
    if proc.poll() is None or tagged_pids(run_id):
        signal_all(signal.SIGKILL)
    proc.wait()
    deadline = time.time() + grace_s
    while tagged_pids(run_id) and time.time() < deadline:
        time.sleep(0.1)


# --- failure records -------------------------------------------------------------------------


def read_phases(run_dir: Path) -> dict[int, dict]:
    phases = {}
    for path in run_dir.glob("rank*.phase"):
        try:
            phases[int(path.stem.removeprefix("rank"))] = json.loads(path.read_text())
        except (ValueError, OSError):
            continue
    return phases


def log_tails(run_dir: Path, lines: int = LOG_TAIL_LINES) -> dict[str, str]:
    tails = {}
    for path in sorted(run_dir.glob("rank*.log"), key=lambda p: int(p.stem.removeprefix("rank"))) + [
            run_dir / "torchrun.log"]:
        if path.exists():
            text = path.read_text(errors="replace").splitlines()
            tails[path.name] = "\n".join(text[-lines:])
    return tails


# One failure entry of torchrun's ChildFailedError message (the "Failures:" list and the
# "Root Cause" block use the same layout); the root cause is printed last.
_TORCHRUN_FAILURE = re.compile(
    r"host\s*:\s*(?P<host>\S+)\s*\n\s*rank\s*:\s*(?P<rank>\d+)[^\n]*\n\s*exitcode\s*:\s*(?P<exitcode>-?\d+)")

# What a rank reports when a *peer* died: a symptom, never the cause.
_PEER_LOSS = re.compile(
    r"Connection closed by peer|Connection reset by peer|Broken pipe|remote process exited|DistBackendError|"
    r"DistNetworkError|NCCL communicator was aborted|ProcessGroupNCCL.*(?:abort|timed? ?out)", re.I)


def _torchrun_failures(log_text: str) -> list[dict]:
    """Failed ranks as torchrun reports them, the root cause first, one entry per rank."""
    entries = [{"rank": int(m["rank"]), "exitcode": int(m["exitcode"]), "host": m["host"]}
               for m in _TORCHRUN_FAILURE.finditer(log_text)]
    if "Root Cause" in log_text and entries:
        entries.insert(0, entries.pop())
    unique: dict[int, dict] = {}
    for entry in entries:
        unique.setdefault(entry["rank"], entry)
    return list(unique.values())


def _how_it_ended(exitcode: int) -> str:
    if exitcode < 0 and -exitcode in {s.value for s in signal.Signals}:
        return f"was killed by {signal.Signals(-exitcode).name}"
    return f"exited with code {exitcode}"


def _root_cause(run_dir: Path, rank_failures: list[dict], phases: dict[int, dict], returncode: int | None,
                tails: dict[str, str]) -> tuple[str, int | None, str | None, str]:
    """(status, rank, phase, reason) of a run that ended badly, blaming the cause, not its echoes.

    When one rank dies its peers fail too ("Connection closed by peer"), often first from
    torchrun's point of view. So: a rank's own explanation (OOM, NaN, an exception) that is not
    a peer-loss symptom wins, earliest first; then a rank killed by a signal that wrote nothing;
    then torchrun's root cause; then the earliest symptom.
    """
    log_path = run_dir / "torchrun.log"
    deaths = _torchrun_failures(log_path.read_text(errors="replace") if log_path.exists() else "")
    for death in deaths:
        phases.setdefault(death["rank"], {}).setdefault("host", death["host"])
    explained = {f.get("rank") for f in rank_failures}
    causes = sorted((f for f in rank_failures if not _PEER_LOSS.search(str(f.get("reason", "")))),
                    key=lambda f: (f.get("time", float("inf")), f.get("rank", 0)))
    killed = [d for d in deaths if d["exitcode"] < 0 and d["rank"] not in explained]
    if causes:
        first = causes[0]
        rank = first.get("rank")
        return (first.get("status", "failed"), rank, first.get("phase"),
                f"{_rank_identity(phases, rank)}: {first.get('reason')}")
    for death in killed or deaths:
        rank = death["rank"]
        phase = phases.get(rank, {}).get("phase")
        reason = f"{_rank_identity(phases, rank)} {_how_it_ended(death['exitcode'])}"
        return "failed", rank, phase, reason + (f" in phase {phase}" if phase else "")
    if rank_failures:
        first = min(rank_failures, key=lambda f: (f.get("time", float("inf")), f.get("rank", 0)))
        rank = first.get("rank")
        return "failed", rank, first.get("phase"), f"{_rank_identity(phases, rank)}: {first.get('reason')}"
    reason = f"torchrun exited with code {returncode} before any rank reported a result"
    torchrun_tail = tails.get("torchrun.log", "")
    if "Error" in torchrun_tail:
        reason += f": {torchrun_tail.strip().splitlines()[-1][:300]}"
    return "failed", None, None, reason


def _rank_identity(phases: dict[int, dict], rank: int) -> str:
    info = phases.get(rank, {})
    parts = [f"rank {rank}"]
    details = []
    if info.get("host"):
        details.append(f"host {info['host']}")
    if info.get("gpu_index") is not None:
        details.append(f"GPU {info['gpu_index']}")
    if info.get("gpu_uuid"):
        details.append(info["gpu_uuid"])
    if details:
        parts.append(f"({', '.join(details)})")
    return " ".join(parts)


def failure_record(spec: BenchmarkSpec, run_id: str, run_dir: Path, *, returncode: int | None,
                   stall: Stall | None, elapsed_s: float, phases: dict[int, dict]) -> RunRecord:
    status, failure = explain_failure(run_dir, returncode=returncode, stall=stall, elapsed_s=elapsed_s,
                                      phases=phases)
    return RunRecord(
        run_id=run_id, model=spec.model, precision=spec.precision, scaling=spec.scaling,
        world_size=spec.world_size, nodes=spec.nodes, device_kind=spec.device,
        batch_size_per_gpu=spec.per_gpu_batch, global_batch_size=spec.per_gpu_batch * spec.world_size,
        compile=spec.compile, status=status, failure=failure,
        phases_s={"launch_total": elapsed_s},
        hosts=tuple(dict.fromkeys(info["host"] for info in phases.values() if info.get("host"))),
        finished_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )


def explain_failure(run_dir: Path, *, returncode: int | None, stall: Stall | None, elapsed_s: float,
                    phases: dict[int, dict]) -> tuple[str, Failure]:
    """(status, Failure) of a launch that ended badly, for any worker module that writes phase files."""
    tails = log_tails(run_dir)
    status = "failed"
    rank = None
    phase = None
    rank_failures = []
    for path in run_dir.glob("rank*.failure.json"):
        try:
            rank_failures.append(json.loads(path.read_text()))
        except (ValueError, OSError):
            continue
    if stall is not None:
        status = "timeout"
        by_phase: dict[str, list[int]] = {}
        for r, info in sorted(phases.items()):
            by_phase.setdefault(info.get("phase", "unknown"), []).append(r)
        # The earliest phase any rank is stuck in is where the run stopped making progress.
        order = ["setup", "warmup", "probe", "measure", "gather", "done"]
        stuck = stall.phase or (min(by_phase, key=lambda p: order.index(p) if p in order else -1)
                                if by_phase else "setup")
        phase = "warmup" if stuck == "probe" else stuck
        rank = stall.ranks[0] if stall.ranks else None
        where = "; ".join(f"{p}: ranks {', '.join(map(str, rs))}" for p, rs in by_phase.items())
        reason = (f"timed out in phase {phase} after {elapsed_s:.0f} s: {stall.reason}; every process of the "
                  f"run was killed ({where or 'no rank reported a phase'})")
    else:
        status, rank, phase, reason = _root_cause(run_dir, rank_failures, phases, returncode, tails)
    return status, Failure(reason=reason, phase=phase, rank=rank, log_tails=tails)
