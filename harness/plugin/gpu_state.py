"""The session's GPU state: a snapshot of every GPU at session start, an XID watcher from then to the
session's end, and a snapshot at the end, taken by the GPU-state tests, which run after every
benchmark (``order_last`` below), so "end" is after all the load.

Also what a case window saw besides its own checks (``seen_in_window``): foreign processes,
clock-event reasons with their share of the window and XIDs, listed under a failing case.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import pytest

from harness.checks.gpu_state import GpuStateInput, clock_setting_windows, gpu_state_checks
from harness.checks.verdict import describe_foreign, reason_shares
from harness.node.gpu_state import GpuState, read_gpu_states
from harness.node.xid import XidWatcher
from harness.plugin.context import SessionContext
from harness.plugin.results import CheckedResult
from harness.telemetry import gpu_label

GPU_STATE_FIXTURE = "gpu_state_gpu"
"""The parameter of acceptance/test_gpu_state.py: a GPU index, one test id per GPU (``gpu3``)."""
NO_GPU_REASON = "no GPU on a CPU run"


def gpu_state_params(ctx: SessionContext) -> list[Any]:
    """One ``gpuN`` per GPU NVML sees; on a CPU profile one skipped parameter saying why."""
    if ctx.device != "cuda":
        return [pytest.param(None, id="no-gpu", marks=pytest.mark.skip(reason=NO_GPU_REASON))]
    return [pytest.param(gpu.index, id=f"gpu{gpu.index}") for gpu in ctx.hardware.gpus]


def order_last(items: list[pytest.Item]) -> None:
    """The GPU-state tests after every other test, in place: their end snapshot and XID check must
    follow all the load of the session."""
    last = [item for item in items if GPU_STATE_FIXTURE in getattr(item, "fixturenames", ())]
    if last:
        items[:] = [item for item in items if item not in last] + last


@dataclass(kw_only=True)
class GpuStateRunner:
    ctx: SessionContext
    start_states: dict[str, GpuState] = field(default_factory=dict)
    """uuid -> the snapshot taken at session start."""
    end_states: dict[str, GpuState] | None = None
    """uuid -> the snapshot at session end; None until the first GPU-state test takes it."""
    problems: dict[str, str | None] = field(default_factory=dict)
    """"start" / "end" -> why a snapshot is missing GPUs (NVML unavailable, a GPU not found)."""
    watcher: XidWatcher | None = None

    def start(self, nvml: Any = None) -> None:
        """Session start: snapshot every GPU and start watching for XIDs (a CPU profile: nothing)."""
        if self.ctx.device != "cuda":
            return
        states, self.problems["start"] = read_gpu_states(self.ctx.hardware.gpus, nvml)
        self.start_states = {state.uuid: state for state in states}
        self.watcher = XidWatcher(self.ctx.hardware.gpus, nvml).start()

    def stop(self) -> None:
        if self.watcher is not None:
            self.watcher.stop()

    def end_snapshot(self, nvml: Any = None) -> dict[str, GpuState]:
        if self.end_states is None:
            states, self.problems["end"] = read_gpu_states(self.ctx.hardware.gpus, nvml)
            self.end_states = {state.uuid: state for state in states}
        return self.end_states

    def run_gpu_state(self, index: int, results: Sequence[Any] = (), nvml: Any = None) -> CheckedResult:
        """The GPU-state checks of GPU ``index``, start against end, XIDs of the whole session."""
        ctx = self.ctx
        gpu = next(g for g in ctx.hardware.gpus if g.index == index)
        end = self.end_snapshot(nvml).get(gpu.uuid)
        start = self.start_states.get(gpu.uuid)
        watcher = self.watcher
        if watcher is None or watcher.failure:
            # Also a watcher that stopped mid-session: what it did not see cannot pass.
            watch = f"error: {watcher.failure if watcher is not None else 'the XID watcher never started'}"
        else:
            watch = watcher.status.get(gpu.uuid, "error: the XID watcher did not register this GPU")
        xids = [e.to_dict() for e in watcher.events_between(None, None) if e.gpu_uuid == gpu.uuid] if watcher else []
        state = GpuStateInput(index=gpu.index, uuid=gpu.uuid, start=start.to_dict() if start else None,
                              end=end.to_dict() if end else None, xid_events=xids, xid_watch=watch,
                              clock_setting_windows=clock_setting_windows(results, gpu.uuid))
        bounds = ctx.profile.gpu_state
        return CheckedResult(name=f"gpu-state-gpu{gpu.index}",
                             context=f"{ctx.profile.name}, GPU state, {gpu_label(gpu.index, gpu.uuid)}",
                             checks=gpu_state_checks(state, bounds),
                             bounds=bounds.to_dict() if bounds is not None else None,
                             data={"gpu_state": {"index": gpu.index, "uuid": gpu.uuid, "start": state.start,
                                                 "end": state.end, "xid_events": xids, "xid_watch": watch,
                                                 "problems": {k: v for k, v in self.problems.items() if v}}})

    def seen_in_window(self, telemetry: Any) -> list[str]:
        """What else a case's window saw, one line each: foreign processes, clock-event reasons with
        their share, XIDs between the window's start and end."""
        if not isinstance(telemetry, dict) or telemetry.get("status") != "ok":
            return []
        window = telemetry.get("window") or {}
        lines = []
        for gpu in telemetry.get("gpus", []):
            name = gpu_label(gpu.get("index"), gpu.get("uuid"))
            for process in gpu.get("foreign_processes") or []:
                lines.append(f"{name}: foreign process {describe_foreign(process)}")
            shares = reason_shares(gpu, window.get("seconds"))
            if shares:
                lines.append(f"{name}: clock-event reasons: {', '.join(shares.values())}")
        if self.watcher is not None:
            uuids = {gpu.get("uuid") for gpu in telemetry.get("gpus", [])}
            lines += [event.describe() for event in self.watcher.events_between(window.get("start"), window.get("end"))
                      if event.gpu_uuid in uuids]
        return lines

    def summary(self) -> dict | None:
        """``gpu_state`` of session.json: both snapshots and every XID; None on a CPU run."""
        if self.ctx.device != "cuda":
            return None
        return {"start": [s.to_dict() for s in self.start_states.values()],
                "end": [s.to_dict() for s in (self.end_states or {}).values()],
                "problems": {k: v for k, v in self.problems.items() if v},
                "xid": self.watcher.to_dict() if self.watcher is not None else None}
