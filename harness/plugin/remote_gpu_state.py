"""The GPU state of the other nodes of a multi-node session, judged like the driver's own GPUs.

The driver (pytest) runs on the allocation's first node and reads NVML there (plugin/gpu_state.py).
The multi-node cases also load every other node they use, so each of those must be judged too: at
session start the driver starts one background ``srun`` step, one task per other node, running
``python -m harness.node.gpu_state_probe watch`` (under HARNESS_STEP_WRAPPER, as the agents of the
multi-node cases). Each task writes its node's start snapshot into ``RUN/gpu_state_nodes/``, watches
its GPUs for XIDs, and at the session's end (``stop`` written there) its end snapshot and XIDs.

The step takes ``--overlap``: it shares the nodes' CPUs and GPUs with the cases' steps instead of
holding them (Slurm >= 22.05 shares GRES too). A node whose snapshot does not come, or whose NVML
cannot be opened, fails its tests naming the node and why: an unread node is never signed off.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from harness.checks.gpu_state import UNKNOWN_UUID, GpuStateInput
from harness.results.check import Check
from harness.jobs.job import node_gpu_id
from harness.launch import slurm
from harness.launch.cleanup import session_owner
from harness.launch.command import PACKAGE_ROOT
from harness.node.gpu_state_probe import STOP_FILE, node_file
from harness.node.nvml import CLOCK_SETTING_REASON
from harness.node.processes import GpuProcess, busy_gpu_message
from harness.plugin.cases import node_counts
from harness.plugin.context import SessionContext
from harness.results.location import Location

PROBE_DIR = "gpu_state_nodes"
"""The probe directory in the run directory: ``<host>.start.json``, ``<host>.end.json``, ``stop``."""
START_TIMEOUT_S = 180.0
"""How long the driver waits for every node's start snapshot: srun's step start on a busy controller."""
END_TIMEOUT_S = 120.0
"""How long it waits for the end snapshots after writing ``stop``: each watcher looks every second, but
an NFS client may take up to its acdirmax (60 s by default) to show it a file another host made."""
LATE_END_S = 10.0
"""How long it looks again for end snapshots after the step ended on SIGUSR1."""
STEP_END_S = 15.0
"""How long each signal that ends the probe step is given."""


@dataclass(frozen=True, kw_only=True, slots=True)
class NodeGpu:
    """A GPU of a multi-node session, the parameter of ``test_gpu_state[gpu01-gpu3]``."""

    node: str
    index: int

    @property
    def test_id(self) -> str:
        return node_gpu_id(self.node, self.index)


def judged_nodes(ctx: SessionContext) -> tuple[str, ...]:
    """The driver's node, then every other node the session's multi-node cases use; () when no case uses
    another node (one node, a CPU profile, the quick level: no DDP matrix).

    The driver is meant to run on the allocation's first node (slurm/acceptance.sbatch); where it runs
    elsewhere (an salloc shell on a login node), the first node is probed like the others, never
    taken for the driver's."""
    if ctx.device != "cuda" or ctx.allocation is None or ctx.options.level == "quick":
        return ()
    counts = node_counts(ctx.options, ctx.allocation)
    if not counts:
        return ()
    used = tuple(ctx.allocation.nodes[:max(counts)])
    driver = ctx.hardware.hostname
    return used if _short(driver) == _short(used[0]) else (_short(driver), *used)


def _short(host: str) -> str:
    """``gpu01`` of ``gpu01.cluster.example``: Slurm's node names and a host's name may differ so."""
    return host.split(".", 1)[0]


def probe_command(alloc: slurm.SlurmAllocation, nodes: Sequence[str], directory: Path) -> list[str]:
    """One probe task on each of ``nodes``, sharing their resources with the cases' steps (``--overlap``);
    one node's probe failing ends no other (``--kill-on-bad-exit=0``)."""
    gpus = [f"--gpus-per-node={alloc.gpus_per_node}"] if alloc.gpus_per_node else []
    return ["srun", f"--nodes={len(nodes)}", f"--ntasks={len(nodes)}", "--ntasks-per-node=1",
            f"--nodelist={','.join(nodes)}", "--overlap", "--kill-on-bad-exit=0", "--export=ALL",
            "--job-name=harness-gpu-state", *gpus, *slurm.step_wrapper(),
            sys.executable, "-m", "harness.node.gpu_state_probe", "watch", "--dir", str(directory),
            # Every launch of this session carries this tag (cleanup.owner_env): what tells the session's
            # ranks on that node from a foreign process.
            "--owner", session_owner()]


@dataclass(kw_only=True)
class RemoteGpuState:
    """The probe step over the other nodes, and what each node wrote."""

    nodes: tuple[str, ...]
    """The other nodes, in allocation order (the driver's node is read in-process)."""
    directory: Path
    expected_gpus: int | None
    """GPUs each node must have (the session's expected count); None: as many as each node shows."""
    process: Any = None
    start: dict[str, dict] = field(default_factory=dict)
    """host -> its start snapshot file (``gpu_state_probe.snapshot``)."""
    end: dict[str, dict] | None = None
    """host -> its end snapshot file; None until the session's end."""
    launch_failure: str | None = None
    """Why the probe step could not be started at all."""

    def launch(self, alloc: slurm.SlurmAllocation, popen: Callable[..., Any] | None = None,
               timeout_s: float = START_TIMEOUT_S) -> None:
        """Start the probe step and wait for every node's start snapshot (or the step's end, or the timeout)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        command = probe_command(alloc, self.nodes, self.directory)
        # The whole environment goes to the nodes (--export=ALL), as for the cases' steps; this checkout first.
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(PACKAGE_ROOT), os.environ.get("PYTHONPATH"))
                                                          if p)}
        try:
            with (self.directory / "probe.log").open("w") as log:
                self.process = (popen or subprocess.Popen)(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                                           start_new_session=True)
        except OSError as err:
            self.launch_failure = f"could not be started (`{' '.join(command[:2])} ...`): {err}"
            return
        self.start = self._wait_for("start", timeout_s)

    def finish(self, timeout_s: float = END_TIMEOUT_S) -> dict[str, dict]:
        """Session end: ask every watcher to stop (the ``stop`` file), collect the end snapshots, end the
        step. A watcher that has not seen the file in time gets SIGUSR1 through srun, which it answers
        with its end snapshot too; the files are read once more after the step ended."""
        if self.end is None:
            if self.process is not None:
                (self.directory / STOP_FILE).touch()
                self.end = self._wait_for("end", timeout_s)
                self._end_step()
                if len(self.end) < len(self.nodes):
                    self.end = self._wait_for("end", LATE_END_S)
            else:
                self.end = {}
        return self.end

    def _wait_for(self, phase: str, timeout_s: float) -> dict[str, dict]:
        deadline = time.monotonic() + timeout_s
        exited_at: float | None = None
        while True:
            # Whether the step ended, before reading: a step that ended wrote all it ever will, and a
            # shared filesystem shows it within a few seconds.
            if exited_at is None and (self.process is None or self.process.poll() is not None):
                exited_at = time.monotonic()
            found = {node: data for node in self.nodes if (data := _read(node_file(self.directory, node, phase)))}
            now = time.monotonic()
            if len(found) == len(self.nodes) or now >= deadline or (exited_at is not None and now - exited_at >= 2.0):
                return found
            time.sleep(0.2)

    def _end_step(self) -> None:
        """SIGUSR1 (srun forwards it to every task: each writes its end snapshot and exits), then SIGTERM
        (srun kills the tasks), then SIGKILL: the step never outlives the session."""
        for stop in (lambda: self.process.send_signal(signal.SIGUSR1), self.process.terminate, self.process.kill):
            if self.process is None or self.process.poll() is not None:
                return
            stop()
            try:
                self.process.wait(timeout=STEP_END_S)
            except subprocess.TimeoutExpired:
                continue

    def problem(self, node: str, phase: str) -> str | None:
        """Why ``node`` has no usable ``phase`` snapshot; None when it has one."""
        snapshots = self.start if phase == "start" else (self.end or {})
        data = snapshots.get(node)
        if self.launch_failure:
            return f"node {node}: the GPU-state probe step {self.launch_failure}"
        if data is None:
            code = self.process.poll() if self.process is not None else None
            ended = f"; the probe step ended with status {code}" if code is not None else ""
            return (f"node {node}: no {phase} snapshot from the GPU-state probe{ended} (see "
                    f"{self.directory}/probe.log; is the run directory on a filesystem every node sees?)")
        if data.get("status") != "ok":
            return f"node {node}: {data.get('why') or 'the probe could not read NVML'}"
        return None

    def gpu_indices(self, node: str) -> list[int]:
        """The GPUs to judge on ``node``: every one it showed at start, and every one it should have."""
        seen = {int(gpu["index"]) for gpu in self.start.get(node, {}).get("gpus", [])}
        return sorted(seen | set(range(self.expected_gpus or (0 if seen else 1))))

    def gpu_input(self, node: str, index: int, case_windows: Sequence[dict] = ()) -> GpuStateInput:
        """What the GPU-state checks of GPU ``index`` of ``node`` read (``case_windows``: the session's
        measured windows, to name the case a fault on that node fell in)."""
        end = self.finish()
        gpus = {int(g["index"]): g for g in self.start.get(node, {}).get("gpus", [])}
        uuid = str(gpus[index]["uuid"]) if index in gpus else UNKNOWN_UUID
        why = self.problem(node, "start") or self.problem(node, "end")
        if why is None and index not in gpus:
            shown = ", ".join(str(i) for i in sorted(gpus)) or "none"
            why = f"node {node}: GPU {index} is missing: NVML there shows {len(gpus)} GPUs ({shown})"
        starts = {s["uuid"]: s for s in self.start.get(node, {}).get("states", [])}
        ends = {s["uuid"]: s for s in end.get(node, {}).get("states", [])}
        xid = end.get(node, {}).get("xid") or {}
        if why is not None:
            watch = f"error: {why}"
        elif xid.get("failure"):
            watch = f"error: node {node}: {xid['failure']}"
        else:
            watch = (xid.get("status") or {}).get(uuid, f"error: node {node}: the XID watcher did not register it")
        events = [e for e in xid.get("events", []) if e.get("gpu_uuid") == uuid]
        # A GPU NVML lost between start and end: the probe's own words for it (read_gpu_states' problems).
        lost = next((f"node {node}: {data['why']}" for data in (end.get(node, {}), self.start.get(node, {}))
                     if data.get("why")), None)
        load_record = end.get(node, {}).get("load") or {}
        load = None if why is not None else (load_record.get("gpus") or {}).get(uuid)
        load_why = why or (f"node {node}: {load_record['failure']}" if load_record.get("failure") else
                           f"node {node}: the probe's load watch has no record of this GPU")
        held = [] if load is None or load.get("clock_setting_min_sm_mhz") is None else [
            {"where": f"the session on node {node} ({load['reasons_loaded'].get(CLOCK_SETTING_REASON)} of "
                      f"{load.get('loaded_samples')} samples under its load)",
             "min_sm_clock_mhz": load["clock_setting_min_sm_mhz"]}]
        return GpuStateInput(index=index, uuid=uuid, node=node, start=starts.get(uuid), end=ends.get(uuid),
                             xid_events=events, xid_watch=watch, missing_why=why or lost or "no snapshot of this GPU",
                             judge_load=True, load=load, load_why=load_why, case_windows=list(case_windows),
                             clock_setting_windows=held)

    def busy_message(self) -> str | None:
        """The processes already on the other nodes' GPUs at session start, as the driver's own refusal
        says them (harness/node/processes.py), one block per node; None when there are none."""
        blocks = []
        for node in self.nodes:
            found = [GpuProcess(**p) for p in self.start.get(node, {}).get("processes", [])]
            if found:
                blocks.append(f"node {node}: {busy_gpu_message(found)}")
        return "\n".join(blocks) or None

    def gpu_counts(self) -> dict[str, int]:
        """host -> the GPUs its probe showed at start, for the nodes that could be read."""
        return {node: len(self.start[node].get("gpus", [])) for node in self.nodes
                if self.problem(node, "start") is None}

    def gpu_count_check(self, expected_source: str) -> Check:
        """``remote_gpu_count``: every other node shows the GPUs a node of this session must have (the
        smallest count is the measure); an unread node fails it, named."""
        counts = {node: len(self.start.get(node, {}).get("gpus", [])) for node in self.nodes}
        short, missing = [], []
        for node in self.nodes:
            why = self.problem(node, "start")
            if why is not None:
                short.append(f"{why}: its GPUs are unknown")
                missing.append(Location(node=node, detail="not read"))
            elif self.expected_gpus is not None and counts[node] < self.expected_gpus:
                gpus = self.start[node].get("gpus", [])
                shown = ", ".join(f"GPU {g['index']} {g['uuid']}" for g in gpus)
                short.append(f"node {node}: {counts[node]} usable GPUs < {self.expected_gpus} expected "
                             f"(NVML there shows: {shown or 'none'})")
                there = {g.get("index") for g in gpus}
                missing += [Location(node=node, gpu_index=index, detail="not seen by NVML")
                            for index in range(self.expected_gpus) if index not in there]
        fewest = min(counts.values()) if counts else 0
        seen = ", ".join(f"{node} {count}" for node, count in counts.items())
        bound = float(self.expected_gpus) if self.expected_gpus is not None else None
        return Check(key="remote_gpu_count", name="usable GPUs on the other nodes", kind="health",
                     measured=float(fewest), bound=bound,
                     unit="GPUs", comparison=">=", passed=not short, source=expected_source,
                     note="; ".join(short) if short else f"usable GPUs per node: {seen}", locations=tuple(missing))

    def gpu_model_check(self, driver_models: Sequence[str], profile_name: str) -> Check:
        """``remote_gpu_model``: every other node's GPUs are the model the driver's are, the model the
        profile judges; a node of another kind is not signed off against this profile."""
        models = {node: sorted({str(g.get("name")) for g in self.start.get(node, {}).get("gpus", [])})
                  for node in self.nodes if self.problem(node, "start") is None}
        expected = sorted(set(driver_models))
        other = [f"node {node}: {' + '.join(names)}" for node, names in models.items() if names and names != expected]
        note = (f"{'; '.join(other)}; the driver's node and profile {profile_name}: {' + '.join(expected)}" if other
                else f"every node read: {' + '.join(expected)}" if models
                else "no other node could be read (remote_gpu_count says why)")
        return Check(key="remote_gpu_model", name="GPU model on the other nodes", kind="health", measured=None,
                     bound=None, unit="", comparison="==", passed=(not other) if models else None,
                     source=f"the driver's node, judged with profile {profile_name}", note=note)

    def summary(self) -> dict[str, Any]:
        return {"nodes": list(self.nodes), "directory": str(self.directory), "launch_failure": self.launch_failure,
                "start": self.start, "end": self.end}


def remote_gpu_state(ctx: SessionContext) -> RemoteGpuState | None:
    """The other nodes' probe of this session, not started; None when no case uses another node."""
    nodes = judged_nodes(ctx)
    if len(nodes) < 2:
        return None
    return RemoteGpuState(nodes=nodes[1:], directory=ctx.run_dir / PROBE_DIR,
                          expected_gpus=ctx.node_gpus)


def _read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
