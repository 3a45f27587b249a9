"""The session's GPU-state watch: a snapshot of every GPU at session start, an XID watcher from then to the
session's end, and a snapshot at the end, taken when the first GPU-state test asks; those tests run after every
benchmark (the GPU-state job's ``order = "last"``, harness/kinds/gpu_state/job.py), so "end" is after all the load,
and their kind judges what the watch read (harness/kinds/gpu_state/runner.py). In a multi-node session the other
nodes' GPUs are read the same way on their nodes (plugin/remote_gpu_state.py), and every test id names its node
(``gpu01-gpu3``); on one node the ids are ``gpu3``.

Also what a case window saw besides its own checks (``seen_in_window``): foreign processes,
clock-event reasons with their share of the window and XIDs, listed under a failing case.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import pytest

from harness.checks.gpu_state import GpuStateInput, clock_setting_windows
from harness.checks.node_load import case_windows
from harness.checks.telemetry_checks import describe_foreign, reason_shares
from harness.node.gpu_state import GpuState, read_gpu_states
from harness.node.xid import XidWatcher
from harness.plugin.context import SessionContext
from harness.plugin.remote_gpu_state import NodeGpu, RemoteGpuState, judged_nodes, remote_gpu_state
from harness.results.telemetry_summary import read_telemetry
from harness.telemetry import gpu_label


@dataclass(frozen=True, kw_only=True)
class GpuStateReading:
    """What the watch read of one GPU, for the GPU-state kind to judge."""

    state: GpuStateInput
    problems: dict[str, str]
    """"start" / "end" -> why a snapshot is missing."""
    other_node: bool = False
    """A GPU of another node of the session, read by its probe."""


@dataclass(kw_only=True)
class GpuStateWatcher:
    """The session's GPU-state watch (harness/jobs/job.py ``GpuStateWatch``), handed to every kind's runner."""

    ctx: SessionContext
    start_states: dict[str, GpuState] = field(default_factory=dict)
    """uuid -> the snapshot taken at session start."""
    end_states: dict[str, GpuState] | None = None
    """uuid -> the snapshot at session end; None until the first GPU-state test takes it."""
    problems: dict[str, str | None] = field(default_factory=dict)
    """"start" / "end" -> why a snapshot is missing GPUs (NVML unavailable, a GPU not found)."""
    watcher: XidWatcher | None = None
    remote: RemoteGpuState | None = None
    """The other nodes of a multi-node session, read on their nodes; None on one node."""
    results: Mapping[str, Any] = field(default_factory=dict)
    """The session's results so far, by pytest node id (harness/plugin/session.py ``HarnessSession.results``): the
    case windows a GPU's clocks were set in, and the other nodes' load during the cases."""

    def start(self, nvml: Any = None, popen: Any = None) -> None:
        """Session start: snapshot every GPU and start watching for XIDs, here and on every other node the
        session's cases use (a CPU profile: nothing)."""
        if self.ctx.device != "cuda":
            return
        states, self.problems["start"] = read_gpu_states(self.ctx.hardware.gpus, nvml)
        self.start_states = {state.uuid: state for state in states}
        self.watcher = XidWatcher(self.ctx.hardware.gpus, nvml).start()
        self.remote = remote_gpu_state(self.ctx)
        if self.remote is not None and self.ctx.allocation is not None:
            self.remote.launch(self.ctx.allocation, popen)
            busy = self.remote.busy_message()
            if busy is not None:  # as on the driver's node (plugin/session.py): a shared GPU measures two jobs
                self.stop()
                raise pytest.UsageError(f"{busy}\nNo benchmark was started.")

    def stop(self) -> None:
        if self.watcher is not None:
            self.watcher.stop()
        if self.remote is not None:
            self.remote.finish()

    def end_snapshot(self, nvml: Any = None) -> dict[str, GpuState]:
        if self.end_states is None:
            states, self.problems["end"] = read_gpu_states(self.ctx.hardware.gpus, nvml)
            self.end_states = {state.uuid: state for state in states}
        return self.end_states

    def reading(self, target: int | NodeGpu, nvml: Any = None) -> GpuStateReading:
        """What the watch read of GPU ``target`` (an index; a ``NodeGpu`` in a multi-node session): its start and
        end snapshots, the XIDs of the whole session, the windows in which its clocks were set; judged by the
        GPU-state kind (harness/kinds/gpu_state/)."""
        ctx = self.ctx
        results = list(self.results.values())
        node, index = (target.node, target.index) if isinstance(target, NodeGpu) else (None, target)
        if node is not None and node != next(iter(judged_nodes(ctx)), None):
            return self._other_node(node, index, results)
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
                              clock_setting_windows=clock_setting_windows(results, gpu.uuid), node=node)
        return GpuStateReading(state=state, problems={k: v for k, v in self.problems.items() if v})

    def _other_node(self, node: str, index: int, results: Sequence[Any] = ()) -> GpuStateReading:
        """A GPU of another node: what its probe wrote (a node never probed fails, named)."""
        remote = self.remote
        if remote is None or node not in remote.nodes:
            remote = RemoteGpuState(nodes=(node,), directory=self.ctx.run_dir, expected_gpus=None,
                                    launch_failure="was never started for this node")
        state = remote.gpu_input(node, index, case_windows(results))
        problems = {phase: why for phase in ("start", "end") if (why := remote.problem(node, phase))}
        return GpuStateReading(state=state, problems=problems, other_node=True)

    def seen_in_window(self, telemetry: Any) -> list[str]:
        """What else a case's window saw, one line each: foreign processes, clock-event reasons with
        their share, XIDs between the window's start and end."""
        summary = read_telemetry(telemetry)
        if summary.status != "ok":
            return []
        lines = []
        for gpu in summary.gpus:
            name = gpu_label(gpu.index, gpu.uuid)
            for process in gpu.foreign_processes:
                lines.append(f"{name}: foreign process {describe_foreign(process)}")
            shares = reason_shares(gpu, summary.window_s)
            if shares:
                lines.append(f"{name}: clock-event reasons: {', '.join(shares.values())}")
        if self.watcher is not None:
            uuids = {gpu.uuid for gpu in summary.gpus}
            events = self.watcher.events_between(summary.window_start, summary.window_end)
            lines += [event.describe() for event in events if event.gpu_uuid in uuids]
        return lines

    def summary(self) -> dict | None:
        """``gpu_state`` of session.json: both snapshots and every XID; None on a CPU run."""
        if self.ctx.device != "cuda":
            return None
        return {"start": [s.to_dict() for s in self.start_states.values()],
                "end": [s.to_dict() for s in (self.end_states or {}).values()],
                "problems": {k: v for k, v in self.problems.items() if v},
                "xid": self.watcher.to_dict() if self.watcher is not None else None,
                **({"other_nodes": self.remote.summary()} if self.remote is not None else {})}
