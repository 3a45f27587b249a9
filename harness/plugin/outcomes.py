"""What each test of the session did, and the one session verdict made from it (harness/checks/session.py).

pytest's own records lose a case cut short: after Ctrl-C or SIGTERM the running test has a setup
report and nothing else, which pytest-json-report records as ``passed`` and JUnit as a testcase
without a name. This plugin object follows every test's phases itself, so an interrupted case is
``interrupted``, a case that never started ``not run``, and computes the verdict once, lazily, for
report.json, junit.xml, session.json, report.html, the terminal's last line and the exit status.
"""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from _pytest.junitxml import xml_key  # the LogXML object; pytest offers no other handle on it

from harness.cases import CaseId
from harness.checks.session import SelectedTest, SessionFacts, SessionVerdict, judge_session, unjudged
from harness.exitcodes import EXIT_NOT_RECORDED
from harness.files import is_storage_full
from harness.jobs.registry import job_of, required_tests
from harness.plugin.levels import session_jobs
from harness.plugin.remote_gpu_state import judged_nodes
from harness.plugin.results import CaseResult
from harness.plugin.session import HarnessSession

OUTCOMES_KEY = pytest.StashKey["SessionOutcomes"]()


@dataclass(kw_only=True)
class SessionOutcomes:
    """Follows the session's tests; ``verdict()`` judges them once."""

    harness_session: HarnessSession
    session: pytest.Session | None = None
    collected: set[str] = field(default_factory=set)
    """Test names collected before the user's deselection."""
    items: list[pytest.Item] = field(default_factory=list)
    phases: dict[str, dict[str, pytest.TestReport]] = field(default_factory=dict)
    """nodeid -> when (setup, call, teardown) -> its report."""
    _verdict: SessionVerdict | None = None
    not_recorded: list[str] = field(default_factory=list)
    """What could not be written for want of space (a case's records, the session's outputs), one line each."""

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.collected = {item.name for item in items}

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.items = list(session.items)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.phases.setdefault(report.nodeid, {})[report.when] = report

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Before JUnit writes its file: name the interrupted testcases, add the verdict properties."""
        logxml = session.config.stash.get(xml_key, None)
        if logxml is None:
            return
        verdict = self.verdict()
        for name, value in (("harness_verdict", verdict.verdict), ("harness_scope", verdict.scope),
                            ("harness_headline", verdict.headline), ("harness_exit_code", verdict.exit_code)):
            logxml.add_global_property(name, value)
        for item in self.items:
            setup = self.phases.get(item.nodeid, {}).get("setup")
            if setup is not None and setup.passed and "call" not in self.phases[item.nodeid]:
                reporter = logxml.node_reporter(setup)  # made nameless by the setup's duration
                reporter.record_testreport(setup)
                reporter.append(ET.Element("skipped", type="harness.interrupted",
                                           message="INTERRUPTED: the session stopped while this test ran; not run"))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        """A case whose records could not be written (a full disk) did not run as far as the verdict is
        concerned: skipped with the reason, never failed, so the node is not blamed for its storage."""
        try:
            return (yield)
        except OSError as exc:
            if not is_storage_full(exc):
                raise
            self.not_recorded.append(f"{item.name}: {exc}")
            pytest.skip(f"could not record: {exc}")

    def outcome_of(self, nodeid: str) -> str:
        """passed, failed, error, skipped, interrupted (started, cut short) or not run (never started)."""
        phases = self.phases.get(nodeid, {})
        if any(r.failed for when, r in phases.items() if when != "call"):
            return "error"
        if "call" in phases:
            call = phases["call"]
            return "failed" if call.failed else "skipped" if call.skipped else "passed"
        if "setup" in phases:
            return "skipped" if phases["setup"].skipped else "interrupted"
        return "not run"

    def verdict(self) -> SessionVerdict:
        if self._verdict is None:
            try:
                self._verdict = judge_session([self._test(item) for item in self.items], self.facts())
            except Exception as exc:  # noqa: BLE001 - a bug here must not lose the reports, nor read as a PASS
                self._verdict = unjudged(f"{type(exc).__name__}: {exc}")
        return not_recorded(self._verdict, self.not_recorded + self.harness_session.output_problems)

    def facts(self) -> SessionFacts:
        ctx = self.harness_session.ctx
        config = self.harness_session.config
        session = self.session
        exitstatus = int(session.exitstatus) if session is not None else 0
        level = ctx.options.level
        jobs = session_jobs(config)
        return SessionFacts(
            required=tuple(required_tests(ctx.profile, ctx.node_gpus, level=level, native_bf16=ctx.native_bf16,
                                          nodes=judged_nodes(ctx), jobs=jobs)), jobs=jobs,
            collected=frozenset(self.collected), option_narrowing=_option_narrowing(ctx.options),
            selection_narrowing=_selection_narrowing(config), partial_collection=_names_part_of_the_suite(config),
            cpu=ctx.device == "cpu",
            interrupted=exitstatus == pytest.ExitCode.INTERRUPTED, pytest_exit=exitstatus,
            overrides=tuple(override.to_dict() for override in ctx.overrides), level=level,
            calibration=ctx.options.calibration)

    def _test(self, item: pytest.Item) -> SelectedTest:
        result = self.harness_session.results.get(item.nodeid)
        outcome = self.outcome_of(item.nodeid)
        return SelectedTest(name=item.name, outcome=outcome,  # type: ignore[arg-type]
                           must_run=self._beyond_node(item),
                           checks=tuple(c.to_dict() for c in result.checks) if result is not None else (),
                           synchronised=_synchronised(result), reason=self._reason(item.nodeid, outcome))

    def case_of(self, nodeid: str) -> CaseId | None:
        """The benchmark case a test of the session runs; None for other tests."""
        item = next((i for i in self.items if i.nodeid == nodeid), None)
        params = getattr(getattr(item, "callspec", None), "params", {})
        return next((value for value in params.values() if isinstance(value, CaseId)), None)

    def _beyond_node(self, item: pytest.Item) -> bool:
        """A matrix case the user asked for (``--gpus 8``) that needs more GPUs than the node has: its skip
        is not a pass. Without ``--gpus`` the profile's counts above the node's shape are not required."""
        if self.harness_session.ctx.options.gpus is None:
            return False
        ctx = self.harness_session.ctx
        case = self.case_of(item.nodeid)
        if case is not None:  # and one the profile would judge: bounded, bf16 runnable here
            return case.gpus > ctx.available_gpus and ctx.profile.asks_for(case, ctx.native_bf16)
        # Another kind the matrix options narrow: its parameter is the GPU count it runs on (the all-reduce's).
        job = job_of(item.name, session_jobs(self.harness_session.config))
        counts = [value for value in getattr(getattr(item, "callspec", None), "params", {}).values()
                  if isinstance(value, int) and not isinstance(value, bool)]
        return job is not None and job.narrowed_by_matrix and any(gpus > ctx.available_gpus for gpus in counts)

    def _reason(self, nodeid: str, outcome: str) -> str:
        phases = self.phases.get(nodeid, {})
        for report in phases.values():
            if report.skipped and isinstance(report.longrepr, tuple):
                return str(report.longrepr[2]).removeprefix("Skipped: ")
            if report.failed:
                return (report.longreprtext.strip().splitlines() or [""])[-1][:300]
        return self._measured_not_judged(nodeid) if outcome in ("interrupted", "not run") else ""

    def _measured_not_judged(self, nodeid: str) -> str:
        """A case of a launch the session's stop cut while it still ran (holding, or re-measuring cases in
        doubt) may have been measured already: "never started" would then send an operator after the wrong
        problem (2026-11-28, a 4 x H100 host: 24 cases measured, 5 being re-measured, all 28 said "never
        started"). Its record is kept in logs/; it is not judged, since its re-measures did not end."""
        case = self.case_of(nodeid)
        if case is None:
            return ""
        ctx = self.harness_session.ctx
        record = ctx.log_dir(case.key) / "record.json"  # log_dir is under run_dir
        if not record.is_file():
            return ""
        return ("measured, not judged: the session stopped while its launch still ran; its record: "
                f"{record.relative_to(ctx.run_dir)}")


def not_recorded(verdict: SessionVerdict, problems: list[str]) -> SessionVerdict:
    """The verdict when something measured could not be written: "could not record", exit status 7, never a
    sign-off. A FAIL stays a FAIL (its checks failed on what was measured); anything else cannot stand,
    since the record that would show it is missing."""
    if not problems or verdict.verdict == "FAIL":
        return verdict
    what = verdict.headline.split(" — ", 1)[-1]
    return dataclasses.replace(
        verdict, verdict="INCOMPLETE", exit_code=EXIT_NOT_RECORDED, sign_off=False,
        headline=f"INCOMPLETE — could not record (a storage failure, not the node's): {problems[0]}"
                 f"{f' (and {len(problems) - 1} more)' if len(problems) > 1 else ''}; of what was recorded: {what}")


def _option_narrowing(options) -> tuple[str, ...]:
    given = (("--models", options.models), ("--precisions", options.precisions), ("--gpus", options.gpus))
    return tuple(f"{flag} {','.join(str(v) for v in values)}" for flag, values in given if values is not None)


def _selection_narrowing(config: pytest.Config) -> tuple[str, ...]:
    chosen = []
    if getattr(config.option, "keyword", ""):
        chosen.append(f"-k {config.option.keyword}")
    if getattr(config.option, "markexpr", ""):
        chosen.append(f"-m {config.option.markexpr}")
    chosen += [f"--deselect {nodeid}" for nodeid in getattr(config.option, "deselect", None) or ()]
    chosen += [arg for arg in config.args if _names_part(arg)]
    return tuple(chosen)


def _names_part(arg: str) -> bool:
    """A node id or a single file selects part of the suite; a directory (acceptance/) selects all of it."""
    return "::" in arg or Path(arg).suffix == ".py"


def _names_part_of_the_suite(config: pytest.Config) -> bool:
    return any(_names_part(arg) for arg in config.args)


def _synchronised(result: object) -> bool:
    """A DDP case's result: its ranks waited for each other (an independent run's GPUs did not)."""
    return isinstance(result, CaseResult) and result.record.world_size > 1 and not result.record.independent
