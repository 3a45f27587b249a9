"""The run record: what one benchmark launch measured, as frozen dataclasses and versioned JSON.

This is the contract between the worker (which writes it), the launcher (which writes it when
the worker could not), the verdict, the report and calibration (which read it). Bump
``SCHEMA_VERSION`` on any change a reader would notice, and teach ``from_dict`` the old shape.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from harness.cases import CaseId
from harness.files import write_json_atomic
from harness.results.job import Failure, Status
from harness.results.overrides import Override, find_overrides

SCHEMA_VERSION = 1

Scaling = Literal["weak", "strong"]


@dataclass(frozen=True, kw_only=True, slots=True)
class StepTimeStats:
    """Distribution of step times over the measured window (milliseconds)."""

    mean_ms: float
    median_ms: float
    p95_ms: float
    p99_ms: float
    cv: float
    """Coefficient of variation (stdev / mean), a fraction."""
    steps: int


@dataclass(frozen=True, kw_only=True, slots=True)
class RankStats:
    rank: int
    local_rank: int
    host: str
    gpu_index: int | None
    """Physical GPU index on its host (CUDA_VISIBLE_DEVICES applied); None on CPU."""
    gpu_uuid: str | None
    device_name: str
    step_time: StepTimeStats
    window_s: float
    """Wall time of this rank's measured window (seconds)."""
    compute_step_ms: float | None
    """Mean step time with gradient synchronisation off (DDP no_sync): this rank's own speed,
    which the synchronised steps hide because every rank waits for the slowest."""
    peak_memory_gib: float | None
    throughput: float | None = None
    """This rank's own rate, samples/s: its samples of the window / its own time. Under DDP its own
    window (every rank waits for the slowest at each all-reduce, so the ranks agree); in an
    independent run (``RunRecord.independent``) its own steps' time, which leaves out the waits at
    the window's block boundaries where the ranks vote. None in records written before it existed."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Straggler:
    """Slowest vs fastest rank by their unsynchronised compute step time."""

    ratio: float
    slowest_rank: int
    slowest_host: str
    slowest_gpu_index: int | None
    fastest_rank: int
    fastest_host: str
    fastest_gpu_index: int | None


@dataclass(frozen=True, kw_only=True, slots=True)
class Versions:
    torch: str
    cuda: str | None
    nccl: str | None
    driver: str | None
    python: str
    harness: str


@dataclass(frozen=True, kw_only=True, slots=True)
class RunRecord:
    schema_version: int = SCHEMA_VERSION
    run_id: str
    model: str
    precision: str
    scaling: Scaling
    world_size: int
    nodes: int
    device_kind: Literal["cuda", "cpu"]
    batch_size_per_gpu: int
    global_batch_size: int
    compile: bool = False
    status: Status
    failure: Failure | None = None
    sample_unit: str = "samples"
    # Performance; None when the run produced no measurement.
    throughput_per_gpu: float | None = None
    """Samples per second per GPU (rank): throughput_total / world_size; in an independent run the
    median of the GPUs' own rates. Each rank's own rate is ``per_rank[i].throughput``."""
    throughput_total: float | None = None
    """Samples per second: global samples of the window / the slowest rank's window time."""
    throughput_ci95_rel: float | None = None
    """Half-width of the 95 % confidence interval of throughput, relative (0.01 = ±1 %),
    from batch means, because consecutive step times are correlated."""
    ci_blocks: int | None = None
    step_time_ms: StepTimeStats | None = None
    """Pooled over ranks' measured steps."""
    per_rank: tuple[RankStats, ...] = ()
    independent: bool = False
    """A 1-GPU case run on every usable GPU at once, one process each training its own model without
    DDP (no gradient all-reduce): ``per_rank`` holds each GPU's run, ``throughput_per_gpu`` and
    ``throughput_total`` their median, which is the scaling cases' baseline and what the node-uniformity
    check compares each GPU with."""
    straggler: Straggler | None = None
    straggler_ratio: float | None = None
    peak_memory_gib: float | None = None
    tflops_per_gpu: float | None = None
    mfu: float | None = None
    """Model FLOPs utilisation: tflops_per_gpu / the profile's dense peak; None without a peak."""
    peak_tflops: float | None = None
    loss_finite: bool | None = None
    final_loss: float | None = None
    """Mean training loss over the measured window (rank 0), for eyeballing; None if not finite."""
    warmup_steps: int | None = None
    warmup_s: float | None = None
    measured_steps: int | None = None
    measure_s: float | None = None
    device_name: str | None = None
    hosts: tuple[str, ...] = ()
    versions: Versions | None = None
    phases_s: dict[str, float] = field(default_factory=dict)
    """Where the launch's wall time went: process start, imports, init, build, warmup, measure."""
    compile_cache: dict[str, Any] | None = None
    """torch.compile cache lookups of this case summed over ranks (harness/workloads/compilecache.py): hits and
    misses of the AOT-autograd and FX-graph caches, and the ranks that missed; None when not compiled."""
    settings: dict[str, Any] = field(default_factory=dict)
    """What the worker was asked to do (durations, seeds, DDP options), for reproduction."""
    telemetry: dict[str, Any] | None = None
    """GPU telemetry of the measured window (harness/telemetry.py): per-GPU reductions and
    timelines, or {"status": "unavailable" | "disabled", "reason": ...}; None in records written
    before telemetry existed. Added by the launcher, not the worker."""
    started_at: str | None = None
    finished_at: str | None = None
    overrides: tuple[Override, ...] = field(default_factory=find_overrides)
    """Environment variables set where the record was made that change what it measured or claims
    (harness/results/overrides.py: fault injection, telemetry off, NCCL transport, provenance), each
    with its effect; empty in records written before they were named."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False, allow_nan=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunRecord":
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ValueError(
                f"run record schema_version {version!r} is not supported (this harness reads {SCHEMA_VERSION}); "
                "rebuild it with the harness version that wrote it"
            )
        # Absent: a record from before overrides were named, not the reader's environment's.
        return _build(cls, {"overrides": [], **data})

    @classmethod
    def from_json(cls, text: str) -> "RunRecord":
        return cls.from_dict(json.loads(text))


def _build(cls: type, data: Any) -> Any:
    """Rebuild a (nested) frozen dataclass from ``asdict`` output, guided by its type hints."""
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in data:
            kwargs[f.name] = _coerce(hints[f.name], data[f.name])
    return cls(**kwargs)


def _coerce(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        for arg in args:
            if arg is not type(None):
                return _coerce(arg, value)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _build(hint, value)
    if origin is tuple:
        return tuple(_coerce(args[0], item) for item in value)
    if origin is dict and args and args[0] is int:
        return {int(k): v for k, v in value.items()}
    return value


def write_record(path: Path, record: RunRecord) -> None:
    write_json_atomic(path, record.to_json() + "\n")


def read_record(path: Path) -> RunRecord:
    return RunRecord.from_json(Path(path).read_text())


def record_case(record: RunRecord) -> CaseId:
    """The case a run record describes (model, precision, scaling, nodes x GPUs per node); ValueError when
    its fields describe none (a GPU count or a scaling out of range)."""
    nodes = max(record.nodes, 1)
    return CaseId(model=record.model, precision=record.precision, gpus=record.world_size // nodes,
                  scaling=record.scaling, nodes=nodes)
