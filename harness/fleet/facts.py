"""What the fleet keeps of one acceptance session: one shape, whether it was read from a report
directory (harness.fleet.collect) or from the history store (harness.fleet.store).

Frozen dataclasses, no I/O. Every figure says which way is better, so an outlier or a drift can
be called worse or better without knowing the check's meaning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Verdict = Literal["PASS", "FAIL", "INCOMPLETE"]
VERDICTS: tuple[Verdict, ...] = ("PASS", "FAIL", "INCOMPLETE")
FULL_LEVELS = ("standard", "long")
"""Run levels that cover the DDP matrix: a node is signed off only by a full session at one of them."""
Direction = Literal["higher", "lower", "either"]
"""Which way a figure is better: a throughput higher, a step-time CV lower; "either" when no
bound says (a power draw)."""


def direction_of(comparison: str) -> Direction:
    """A check's comparison with its bound (``measured >= bound``) says which way is better."""
    if comparison == ">=":
        return "higher"
    return "lower" if comparison == "<=" else "either"


@dataclass(frozen=True, kw_only=True, slots=True)
class GpuFact:
    """One GPU of the node as the session detected it."""

    index: int
    """NVML index (the nvidia-smi order)."""
    uuid: str | None = None
    serial: str | None = None
    """The board serial number, when the session recorded one (``None``: not recorded)."""
    name: str | None = None
    pci_bus_id: str | None = None
    memory_gib: float | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class CheckFact:
    """One check of one test, as judged in the session: measured against the profile's bound."""

    test: str
    """The pytest node id, or the result's name for results without one."""
    case_key: str
    """``CaseId.key`` (``resnet50-bf16-weak-4gpu``), or the result's name (``allreduce-2gpu``)."""
    key: str
    """The check's stable key, or its name where the session did not record one."""
    name: str
    kind: str
    measured: float | None
    bound: float | None
    unit: str
    comparison: str
    passed: bool | None
    """None: not evaluated."""
    note: str = ""

    @property
    def direction(self) -> Direction:
        return direction_of(self.comparison)


@dataclass(frozen=True, kw_only=True, slots=True)
class GpuFigure:
    """One GPU's own figure in one case: its throughput alone, its compute speed in the straggler
    probe (no gradient all-reduce), or a telemetry reduction of the measured window."""

    case_key: str
    key: str
    """``throughput_alone``, ``compute_throughput`` or ``telemetry.<metric>``."""
    name: str
    host: str
    rank: int
    gpu_index: int | None
    """None on CPU ranks: the rank's local rank names it instead."""
    gpu_uuid: str | None
    value: float
    unit: str
    direction: Direction

    @property
    def gpu_label(self) -> str:
        return f"GPU {self.gpu_index}" if self.gpu_index is not None else f"rank {self.rank}"


@dataclass(frozen=True, kw_only=True, slots=True)
class SessionFacts:
    """One session of one node: its facts, every check, every per-GPU figure, its verdict."""

    run_id: str
    node: str
    """The host the session ran on (the driver's host for a multi-node session)."""
    verdict: Verdict
    verdict_reasons: tuple[str, ...] = ()
    """Why INCOMPLETE (or what was missing), as the node report says it."""
    started_at: str | None = None
    finished_at: str | None = None
    profile_name: str | None = None
    profile_sha256: str | None = None
    device: str | None = None
    gpu_name: str | None = None
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    cuda_runtime_version: str | None = None
    nccl_version: str | None = None
    torch_version: str | None = None
    python_version: str | None = None
    harness_version: str | None = None
    git_commit: str | None = None
    container: str | None = None
    slurm_job_id: str | None = None
    gpus: tuple[GpuFact, ...] = ()
    checks: tuple[CheckFact, ...] = ()
    gpu_figures: tuple[GpuFigure, ...] = ()
    source: str = ""
    """Where these facts were read: a report directory or a store file."""
    scope: str | None = None
    """The session verdict's scope (``full``, ``partial: N of M profile cases``); None: not recorded."""
    level: str | None = None
    """The run level (quick, standard, long); None: not recorded."""
    sign_off: bool | None = None
    """The session's own word: a PASS over the full scope of a GPU profile (not quick); None: not recorded."""
    cpu_self_check: bool | None = None
    """The cpu profile: a harness self-check, never a GPU sign-off; None: not recorded."""

    @property
    def identity(self) -> tuple[str, str]:
        """(node, run_id): one session, however many copies of it the store holds."""
        return self.node, self.run_id

    @property
    def when(self) -> str:
        """Sort key in time: ISO times sort as text; the run id starts with the start time too."""
        return self.finished_at or self.started_at or self.run_id

    @property
    def full_gpu_session(self) -> bool:
        """A session that covered the whole profile of a GPU node at level standard or long: the only
        kind a node is judged on (whatever its verdict). Unknown scope counts as not full."""
        return self.scope == "full" and self.cpu_self_check is False and self.level in FULL_LEVELS

    @property
    def scope_text(self) -> str:
        """What the session covered, in words: ``full sign-off run``, ``partial: 2 of 20 profile cases``, …"""
        if self.scope is None or self.level is None or self.cpu_self_check is None:
            return "scope not recorded"
        if self.cpu_self_check:
            return f"CPU self-check ({self.scope})" if self.scope != "full" else "CPU self-check"
        if self.scope != "full":
            return self.scope
        if self.level not in FULL_LEVELS:
            return f"{self.level} health check"
        return f"full sign-off run at level {self.level}"

    @property
    def failed_checks(self) -> tuple[CheckFact, ...]:
        return tuple(check for check in self.checks if check.passed is False)

    @property
    def gpu_count(self) -> int:
        return len(self.gpus)
