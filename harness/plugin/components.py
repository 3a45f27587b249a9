"""The component tests' session side: one launch of the component benchmarks (measured once, judged
per GPU and per ordered pair) and their pytest parameters. Which of them run at which level is the
components job's (harness/jobs/registry.py, harness/plugin/levels.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from harness.checks import components as checks
from harness.checks import confirm
from harness import definitions
from harness.checks.judged import not_judged
from harness.results.check import Check
from harness.checks.telemetry_checks import telemetry_checks
from harness.jobs.job import CPU_RANK_ID, gpu_id, pair_id
from harness.launch.components import ComponentsRun, ComponentsSpec, node_components_spec, run_components
from harness.node.processes import busy_gpu_message
from harness.plugin.context import SessionContext
from harness.plugin.progress import announce
from harness.plugin.results import CheckedResult
from harness.plugin.specs import launch_settings
from harness.results.job import Failure
from harness.results.telemetry_summary import TelemetrySummary, read_telemetry
from harness.catalog import GPU_GEMM_DTYPES

NO_GPU = "no GPU on a CPU run"


# --- parameters ---------------------------------------------------------------------------------


def gpu_params(ctx: SessionContext) -> list:
    """One test id per GPU (``gpu0``...), or ``cpu0``: the one CPU rank of a CPU profile."""
    if ctx.device != "cuda":
        return [pytest.param(0, id=CPU_RANK_ID)]
    return [pytest.param(gpu.index, id=gpu_id(gpu.index)) for gpu in ctx.hardware.gpus]


def pair_params(ctx: SessionContext) -> list:
    """One test id per ordered GPU pair (``gpu0-gpu1``); not applicable, with the reason, below two GPUs."""
    if ctx.device != "cuda":
        return [pytest.param(None, id="no-pairs", marks=pytest.mark.skip(reason=f"not applicable: {NO_GPU}"))]
    indices = [gpu.index for gpu in ctx.hardware.gpus]
    if len(indices) >= 2 and not peer_judged(ctx):
        return [pytest.param(None, id="no-pairs", marks=pytest.mark.skip(
            reason=f"not measured: profile {ctx.profile.name} has no peer bound ([components] min_peer_gbps); "
                   "--level long measures the peer matrix for the report"))]
    if len(indices) < 2:
        return [pytest.param(None, id="no-pairs", marks=pytest.mark.skip(
            reason=f"not applicable: {len(indices)} GPU on this node, no pair to copy between"))]
    return [pytest.param((a, b), id=pair_id(a, b)) for a in indices for b in indices if a != b]


def parametrize(metafunc: pytest.Metafunc, ctx: SessionContext | None, not_acceptance: list) -> None:
    if "component_gpu" in metafunc.fixturenames:
        metafunc.parametrize("component_gpu", not_acceptance if ctx is None else gpu_params(ctx))
    if "gpu_pair" in metafunc.fixturenames:
        metafunc.parametrize("gpu_pair", not_acceptance if ctx is None else pair_params(ctx))


# --- the one launch, judged per GPU and per pair ------------------------------------------------


def gemm_dtypes(ctx: SessionContext) -> tuple[str, ...]:
    """The GEMM dtypes this session measures: at level long every one; below it the matrix's first
    precision alone (bf16 on Hopper: 6 s instead of 19.5 s on 4 x H200, issue 28)."""
    if ctx.options.level == "long":
        return GPU_GEMM_DTYPES
    return tuple(p for p in ctx.profile.precisions if p in GPU_GEMM_DTYPES)[:1] or GPU_GEMM_DTYPES[:1]


def peer_judged(ctx: SessionContext) -> bool:
    """Whether the peer matrix runs: at level long, or where the profile bounds it (nothing is measured
    that no bound judges)."""
    bounds = ctx.profile.components
    bounded = bounds is not None and (bounds.min_peer_gbps is not None or bounds.max_peer_latency_us is not None)
    return ctx.options.level == "long" or bounded


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
class ComponentRuns:
    ctx: SessionContext
    run: ComponentsRun | None = None
    """The session's one component launch, once it ran."""
    spec: ComponentsSpec | None = field(default=None)
    confirmations: list[ComponentsRun] = field(default_factory=list)
    """The host-link re-measures, in order (``remeasured``): each a launch of the host-link part alone."""
    say: Callable[[str], None] | None = None
    """Where a re-measure is announced (plugin/progress.py: past pytest's capture); None: printed."""

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
    def no_bounds(self) -> str:
        return f"profile {self.ctx.profile.name} has no [components] bound"

    def _result(self, name: str, what: str, checks_of: list[Check], data: dict) -> CheckedResult:
        ctx, run = self.ctx, self.measured()
        bounds = ctx.profile.components
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
        rank, bounds = self._rank(index), self.ctx.profile.components
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
        found = checks.hbm_checks(rank, self.ctx.profile.components, no_bounds=self.no_bounds)
        return self._result(f"hbm-gpu{index}", f"memory bandwidth, {checks.label_of(rank)}", found,
                            {"gpu": _gpu(rank), "hbm": rank.get("hbm")})

    def host_link(self, index: int) -> CheckedResult:
        rank = self._rank(index)
        at_once = len(self.measured().result.get("ranks") or []) or 1
        found = checks.host_link_checks(rank, self.ctx.profile.components, no_bounds=self.no_bounds,
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
            attempts.append(checks.host_link_checks(rank, self.ctx.profile.components, no_bounds=self.no_bounds,
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
        found = checks.peer_checks(pairs, src, dst, self.ctx.profile.components, no_bounds=self.no_bounds)
        return self._result(f"peer-gpu{src}-gpu{dst}", f"peer copy GPU {src} -> GPU {dst}", found,
                            {"pair": [src, dst], "peer": peer})


def _gpu(rank: dict) -> dict:
    return {"index": rank.get("gpu_index"), "uuid": rank.get("gpu_uuid"), "label": checks.label_of(rank),
            **({"missing": True} if rank.get("missing") else {})}


COMPONENTS_KEY = pytest.StashKey[ComponentRuns]()


def component_runs(config: pytest.Config, ctx: SessionContext) -> ComponentRuns:
    """The session's component runs, made on first use."""
    if COMPONENTS_KEY not in config.stash:
        progress = config.pluginmanager.get_plugin("harness-progress")
        config.stash[COMPONENTS_KEY] = ComponentRuns(ctx=ctx, say=getattr(progress, "say", None))
    return config.stash[COMPONENTS_KEY]


def assert_evaluated(result: CheckedResult) -> None:
    """Fail on any missed check; skip, saying why, when no performance check could be judged (never a pass)."""
    if result.failed:
        pytest.fail(result.failure_message(), pytrace=False)
    judged = [c for c in result.checks if c.kind == "performance" and c.evaluated]
    if not judged:
        unjudged = [c.note for c in result.checks if c.kind == "performance"]
        pytest.skip(unjudged[0] if unjudged else "not evaluated: nothing measured")
