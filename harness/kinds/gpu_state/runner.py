"""The GPU-state kind's judging: what the session's GPU-state watch read of one GPU (harness/plugin/gpu_state.py:
its snapshots at the session's start and end, the XIDs between, the other nodes' probes) judged against the
profile's ``[gpu_state]`` bounds. The watch serves every kind (what a window saw); this kind owns its tests'
verdict and session.json's ``gpu_state`` section. Its tests reach it as ``harness.runner("gpu_state")``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.kinds.gpu_state.bounds import GPU_STATE_BOUNDS
from harness.kinds.gpu_state.checks import gpu_state_checks
from harness.jobs.job import GpuStateWatch, KindRunner, gpu_id, node_gpu_id
from harness.plugin.context import SessionContext
from harness.plugin.gpu_state import GpuStateReading
from harness.plugin.remote_gpu_state import NodeGpu
from harness.plugin.results import CheckedResult
from harness.telemetry import gpu_label

SECTION = "gpu_state"
"""Its runner's key, and its section of session.json: both snapshots and every XID (the watch's summary)."""


@dataclass(kw_only=True)
class GpuStateChecks(KindRunner):
    ctx: SessionContext
    watch: GpuStateWatch | None = None
    """The session's GPU-state watch, handed over at the session's start (``attach``)."""

    def attach(self, watch: GpuStateWatch) -> None:
        self.watch = watch

    def summary(self) -> dict | None:
        return self.watch.summary() if self.watch is not None else None

    def check(self, target: int | NodeGpu, nvml: Any = None) -> CheckedResult:
        """The GPU-state checks of GPU ``target`` (an index; a ``NodeGpu`` in a multi-node session), start against
        end, XIDs of the whole session."""
        if self.watch is None:
            raise RuntimeError("the GPU-state kind's runner has no GPU-state watch: the session attaches it at start")
        return judged(self.ctx, self.watch.reading(target, nvml=nvml))


def judged(ctx: SessionContext, reading: GpuStateReading) -> CheckedResult:
    """One GPU's reading judged against the profile's ``[gpu_state]`` bounds (harness/kinds/gpu_state/checks.py)."""
    state = reading.state
    bounds = ctx.profile.table(GPU_STATE_BOUNDS)
    name = node_gpu_id(state.node, state.index) if state.node else gpu_id(state.index)
    where = gpu_label(state.index, state.uuid)
    return CheckedResult(name=f"gpu-state-{name}",
                         context=f"{ctx.profile.name}, GPU state, {f'node {state.node}, ' if state.node else ''}"
                                 f"{where}",
                         checks=gpu_state_checks(state, bounds),
                         bounds=bounds.to_dict() if bounds is not None else None,
                         data={"gpu_state": {"index": state.index, "uuid": state.uuid, "start": state.start,
                                             "end": state.end, "xid_events": state.xid_events,
                                             "xid_watch": state.xid_watch, "problems": reading.problems,
                                             **({"node": state.node} if state.node else {}),
                                             **({"other_node": True, "load": state.load} if reading.other_node
                                                else {})}})
