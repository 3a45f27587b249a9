"""The interconnect kind's bounds tables: ``[interconnect]`` (the all-reduce's bus bandwidth) and ``[topology]``
(the GPU wiring), declared here and handed to the loader with every other kind's (harness/profile/tables.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.profile.bounds import JsonForm, ReferencedBounds
from harness.profile.kinds import BOOLEAN, BOUND_BY_GPU_COUNT, INTEGER, STRING, Field
from harness.profile.schema import SOURCE_FIELD, at_least, between, greater_than, one_of
from harness.profile.tables import BoundsTable, References, with_references

INTERCONNECT_FIELDS = (
    Field(key="min_allreduce_busbw_gbps", kind=BOUND_BY_GPU_COUNT, required=True, rule=greater_than(0, " GB/s"),
          doc="GPU count (>= 2) -> lowest all-reduce bus bandwidth, GB/s (10^9 bytes/s): a number, or "
              "{ ref, tol, hosts, runs, spread } as harness calibrate-fit writes it",
          formerly=("min_allreduce_busbw",)),
    SOURCE_FIELD,
)


@dataclass(frozen=True, kw_only=True, slots=True)
class InterconnectBounds(JsonForm, ReferencedBounds):
    """Collective-communication bounds, measured as nccl-tests does."""

    min_allreduce_busbw_gbps: dict[int, float]
    """GPU count -> lowest acceptable all-reduce bus bandwidth, GB/s (10⁹ bytes/s, nccl-tests busbw)."""
    source: str
    references: References = field(default_factory=dict)
    """The bounds above written as a reference and a tolerance (fitted across hosts by calibrate-fit)."""


INTERCONNECT_BOUNDS: BoundsTable[InterconnectBounds] = BoundsTable(
    name="interconnect", fields=INTERCONNECT_FIELDS, build=with_references(InterconnectBounds), doc="all-reduce bounds",
    shipped=True)

NVLINK_WHEN = ("always", "multi_gpu")

TOPOLOGY_FIELDS = (
    Field(key="nvlinks_per_gpu", kind=INTEGER, rule=at_least(0, " (links)"), doc="active NVLink links per GPU"),
    Field(key="nvlink_when", kind=STRING, rule=one_of(NVLINK_WHEN),
          doc='"always": every GPU must show its NVLinks, even alone; "multi_gpu": only where the node has '
              "two GPUs or more (a GPU alone has no peer to link to, as in a 1-GPU VM)"),
    Field(key="p2p_all_pairs", kind=BOOLEAN, doc="every GPU pair supports peer-to-peer access"),
    Field(key="pcie_generation", kind=INTEGER, rule=between(1, 7), doc="PCIe link generation of each GPU under load"),
    Field(key="pcie_width", kind=INTEGER, rule=one_of((1, 2, 4, 8, 16)), doc="PCIe link width (lanes) of each GPU"),
    SOURCE_FIELD,
)


@dataclass(frozen=True, kw_only=True, slots=True)
class TopologyBounds(JsonForm):
    """Expected GPU wiring; a missing link is a hardware fault the throughput checks may not show."""

    nvlinks_per_gpu: int | None = None
    """Active NVLink links per GPU."""
    nvlink_when: str = "always"
    """``always``: every GPU must show ``nvlinks_per_gpu`` links; ``multi_gpu``: only on a node of two GPUs
    or more, since a GPU alone (a 1-GPU VM) has no peer to link to."""
    p2p_all_pairs: bool | None = None
    """Whether every GPU pair must support peer-to-peer access."""
    pcie_generation: int | None = None
    """Expected current PCIe link generation of each GPU (under load: links downtrain when idle)."""
    pcie_width: int | None = None
    """Expected PCIe link width (lanes) of each GPU."""
    source: str


TOPOLOGY_BOUNDS: BoundsTable[TopologyBounds] = BoundsTable(
    name="topology", fields=TOPOLOGY_FIELDS, build=lambda checked: TopologyBounds(**checked),
    doc="expected GPU wiring", shipped=True)
