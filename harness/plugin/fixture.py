"""What an acceptance test gets as its ``harness`` fixture: the session, bound to this test.

The tests in acceptance/ stay short: ``result = harness.keep(harness.runner("scaling").run(case))`` then
``harness.assert_passed(result)``. Each result is kept for report.json (through the item's stash)
and for session.json (in the session, by node id).
"""

from __future__ import annotations

import pytest

from typing import Any, TypeVar

from harness.plugin.options import HarnessOptions
from harness.plugin.results import CaseResult, CheckedResult
from harness.plugin.session import HarnessSession
from harness.profile.bounds import Profile

Kept = TypeVar("Kept", CaseResult, CheckedResult)
"""What a test keeps: a benchmark case's result or a checked measurement's."""

RESULT_KEY = pytest.StashKey["CaseResult | CheckedResult"]()


class HarnessTest:
    def __init__(self, session: HarnessSession, item: pytest.Item):
        self.session = session
        self.item = item

    @property
    def profile(self) -> Profile:
        return self.session.profile

    @property
    def options(self) -> HarnessOptions:
        """What the command line asked (e.g. ``options.level``; a kind's own option, ``options.of("soak")``),
        parsed once per session."""
        return self.session.ctx.options

    def runner(self, section: str) -> Any:
        """The session's runner of a kind of job, by its section (``Job.section``): how a kind's acceptance test
        reaches its runner, the harness's (``harness.runner("interconnect").run_allreduce(gpus)``) and a site's
        alike, then keeps its result (``harness.keep(result)``). Typed loosely: the plugin imports no kind."""
        return self.session.runner(section)

    @property
    def remote_gpu_state(self) -> Any:
        """The other nodes' GPU-state probes of a multi-node session (plugin/remote_gpu_state.py), None on one
        node: what the node-shape test judges the other nodes' GPUs by."""
        return self.session.gpu_state.remote

    def keep(self, result: Kept) -> Kept:
        """Keep a result made outside this class for the verdict, report.json and session.json."""
        return self._keep(result)

    def _keep(self, result):
        self.item.stash[RESULT_KEY] = result
        self.session.results[self.item.nodeid] = result
        return result

    def assert_passed(self, result: CaseResult | CheckedResult) -> None:
        """Fail the test listing every check that missed, one line each; not-evaluated checks don't fail.
        A case or a measurement none of whose performance checks could be judged (no bound for its GPU count,
        bounds of another definition, a host too noisy, an all-reduce a calibration session measured without a
        bound) is skipped saying why: never a PASS."""
        if result.failed:
            pytest.fail(result.failure_message(), pytrace=False)
        performance = [c for c in result.checks if c.kind == "performance"]
        if performance and not any(c.evaluated for c in performance):
            note = performance[0].note or "no bound to judge it against"
            pytest.skip(note if note.startswith("not evaluated") else f"not evaluated: {note}")
