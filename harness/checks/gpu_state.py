"""What the GPU-state kind judges of one GPU, as the session's GPU-state watch gathers it (``GpuStateInput``: both
snapshots, its XIDs, the windows that saw its clocks set), and where it saw a clock setting in the session's own
windows. The judging itself is the kind's (harness/kinds/gpu_state/checks.py); the watch (harness/plugin/
gpu_state.py, remote_gpu_state.py) builds these below the kinds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from harness.node.nvml import CLOCK_SETTING_REASON
from harness.results.location import Location
from harness.results.telemetry_summary import read_telemetry

UNKNOWN_UUID = "UUID unknown"
"""The UUID of a GPU a node should have and does not show (a multi-node session's other node)."""

APPLICATIONS_CLOCKS_REASON = CLOCK_SETTING_REASON


@dataclass(kw_only=True)
class GpuStateInput:
    """Everything the GPU-state checks of one GPU read."""

    index: int
    uuid: str
    start: dict | None
    """The session-start snapshot (``GpuState.to_dict()``); None when it could not be taken."""
    end: dict | None
    """The session-end snapshot."""
    xid_events: list[dict] = field(default_factory=list)
    """``XidEvent.to_dict()`` of this GPU's XIDs during the session."""
    xid_watch: str = "ok"
    """``ok``, or why the watcher did not watch this GPU (``unsupported: ...``, ``error: ...``)."""
    clock_setting_windows: list[dict] = field(default_factory=list)
    """Case windows in which this GPU reported "applications clocks setting": ``where`` (``case: N of M
    samples``) and ``min_sm_clock_mhz`` (the window's lowest SM clock; None where unread)."""
    node: str | None = None
    """The node's host name in a multi-node session (every note then names it); None on one node."""
    missing_why: str = "no snapshot of this GPU"
    """Why ``start`` or ``end`` is None, as the failing checks say it (e.g. the node could not be read)."""
    judge_load: bool = False
    """A GPU of another node: judge throttling and foreign processes over the session here, from its probe's
    ``load`` record (the driver's GPUs are judged per case, by their windows' telemetry)."""
    load: dict | None = None
    """This GPU's record of the probe's load watch (harness/node/load_watch.py); None: there is none."""
    load_why: str = "no record of the probe's load watch"
    """Why ``load`` is None, as the failing checks say it."""
    case_windows: list[dict] = field(default_factory=list)
    """The session's measured windows (``case``, ``start``, ``end``), to name the case a fault fell in."""

    def location(self, **more: Any) -> Location:
        """This GPU (its node in a multi-node session), with ``more`` (an XID, a link) on it."""
        return Location(node=self.node, gpu_index=self.index,
                        gpu_uuid=self.uuid if self.uuid and self.uuid != UNKNOWN_UUID else None, **more)

    @property
    def label(self) -> str:
        where = f"GPU {self.index} ({self.uuid})"
        return f"node {self.node}: {where}" if self.node else where


def clock_setting_windows(results: Sequence[Any], uuid: str) -> list[dict]:
    """Case windows of this session in which ``uuid`` reported "applications clocks setting" (from each
    result's ``record.telemetry``): where (``<case>: N of M samples``) and the window's lowest SM clock."""
    seen = []
    for result in results:
        record = getattr(result, "record", None)
        for track in read_telemetry(getattr(record, "telemetry", None)).gpus:
            count = track.clock_events.get(APPLICATIONS_CLOCKS_REASON)
            if track.uuid == uuid and count:
                seen.append({"where": f"{getattr(result, 'context', '?')}: {count} of {track.samples} samples",
                             "min_sm_clock_mhz": track.reduced.get("sm_clock_mhz")})
    return seen
