"""From the profile and the command line to what is launched: the launch settings every kind's spec holds, and
the DDP benchmark's spec (a kind's own spec is built in its folder, harness/kinds/<kind>/runner.py).

The durations come from the profile's ``[run]`` table (harness.profile.bounds.RunSettings holds
their defaults), overridden by the command line; the stall and telemetry settings from the
options (their defaults are harness.launch.spec's). Every spec holds one ``LaunchSettings`` made by
``launch_settings``. Nothing here launches anything.
"""

from __future__ import annotations

from pathlib import Path

from harness.cases import CaseId
from harness.launch.spec import BenchmarkSpec, LaunchSettings
from harness.plugin.context import SessionContext
from harness.plugin.options import HarnessOptions
from harness.workloads.compilecache import cache_env, default_cache_root

def compile_env(options: HarnessOptions) -> dict[str, str]:
    """The environment that keeps torch.compile's caches where the next run finds them."""
    if not options.compile:
        return {}
    return cache_env(Path(options.compile_cache or default_cache_root()).resolve())


def ci_target(ctx: SessionContext) -> float:
    chosen = ctx.options.ci_target
    return chosen if chosen is not None else ctx.profile.run.ci_target


def warmup_seconds(ctx: SessionContext) -> float:
    return ctx.options.warmup_seconds or ctx.profile.run.warmup_seconds


def launch_settings(ctx: SessionContext, gpus_per_node: int, *, nodes: int = 1,
                    extra_env: dict[str, str] | None = None) -> LaunchSettings:
    """How this session launches a job on ``gpus_per_node`` GPUs (per node): device, time bounds, telemetry."""
    options = ctx.options
    return LaunchSettings(
        gpus_per_node=gpus_per_node, nodes=nodes, device=ctx.device,
        timeout_s=options.timeout_s or ctx.profile.run.timeout_seconds,
        stall_factor=options.stall_factor, stall_floor_s=options.stall_floor_s, extra_env=extra_env or {},
        telemetry=options.telemetry, telemetry_period_s=options.telemetry_period_s)


def independent_gpus(ctx: SessionContext) -> int:
    """On how many GPUs a 1-GPU case runs at once, each its own: every GPU of the node (on a CPU
    profile, the most ranks its matrix runs on this host, so the mode is exercised there too)."""
    if ctx.device == "cuda":
        return max(1, ctx.available_gpus)
    return max((n for n in ctx.profile.gpu_counts if n <= ctx.available_gpus), default=1)


def benchmark_spec(ctx: SessionContext, case: CaseId, gpus_per_node: int | None = None) -> BenchmarkSpec:
    """The launch of ``case`` (on ``gpus_per_node`` GPUs, when given: a baseline's).

    A 1-GPU case of one node runs on every GPU at once, each GPU training its own model
    (``independent``): each GPU is judged on its own rate, and the wider cases' baseline is the
    median of them, not one GPU's run.
    """
    bounds = ctx.profile.bounds(case.model, case.precision)
    assert bounds is not None, f"{case.key}: the plugin launches only cases the profile bounds"
    run, options = ctx.profile.run, ctx.options
    independent = gpus_per_node is None and case.world_size == 1
    gpus = gpus_per_node if gpus_per_node is not None else independent_gpus(ctx) if independent else case.gpus
    return BenchmarkSpec(
        model=case.model, precision=case.precision, scaling=case.scaling,
        batch_size_per_gpu=bounds.batch_size_per_gpu if case.scaling == "weak" else None,
        global_batch_size=bounds.strong_global_batch_size if case.scaling == "strong" else None,
        warmup_seconds=warmup_seconds(ctx), measure_seconds=options.measure_seconds or run.measure_seconds,
        ci_target=ci_target(ctx),
        max_measure_seconds=max(run.max_measure_seconds, options.measure_seconds or 0)
        if run.max_measure_seconds else None,
        peak_tflops=ctx.profile.peak_tflops.get(case.precision), compile=options.compile, independent=independent,
        launch=launch_settings(ctx, gpus, nodes=case.nodes, extra_env=compile_env(options)))
