"""Re-measures of the cases in doubt, taken together (issue 28): confirm before a FAIL costs one launch
per attempt, not one per case.

Which case is in doubt and how its attempts decide it is harness/checks/confirm.py. What this adds is
when they are measured. The first test that needs attempt N launches attempt N of every other planned
single-node case that will need it too, judged ahead of its test from the records the session's launch
left waiting (the same records and bounds its test will judge, so the same doubt); each later test finds
its attempt measured. On a 2 x H100 node a launch per re-measure paid start-up and cold autotuning again,
27 s each, 215 s of one session's 417 s (docs/measurements.md, 2026-11-27).

Where it can, no launch is started for them at all: the session's grouped launch holds after its planned
cases (launch/group.py), and this hands it each attempt's re-measures as follow-ons (``next_runs``), judged
from the records it just wrote, so they run on the same processes, warm, before any test has asked. A launch
that could not hold (it failed, or a case was not in it) leaves its attempts to ``remeasured``, as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from harness.cases import CaseId
from harness.checks import confirm
from harness.kinds.ddp_scaling.launcher import CaseLauncher, Runs
from harness.plugin.progress import announce
from harness.records import RunRecord
from harness.results.check import Check

Judge = Callable[[CaseId, RunRecord, RunRecord | None], list[Check]]
"""A case's checks from its record and its 1-GPU reference (HarnessSession.judge)."""


@dataclass(kw_only=True)
class Confirmations:
    cases: CaseLauncher
    judge: Judge
    calibration: bool = False
    """--harness-calibration: a case is re-measured only where its window never settled (confirm.WINDOW)."""
    judged: set[CaseId] = field(default_factory=set)
    """Cases whose test has taken its records: never measured again ahead of it."""
    measured: dict[tuple[CaseId, int], tuple[RunRecord, RunRecord | None]] = field(default_factory=dict)
    """(case, attempt) -> (record, reference) measured ahead, waiting for the case's test."""
    handed: dict[tuple[CaseId, int], tuple[str, str | None]] = field(default_factory=dict)
    """(case, attempt) -> labels of (its run, its reference's) handed to a holding launch as follow-ons."""
    taken: set[tuple[CaseId, int]] = field(default_factory=set)
    """(case, attempt) whose measured pair a test has taken: never put back."""
    say: Callable[[str], None] | None = None
    """Where a re-measure is announced (plugin/progress.py: through pytest's terminal, past its capture, so a
    long confirmation is seen while it runs); None: printed."""

    def tell(self, text: str) -> None:
        announce(self.say, text)

    def remeasured(self, case: CaseId, attempt: int) -> tuple[RunRecord, RunRecord | None]:
        """Attempt ``attempt`` of ``case``: measured ahead with an earlier case's, or now, with every other
        planned case that will need this attempt too."""
        if (case, attempt) not in self.measured:
            batch = [case] + [other for other in self.waiting(attempt) if other != case]
            self.tell(f"re-measuring {len(batch)} case{'s' if len(batch) > 1 else ''} in doubt together, each with "
                      f"its reference (attempt {attempt} of {confirm.MAX_REMEASURES}): "
                      + ", ".join(c.test_param for c in batch))
            self.measured.update({(c, attempt): pair for c, pair in
                                  self.cases.remeasure_together(batch, attempt).items()})
        self.taken.add((case, attempt))
        return self.measured.pop((case, attempt))

    def next_runs(self, done: dict[str, RunRecord]) -> Runs:
        """The holding launch's next follow-on (launcher.FollowOns): the lowest attempt that any
        planned case not yet judged will need, for every such case, each after its reference; [] when none
        will (the launch ends). ``done``: the launch's every record so far, by label."""
        self.took(done)
        for attempt in range(1, confirm.MAX_REMEASURES + 1):
            batch = self.waiting(attempt)
            if not batch:
                continue
            self.tell(f"re-measuring {len(batch)} case{'s' if len(batch) > 1 else ''} in doubt in the session's "
                      f"launch, warm, each with its reference (attempt {attempt} of {confirm.MAX_REMEASURES}): "
                      + ", ".join(c.test_param for c in batch))
            labels, runs = self.cases.remeasure_plan(batch, attempt)
            self.handed.update({(case, attempt): pair for case, pair in labels.items()})
            return runs
        return []

    def waiting(self, attempt: int) -> list[CaseId]:
        """The planned cases, in test order, that no test has judged yet, that hold no measure of ``attempt`` (none
        measured ahead, none handed to a holding launch) and whose tests will ask for it (``will_need``: a
        multi-node case never, its records are not peeked)."""
        return [case for case in dict.fromkeys(self.cases.planned)
                if case not in self.judged and (case, attempt) not in self.measured
                and (case, attempt) not in self.handed and self.will_need(case, attempt)]

    def took(self, done: dict[str, RunRecord]) -> None:
        """The pairs of every handed (case, attempt) whose runs are in ``done``, waiting for the case's test."""
        for key, (label, reference) in self.handed.items():
            if key not in self.measured and key not in self.taken and label in done and (
                    reference is None or reference in done):
                self.measured[key] = done[label], done[reference] if reference is not None else None

    def will_need(self, case: CaseId, attempt: int) -> bool:
        """Whether ``case``'s test, judging the records measured so far, will ask for ``attempt``: its first
        figure is in doubt, and no earlier attempt settled it (HarnessSession.confirmed's rule)."""
        first = self.cases.peek(case)
        if first is None:
            return False
        attempts = [self.attempt(case, *first)]
        key = confirm.doubted_key(attempts[0].checks, *first, calibration=self.calibration)
        if key is None:
            return False
        for earlier in range(1, attempt):
            pair = self.measured.get((case, earlier))
            if pair is None:
                return False
            attempts.append(self.attempt(case, *pair))
            if confirm.direct_failure(attempts[-1].checks) or confirm.settles(attempts, key):
                return False
        return True

    def attempt(self, case: CaseId, record: RunRecord, reference: RunRecord | None) -> confirm.Attempt:
        return confirm.Attempt(record=record, baseline=reference, checks=self.judge(case, record, reference))
