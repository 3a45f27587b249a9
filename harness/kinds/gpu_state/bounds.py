"""The GPU-state kind's bounds table, ``[gpu_state]``: what NVML must say of each GPU at session start and end."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from harness.profile.bounds import JsonForm
from harness.profile.kinds import BOOLEAN, INTEGER, STRING_ARRAY, Field
from harness.profile.schema import SOURCE_FIELD, at_least, one_of
from harness.profile.tables import BoundsTable

GPU_STATE_KEYS = ("power_limit", "clocks", "ecc_mode", "retired_pages", "remapped_rows", "ecc_uncorrected",
                  "xid_events", "nvlink_errors")
"""The checks of the GPU-state test (harness/kinds/gpu_state/checks.py), by key."""

GPU_STATE_FIELDS = (
    Field(key="require_ecc", kind=BOOLEAN, required=True,
          doc="ECC must be enabled on every GPU (false only for GPUs sold without ECC)"),
    Field(key="allow_unsupported", kind=STRING_ARRAY, rule=one_of(GPU_STATE_KEYS),
          doc="GPU-state checks whose NVML query this GPU kind does not support (NotSupported is then "
              "reported, not failed); nvlink_errors only where NVML shows no NVLink at all"),
    Field(key="max_nvlink_error_growth", kind=INTEGER, rule=at_least(0, " (errors per link per session)"),
          doc="largest rise of one NVLink error counter (CRC, replay, recovery) between session start and end; "
              "absent: any rise is reported as not evaluated"),
    SOURCE_FIELD,
)


@dataclass(frozen=True, kw_only=True, slots=True)
class GpuStateBounds(JsonForm):
    """What NVML must say of each GPU at session start and end (harness/kinds/gpu_state/checks.py)."""

    require_ecc: bool
    """ECC must be enabled; disabled fails the ``ecc_mode`` check."""
    allow_unsupported: tuple[str, ...] = ()
    """Check keys whose NVML query this GPU kind does not support (e.g. retired_pages on Hopper, which
    remaps rows instead): NotSupported is then reported, not failed. Any other NotSupported fails."""
    max_nvlink_error_growth: int | None = None
    """Largest rise of one NVLink error counter of one link over the session; None: a rise is not evaluated."""
    source: str


def _gpu_state(checked: Mapping[str, Any]) -> GpuStateBounds:
    return GpuStateBounds(**{**checked, "allow_unsupported": tuple(checked.get("allow_unsupported", ()))})


GPU_STATE_BOUNDS: BoundsTable[GpuStateBounds] = BoundsTable(
    name="gpu_state", fields=GPU_STATE_FIELDS, build=_gpu_state, doc="what NVML must say of each GPU", shipped=True)
