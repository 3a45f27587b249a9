"""The components kind's bounds table, ``[components]``: each GPU's GEMM, memory, host-link and peer figures
(docs/components.md), each per GPU (per ordered pair), GB/s = 10^9 bytes/s."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.catalog import GEMM_DTYPES
from harness.profile.bounds import JsonForm, ReferencedBounds
from harness.profile.kinds import BOUND_BY_GPUS_AT_ONCE, NUMBER, Field
from harness.profile.schema import SOURCE_FIELD, TABLE, greater_than
from harness.profile.tables import BoundsTable, References, with_references

_GBPS, _TFLOPS = greater_than(0, " GB/s"), greater_than(0, " TFLOP/s")
_BY_GEMM_DTYPE = tuple(Field(key=dtype, kind=NUMBER, rule=_TFLOPS, doc=f"{dtype}, TFLOP/s") for dtype in GEMM_DTYPES)
COMPONENTS_FIELDS = (
    Field(key="min_gemm_tflops", kind=TABLE, fields=_BY_GEMM_DTYPE, doc="lowest settled dense TFLOP/s per dtype"),
    Field(key="datasheet_tflops", kind=TABLE, fields=_BY_GEMM_DTYPE,
          doc="datasheet dense peak TFLOP/s per dtype where [hardware] peak_tflops has none (tf32)"),
    Field(key="datasheet_hbm_gbps", kind=NUMBER, rule=_GBPS, doc="datasheet memory bandwidth per GPU, GB/s"),
    Field(key="min_hbm_copy_gbps", kind=NUMBER, rule=_GBPS, doc="lowest device-to-device copy, GB/s (read + written)"),
    Field(key="min_hbm_rmw_gbps", kind=NUMBER, rule=_GBPS, doc="lowest read-modify-write, GB/s (read + written)"),
    *(Field(key=f"min_{way}_gbps", kind=NUMBER, rule=_GBPS,
            doc=f"lowest pinned {words} bandwidth, each GPU alone, GB/s")
      for way, words in (("h2d", "host-to-GPU"), ("d2h", "GPU-to-host"))),
    # The GPUs of a node share the host's bandwidth: a figure with 4 GPUs at once is not one with 1.
    *(Field(key=f"min_{way}_concurrent_gbps", kind=BOUND_BY_GPUS_AT_ONCE, rule=_GBPS,
            doc=f"GPUs at once -> lowest pinned {words} bandwidth per GPU with every GPU at once, GB/s")
      for way, words in (("h2d", "host-to-GPU"), ("d2h", "GPU-to-host"))),
    Field(key="min_peer_gbps", kind=NUMBER, rule=_GBPS, doc="lowest GPU-to-GPU copy of each ordered pair, GB/s"),
    Field(key="max_peer_latency_us", kind=NUMBER, rule=greater_than(0, " us"),
          doc="highest GPU-to-GPU 4-byte copy time of each ordered pair, microseconds"),
    SOURCE_FIELD,
)


@dataclass(frozen=True, kw_only=True, slots=True)
class ComponentBounds(JsonForm, ReferencedBounds):
    """Per-GPU component bounds (docs/components.md); a bound left out is not evaluated, never passed."""

    min_gemm_tflops: dict[str, float] = field(default_factory=dict)
    """GEMM dtype -> lowest settled dense GEMM TFLOP/s per GPU."""
    datasheet_tflops: dict[str, float] = field(default_factory=dict)
    """GEMM dtype -> datasheet dense peak, where [hardware] peak_tflops has none (tf32)."""
    datasheet_hbm_gbps: float | None = None
    """Datasheet memory bandwidth per GPU, GB/s."""
    min_hbm_copy_gbps: float | None = None
    """Device-to-device copy, GB/s counting bytes read and written."""
    min_hbm_rmw_gbps: float | None = None
    """Read-modify-write (in-place multiply), GB/s counting bytes read and written."""
    min_h2d_gbps: float | None = None
    """Pinned host-to-GPU, each GPU alone, GB/s."""
    min_d2h_gbps: float | None = None
    """Pinned GPU-to-host, each GPU alone, GB/s."""
    min_h2d_concurrent_gbps: dict[int, float] = field(default_factory=dict)
    """GPUs at once -> pinned host-to-GPU per GPU, every GPU at once, GB/s (the GPUs share the host's bandwidth)."""
    min_d2h_concurrent_gbps: dict[int, float] = field(default_factory=dict)
    """GPUs at once -> pinned GPU-to-host per GPU, every GPU at once, GB/s."""
    min_peer_gbps: float | None = None
    """GPU-to-GPU copy bandwidth of each ordered pair, GB/s."""
    max_peer_latency_us: float | None = None
    """GPU-to-GPU 4-byte copy time of each ordered pair, microseconds."""
    source: str
    references: References = field(default_factory=dict)
    """The bounds above written as a reference and a tolerance."""


COMPONENTS_BOUNDS: BoundsTable[ComponentBounds] = BoundsTable(
    name="components", fields=COMPONENTS_FIELDS, build=with_references(ComponentBounds),
    doc="per-GPU component bounds", shipped=True)
