"""What a session knows from its start and never changes: options, profile, node, run directory.

Every runner of the plugin (benchmark cases, the all-reduce sweep, the topology, the soak) reads
the same ``SessionContext``; none of them reads the command line or the hardware again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from harness.cases import CaseId
from harness.launch.cleanup import Orphan
from harness.launch.slurm import SlurmAllocation
from harness.node.hardware import Hardware
from harness.node.presence import NvidiaPresence
from harness.results.overrides import Override
from harness.node.processes import GpuProcess, gpu_processes
from harness.plugin.options import HarnessOptions
from harness.profile.bounds import Profile


@dataclass(frozen=True, kw_only=True)
class SessionContext:
    options: HarnessOptions
    profile: Profile
    """The threshold profile in force."""
    hardware: Hardware
    """What detection found on this node."""
    available_gpus: int
    """GPUs this node can use; CPU cores on a CPU profile."""
    allocation: SlurmAllocation | None
    """The Slurm allocation when the driver runs in a Slurm job."""
    run_id: str
    run_dir: Path
    started_at: str
    """UTC, ISO 8601, to the second."""
    native_bf16: str | None = None
    """The /proc/cpuinfo flag that gives this CPU native bf16 (harness/node/cpu_features.py); None: emulated."""
    expected_gpus: int | None = None
    """The GPUs a node of this shape has (CPU ranks on the cpu profile, when stated): --expect-gpus, else
    the Slurm allocation's, else the profile's node shape (harness/node/shape.py). None: available."""
    expected_gpus_source: str | None = None
    """Where ``expected_gpus`` came from, as the node-shape check's source says it."""
    expected_gpus_stated: bool = False
    """``expected_gpus`` was stated (--expect-gpus, Slurm): the node under test may be part of one."""
    nvidia_presence: NvidiaPresence | None = None
    """What the machine shows of NVIDIA GPUs without the driver (device files, PCI, nvidia-smi)."""
    overrides: tuple[Override, ...] = ()
    """Environment variables set at session start that change what it measures or claims
    (harness/results/overrides.py)."""
    orphans_stopped: tuple[Orphan, ...] = ()
    """Processes an earlier, killed session left running, stopped by this session's start (launch/cleanup.py)."""
    start_warnings: tuple[str, ...] = ()
    """What the session start could not do and the user should know (e.g. ``latest`` is a real directory)."""

    @property
    def device(self) -> Literal["cuda", "cpu"]:
        return self.profile.hardware.device

    @property
    def node_gpus(self) -> int:
        """The GPUs (CPU ranks) this node should have: ``expected_gpus``, else the GPUs available."""
        return self.expected_gpus if self.expected_gpus is not None else self.available_gpus

    @property
    def rank_unit(self) -> str:
        """What one rank is: a GPU, or on a CPU profile a CPU rank."""
        return "GPU" if self.device == "cuda" else "rank"

    @property
    def core_unit(self) -> str:
        """What a case needs one of per rank, as a skip reason says it."""
        return "GPUs" if self.device == "cuda" else "CPU cores"

    def log_dir(self, label: str) -> Path:
        return self.run_dir / "logs" / label

    def record_path(self, label: str) -> Path:
        return self.run_dir / "runs" / f"{label}.json"

    def describe(self, case: CaseId) -> str:
        """A check's context line: ``h200, resnet50 bf16, 4 GPUs``."""
        gpus = f"{case.gpus} {self.rank_unit}{'' if case.gpus == 1 else 's'}"
        if case.nodes > 1:
            gpus = f"{case.nodes} nodes x {gpus}"
        return f"{self.profile.name}, {case.model} {case.precision}, {gpus}"

    def telemetry_note(self) -> str:
        """Why a check that needs telemetry could not be evaluated, when the run record does not say."""
        if self.device == "cpu":
            return "no GPU telemetry on a CPU run"
        if not self.options.telemetry:
            return "GPU telemetry was switched off (--harness-telemetry off)"
        return "no GPU telemetry was recorded for this run"

    def busy_gpus(self, count: int) -> list[GpuProcess]:
        """Foreign processes on the GPUs a launch of ``count`` ranks will use (CUDA order); this node's
        only: srun's other nodes are not looked at."""
        if self.device != "cuda":
            return []
        return gpu_processes(self.hardware.gpus[:count])
