"""Re-measures of the cases in doubt, taken together (issue 28): confirm before a FAIL costs one launch
per attempt, not one per case.

Which case is in doubt and how its attempts decide it is harness/checks/confirm.py. What this adds is
when they are measured. The first test that needs attempt N launches attempt N of every other planned
single-node case that will need it too, judged ahead of its test from the records the session's launch
left waiting (the same records and bounds its test will judge, so the same doubt); each later test finds
its attempt measured. On a 2 x H100 node a launch per re-measure paid start-up and cold autotuning again,
27 s each, 215 s of one session's 417 s (docs/measurements.md, 2026-11-27).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from harness.cases import CaseId
from harness.checks import confirm
from harness.plugin.launching import CaseLauncher
from harness.records import RunRecord
from harness.results.check import Check

Judge = Callable[[CaseId, RunRecord, RunRecord | None], list[Check]]
"""A case's checks from its record and its 1-GPU reference (HarnessSession.judge)."""


@dataclass(kw_only=True)
class Confirmations:
    cases: CaseLauncher
    judge: Judge
    calibration: bool = False
    """--harness-calibration: nothing is re-measured (confirm.doubted_key)."""
    judged: set[CaseId] = field(default_factory=set)
    """Cases whose test has taken its records: never measured again ahead of it."""
    measured: dict[tuple[CaseId, int], tuple[RunRecord, RunRecord | None]] = field(default_factory=dict)
    """(case, attempt) -> (record, reference) measured ahead, waiting for the case's test."""
    say: Callable[[str], None] | None = None
    """Where a re-measure is announced (plugin/progress.py: through pytest's terminal, past its capture, so a
    long confirmation is seen while it runs); None: printed."""

    def tell(self, text: str) -> None:
        if self.say is not None:
            self.say(text)
        else:
            print(f"\nharness: {text}", flush=True)

    def remeasured(self, case: CaseId, attempt: int) -> tuple[RunRecord, RunRecord | None]:
        """Attempt ``attempt`` of ``case``: measured ahead with an earlier case's, or now, with every other
        planned case that will need this attempt too."""
        if (case, attempt) not in self.measured:
            batch = [case] + [other for other in dict.fromkeys(self.cases.planned)
                              if other != case and other not in self.judged and self.will_need(other, attempt)]
            self.tell(f"re-measuring {len(batch)} case{'s' if len(batch) > 1 else ''} in doubt together, each with "
                      f"its reference (attempt {attempt} of {confirm.MAX_REMEASURES}): "
                      + ", ".join(c.test_param for c in batch))
            self.measured.update({(c, attempt): pair for c, pair in
                                  self.cases.remeasure_together(batch, attempt).items()})
        return self.measured.pop((case, attempt))

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
            if confirm.direct_failure(attempts[-1].checks) or confirm.agree(attempts, key):
                return False
        return True

    def attempt(self, case: CaseId, record: RunRecord, reference: RunRecord | None) -> confirm.Attempt:
        return confirm.Attempt(record=record, baseline=reference, checks=self.judge(case, record, reference))
