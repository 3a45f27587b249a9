"""What a loaded threshold profile is: frozen dataclasses, already validated and merged.

harness/profile/load.py builds them from a ``thresholds/<name>.toml`` file; the verdict, the
plugin and the report read them. ``to_dict()`` gives the JSON form that results carry as their
resolved bounds (GPU-count keys as strings), so a report shows what the session applied without
reading the TOML again.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from harness.cases import CaseId
from harness.profile.kinds import Reference
from harness.profile.tables import BoundsTable, Bounds, References


def json_safe(value: Any) -> Any:
    """``value`` with every mapping key a string and every tuple a list, as JSON would give it back."""
    if isinstance(value, dict):
        return {str(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    return value


class JsonForm:
    """``to_dict()`` for a bounds dataclass (the kinds' own too), as the results carry it."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        """As JSON: GPU-count keys as strings."""
        return json_safe(asdict(self))  # type: ignore[call-overload]  # only dataclasses mix this in


class ReferencedBounds:
    """``reference(key, gpus)`` for a bounds dataclass whose ``references`` hold the bounds written as a reference
    and a tolerance (a case's, the all-reduce's, the components')."""

    __slots__ = ()
    references: References

    def reference(self, key: str, gpus: int) -> Reference | None:
        """The reference bound ``key`` was written as for ``gpus`` GPUs; None: a plain number, or no bound."""
        return self.references.get(key, {}).get(gpus)


@dataclass(frozen=True, kw_only=True, slots=True)
class HardwareMatch:
    """How the harness recognises the hardware a profile is for (used by profile/match.py)."""

    device: Literal["cuda", "cpu"]
    gpu_name_contains: str | None = None
    """Case-insensitive fragment of the GPU name as NVML reports it, e.g. "A100-SXM4"; None on cpu."""
    min_memory_gib: float | None = None
    """Smallest GPU memory (GiB, 1024³ bytes) the profile accepts; tells 40 GB from 80 GB parts."""
    max_memory_gib: float | None = None
    """Largest GPU memory (GiB) the profile accepts."""
    node_gpus: int | None = None
    """The node size (GPUs the node shows) this profile's bounds were fitted on; None: any size. A node
    of this size picks this profile over one without it, as its figures are of this shape."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CaseBounds(ReferencedBounds):
    """The bounds of one model x precision, already merged with [defaults] (the case's value wins)."""

    model: str
    """Key of harness.catalog.MODELS."""
    precision: str
    """One of harness.catalog.PRECISIONS."""
    batch_size_per_gpu: int
    """Samples per GPU per step in the weak-scaling runs."""
    source: str
    """Where the numbers came from: a measurement (who, where, when) or a cited publication."""
    min_samples_per_sec_per_gpu: dict[int, float] = field(default_factory=dict)
    """GPUs at once -> lowest throughput of each GPU in the 1-GPU case on that many GPUs at once, samples/s."""
    min_weak_efficiency: dict[int, float] = field(default_factory=dict)
    """GPU count -> lowest acceptable per-GPU throughput at that count / at 1 GPU, a fraction in (0, 1]."""
    strong_global_batch_size: int | None = None
    """Global batch of the strong-scaling runs (split evenly over the GPUs); None: no strong runs."""
    min_strong_efficiency: dict[int, float] = field(default_factory=dict)
    """GPU count -> lowest acceptable speedup / GPU count at a fixed global batch, a fraction in (0, 1]."""
    min_gpu_utilization_pct: dict[int, float] = field(default_factory=dict)
    """GPUs at once -> lowest acceptable mean GPU utilization during the measured window, percent (0..100)."""
    min_power_fraction_of_limit: dict[int, float] = field(default_factory=dict)
    """GPUs at once -> lowest acceptable mean power draw as a fraction of the enforced power limit, in (0, 1]."""
    max_temperature_c: float | None = None
    """Highest acceptable GPU temperature, degrees Celsius."""
    max_straggler_ratio: dict[int, float] = field(default_factory=dict)
    """GPU count -> highest acceptable slowest-rank / fastest-rank compute step time, >= 1."""
    max_step_time_cv: dict[int, float] = field(default_factory=dict)
    """GPUs at once -> highest acceptable coefficient of variation (stdev / mean) of step time, a fraction > 0."""
    min_gpu_uniformity: dict[int, float] = field(default_factory=dict)
    """GPUs at once -> lowest acceptable rate of any GPU / the node's median GPU, on the 1-GPU case run on
    every GPU at once (each its own model), a fraction in (0, 1]; no entry: the check is shown, not evaluated."""
    references: References = field(default_factory=dict)
    """The bounds above that were written as a reference and a tolerance (fitted across hosts)."""
    inherited: tuple[str, ...] = ()
    """Names of the bounds above that came from [defaults] (the case's own table leaves them out), sorted."""

    def to_dict(self) -> dict[str, Any]:
        """The resolved bounds as JSON (GPU-count keys as strings); without ``inherited``, which a
        result carries beside them as ``bounds_inherited``."""
        data = json_safe(asdict(self))
        del data["inherited"]
        return data

    def at(self, key: str, gpus: int) -> float | None:
        """The bound ``key`` for ``gpus`` GPUs (at once, or together); None where none was measured."""
        table = getattr(self, key)
        return table.get(gpus) if isinstance(table, dict) else table



@dataclass(frozen=True, kw_only=True, slots=True)
class RunSettings:
    """How long each benchmark launch warms up, measures, and may take in total."""

    warmup_seconds: float = 5.0
    """Untimed steps first: cuDNN autotuning, allocator growth, clocks ramping up."""
    measure_seconds: float = 10.0
    """Length of the timed window; with ci_target, the least it lasts."""
    ci_target: float = 0.0
    """Adaptive window: stop once the 95 % CI half-width of throughput is at most this (0.01 = ±1 %);
    0 = a fixed window of measure_seconds."""
    max_measure_seconds: float | None = None
    """Adaptive window: the longest it lasts, whatever the CI."""
    timeout_seconds: float = 600.0
    """Wall-clock limit of one launch, start-up included; past it the launch is killed and fails."""


@dataclass(frozen=True, kw_only=True, slots=True)
class MeasuredStack(JsonForm):
    """The software the profile's bounds were measured on: a run on another stack is told so."""

    torch: str | None = None
    """``torch.__version__`` as the measurement printed it, e.g. ``2.11.0+cu130``."""
    cuda: str | None = None
    """The CUDA version torch was built with (``torch.version.cuda``), e.g. ``13.0``."""
    nccl: str | None = None
    """NCCL as torch reports it, e.g. ``2.28.9``."""
    driver: str | None = None
    """The NVIDIA driver, e.g. ``580.159.04``."""
    source: str


@dataclass(frozen=True, kw_only=True, slots=True)
class NodeShape(JsonForm):
    """How many GPUs a node of this kind has: what the node-shape check holds a node to (harness/node/shape.py)."""

    gpus_per_node: tuple[int, ...]
    """The GPU counts nodes of this kind come with, ascending (an HGX board: 8; cloud VMs: also 1, 2, 4)."""
    source: str
    """The published figure the shapes come from."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Profile:
    """One validated threshold file."""

    name: str
    """The file stem, e.g. "a100-80gb"; what --hardware names."""
    path: Path
    """The file it was read from, as given."""
    sha256: str
    """SHA-256 of the file's bytes, so a report pins exactly which thresholds were applied."""
    description: str
    hardware: HardwareMatch
    peak_tflops: dict[str, float] = field(default_factory=dict)
    """Precision -> dense (not 2:4 sparse) peak TFLOP/s per GPU, for MFU; may be empty on cpu."""
    peak_tflops_source: str | None = None
    bf16_needs_native: bool = False
    """cpu: the bf16 bounds hold only on a CPU with native bf16; elsewhere the bf16 cases are skipped."""
    gpu_counts: tuple[int, ...]
    """GPU counts of the default matrix."""
    models: tuple[str, ...]
    """Models of the default matrix."""
    precisions: tuple[str, ...]
    """Precisions of the default matrix."""
    run: RunSettings = field(default_factory=RunSettings)
    cases: dict[tuple[str, str], CaseBounds]
    """(model, precision) -> bounds; includes cases outside the default matrix."""
    stack: MeasuredStack | None = None
    """What the bounds were measured on; None: not recorded."""
    node: NodeShape | None = None
    """None: the profile states no node shape; the node's own GPU count is expected."""
    definitions: dict[str, str] = field(default_factory=dict)
    """family -> the definition its bounds were measured under (harness/definitions.py)."""
    tables: dict[str, Any] = field(default_factory=dict)
    """A shipped kind's table (``[interconnect]``) -> what its ``BoundsTable.build`` made of it (harness/profile/
    tables.py); only the tables the loader was handed, and the file has. Read as ``table(TABLE)``."""
    site: dict[str, dict[str, Any]] = field(default_factory=dict)
    """``[site.<table>]`` -> its values, checked against the fields the site's kind declares (``Job.bounds``); only
    the tables the loading session's kinds declare (none when loaded without a session: ``harness thresholds
    check`` checks their shape alone)."""
    raw: dict = field(default_factory=dict)
    """The parsed TOML as read, for the report's "thresholds applied" section."""

    def table(self, table: BoundsTable[Bounds]) -> Bounds | None:
        """A kind's bounds (``INTERCONNECT_BOUNDS``: its ``InterconnectBounds``) as the file gave them; None: the
        file has no such table."""
        found = self.tables.get(table.name) if table.shipped else self.site.get(table.name)
        return found  # type: ignore[return-value]  # built by this very table's build as the profile loaded

    def bounds(self, model: str, precision: str) -> CaseBounds | None:
        """The bounds for ``model`` x ``precision``, or None when the profile has no such case."""
        return self.cases.get((model, precision))

    def asks_for(self, case: CaseId, native_bf16: str | None) -> bool:
        """Whether this profile requires ``case`` of a node that holds its GPUs: it bounds the case (a strong-scaling
        one at its GPU count), and bf16 runs here where the profile needs it native (``native_bf16``: the CPU's
        flag, None without)."""
        bounds = self.bounds(case.model, case.precision)
        if bounds is None:
            return False
        if case.precision == "bf16" and self.bf16_needs_native and native_bf16 is None:
            return False
        return case.scaling == "weak" or (case.gpus > 1 and case.gpus in bounds.min_strong_efficiency)

