"""The DDP scaling kind's session side: the session's grouped launches of the benchmark cases (launcher.py), the
re-measures of the cases in doubt (confirming.py), and each case judged against the profile's bounds (checks.py).
The session holds it as the kind's runner (job.py ``DDP_SCALING``); the tests reach it as
``harness.runner("scaling")`` and keep what ``run`` returns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness import definitions
from harness.cases import CaseId
from harness.checks import confirm
from harness.checks.judged import not_judged
from harness.checks.straggler import name_straggler
from harness.jobs.job import GpuStateWatch, KindRunner
from harness.kinds.ddp_scaling import checks as scaling_checks
from harness.kinds.ddp_scaling.confirming import Confirmations
from harness.kinds.ddp_scaling.launcher import CaseLauncher
from harness.kinds.ddp_scaling.params import planned_cases
from harness.plugin.context import SessionContext
from harness.plugin.results import CaseResult
from harness.profile.bounds import CaseBounds
from harness.records import RunRecord
from harness.results.check import Check

SECTION = "scaling"
"""The kind's runner key (``harness.runner("scaling")``). It writes no section of session.json: each test's result
carries its case's record and checks, and the records are the run directory's runs/."""


@dataclass(kw_only=True)
class ScalingRuns(KindRunner):
    ctx: SessionContext
    cases: CaseLauncher = field(init=False)
    confirmations: Confirmations = field(init=False)
    """Re-measures of the cases in doubt, one launch per attempt (confirming.py)."""
    watch: GpuStateWatch | None = None
    """The session's GPU-state watch: what a case's window saw besides its checks (``attach``)."""

    def __post_init__(self) -> None:
        self.cases = CaseLauncher(ctx=self.ctx)
        self.confirmations = Confirmations(cases=self.cases, judge=self.judge,
                                           calibration=self.ctx.options.calibration)
        self.cases.follow_ons = self.confirmations

    def connect(self, say: Callable[[str], None]) -> None:
        self.confirmations.say = say

    def attach(self, watch: GpuStateWatch) -> None:
        self.watch = watch

    def start_early(self, items: Sequence[Any]) -> None:
        """Remember which cases will run, so a launch can take the others of its GPU count along, and start the
        session's first grouped launch now (launcher.py ``start_early``)."""
        self.cases.planned.extend(planned_cases(list(items)))
        self.cases.start_early()

    def bounds_of(self, case: CaseId) -> CaseBounds:
        """The profile's bounds of ``case``; collection skips a case without any (params.py), so none here is a
        bug, said as one."""
        bounds = self.ctx.profile.bounds(case.model, case.precision)
        if bounds is None:
            raise RuntimeError(f"{case.key}: profile {self.ctx.profile.name} has no bounds for this case")
        return bounds

    def run(self, case: CaseId) -> CaseResult:
        """Launch (or find launched) ``case`` and its baseline; judge it against the profile's bounds."""
        bounds = self.bounds_of(case)
        record, baseline = self.cases.record_and_baseline(case)
        # Judged from here on: no attempt of it is measured ahead any more (its own test asks for them). Not
        # before the launch that measures it, whose follow-ons re-measure it with the others in doubt.
        self.confirmations.judged.add(case)
        checks = self.judge(case, record, baseline)
        key = confirm.doubted_key(checks, record, baseline, calibration=self.ctx.options.calibration)
        if key is not None:
            record, baseline, checks = self.confirmed(case, key, confirm.Attempt(record=record, baseline=baseline,
                                                                                 checks=checks))
        seen = self.watch.seen_in_window(record.telemetry) if self.watch is not None else []
        return CaseResult(case=case, record=record, checks=checks,
                          baseline_run_id=baseline.run_id if baseline is not None else None,
                          context=self.ctx.describe(case), log_dir=self.ctx.log_dir(self.cases.spec_for(case).case_id),
                          bounds=bounds.to_dict(), bounds_inherited=list(bounds.inherited), seen_in_window=seen)

    def judge(self, case: CaseId, record: RunRecord, baseline: RunRecord | None) -> list[Check]:
        bounds = self.bounds_of(case)
        rules = scaling_checks.weak_scaling_checks if case.scaling == "weak" else scaling_checks.strong_scaling_checks
        checks = name_straggler(rules(record, baseline, bounds, telemetry_note=self.ctx.telemetry_note()), record)
        return not_judged(checks, definitions.mismatch("training", self.ctx.profile.definitions))

    def confirmed(self, case: CaseId, key: str, first: confirm.Attempt) -> tuple[RunRecord, RunRecord | None,
                                                                                  list[Check]]:
        """A case whose ``key`` check is in doubt, measured again with its reference until two attempts
        agree or MAX_REMEASURES are spent, and judged on the median attempt (harness/checks/confirm.py)."""
        attempts = [first]
        for attempt in range(1, confirm.MAX_REMEASURES + 1):
            ci = f"CI ±{confirm.noise(first.record, first.baseline):.1%}"
            self.confirmations.tell(
                (f"{case.test_param}: its window never settled ({ci})" if key == confirm.WINDOW else
                 f"{case.test_param}: {key} in doubt ({ci}"
                 f"{', window never settled' if confirm.unsettled(attempts[-1].record) else ''})")
                + f": re-measured with its reference ({attempt} of {confirm.MAX_REMEASURES})")
            record, baseline = self.confirmations.remeasured(case, attempt)
            checks = self.judge(case, record, baseline)
            if confirm.direct_failure(checks):
                return record, baseline, checks  # a run that fails on re-measure is a finding of its own
            attempts.append(confirm.Attempt(record=record, baseline=baseline, checks=checks))
            if confirm.settles(attempts, key):
                break
        chosen, checks = confirm.decide(attempts, key)
        return chosen.record, chosen.baseline, checks
