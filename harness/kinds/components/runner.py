"""The component tests' session side: one launch of the component benchmarks, measured once and judged per GPU
and per ordered pair. The session holds it as the components job's runner (job.py ``COMPONENTS``), and the tests
reach it as ``harness.runner("components")``; their pytest parameters are the job's (params.py),
which of them run at which level the job's (harness/plugin/levels.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from harness.kinds.components import checks
from harness.kinds.components.bounds import COMPONENTS_BOUNDS, ComponentBounds
from harness.checks import confirm
from harness import definitions
from harness.checks.judged import not_judged
from harness.results.check import Check
from harness.checks.telemetry_checks import telemetry_checks
from harness.jobs.job import KindRunner
from harness.kinds.components.launch import ComponentsRun, ComponentsSpec, node_components_spec, run_components
from harness.node.processes import busy_gpu_message
from harness.kinds.components.params import peer_judged
from harness.plugin.context import SessionContext
from harness.plugin.progress import announce
from harness.plugin.results import CheckedResult
from harness.plugin.specs import launch_settings
from harness.results.job import Failure
from harness.results.telemetry_summary import TelemetrySummary, read_telemetry
from harness.catalog import GPU_GEMM_DTYPES


def gemm_dtypes(ctx: SessionContext) -> tuple[str, ...]:
    """The GEMM dtypes this session measures: at level long every one; below it the matrix's first
    precision alone (bf16 on Hopper: 6 s instead of 19.5 s on 4 x H200, issue 28)."""
    if ctx.options.level == "long":
        return GPU_GEMM_DTYPES
    return tuple(p for p in ctx.profile.precisions if p in GPU_GEMM_DTYPES)[:1] or GPU_GEMM_DTYPES[:1]


def components_spec(ctx: SessionContext) -> ComponentsSpec:
    """Every GPU of the node at once; one rank on a CPU profile (its figures are a self-check)."""
    return node_components_spec(ctx.device, ctx.hardware.gpus, lambda gpus: launch_settings(ctx, gpus),
                                gemm_dtypes=gemm_dtypes(ctx), peer=peer_judged(ctx))


def _one_gpu(telemetry: dict | None, uuid: str | None) -> TelemetrySummary:
    """The launch's telemetry narrowed to one GPU, so a throttling GPU fails its own test only."""
    summary = read_telemetry(telemetry)
    if uuid is None:
        return summary
    return dataclasses.replace(summary, gpus=tuple(gpu for gpu in summary.gpus if gpu.uuid == uuid))


@dataclass(kw_only=True)
class ComponentRuns(KindRunner):
    ctx: SessionContext
    run: ComponentsRun | None = None
    """The session's one component launch, once it ran."""
    spec: ComponentsSpec | None = field(default=None)
    confirmations: list[ComponentsRun] = field(default_factory=list)
    """The host-link re-measures, in order (``remeasured``): each a launch of the host-link part alone."""
    say: Callable[[str], None] | None = None
    """Where a re-measure is announced (plugin/progress.py: past pytest's capture); None: printed."""

    def connect(self, say: Callable[[str], None]) -> None:
        self.say = say

    def launches_s(self) -> dict[str, float]:
        """The component launch and each host-link re-measure, once the launch ran. It writes no section of
        session.json (``summary`` None): each test's result carries its GPU's figures."""
        if self.run is None:
            return {}
        return {"components": self.run.elapsed_s or 0.0,
                **{f"host-link re-measure {number}": run.elapsed_s or 0.0
                   for number, run in enumerate(self.confirmations, start=1)}}

    def tell(self, text: str) -> None:
        announce(self.say, text)

    def measured(self) -> ComponentsRun:
        if self.run is None:
            ctx = self.ctx
            self.spec = spec = components_spec(ctx)
            run_id = f"{ctx.run_id}-{spec.case_id}"
            busy = ctx.busy_gpus(spec.world_size)
            self.run = (ComponentsRun(run_id=run_id, status="failed", failure=Failure(reason=busy_gpu_message(busy)))
                        if busy else run_components(spec, ctx.log_dir(spec.case_id), run_id=run_id))
        return self.run

    @property
    def bounds(self) -> ComponentBounds | None:
        """The profile's ``[components]``; None: it has none (every component check then not evaluated)."""
        return self.ctx.profile.table(COMPONENTS_BOUNDS)

    @property
    def no_bounds(self) -> str:
        return f"profile {self.ctx.profile.name} has no [components] bound"

    def _result(self, name: str, what: str, checks_of: list[Check], data: dict) -> CheckedResult:
        ctx, run = self.ctx, self.measured()
        bounds = self.bounds
        found = [checks.completed_check(run.status, run.why)]
        if run.status == "ok":
            gpu = data.get("gpu") or {}
            if gpu.get("missing"):
                found.append(checks.reported_check(gpu.get("label", "?"), checks.location_of(
                    {"gpu_index": gpu.get("index"), "gpu_uuid": gpu.get("uuid")})))
            found += not_judged(checks_of, definitions.mismatch("components", ctx.profile.definitions))
        assert self.spec is not None
        return CheckedResult(name=name, context=f"{ctx.profile.name}, {what}", checks=found,
                             bounds=bounds.to_dict() if bounds is not None else None,
                             log_dir=ctx.log_dir(self.spec.case_id),
                             data={"components": data, "record": {"run_id": run.run_id}})

    def _rank(self, index: int) -> dict:
        """The figures of the rank on GPU ``index`` (matched by UUID where known); a GPU without any is marked."""
        uuid = next((g.uuid for g in self.ctx.hardware.gpus if g.index == index), None)
        found = self.measured().rank_of_gpu(index, uuid)
        if found is not None:
            return found
        return {"gpu_index": index if self.ctx.device == "cuda" else None, "gpu_uuid": uuid, "rank": index,
                "missing": True}

    def gemm(self, index: int) -> CheckedResult:
        rank, bounds = self._rank(index), self.bounds
        assert self.spec is not None
        found = checks.gemm_checks(rank, self.spec.sizes.gemm_dtypes, bounds, self.ctx.profile.peak_tflops,
                                   no_bounds=self.no_bounds)
        if self.ctx.device == "cuda":
            found += telemetry_checks(_one_gpu(self.measured().telemetry, rank.get("gpu_uuid")),
                                      missing_note=self.ctx.telemetry_note())
        return self._result(f"gemm-gpu{index}", f"GEMM, {checks.label_of(rank)}", found,
                            {"gpu": _gpu(rank), "gemm": rank.get("gemm")})

    def hbm(self, index: int) -> CheckedResult:
        rank = self._rank(index)
        found = checks.hbm_checks(rank, self.bounds, no_bounds=self.no_bounds)
        return self._result(f"hbm-gpu{index}", f"memory bandwidth, {checks.label_of(rank)}", found,
                            {"gpu": _gpu(rank), "hbm": rank.get("hbm")})

    def host_link(self, index: int) -> CheckedResult:
        rank = self._rank(index)
        at_once = len(self.measured().result.get("ranks") or []) or 1
        found = checks.host_link_checks(rank, self.bounds, no_bounds=self.no_bounds,
                                        gpus_at_once=at_once)
        doubted = confirm.doubted_host_link(found)
        remeasured: list[str] = []
        if doubted and not self.ctx.options.calibration:
            found, remeasured = self.confirmed(index, found, frozenset(c.key for c in doubted), at_once)
        keep = ("numa_node", "cpu_affinity", "bound", "binding_note", "host")
        return self._result(f"host-link-gpu{index}", f"host link, {checks.label_of(rank)}", found,
                            {"gpu": _gpu(rank), "gpus_at_once": at_once, **{k: rank.get(k) for k in keep},
                             **({"remeasured_by": remeasured} if remeasured else {})})

    def confirmed(self, index: int, first: list[Check], keys: frozenset[str], at_once: int
                  ) -> tuple[list[Check], list[str]]:
        """Confirm before a FAIL (issue 27), for the host link: its copies measured again on every GPU at once
        (a launch of the host-link part alone, shared by every GPU's test), up to MAX_REMEASURES times until two
        attempts agree, each of ``keys`` judged on its median attempt. (checks, the re-measures' run ids)."""
        attempts, used = [first], []
        for attempt in range(1, confirm.MAX_REMEASURES + 1):
            run = self.remeasured(attempt)
            if run.status != "ok":
                break  # judged on what was measured; the failed re-measure is in its own log directory
            used.append(run.run_id)
            rank = run.rank_of_gpu(index, self._rank(index).get("gpu_uuid")) or {}
            attempts.append(checks.host_link_checks(rank, self.bounds, no_bounds=self.no_bounds,
                                                    gpus_at_once=at_once))
            if confirm.checks_agree(attempts, keys):
                break
        return confirm.decide_checks(attempts, keys), used

    def remeasured(self, attempt: int) -> ComponentsRun:
        """Re-measure ``attempt`` of the host link on every GPU at once: launched once, for every GPU in doubt."""
        while len(self.confirmations) < attempt:
            ctx, number = self.ctx, len(self.confirmations) + 1
            assert self.spec is not None
            spec = dataclasses.replace(self.spec, parts=("host",))
            name = f"{spec.case_id}-host-confirm{number}"
            self.tell(f"host link in doubt: its copies re-measured on every GPU at once ({number} of "
                      f"{confirm.MAX_REMEASURES})")
            busy = ctx.busy_gpus(spec.world_size)
            self.confirmations.append(
                ComponentsRun(run_id=f"{ctx.run_id}-{name}", status="failed", failure=Failure(
                    reason=busy_gpu_message(busy))) if busy else run_components(spec, ctx.log_dir(name),
                                                                                run_id=f"{ctx.run_id}-{name}"))
        return self.confirmations[attempt - 1]

    def peer(self, src: int, dst: int) -> CheckedResult:
        peer = self.measured().result.get("peer") or {}
        pairs = peer.get("pairs") or []
        found = checks.peer_checks(pairs, src, dst, self.bounds, no_bounds=self.no_bounds)
        return self._result(f"peer-gpu{src}-gpu{dst}", f"peer copy GPU {src} -> GPU {dst}", found,
                            {"pair": [src, dst], "peer": peer})


def _gpu(rank: dict) -> dict:
    return {"index": rank.get("gpu_index"), "uuid": rank.get("gpu_uuid"), "label": checks.label_of(rank),
            **({"missing": True} if rank.get("missing") else {})}


def assert_evaluated(result: CheckedResult) -> None:
    """Fail on any missed check; skip, saying why, when no performance check could be judged (never a pass)."""
    if result.failed:
        pytest.fail(result.failure_message(), pytrace=False)
    judged = [c for c in result.checks if c.kind == "performance" and c.evaluated]
    if not judged:
        unjudged = [c.note for c in result.checks if c.kind == "performance"]
        pytest.skip(unjudged[0] if unjudged else "not evaluated: nothing measured")
