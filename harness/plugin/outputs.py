"""What a session leaves in its run directory: report.json, junit.xml, session.json, report.html.

pytest-json-report and JUnit write into the run directory unless the user pointed them elsewhere;
report.json gets each test's result and the session's facts through its hooks; at the end come
session.json and the HTML sign-off page, also after failures and interrupts.

A write that fails at the end (a full disk) loses nothing that was measured and leaves no empty
file as the only copy: ``OutputGuard`` turns junit.xml's write error into a line instead of
pytest's INTERNALERROR, removes a report.json or junit.xml cut short (the report page is then built
from session.json), writes session.json to a fallback directory when the run directory refuses
it, says where everything is, and ends the session with the verdict "could not record" and exit status 7
(``EXIT_NOT_RECORDED``; never 1, a node's failure, which a Slurm prolog drains the node for).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Generator
from pathlib import Path
from xml.etree import ElementTree

import pytest

from harness.fleet.session_end import prometheus_dir, record_session, store_path
from harness.checks.session import SessionVerdict
from harness.plugin.fixture import RESULT_KEY
from harness.plugin.outcomes import SessionOutcomes, not_recorded
from harness.plugin.progress import write_own_line
from harness.timeline import describe as describe_timeline
from harness.plugin.session import HarnessSession
from harness.files import write_json_atomic
from harness.report.render import write_report
from harness.report.sections.kind import KindReports


def route_reports(config: pytest.Config, session: HarnessSession, outcomes: SessionOutcomes) -> None:
    """report.json and junit.xml into the run directory, unless the command line chose a place."""
    run_dir = session.ctx.run_dir
    config.pluginmanager.register(JsonReportHooks(session, outcomes), "harness-json-report")
    config.pluginmanager.register(OutputGuard(session, outcomes), "harness-output-guard")
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


class OutputGuard:
    """Wraps every ``pytest_sessionfinish`` (pytest-json-report's, junitxml's, the plugin's own)."""

    def __init__(self, session: HarnessSession, outcomes: SessionOutcomes):
        self.session = session
        self.outcomes = outcomes

    @pytest.hookimpl(wrapper=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> Generator[None, object, object]:
        problems: list[str] = []
        try:
            result = yield
        except OSError as exc:  # junitxml raises where it cannot write junit.xml; the later hooks were skipped
            problems.append(f"a report file could not be written: {exc.strerror or exc}")
            result = None
        if not self.session.outputs_written:  # the plugin's own hook was skipped: do its part
            self.session.gpu_state.stop()
            write_session_outputs(session, self.session, exitstatus, self.outcomes.verdict())
            session.exitstatus = self.outcomes.verdict().exit_code
        problems += _drop_cut_short(self.session.ctx.run_dir) + self.session.output_problems
        if problems:
            self.outcomes.not_recorded += [p for p in problems if p not in self.session.output_problems]
            _say_where_things_are(session, self.session, problems)
            # "could not record", exit status 7 (never 1, a node's failure); a FAIL stays a FAIL.
            session.exitstatus = self.outcomes.verdict().exit_code
        return result


def _drop_cut_short(run_dir: Path) -> list[str]:
    """report.json and junit.xml that a full disk left empty or cut short: removed, not kept as the only copy."""
    problems = []
    for name in ("report.json", "junit.xml"):
        path = run_dir / name
        try:
            text = path.read_text(encoding="utf-8") if path.is_file() else None
            if text is None:
                continue
            if _parses(name, text):
                continue
            path.unlink()
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"{path}: could not be checked ({exc})")
            continue
        problems.append(f"{path} was cut short ({len(text)} bytes written) and was removed")
    return problems


def _parses(name: str, text: str) -> bool:
    """Whether the file is whole: JSON that loads, XML that parses (a full disk cuts it anywhere)."""
    try:
        if name.endswith(".json"):
            json.loads(text)
        else:
            ElementTree.fromstring(text)
    except (ValueError, ElementTree.ParseError):
        return False
    return True


def _say_where_things_are(session: pytest.Session, harness_session: HarnessSession, problems: list[str]) -> None:
    run_dir = harness_session.ctx.run_dir
    records = sorted(run_dir.glob("runs/*.json")) + sorted(run_dir.glob("logs/*/record.json"))
    lines = [f"harness: WRITE ERROR: {problem}" for problem in problems]
    lines.append(f"harness: what was measured is kept: {len(records)} record(s) in {run_dir}/runs and "
                 f"{run_dir}/logs/*/record.json" + (f"; the session's summary in {harness_session.fallback_summary}"
                                                    if harness_session.fallback_summary else ""))
    lines.append(f"harness: free space in {run_dir.parent}, then rebuild the page with `harness report {run_dir}`"
                 + (f" (copy {harness_session.fallback_summary} to {run_dir / 'session.json'} first)"
                    if harness_session.fallback_summary else ""))
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    for text in lines:
        if reporter is not None:
            write_own_line(reporter, text)
        else:
            print(text)


def _write_summary(harness_session: HarnessSession, summary: dict, verdict: SessionVerdict) -> None:
    """session.json in the run directory; where that fails, in the first fallback directory that takes it,
    with the verdict that failure makes ("could not record")."""
    run_dir = harness_session.ctx.run_dir
    try:
        write_json_atomic(run_dir / "session.json", json.dumps(summary, indent=1, default=str))
        return
    except OSError as exc:
        harness_session.output_problems.append(f"{run_dir / 'session.json'}: {exc.strerror or exc}")
    summary["session_verdict"] = not_recorded(verdict, harness_session.output_problems).to_dict()
    text = json.dumps(summary, indent=1, default=str)
    for fallback_dir in (Path(tempfile.gettempdir()), Path.home()):
        fallback = fallback_dir / f"harness-{harness_session.ctx.run_id}-session.json"
        try:
            write_json_atomic(fallback, text)
        except OSError:
            continue
        harness_session.fallback_summary = fallback
        return
    harness_session.output_problems.append("session.json could not be written anywhere (run directory, "
                                           f"{tempfile.gettempdir()}, {Path.home()})")


def write_session_outputs(session: pytest.Session, harness_session: HarnessSession, exitstatus: int,
                          verdict: SessionVerdict) -> None:
    """session.json, then the HTML sign-off report (after pytest-json-report saved report.json)."""
    harness_session.outputs_written = True
    run_dir = harness_session.ctx.run_dir
    summary = harness_session.summary()
    summary["session_verdict"] = verdict.to_dict()
    summary["exitstatus"] = int(exitstatus)  # pytest's own; the process exits with session_verdict.exit_code
    summary["interrupted"] = bool(session.shouldstop) or int(exitstatus) == pytest.ExitCode.INTERRUPTED
    _drop_cut_short(run_dir)  # before the page reads them: it falls back to session.json
    _write_summary(harness_session, summary, verdict)
    try:
        line = f"harness: report {write_report(run_dir, KindReports.of(harness_session.jobs))}"
    except Exception as exc:  # noqa: BLE001 - the JSON is saved: `harness report RUN_DIR` rebuilds the page
        line = (f"harness: report.html not written ({type(exc).__name__}: {exc}); "
                f"rebuild with `harness report {run_dir}`")
    options = harness_session.ctx.options
    # harness/fleet: the session into the history store, and its Prometheus file; never raises.
    lines = [line, *record_session(run_dir, store=store_path(options.store, options.report_dir),
                                   textfile_dir=prometheus_dir(options.prometheus_dir)),
             f"harness: {describe_timeline(summary['timeline'])}"]
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        for text in lines:
            write_own_line(reporter, text)
