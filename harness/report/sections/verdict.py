"""The verdict banner: PASS, FAIL or INCOMPLETE, the counts, the times, and why a run is incomplete.

The verdict shown is the one the session recorded (session.json ``session_verdict``, or report.json
``harness.session_verdict``: harness/checks/session.py), so the page says what the terminal, the
JSON, JUnit and the exit code said. A run directory without one (an older harness, a session killed
before its end) says "session verdict: not recorded" and shows the banner derived from the test
outcomes below, as before. Where the verdict is recorded but report.json is not there (removed as
cut short, or not kept with session.json), the counts are the session's own tally, and what the
page could not read is a note, not a reason for a verdict the session already gave.
"""

from __future__ import annotations

from harness.report.format import fmt_duration, fmt_time, parse_time
from harness.report.inputs import RunInputs
from harness.results.reading import KEY_CHARS, as_dict, as_int, as_list, as_number, as_text, clean_text
from harness.checks.session import from_dict as stored_verdict
from harness.report.outcomes import SessionTest

_TITLES = {"pass": "PASS", "fail": "FAIL", "incomplete": "INCOMPLETE"}


def _counts(tests: list[SessionTest]) -> tuple[dict[str, int], int]:
    """Outcome counts (xpassed counted as passed, xfailed as skipped), and tests without an outcome."""
    counts = {name: 0 for name in ("passed", "failed", "skipped", "error", "interrupted")}
    missing = 0
    for test in tests:
        if test.outcome is None:
            missing += 1
            continue
        counts[{"xpassed": "passed", "xfailed": "skipped"}.get(test.outcome, test.outcome)] += 1
    return counts, missing


def _exit_status(inputs: RunInputs) -> int | None:
    exitstatus = as_int(as_dict(inputs.session).get("exitstatus"))
    return exitstatus if exitstatus is not None else as_int(as_dict(inputs.report).get("exitcode"))


def _incomplete(inputs: RunInputs, tests: list[SessionTest], counts: dict[str, int], missing: int,
                *, ended: bool) -> list[str]:
    """Every reason this session's results are not the whole story. ``ended``: session.json records the
    session's verdict, which it writes at the session's end only, so the session was not killed."""
    reasons: list[str] = []
    if inputs.report is None and ended:
        reasons.append(f"report.json {inputs.report_problem}, though the session ended (session.json records its "
                       "verdict): the file was removed, never written or not copied with session.json; the "
                       "outcomes below are derived from each result's checks")
    elif inputs.report is None:
        reasons.append(f"report.json {inputs.report_problem}: pytest did not finish its report, so the "
                       "test outcomes below come from session.json and runs/ (the session was probably killed)")
    exitstatus = _exit_status(inputs)
    if as_dict(inputs.session).get("interrupted") is True or exitstatus == 2:
        status = exitstatus if exitstatus is not None else "unknown"
        reasons.append(f"the session was interrupted (exit status {status}): cases after the interruption never ran")
    elif exitstatus in (3, 4):
        reasons.append(f"pytest ended with exit status {exitstatus} "
                       f"({'internal error' if exitstatus == 3 else 'usage error'})")
    if missing and not ended:
        reasons.append(f"{missing} test{'s have' if missing > 1 else ' has'} no recorded outcome")
    if tests and not any(counts[k] for k in ("passed", "failed", "error", "interrupted")) and not missing:
        reasons.append("no test ran: every test was skipped")
    if not tests:
        reasons.append("no test results were recorded")
    return reasons


def _wall_seconds(inputs: RunInputs, header: dict) -> float | None:
    started, finished = parse_time(header.get("started_at")), parse_time(header.get("finished_at"))
    if started and finished and (started.tzinfo is None) == (finished.tzinfo is None):
        return (finished - started).total_seconds()
    return as_number(as_dict(inputs.report).get("duration"))


def build_verdict(inputs: RunInputs, header: dict, tests: list[SessionTest]) -> dict:
    """The banner: any failure is FAIL (even in an interrupted run); else any gap is INCOMPLETE; else PASS."""
    counts, missing = _counts(tests)
    recorded = recorded_verdict(inputs)
    incomplete = _incomplete(inputs, tests, counts, missing, ended=recorded is not None)
    notes = [f"session.json {inputs.session_problem}"] if inputs.session is None else []
    notes += inputs.record_problems
    derived_failures = sum(1 for t in tests if t.outcome is None and t.derived_outcome == "failed")
    if counts["failed"] or counts["error"] or derived_failures:
        state = "fail"
    elif incomplete or counts["interrupted"]:
        state = "incomplete"
    else:
        state = "pass"
    if recorded is not None:
        state = recorded["verdict"].lower()
        if inputs.report is None:  # pytest's outcomes are gone; the session's own tally of them is not
            counts, missing = _recorded_counts(recorded, counts), 0
    return {"state": state, "title": _TITLES[state], "session_verdict": _session_verdict_view(recorded),
            "gap_label": "Note" if recorded is not None else "Incomplete",
            "counts": counts, "missing": missing, "derived_failures": derived_failures, "total": len(tests),
            "incomplete": incomplete, "notes": notes, "exitstatus": _exit_status(inputs),
            "run_id": as_text(header.get("run_id")) or clean_text(inputs.run_dir.name, KEY_CHARS, one_line=True),
            "started": fmt_time(header.get("started_at")) if header.get("started_at") else "unknown",
            "finished": fmt_time(header.get("finished_at")) if header.get("finished_at") else "not recorded",
            "wall": fmt_duration(_wall_seconds(inputs, header))}


def recorded_verdict(inputs: RunInputs) -> dict | None:
    """The session's own verdict: session.json's, else report.json's; None when neither recorded one."""
    recorded = stored_verdict(as_dict(inputs.session).get("session_verdict"))
    if recorded is None:
        recorded = stored_verdict(as_dict(as_dict(inputs.report).get("harness")).get("session_verdict"))
    return recorded


def _recorded_counts(recorded: dict, derived: dict[str, int]) -> dict[str, int]:
    """The outcome counts the session tallied at its end (a count it did not record stays as derived)."""
    tally = as_dict(recorded.get("counts"))
    counts = {}
    for name, count in derived.items():
        value = as_int(tally.get(name))
        counts[name] = count if value is None else value
    return counts


def _session_verdict_view(recorded: dict | None) -> dict:
    """What the banner prints of the recorded verdict: its line, scope, causes, cases not run, overrides."""
    if recorded is None:
        return {"recorded": False, "headline": "session verdict: not recorded (an older harness, or a session "
                "stopped before its end); the banner is derived from the test outcomes below",
                "scope": "not recorded", "causes": [], "not_run": [], "overrides": [], "exit_code": None}
    return {"recorded": True, "headline": as_text(recorded.get("headline")),
            "scope": as_text(recorded.get("scope"), "not recorded"),
            "causes": [as_text(as_dict(c).get("text")) for c in as_list(recorded.get("causes"))],
            "not_run": [f"{as_text(as_dict(n).get('name'))}: {as_text(as_dict(n).get('reason'))}"
                        for n in as_list(recorded.get("not_run"))],
            "overrides": [f"{as_text(as_dict(o).get('name'))}={as_text(as_dict(o).get('value'))}: "
                          f"{as_text(as_dict(o).get('effect'))}" for o in as_list(recorded.get("overrides"))],
            "exit_code": as_int(recorded.get("exit_code"))}
