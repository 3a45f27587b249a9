"""Launching one benchmark: the torchrun command, its environment, a timeout, and a record always.

torchrun starts each worker in a session of its own, so killing torchrun's process group does
not reach them. Every process of a launch therefore carries ``HARNESS_RUN_ID`` in its
environment, and the launcher sweeps /proc for that tag on timeout, on interrupt, and after a
normal exit: whatever the workers spawned (compile workers, NCCL proxies) goes with them.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from harness.records import Failure, RunRecord, write_record

RUN_ID_ENV = "HARNESS_RUN_ID"
LOG_TAIL_LINES = 40
KILL_GRACE_S = 5.0


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
    min_warmup_steps: int = 10
    min_measure_steps: int = 20
    compile: bool = False
    peak_tflops: float | None = None
    sync_each_step: bool = False
    timeout_s: float = 600.0
    extra_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from harness.models import MODELS, PRECISIONS

        if self.model not in MODELS:
            raise ValueError(f"model {self.model!r} is unknown; known models: {', '.join(MODELS)}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision {self.precision!r} is unknown; use one of {', '.join(PRECISIONS)}")
        if self.scaling not in ("weak", "strong"):
            raise ValueError(f"scaling {self.scaling!r} is unknown; use weak or strong")
        if self.device not in ("cuda", "cpu"):
            raise ValueError(f"device {self.device!r} is unknown; use cuda or cpu")
        for name in ("gpus_per_node", "nodes", "min_warmup_steps", "min_measure_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("warmup_seconds", "measure_seconds", "timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0 seconds, got {getattr(self, name)}")
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
        gpus = f"{self.nodes}x{self.gpus_per_node}gpu" if self.nodes > 1 else f"{self.gpus_per_node}gpu"
        return f"{self.model}-{self.precision}-{self.scaling}-{gpus}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Rendezvous:
    """Multi-node: torchrun's c10d rendezvous on a host every node can reach (e.g. Slurm's first node)."""

    endpoint: str
    """host:port of the rendezvous store."""
    run_id: str


def make_run_id(spec: BenchmarkSpec) -> str:
    return f"{spec.case_id}-{datetime.now().strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"


def torchrun_command(spec: BenchmarkSpec, run_dir: Path, run_id: str, rendezvous: Rendezvous | None = None) -> list[str]:
    if rendezvous is None:
        topology = ["--standalone", "--nnodes=1"]
    else:
        topology = [f"--nnodes={spec.nodes}", "--rdzv-backend=c10d", f"--rdzv-endpoint={rendezvous.endpoint}",
                    f"--rdzv-id={rendezvous.run_id}"]
    return [
        sys.executable, "-m", "torch.distributed.run", *topology,
        f"--nproc-per-node={spec.gpus_per_node}", "--max-restarts=0",
        "-m", "harness.worker",
        "--model", spec.model, "--precision", spec.precision, "--scaling", spec.scaling,
        "--batch-size-per-gpu", str(spec.per_gpu_batch),
        "--global-batch-size", str(spec.per_gpu_batch * spec.world_size),
        "--device", spec.device,
        "--warmup-seconds", str(spec.warmup_seconds), "--measure-seconds", str(spec.measure_seconds),
        "--min-warmup-steps", str(spec.min_warmup_steps), "--min-measure-steps", str(spec.min_measure_steps),
        *(["--compile"] if spec.compile else []),
        *(["--peak-tflops", str(spec.peak_tflops)] if spec.peak_tflops else []),
        *(["--sync-each-step"] if spec.sync_each_step else []),
        "--run-dir", str(run_dir), "--run-id", run_id,
    ]


def launch_env(spec: BenchmarkSpec, run_id: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(spec.extra_env)
    env[RUN_ID_ENV] = run_id
    env["HARNESS_LAUNCH_EPOCH"] = repr(time.time())
    env["HARNESS_NODES"] = str(spec.nodes)
    env.setdefault("PYTHONUNBUFFERED", "1")
    if spec.device == "cpu":
        # torchrun would set 1 thread per rank; give each rank its share of the cores instead.
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        env.setdefault("OMP_NUM_THREADS", str(max(1, cores // spec.gpus_per_node)))
        env.setdefault("CUDA_VISIBLE_DEVICES", "")  # a CPU run must not touch a GPU that happens to be there
    # Make our package importable by the workers even when it is not installed (a source checkout).
    package_root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    return env


def run_benchmark(spec: BenchmarkSpec, run_dir: Path, *, run_id: str | None = None,
                  rendezvous: Rendezvous | None = None) -> RunRecord:
    """Launch, wait (bounded), clean up, and return the run record: a failure is a record, not an exception.

    KeyboardInterrupt/SystemExit still propagate (after the processes are gone), because the user
    or the scheduler asked us to stop.
    """
    run_id = run_id or make_run_id(spec)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    for stale in (*run_dir.glob("rank*"), run_dir / "record.json"):
        stale.unlink(missing_ok=True)
    command = torchrun_command(spec, run_dir, run_id, rendezvous)
    (run_dir / "command.json").write_text(json.dumps(command))
    launcher_log = run_dir / "torchrun.log"
    started = time.time()
    timed_out = False
    with open(launcher_log, "w") as log:
        proc = subprocess.Popen(command, env=launch_env(spec, run_id), stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline = started + spec.timeout_s
            while proc.poll() is None:
                if time.time() >= deadline:
                    timed_out = True
                    break
                time.sleep(0.2)
        finally:
            # Runs on timeout, on normal exit (stragglers) and on Ctrl-C / SIGTERM alike.
            phases = read_phases(run_dir)
            kill_run(proc, run_id)
    elapsed_s = time.time() - started
    record_path = run_dir / "record.json"
    if not timed_out and proc.returncode == 0 and record_path.exists():
        from harness.records import read_record

        record = read_record(record_path)
        return _with_launch_time(record, elapsed_s)
    record = failure_record(spec, run_id, run_dir, returncode=proc.returncode, timed_out=timed_out,
                            elapsed_s=elapsed_s, phases=phases)
    write_record(record_path, record)
    return record


def _with_launch_time(record: RunRecord, elapsed_s: float) -> RunRecord:
    import dataclasses

    return dataclasses.replace(record, phases_s={**record.phases_s, "launch_total": elapsed_s})


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


_ROOT_CAUSE = re.compile(
    r"Root Cause \(first observed failure\):.*?host\s*:\s*(?P<host>\S+).*?rank\s*:\s*(?P<rank>\d+).*?"
    r"exitcode\s*:\s*(?P<exitcode>-?\d+)", re.S)


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


def failure_record(spec: BenchmarkSpec, run_id: str, run_dir: Path, *, returncode: int | None, timed_out: bool,
                   elapsed_s: float, phases: dict[int, dict]) -> RunRecord:
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
    if timed_out:
        status = "timeout"
        by_phase: dict[str, list[int]] = {}
        for r, info in sorted(phases.items()):
            by_phase.setdefault(info.get("phase", "unknown"), []).append(r)
        # The earliest phase any rank is stuck in is where the run stopped making progress.
        order = ["setup", "warmup", "probe", "measure", "gather", "done"]
        stuck = min(by_phase, key=lambda p: order.index(p) if p in order else -1) if by_phase else "setup"
        phase = "warmup" if stuck == "probe" else stuck
        where = "; ".join(f"{p}: ranks {', '.join(map(str, rs))}" for p, rs in by_phase.items())
        reason = (f"timed out in phase {phase} after {elapsed_s:.0f} s (limit {spec.timeout_s:.0f} s); "
                  f"the process group was killed ({where or 'no rank reported a phase'})")
    elif rank_failures:
        first = min(rank_failures, key=lambda f: f.get("rank", 0))
        rank, phase = first.get("rank"), first.get("phase")
        status = first.get("status", "failed")
        reason = f"{_rank_identity(phases, rank)}: {first.get('reason')}"
    else:
        torchrun_tail = tails.get("torchrun.log", "")
        match = _ROOT_CAUSE.search((run_dir / "torchrun.log").read_text(errors="replace")
                                   if (run_dir / "torchrun.log").exists() else "")
        if match:
            rank = int(match["rank"])
            exitcode = int(match["exitcode"])
            phase = phases.get(rank, {}).get("phase")
            how = (f"was killed by {signal.Signals(-exitcode).name}" if exitcode < 0 and -exitcode in
                   signal.valid_signals() else f"exited with code {exitcode}")
            reason = f"{_rank_identity(phases, rank)} {how}" + (f" in phase {phase}" if phase else "")
        else:
            reason = f"torchrun exited with code {returncode} before any rank reported a result"
            if "Error" in torchrun_tail:
                reason += f": {torchrun_tail.strip().splitlines()[-1][:300]}"
    return RunRecord(
        run_id=run_id, model=spec.model, precision=spec.precision, scaling=spec.scaling,
        world_size=spec.world_size, nodes=spec.nodes, device_kind=spec.device,
        batch_size_per_gpu=spec.per_gpu_batch, global_batch_size=spec.per_gpu_batch * spec.world_size,
        compile=spec.compile, status=status,
        failure=Failure(reason=reason, phase=phase, rank=rank, log_tails=tails),
        phases_s={"launch_total": elapsed_s},
        hosts=tuple(dict.fromkeys(info["host"] for info in phases.values() if info.get("host"))),
        finished_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
