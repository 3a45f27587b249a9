"""Progress while a session runs: one line per finished test, what runs next and about how long is left.

A 4 x H200 sign-off takes many minutes per GPU count, and pytest alone shows one dot per test. After
each test that ran a check, this prints (through pytest's terminal reporter, so ``-q``/``-v`` and
capturing behave as for pytest's own lines)::

    harness: [3/12] PASS test_weak_scaling[resnet18-fp32-2gpu] in 41.2 s: per-GPU throughput 49.1 images/s >= 22.8 …
    harness: next test_strong_scaling[resnet18-fp32-2gpu]; 9 tests left, about 6 min (41 s per test so far)

Verbosity: the default and ``-v`` print both lines; ``-q`` keeps the verdict lines and drops the
"next" lines (a quiet log still shows every case's figure); ``-qq`` prints neither. A soak's
state line each minute (harness/kinds/soak/runner.py) follows the verdict lines' rule.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pytest

from harness.checks.session import SessionVerdict, not_run_by_reason
from harness.results.check import Check
from harness.plugin.results import CaseResult, CheckedResult

QUIET_VERDICTS_ONLY = -1
"""pytest verbosity (``-q``) at which only the verdict lines are printed."""


def headline_check(checks: list[Check]) -> Check | None:
    """The check a progress line shows: the first that failed, else the first with a figure and a bound."""
    failed = [check for check in checks if check.passed is False]
    bounded = [check for check in checks if check.evaluated and check.measured is not None and check.bound is not None]
    shown = failed or bounded
    return shown[0] if shown else None


def verdict_line(position: str, test_id: str, outcome: str, elapsed_s: float,
                 result: CaseResult | CheckedResult | None) -> str:
    """``[3/12] PASS test_weak_scaling[resnet18-fp32-2gpu] in 41.2 s: weak-scaling efficiency 0.512 >= 0.200``."""
    check = headline_check(result.checks) if result is not None else None
    figure = f": {check.describe('').removesuffix(' ()')}" if check is not None else ""
    return f"{position} {outcome} {test_id} in {elapsed_s:.1f} s{figure}"


def duration_text(seconds: float) -> str:
    """``45 s``, ``6 min``, ``2 h 05 min``: as precise as an estimate deserves."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


@dataclass
class SessionProgress:
    """The pytest hooks that print progress; registered for an acceptance session that runs tests."""

    config: pytest.Config
    results: dict[str, CaseResult | CheckedResult]
    """The session's results by node id (HarnessSession.results), filled as tests run."""
    to_run: list[str] = field(default_factory=list)
    """Node ids of the collected tests not marked skip, in run order."""
    started_at: dict[str, float] = field(default_factory=dict)
    """Node id -> time.monotonic() when the test started."""
    outcomes: dict[str, str] = field(default_factory=dict)
    """Node id -> PASS, FAIL or SKIP, from its call (or failed setup) report."""
    finished: list[str] = field(default_factory=list)
    seconds_spent: float = 0.0

    def say(self, text: str, *, min_verbosity: int = QUIET_VERDICTS_ONLY) -> None:
        """One line through the terminal reporter, also from inside a running test (the soak's thread)."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None or self.config.get_verbosity() < min_verbosity:
            return
        capture = self.config.pluginmanager.get_plugin("capturemanager")
        if capture is None:
            write_own_line(reporter, f"harness: {text}")
            return
        with capture.global_and_fixture_disabled():
            write_own_line(reporter, f"harness: {text}")

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.to_run = [item.nodeid for item in session.items if item.get_closest_marker("skip") is None]

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.started_at[nodeid] = time.monotonic()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or (report.when == "setup" and not report.passed):
            self.outcomes[report.nodeid] = _outcome_word(report)

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        if nodeid not in self.to_run:
            return
        elapsed_s = time.monotonic() - self.started_at.pop(nodeid, time.monotonic())
        self.finished.append(nodeid)
        self.seconds_spent += elapsed_s
        outcome = self.outcomes.pop(nodeid, "SKIP")
        if outcome != "SKIP":
            position = f"[{len(self.finished)}/{len(self.to_run)}]"
            self.say(verdict_line(position, nodeid.rpartition("::")[2], outcome, elapsed_s, self.results.get(nodeid)))
        left = [n for n in self.to_run if n not in self.finished]
        if left:
            per_test_s = self.seconds_spent / len(self.finished)
            self.say(f"next {left[0].rpartition('::')[2]}; {len(left)} test{'s' if len(left) != 1 else ''} left, "
                     f"about {duration_text(per_test_s * len(left))} ({duration_text(per_test_s)} per test so far)",
                     min_verbosity=0)


def announce(say: Callable[[str], None] | None, text: str) -> None:
    """``text`` through ``say`` (``SessionProgress.say``: past pytest's capture, so a long re-measure is seen while
    it runs), or printed where nothing was wired (a runner made outside a session)."""
    if say is not None:
        say(text)
    else:
        print(f"\nharness: {text}", flush=True)


def write_own_line(reporter: pytest.TerminalReporter, line: str) -> None:
    """``line`` on a line of its own: with ``-q`` pytest writes its result letters without a file path,
    which the reporter's own newline tracking (ensure_newline, in write_line) does not see."""
    reporter.ensure_newline()
    if getattr(reporter, "_width_of_current_line", 0):
        reporter.write("\n")
    reporter.write_line(line)


def _outcome_word(report: pytest.TestReport) -> str:
    if report.skipped:
        return "SKIP"
    return "PASS" if report.passed else "FAIL"


NOT_RUN_NAMES = 6
"""Tests named per reason in the terminal; report.html lists every one."""


def not_run_lines(not_run: Sequence[dict]) -> list[str]:
    """One line per reason, naming the tests it kept from running: a profile whose training bounds are of another
    definition keeps all 8 cases of a 1-GPU node from being judged for one reason, which printed 8 times was
    a screen of one sentence (2026-11-28)."""
    lines = []
    for reason, names in not_run_by_reason(not_run).items():
        shown = ", ".join(names[:NOT_RUN_NAMES]) + (f" and {len(names) - NOT_RUN_NAMES} more (report.html lists them)"
                                                    if len(names) > NOT_RUN_NAMES else "")
        lines.append(f"harness: did not run: {shown}: {reason}" if len(names) == 1
                     else f"harness: did not run, {len(names)} tests: {shown}: {reason}")
    return lines


def write_verdict_lines(reporter: pytest.TerminalReporter, verdict: SessionVerdict) -> None:
    """The failures by cause and the cases that did not run, then the verdict itself as the last line.

    Printed at every verbosity (``-qq`` too): the verdict is the session's product.
    """
    lines = [f"harness: failed: {cause.text()}" for cause in verdict.causes]
    lines += not_run_lines(verdict.not_run)
    lines += [f"harness: override: {o.get('name')}={o.get('value')}: {o.get('effect')}" for o in verdict.overrides]
    for line in lines:
        write_own_line(reporter, line)
    write_own_line(reporter, f"harness: {verdict.headline} (exit status {verdict.exit_code})")
