"""The session's burn-in (``--soak DURATION``): the profile's most compute-heavy case on every GPU."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from harness.catalog import MODELS
from harness.plugin.context import SessionContext
from harness.plugin.results import CheckedResult
from harness.plugin.specs import launch_settings, warmup_seconds
from harness.jobs.job import KindRunner
from harness.kinds.soak import launch
from harness.kinds.soak.bounds import SOAK_BOUNDS
from harness.kinds.soak.checks import soak_checks
from harness.kinds.soak.options import SOAK_OPTION
from harness.kinds.soak.spec import SoakSpec
from harness.profile.bounds import Profile


def heaviest_case(profile: Profile) -> tuple[str, str]:
    """(model, precision) with the most training FLOPs per sample among the profile's bounded cases:
    the one that works the GPUs hardest (the first listed on ties)."""
    pairs = [(m, p) for m in profile.models for p in profile.precisions if profile.bounds(m, p) is not None]
    return max(pairs, key=lambda pair: MODELS[pair[0]].train_flops_per_sample)


def soak_spec(ctx: SessionContext, model: str, precision: str) -> SoakSpec:
    """The soak of ``model`` x ``precision`` on every GPU (on a CPU profile: its largest usable rank count)."""
    profile, duration_s = ctx.profile, ctx.options.of(SOAK_OPTION.name)
    bounds = profile.bounds(model, precision)
    assert bounds is not None and duration_s is not None
    counts = [n for n in profile.gpu_counts if n <= ctx.available_gpus]
    gpus = ctx.hardware.gpu_count if ctx.device == "cuda" else max(counts, default=1)
    return SoakSpec(model=model, precision=precision, batch_size_per_gpu=bounds.batch_size_per_gpu,
                    duration_s=duration_s, warmup_seconds=warmup_seconds(ctx),
                    launch=launch_settings(ctx, gpus))


@dataclass(kw_only=True)
class SoakRunner(KindRunner):
    ctx: SessionContext
    run: launch.SoakRun | None = None
    """The soak of this session, once it ran."""
    say: Callable[[str], None] | None = None
    """Where the soak's state goes every minute while it runs (plugin/progress.py); None: nowhere."""

    def connect(self, say: Callable[[str], None]) -> None:
        self.say = say

    @property
    def duration_s(self) -> float | None:
        """How long the session's soak runs (``--soak``); None: it does not (its test is skipped)."""
        duration: float | None = self.ctx.options.of(SOAK_OPTION.name)
        return duration

    def spec(self) -> SoakSpec:
        return soak_spec(self.ctx, *heaviest_case(self.ctx.profile))

    def run_soak(self) -> CheckedResult:
        ctx = self.ctx
        spec = self.spec()
        run = launch.run_soak(spec, ctx.log_dir(spec.case_id), run_id=f"{ctx.run_id}-{spec.case_id}",
                            on_progress=self.say)
        self.run = run
        bounds = ctx.profile.table(SOAK_BOUNDS)
        checks = soak_checks(run, bounds, ctx.profile.bounds(spec.model, spec.precision),
                             missing_note=ctx.telemetry_note())
        ranks = f"{spec.world_size} {ctx.rank_unit}{'' if spec.world_size == 1 else 's'}"
        return CheckedResult(name=spec.case_id, checks=checks, log_dir=ctx.log_dir(spec.case_id),
                             bounds=bounds.to_dict() if bounds is not None else None,
                             context=f"{ctx.profile.name}, soak {spec.model} {spec.precision}, {ranks}, "
                                     f"{run.spec.duration_s:.0f} s",
                             data={"soak": run.to_dict(), "record": {"run_id": run.run_id, "telemetry": run.telemetry}})

    def summary(self) -> dict | None:
        return self.run.to_dict() if self.run is not None else None

    def launches_s(self) -> dict[str, float]:
        """The soak's launch, once it ran, for the session's time line."""
        return {"soak": self.run.elapsed_s or 0.0} if self.run is not None else {}
