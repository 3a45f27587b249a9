"""The session's all-reduce sweeps and topology reading, each measured once and judged per test.

The topology test reads PCIe links under load from the component launch's GEMM window (every GPU busy
at once, at every level), so the quick level needs no all-reduce launch for it: a busy GPU trains its
link to the top generation whatever keeps it busy (the DDP windows of docs/data show Gen5 x16 on every
GPU, as the all-reduce sweeps did).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol
from dataclasses import dataclass, field

from harness import definitions
from harness.checks.judged import not_judged
from harness.jobs.job import KindRunner
from harness.kinds.interconnect import launch
from harness.kinds.interconnect.bounds import INTERCONNECT_BOUNDS, TOPOLOGY_BOUNDS
from harness.kinds.interconnect.busbw import default_max_bytes
from harness.kinds.interconnect.params import planned_allreduce
from harness.kinds.interconnect.checks import allreduce_checks, pcie_under_load, topology_checks
from harness.kinds.interconnect.spec import ALLREDUCE_SWEEP, AllReduceSpec
from harness.launch import prestart
from harness.launch.command import launch_command
from harness.node.processes import busy_gpu_message
from harness.node.topology import read_topology
from harness.plugin.context import SessionContext
from harness.plugin.results import CheckedResult
from harness.plugin.specs import launch_settings
from harness.results.job import Failure, JobResult
from harness.results.telemetry_summary import read_telemetry


def allreduce_spec(ctx: SessionContext, gpus: int) -> AllReduceSpec:
    """The all-reduce sweep on ``gpus`` GPUs (CPU ranks), up to what the smallest GPU's memory allows."""
    memory_gib = min((gpu.memory_total_gib for gpu in ctx.hardware.gpus), default=None)
    min_bytes, factor, target_seconds = ALLREDUCE_SWEEP[ctx.device]
    return AllReduceSpec(min_bytes=min_bytes, max_bytes=default_max_bytes(ctx.device, memory_gib), factor=factor,
                         target_seconds=target_seconds, launch=launch_settings(ctx, gpus))


class LoadLaunch(Protocol):
    """The launch the topology reads its PCIe links under: the component tests' runner (``harness.runner(
    "components")``), named by what it offers, since a kind's folder imports no other kind's."""

    def measured(self) -> JobResult: ...


@dataclass(kw_only=True)
class InterconnectRuns(KindRunner):
    ctx: SessionContext
    sweeps: dict[int, launch.AllReduceRun] = field(default_factory=dict)
    """GPU count -> the all-reduce sweep on that many GPUs, measured once per session."""
    topology: dict | None = None
    """What NVML said about the links (harness.node.topology.read_topology), once read."""
    started: dict[int, prestart.Started] = field(default_factory=dict)
    """GPU count -> its sweep's launch, started with the session (``start_early``) until the sweep takes it."""

    def start_early(self, items: Sequence[Any]) -> None:
        """Start the sweeps the collected ``items`` will ask for, now."""
        self.start_sweeps_early(planned_allreduce(list(items)))

    def launches_s(self) -> dict[str, float]:
        return {f"all-reduce {gpus} GPUs": run.elapsed_s or 0.0 for gpus, run in self.sweeps.items()}

    def start_sweeps_early(self, counts: list[int]) -> None:
        """Start the sweeps of ``counts`` GPUs now (issue 28): their workers start and import torch while the
        component launch measures, touching no GPU until their plan (harness/launch/prestart.py); ~9 s of each
        sweep's 14 s on 4 x H100 was start-up. ``--harness-prestart`` says where (auto: on GPUs)."""
        ctx = self.ctx
        if not ctx.options.starts_early(ctx.device):
            return
        for gpus in counts:
            spec = allreduce_spec(ctx, gpus)
            if gpus in self.started or gpus in self.sweeps or spec.launch.nodes != 1:
                continue
            run_dir = ctx.log_dir(spec.case_id)
            self.started[gpus] = prestart.start_early(spec.launch, launch_command(spec, run_dir), run_dir,
                                                      f"{ctx.run_id}-{spec.case_id}")

    def sweep(self, gpus: int) -> launch.AllReduceRun:
        """The all-reduce sweep on ``gpus`` GPUs (CPU ranks): measured once per session."""
        if gpus not in self.sweeps:
            ctx = self.ctx
            spec = allreduce_spec(ctx, gpus)
            run_id = f"{ctx.run_id}-{spec.case_id}"
            busy = ctx.busy_gpus(gpus)
            started = self.started.pop(gpus, None)
            if busy:
                if started is not None:
                    started.stop()
                self.sweeps[gpus] = launch.AllReduceRun(gpus=gpus, run_id=run_id, status="failed",
                                                           failure=Failure(reason=busy_gpu_message(busy)))
            else:
                self.sweeps[gpus] = launch.run_allreduce(spec, ctx.log_dir(spec.case_id), run_id=run_id,
                                                            started=started)
        return self.sweeps[gpus]

    def run_allreduce(self, gpus: int) -> CheckedResult:
        ctx = self.ctx
        run = self.sweep(gpus)
        bounds = ctx.profile.table(INTERCONNECT_BOUNDS)
        checks = not_judged(allreduce_checks(run, bounds, missing_note=ctx.telemetry_note()),
                            definitions.mismatch("allreduce", ctx.profile.definitions))
        return CheckedResult(name=f"allreduce-{gpus}gpu",
                             context=f"{ctx.profile.name}, all-reduce, {gpus} {ctx.rank_unit}s",
                             checks=checks, bounds=bounds.to_dict() if bounds is not None else None,
                             log_dir=ctx.log_dir(f"allreduce-{gpus}gpu"),
                             data={"interconnect": run.to_dict(),
                                   "record": {"run_id": run.run_id, "telemetry": run.telemetry}})

    def run_topology_under(self, components: LoadLaunch) -> CheckedResult:
        """The topology, its PCIe links read under the component launch's GEMM load (``components``: the
        session's, ``harness.runner("components")``; launched there if no component test ran it yet)."""
        return self.run_topology(components.measured(), "the component launch's GEMM window")

    def run_topology(self, load: JobResult, load_name: str) -> CheckedResult:
        """NVLink, P2P and PCIe of every GPU against [topology]; PCIe read from ``load``'s telemetry
        (``load_name`` says which launch it was, in the record and in a missing reading's note)."""
        ctx = self.ctx
        gpus = ctx.hardware.gpu_count
        self.topology = read_topology(ctx.hardware.gpus)
        telemetry = read_telemetry(load.telemetry)
        loaded = pcie_under_load(telemetry)
        why = load.why or telemetry.why_not(ctx.telemetry_note())
        self.topology["pcie_under_load"] = loaded
        self.topology["pcie_load"] = load_name
        bounds = ctx.profile.table(TOPOLOGY_BOUNDS)
        checks = topology_checks(self.topology, bounds, loaded,
                                 load_note=f"no PCIe reading under load ({load_name}): {why}")
        return CheckedResult(name="topology", context=f"{ctx.profile.name}, topology, {gpus} GPUs", checks=checks,
                             bounds=bounds.to_dict() if bounds is not None else None,
                             data={"topology": self.topology})

    def summary(self) -> dict | None:
        """``interconnect`` of session.json and report.json; None when nothing was measured."""
        if not self.sweeps and not self.topology:
            return None
        return launch.session_summary(self.sweeps, self.topology)
