"""What a session leaves in its run directory: report.json, junit.xml, session.json, report.html.

pytest-json-report and JUnit write into the run directory unless the user pointed them elsewhere;
report.json gets each test's result and the session's facts through its hooks; at the end come
session.json and the HTML sign-off page, also after failures and interrupts.
"""

from __future__ import annotations

import json

import pytest

from harness.fleet.session_end import prometheus_dir, record_session, store_path
from harness.checks.session import SessionVerdict
from harness.plugin.fixture import RESULT_KEY
from harness.plugin.outcomes import SessionOutcomes
from harness.plugin.progress import write_own_line
from harness.plugin.session import HarnessSession
from harness.records import write_json_atomic
from harness.report.render import write_report


def route_reports(config: pytest.Config, session: HarnessSession, outcomes: SessionOutcomes) -> None:
    """report.json and junit.xml into the run directory, unless the command line chose a place."""
    run_dir = session.ctx.run_dir
    config.pluginmanager.register(JsonReportHooks(session, outcomes), "harness-json-report")
    if hasattr(config.option, "json_report"):
        config.option.json_report = True
        if config.option.json_report_file in (None, ".report.json"):
            config.option.json_report_file = str(run_dir / "report.json")
        config.option.json_report_indent = config.option.json_report_indent or 1
    if not getattr(config.option, "xmlpath", None):
        config.option.xmlpath = str(run_dir / "junit.xml")


class JsonReportHooks:
    """Attaches each test's record and checks, and the session's sign-off facts and verdict, to report.json."""

    def __init__(self, session: HarnessSession, outcomes: SessionOutcomes):
        self.session = session
        self.outcomes = outcomes

    @pytest.hookimpl(optionalhook=True)
    def pytest_json_runtest_metadata(self, item: pytest.Item, call: pytest.CallInfo) -> dict:
        result = item.stash.get(RESULT_KEY, None)
        if call.when != "call" or result is None:
            return {}
        return {"harness": result.to_dict()}

    @pytest.hookimpl(optionalhook=True)
    def pytest_json_modifyreport(self, json_report: dict) -> None:
        summary = self.session.summary()
        summary.pop("results")  # already attached to each test
        summary["session_verdict"] = self.outcomes.verdict().to_dict()
        json_report["harness"] = summary
        # pytest-json-report calls a test cut short by an interrupt "passed" (its setup passed), and counts it so.
        counts = json_report.get("summary", {})
        for test in json_report.get("tests", []):
            if self.outcomes.outcome_of(test.get("nodeid", "")) == "interrupted" and test.get("outcome") == "passed":
                test["outcome"] = "interrupted"
                case = self.outcomes.case_of(test.get("nodeid", ""))
                if case is not None:  # so the report's matrix has the cell, marked INTERRUPTED
                    test.setdefault("metadata", {}).setdefault("harness", {"case": case.test_param,
                                                                           "case_id": case.to_dict()})
                counts["passed"] = counts.get("passed", 1) - 1
                counts["interrupted"] = counts.get("interrupted", 0) + 1
        if counts.get("passed") == 0:
            counts.pop("passed")


def write_session_outputs(session: pytest.Session, harness_session: HarnessSession, exitstatus: int,
                          verdict: SessionVerdict) -> None:
    """session.json, then the HTML sign-off report (after pytest-json-report saved report.json)."""
    run_dir = harness_session.ctx.run_dir
    summary = harness_session.summary()
    summary["session_verdict"] = verdict.to_dict()
    summary["exitstatus"] = int(exitstatus)  # pytest's own; the process exits with session_verdict.exit_code
    summary["interrupted"] = bool(session.shouldstop) or int(exitstatus) == pytest.ExitCode.INTERRUPTED
    write_json_atomic(run_dir / "session.json", json.dumps(summary, indent=1, default=str))
    try:
        line = f"harness: report {write_report(run_dir)}"
    except Exception as exc:  # noqa: BLE001 - the JSON is saved: `harness report RUN_DIR` rebuilds the page
        line = (f"harness: report.html not written ({type(exc).__name__}: {exc}); "
                f"rebuild with `harness report {run_dir}`")
    options = harness_session.ctx.options
    # harness/fleet: the session into the history store, and its Prometheus file; never raises.
    lines = [line, *record_session(run_dir, store=store_path(options.store, options.report_dir),
                                   textfile_dir=prometheus_dir(options.prometheus_dir))]
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        for text in lines:
            write_own_line(reporter, text)
