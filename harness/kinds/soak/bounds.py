"""The soak's bounds table, ``[soak]``: how much a hot node may slow down over a long run."""

from __future__ import annotations

from dataclasses import dataclass

from harness.profile.bounds import JsonForm
from harness.profile.kinds import NUMBER, Field, Rule
from harness.profile.schema import SOURCE_FIELD
from harness.profile.tables import BoundsTable

SOAK_FIELDS = (
    Field(key="max_throughput_decay", kind=NUMBER, required=True,
          rule=Rule(lambda v: 0 < v < 1, "must be a fraction in (0, 1); use 0.03 for 3 %, not 3"),
          doc="largest slowdown of the last window vs the first, a fraction"),
    SOURCE_FIELD,
)


@dataclass(frozen=True, kw_only=True, slots=True)
class SoakBounds(JsonForm):
    """Bounds of a long run: does the node hold its speed once hot?"""

    max_throughput_decay: float
    """Largest acceptable slowdown of the last window vs the first, a fraction in (0, 1)."""
    source: str


SOAK_BOUNDS: BoundsTable[SoakBounds] = BoundsTable(
    name="soak", fields=SOAK_FIELDS, build=lambda checked: SoakBounds(**checked), doc="long-run bounds", shipped=True)
