"""What to launch: the launch settings every spec holds (``LaunchSettings``), what the launcher asks of a spec
(``LaunchedSpec``), and the DDP benchmark's spec; a kind's own spec lives in its folder (harness/kinds/<kind>/).

The defaults of a launch and of a measurement live in harness/durations.py and nowhere else. A spec is validated
when it is made (a ValueError naming the field and what it allows) and resolves into the plan its
worker module reads (harness/workloads/plan.py): ``spec.plan(run_dir, run_id)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from harness.catalog import MODELS, PRECISIONS
from harness.durations import (CI_BLOCK_SECONDS, COMPUTE_PROBE_STEPS, MAX_SECONDS, MEASURE_SECONDS, MIN_MEASURE_STEPS,
                               MIN_WARMUP_STEPS, SETUP_TIMEOUT_SECONDS, STALL_FACTOR, STALL_FLOOR_SECONDS,
                               TELEMETRY_PERIOD_SECONDS, TIMEOUT_SECONDS, WARMUP_BLOCK_STEPS, WARMUP_SECONDS,
                               default_max_measure_seconds, max_warmup_seconds)
from harness.cases import CaseId
from harness.records import Scaling
from harness.workloads.plan import BenchmarkPlan, CasePlan, Device

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

DEVICES = ("cuda", "cpu")
SCALINGS = ("weak", "strong")

MAX_BATCH = 2**20
"""The largest batch (per GPU, or global) accepted: 16x the largest that fit any model on an H200
(65,536, docs/reliability.md row 3). 1e20 passed as a positive integer and then failed the node."""


def check_seconds(name: str, value: float) -> None:
    """A ValueError naming ``name`` unless ``value`` is a positive number of seconds up to a week (inf
    would run a window or wait for a deadline forever; nan compares false with everything)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise ValueError(f"{name} must be > 0 seconds and finite, got {value}")
    if value > MAX_SECONDS:
        raise ValueError(f"{name} must be at most {MAX_SECONDS:g} seconds (a week), got {value:g}")


def check_positive_seconds(spec: object, *names: str) -> None:
    """check_seconds for each of ``names``, an attribute of ``spec``."""
    for name in names:
        check_seconds(name, getattr(spec, name))


def check_window(*, warmup_seconds: float, measure_seconds: float, ci_target: float = 0.0,
                 max_measure_seconds: float | None = None) -> None:
    """The measurement a benchmark can run: a ValueError naming the field and its allowed range.

    BenchmarkSpec checks itself with it; the pytest plugin can call it on its options before any
    benchmark starts, so that a bad --harness-measure-seconds is a usage error, not a failed case.
    """
    check_seconds("warmup_seconds", warmup_seconds)
    check_seconds("measure_seconds", measure_seconds)
    if not 0 <= ci_target < 1:
        raise ValueError(f"ci_target must be a fraction in [0, 1) (0.01 = ±1 %; 0 = fixed window), got {ci_target}")
    if max_measure_seconds is not None and not measure_seconds <= max_measure_seconds < math.inf:
        raise ValueError(f"max_measure_seconds ({max_measure_seconds}) must be >= measure_seconds ({measure_seconds}) "
                         "and finite: it caps the adaptive window that measure_seconds starts")


def check_model_and_precision(model: str, precision: str) -> None:
    if model not in MODELS:
        raise ValueError(f"model {model!r} is unknown; known models: {', '.join(MODELS)}")
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r} is unknown; use one of {', '.join(PRECISIONS)}")


@dataclass(frozen=True, kw_only=True, slots=True)
class LaunchSettings:
    """One torchrun launch, whatever it runs: where its ranks run, what they inherit, how long they may take."""

    gpus_per_node: int
    """Worker processes per node: GPUs on CUDA, ranks on CPU."""
    nodes: int = 1
    """Several nodes: srun + torchrun with a c10d rendezvous in the Slurm job (harness/launch/command.py)."""
    device: Device = "cuda"
    """cuda (NCCL) or cpu (gloo ranks: the self-check profile)."""
    timeout_s: float = TIMEOUT_SECONDS
    """Hard cap on the whole launch (seconds); a kind may derive its own (the soak's, from its duration)."""
    setup_timeout_s: float = SETUP_TIMEOUT_SECONDS
    """Bound for what has no expected time: imports, NCCL init, model build, the first warmup block
    (cuDNN autotuning, torch.compile)."""
    stall_factor: float = STALL_FACTOR
    stall_floor_s: float = STALL_FLOOR_SECONDS
    """A rank that shows no progress for stall_factor × its phase's expected time + stall_floor_s
    is hung: the run is killed then, long before timeout_s."""
    extra_env: dict[str, str] = field(default_factory=dict)
    """Added to every rank's environment (fault injection, compile caches)."""
    telemetry: bool = True
    """Sample the GPUs during the measured window (harness/telemetry.py); off to measure its cost."""
    telemetry_period_s: float = TELEMETRY_PERIOD_SECONDS

    def __post_init__(self) -> None:
        if self.device not in DEVICES:
            raise ValueError(f"device {self.device!r} is unknown; use cuda or cpu")
        for name in ("gpus_per_node", "nodes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0 < self.stall_factor < math.inf:
            raise ValueError(f"stall_factor must be > 0 and finite, got {self.stall_factor}")
        check_positive_seconds(self, "stall_floor_s", "setup_timeout_s", "telemetry_period_s", "timeout_s")

    @property
    def world_size(self) -> int:
        return self.gpus_per_node * self.nodes


class LaunchedSpec:
    """What the launcher asks of every spec, whatever its kind (harness/launch/command.py names none): its launch
    layout, read from its ``launch`` settings; the module its ranks run; its case id; the plan it resolves into."""

    __slots__ = ()
    launch: LaunchSettings
    worker_module: ClassVar[str]
    """The module torchrun runs: ``python -m <worker_module> --plan plan.json``."""

    @property
    def case_id(self) -> str:
        """Its name in the run directory and the run id: ``allreduce-4gpu``."""
        raise NotImplementedError

    def plan(self, run_dir: Path, run_id: str) -> DataclassInstance:
        """What its worker module runs, every default resolved (a dataclass: harness/workloads/plan.py writes it)."""
        raise NotImplementedError

    @property
    def gpus_per_node(self) -> int:
        return self.launch.gpus_per_node

    @property
    def nodes(self) -> int:
        return self.launch.nodes

    @property
    def device(self) -> Device:
        return self.launch.device

    @property
    def world_size(self) -> int:
        return self.launch.world_size


@dataclass(frozen=True, kw_only=True, slots=True)
class BenchmarkSpec(LaunchedSpec):
    """One benchmark case: a model × precision × scaling mode on a launch layout, and how to measure it."""

    worker_module: ClassVar[str] = "harness.workloads.ddp"
    model: str
    precision: str
    launch: LaunchSettings
    scaling: Scaling = "weak"
    batch_size_per_gpu: int | None = None
    """Weak scaling: fixed per GPU."""
    global_batch_size: int | None = None
    """Strong scaling: fixed in total, split over the GPUs."""
    warmup_seconds: float = WARMUP_SECONDS
    measure_seconds: float = MEASURE_SECONDS
    """Fixed window: its length. Adaptive window (ci_target > 0): the least it measures."""
    ci_target: float = 0.0
    """Adaptive window: stop once the throughput's 95 % CI half-width is at most this (0.01 = ±1 %),
    all ranks agreeing, after measure_seconds; 0 = a fixed window of measure_seconds."""
    max_measure_seconds: float | None = None
    """Adaptive window: stop here whatever the CI (None: default_max_measure_seconds)."""
    ci_block_seconds: float = CI_BLOCK_SECONDS
    """Adaptive window: about this long per block of steps (batch means for the CI)."""
    min_warmup_steps: int = MIN_WARMUP_STEPS
    min_measure_steps: int = MIN_MEASURE_STEPS
    compile: bool = False
    peak_tflops: float | None = None
    sync_each_step: bool = False
    """Diagnostic: read the loss on the host every step (to measure what that costs)."""
    independent: bool = False
    """A 1-GPU case on each of the launch's GPUs at once (``gpus_per_node`` of them), one process per
    GPU training its own model without DDP: each GPU's own rate, their median the baseline."""

    def __post_init__(self) -> None:
        check_model_and_precision(self.model, self.precision)
        if self.independent and self.nodes != 1:
            raise ValueError(f"independent 1-GPU runs are on one node (its every GPU at once), got nodes={self.nodes}")
        if self.scaling not in SCALINGS:
            raise ValueError(f"scaling {self.scaling!r} is unknown; use weak or strong")
        for name in ("min_warmup_steps", "min_measure_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        check_window(warmup_seconds=self.warmup_seconds, measure_seconds=self.measure_seconds,
                     ci_target=self.ci_target, max_measure_seconds=self.max_measure_seconds)
        check_positive_seconds(self, "ci_block_seconds")
        if self.peak_tflops is not None and not 0 <= self.peak_tflops < math.inf:
            raise ValueError(f"peak_tflops must be a finite dense peak TFLOP/s per GPU > 0 (or 0/None: no MFU), "
                             f"got {self.peak_tflops}")
        self._check_batch()

    def _check_batch(self) -> None:
        if self.scaling == "weak":
            if self.batch_size_per_gpu is None or not 1 <= self.batch_size_per_gpu <= MAX_BATCH:
                raise ValueError(f"batch_size_per_gpu must be from 1 to {MAX_BATCH:,}: weak scaling needs a batch "
                                 f"size per GPU, got {self.batch_size_per_gpu}")
            return
        if self.global_batch_size is None or not 1 <= self.global_batch_size <= MAX_BATCH * self.training_world_size:
            raise ValueError(f"global_batch_size must be from 1 to {MAX_BATCH:,} per GPU: strong scaling needs a "
                             f"global batch size, got {self.global_batch_size}")
        if self.global_batch_size % self.training_world_size:
            raise ValueError(
                f"strong scaling splits the global batch over the GPUs: {self.global_batch_size} is not "
                f"divisible by {self.training_world_size} GPUs; pick a multiple of {self.training_world_size}")

    @property
    def training_world_size(self) -> int:
        """The GPUs one model trains on: 1 in an independent run (each GPU its own), else world_size."""
        return 1 if self.independent else self.world_size

    @property
    def per_gpu_batch(self) -> int:
        if self.scaling == "weak":
            assert self.batch_size_per_gpu is not None
            return self.batch_size_per_gpu
        assert self.global_batch_size is not None
        return self.global_batch_size // self.training_world_size

    @property
    def case_id(self) -> str:
        gpus = 1 if self.independent else self.gpus_per_node
        return CaseId(model=self.model, precision=self.precision, gpus=gpus, scaling=self.scaling,
                      nodes=self.nodes).key

    def case_plan(self, run_dir: Path, run_id: str) -> CasePlan:
        """This case as the worker runs it, every default resolved."""
        return CasePlan(
            model=self.model, precision=self.precision, scaling=self.scaling, batch_size_per_gpu=self.per_gpu_batch,
            global_batch_size=self.per_gpu_batch * self.training_world_size, device=self.device,
            warmup_seconds=self.warmup_seconds, max_warmup_seconds=max_warmup_seconds(self.warmup_seconds),
            min_warmup_steps=self.min_warmup_steps, warmup_block_steps=WARMUP_BLOCK_STEPS,
            measure_seconds=self.measure_seconds, min_measure_steps=self.min_measure_steps,
            compute_probe_steps=COMPUTE_PROBE_STEPS, compile=self.compile, peak_tflops=self.peak_tflops or None,
            sync_each_step=self.sync_each_step, ci_target=self.ci_target,
            max_measure_seconds=(self.max_measure_seconds if self.max_measure_seconds is not None
                                 else default_max_measure_seconds(self.measure_seconds)),
            ci_block_seconds=self.ci_block_seconds, independent=self.independent, ranks=self.world_size,
            run_dir=Path(run_dir), run_id=run_id)

    def plan(self, run_dir: Path, run_id: str) -> BenchmarkPlan:
        return BenchmarkPlan(cases=(self.case_plan(run_dir, run_id),))
