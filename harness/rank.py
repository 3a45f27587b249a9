"""The rank side of a launch: what every torchrun worker writes for its launcher, and its one reader.

Files a rank keeps in its run directory (the launcher and the telemetry sampler read them):
  rank<R>.log           this rank's stdout and stderr (file descriptors redirected, so NCCL's too)
  rank<R>.phase         the phase it is in, since when, how long it should take (the stall rule),
                        and who it is (host, GPU index and UUID), rewritten at phase changes only
  rank<R>.failure.json  why it gave up, when it could say so (OOM, NaN, an exception)

``RankPhase`` and ``write_failure`` are the writers, ``read_phases`` and ``read_failures`` the
readers; ``run_rank`` is the frame every worker module (harness.workloads.ddp, .allreduce, .soak)
runs in, and ``start_process_group`` its one process-group start (NCCL on a GPU, gloo on CPU).
This module stays light (no torch at import): the launcher and the sampler read phase files
through it.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import os
import platform
import signal
import socket
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from harness.files import write_json_atomic

SEED = 1234
"""Each rank seeds torch with SEED + rank: runs repeat, and ranks do not train on identical data."""


def phase_path(run_dir: Path, rank: int) -> Path:
    return run_dir / f"rank{rank}.phase"


def failure_path(run_dir: Path, rank: int) -> Path:
    return run_dir / f"rank{rank}.failure.json"


def log_path(run_dir: Path, rank: int) -> Path:
    return run_dir / f"rank{rank}.log"


class RankFailure(Exception):
    """A failure this rank can explain in one line (written to rank<R>.failure.json)."""

    def __init__(self, reason: str, phase: str, status: str = "failed"):
        super().__init__(reason)
        self.reason = reason
        self.phase = phase
        self.status = status


# --- the phase file: one writer, one reader ---------------------------------------------------


class RankPhase:
    """Writes this rank's phase to rank<R>.phase (host side, at phase changes only)."""

    def __init__(self, run_dir: Path, rank: int):
        self.path = phase_path(run_dir, rank)
        self.rank = rank
        self.mirror: Path | None = None
        """The current case's copy (a launch of several cases): that case's telemetry sampler reads it."""
        self.name = "setup"
        # Who this rank is, so a launcher that finds it dead or stuck can name the host and GPU.
        self.identity: dict[str, Any] = {"rank": rank, "host": socket.gethostname()}
        self.write("setup")

    def enter_case(self, case_dir: Path | None, index: int) -> None:
        """Launches of several cases: later phases are copied to ``case_dir`` and carry the case's index."""
        self.identity["case"] = index
        self.mirror = (phase_path(case_dir, self.rank)
                       if case_dir is not None and case_dir != self.path.parent else None)

    def write(self, name: str, expected_s: float | None = None) -> None:
        """Enter (or stay in) a phase; ``expected_s`` is how long it should take from now.

        The launcher turns ``expected_s`` into a stall bound (factor × expected + floor) and
        kills the run once a rank has shown no progress for longer; None means "unknown" and
        the launcher's setup bound applies (imports, NCCL init, the first cuDNN/compile step).
        """
        self.name = name
        record = {**self.identity, "phase": name, "since": time.time(), "expected_s": expected_s, "pid": os.getpid()}
        for path in (self.path, self.mirror) if self.mirror is not None else (self.path,):
            tmp = path.with_suffix(".phase.tmp")
            tmp.write_text(json.dumps(record))
            os.replace(tmp, path)  # the launcher polls this file: never let it read half of it


def read_phases(run_dir: Path) -> dict[int, dict]:
    """Each rank's last phase record, by rank; a file being replaced or damaged is skipped."""
    phases = {}
    for path in run_dir.glob("rank*.phase"):
        try:
            phases[int(path.stem.removeprefix("rank"))] = json.loads(path.read_text())
        except (ValueError, OSError):
            continue
    return phases


def rank_identity(phases: dict[int, dict], rank: int | None) -> str:
    """``rank 3 (host node7, GPU 3, GPU-8d1c...)``: as much of who a rank is as its phase file says."""
    info = phases.get(rank, {}) if rank is not None else {}
    details = []
    if info.get("host"):
        details.append(f"host {info['host']}")
    if info.get("gpu_index") is not None:
        details.append(f"GPU {info['gpu_index']}")
    if info.get("gpu_uuid"):
        details.append(info["gpu_uuid"])
    return f"rank {rank}" + (f" ({', '.join(details)})" if details else "")


# --- the failure file: one writer, one reader -------------------------------------------------


def write_failure(run_dir: Path, rank: int, reason: str, phase: str, status: str = "failed") -> None:
    write_json_atomic(failure_path(run_dir, rank), json.dumps(
        {"rank": rank, "reason": reason, "phase": phase, "status": status, "host": socket.gethostname(),
         "time": time.time()}))


def read_failures(run_dir: Path) -> list[dict]:
    failures = []
    for path in run_dir.glob("rank*.failure.json"):
        try:
            failures.append(json.loads(path.read_text()))
        except (ValueError, OSError):
            continue
    return failures


# --- this process --------------------------------------------------------------------------------


def die_with_parent() -> None:
    """Ask Linux to SIGKILL us when our parent (torchrun, find-max-bs) dies, so a killed launcher
    leaves no orphan."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    except OSError:
        pass  # not Linux/glibc: the launcher's process-tree kill still applies


def redirect_output(path: Path) -> None:
    """This process's stdout and stderr, file descriptors included (NCCL writes to fd 2), to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)


def launch_epoch(default: float) -> float:
    """When the launcher started this launch (HARNESS_LAUNCH_EPOCH), else ``default``."""
    try:
        return float(os.environ["HARNESS_LAUNCH_EPOCH"])
    except (KeyError, ValueError):
        return default


@dataclass(kw_only=True, slots=True)
class Rank:
    """This torchrun worker's place in the launch."""

    rank: int
    local_rank: int
    world_size: int
    run_dir: Path
    phase: RankPhase

    def record_failure(self, reason: str, phase: str, status: str = "failed") -> None:
        """rank<R>.failure.json in the launch directory and, when a case is running, in the case's too."""
        directories = {self.run_dir} | ({self.phase.mirror.parent} if self.phase.mirror is not None else set())
        for directory in directories:
            write_failure(directory, self.rank, reason, phase, status)


def start_rank(run_dir: Path) -> Rank:
    """Who this torchrun worker is; its output goes to rank<R>.log and it dies with torchrun."""
    rank = int(os.environ.get("RANK", "0"))
    run_dir.mkdir(parents=True, exist_ok=True)
    redirect_output(log_path(run_dir, rank))
    die_with_parent()
    return Rank(rank=rank, local_rank=int(os.environ.get("LOCAL_RANK", "0")),
                world_size=int(os.environ.get("WORLD_SIZE", "1")), run_dir=run_dir, phase=RankPhase(run_dir, rank))


def run_rank(label: str, run_dir: Path, body: Callable[[Rank], None]) -> int:
    """Run ``body`` on this torchrun rank: every way out leaves a reason behind for the launcher."""
    rank = start_rank(run_dir)
    print(f"[harness {label}] rank {rank.rank}/{rank.world_size} local_rank {rank.local_rank} "
          f"host {socket.gethostname()} pid {os.getpid()} run dir {run_dir}", flush=True)
    try:
        body(rank)
    except RankFailure as failure:
        rank.record_failure(failure.reason, failure.phase, failure.status)
        print(f"[harness {label}] rank {rank.rank} failed in {failure.phase}: {failure.reason}", flush=True)
        return 3
    except BaseException as exc:  # noqa: BLE001 - every way out must leave a reason behind
        traceback.print_exc()
        rank.record_failure(f"{type(exc).__name__}: {exc}", rank.phase.name)
        return 1
    rank.phase.write("done")
    return 0


# --- the process group and this rank's GPU ----------------------------------------------------


def physical_gpu_index(local_rank: int) -> int | None:
    """The GPU's index on its host as NVML and nvidia-smi number it (CUDA_VISIBLE_DEVICES applied)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return local_rank
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    if local_rank < len(entries) and entries[local_rank].isdigit():
        return int(entries[local_rank])
    return None  # given as UUIDs: the UUID names the GPU instead


def gpu_uuid(torch: Any, device: Any) -> str | None:
    uuid = getattr(torch.cuda.get_device_properties(device), "uuid", None)
    if uuid is None:
        return None
    text = str(uuid)
    return text if text.startswith("GPU-") else f"GPU-{text}"


@dataclass(kw_only=True, slots=True)
class ProcessGroup:
    """What a launch sets up once and every case of it shares: torch, the process group, this rank's device."""

    torch: Any
    dist: Any
    device: Any
    device_name: str
    gpu_uuid: str | None
    gpu_index: int | None
    host: str
    init_s: float
    """Seconds the process-group start took (NCCL or gloo init)."""
    size: int = 1
    """Ranks in this group: the launch's world size, or a case's narrower subgroup (``narrowed``)."""
    subgroup: Any = None
    """The torch.distributed group of a case on ranks 0 .. size-1 of a wider launch; None: every rank."""

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def sync(self) -> None:
        """Wait for this rank's GPU (nothing to wait for on CPU, where every call is synchronous)."""
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def across_ranks(self, value: float, op: Any) -> float:
        """``value`` reduced over every rank of the group with ``op`` (a dist.ReduceOp): one tiny all-reduce."""
        tensor = self.torch.tensor([value], dtype=self.torch.float64, device=self.device)
        self.dist.all_reduce(tensor, op=op, group=self.subgroup)
        return float(tensor.item())

    def barrier(self) -> None:
        """Every rank of the group meets here."""
        if self.cuda:
            self.dist.barrier(group=self.subgroup, device_ids=[self.device.index])
        else:
            self.dist.barrier(group=self.subgroup)

    def narrowed(self, size: int, subgroup: Any) -> ProcessGroup:
        """This group as a case on its first ``size`` ranks sees it (``subgroup`` holds them)."""
        return dataclasses.replace(self, size=size, subgroup=subgroup)


def case_subgroups(group: ProcessGroup, sizes: list[int]) -> dict[int, Any]:
    """One subgroup of ranks 0 .. n-1 for each size n narrower than the launch, made up front: every rank
    must create every group, in the same order, members or not."""
    made = {}
    for size in sorted(set(sizes)):
        if not 1 <= size <= group.size:
            raise RankFailure(f"a case of the plan runs on {size} ranks; the launch has {group.size}", "setup")
        if size < group.size:
            made[size] = group.dist.new_group(ranks=list(range(size)))
    return made


def start_process_group(device_kind: str, rank: Rank) -> ProcessGroup:
    """NCCL on this rank's GPU (its identity recorded in the phase file), or gloo on CPU."""
    # Imported here, not at the top: the launcher reads phase files through this module, and a worker
    # is a rank (its log, its phase file, dying with torchrun) before torch loads.
    import torch
    import torch.distributed as dist

    started = time.time()
    if device_kind == "cuda":
        if not torch.cuda.is_available():
            raise RankFailure("--device cuda but torch sees no CUDA device", "setup")
        device = torch.device("cuda", rank.local_rank)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
        device_name = torch.cuda.get_device_name(device)
        uuid, index = gpu_uuid(torch, device), physical_gpu_index(rank.local_rank)
        rank.phase.identity.update(gpu_index=index, gpu_uuid=uuid, device_name=device_name)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
        device_name = platform.processor() or platform.machine() or "cpu"
        uuid, index = None, None
    return ProcessGroup(torch=torch, dist=dist, device=device, device_name=device_name, gpu_uuid=uuid,
                        gpu_index=index, host=socket.gethostname(), init_s=time.time() - started,
                        size=rank.world_size)
