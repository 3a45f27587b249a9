"""Every test of the session, as the report sees it: outcome, case, checks and bounds as recorded.

Tests come from report.json (pytest's outcome, failure message, skip reason, the harness result
in ``metadata.harness``); a result only session.json knows (report.json missing or cut short) is
added with its outcome derived from its checks. The case, its bounds and each check's identity are
read as the session wrote them (``case_id``, ``bounds``, ``bounds_inherited``, each check's
``key``): the report never parses a test id or re-merges the profile to reconstruct them. A file
without them (an older harness, a damaged file) leaves them absent, shown as "not recorded".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from harness.cases import CaseId
from harness.report.inputs import RunInputs
from harness.results.reading import as_dict, as_list, as_number, as_text

OUTCOMES = ("passed", "failed", "skipped", "error", "xfailed", "xpassed", "interrupted")
"""pytest's outcomes, and ``interrupted``: the plugin's word for a test cut short (harness/plugin/outcomes.py)."""
THROUGHPUT_CHECK = "throughput_per_gpu"
"""Key of the per-GPU throughput check (harness.kinds.ddp_scaling.checks)."""

_STATES = {"passed": "pass", "xpassed": "pass", "failed": "fail", "error": "fail", "skipped": "skip",
           "xfailed": "skip", "interrupted": "skip"}
_LABELS = {"passed": "PASS", "xpassed": "PASS", "failed": "FAIL", "error": "ERROR", "skipped": "SKIP",
           "xfailed": "XFAIL", "interrupted": "INTERRUPTED"}
_SKIP_TUPLE = re.compile(r"""^\(.*?, \d+, (['"])(?P<reason>.*)\1\)$""", re.S)


def efficiency_check(scaling: str) -> str:
    """Key of the scaling-efficiency check of ``scaling`` (weak or strong)."""
    return f"{scaling}_efficiency"


def outcome_state(outcome: str) -> str:
    """The colour class of an outcome: pass, fail, skip or none."""
    return _STATES.get(outcome, "none")


@dataclass(kw_only=True)
class SessionTest:
    """One test of the session: pytest's outcome and messages, and the harness result it carried."""

    nodeid: str
    outcome: str | None
    """pytest's outcome; None when not recorded (report.json missing, cut short, or damaged)."""
    harness: dict
    """The harness result attached to the test (record, checks, case_id, bounds); {} when none."""
    outcome_derived: bool = False
    """True for a result only session.json has: ``derived_outcome`` stands in for pytest's."""
    derived_outcome: str | None = None
    message: str = ""
    skip_reason: str = ""
    duration_s: float | None = None

    @cached_property
    def case(self) -> CaseId | None:
        """The case as the session recorded it; None when not recorded (or not a benchmark case)."""
        return CaseId.from_dict(self.harness.get("case_id"))

    @property
    def case_not_recorded(self) -> bool:
        """A benchmark run (its record names a model) whose result does not say which case it was."""
        return self.case is None and bool(self.record.get("model"))

    @property
    def record(self) -> dict:
        return as_dict(self.harness.get("record"))

    @property
    def shown_outcome(self) -> str:
        return self.outcome or self.derived_outcome or "unknown"

    @property
    def state(self) -> str:
        return outcome_state(self.shown_outcome)

    @property
    def label(self) -> str:
        """The badge: PASS, FAIL, …, with a ``?`` when derived from the checks rather than pytest's."""
        return _LABELS.get(self.shown_outcome, "UNKNOWN") + ("?" if self.outcome_derived else "")

    @property
    def failed(self) -> bool:
        return self.shown_outcome in ("failed", "error")

    def check(self, key: str) -> dict | None:
        """The check recorded under ``key``; None when there is none (or checks carry no keys)."""
        for check in as_list(self.harness.get("checks")):
            if as_dict(check).get("key") == key:
                return check
        return None

    def check_value(self, key: str, what: str = "measured") -> tuple[float | None, bool | None]:
        """(the check's ``what``: measured or bound, whether it passed), or (None, None) without it."""
        check = self.check(key)
        if check is None:
            return None, None
        passed = check.get("passed")
        return as_number(check.get(what)), passed if isinstance(passed, bool) else None

    @property
    def bounds_recorded(self) -> bool:
        """Whether the result says which bounds applied (a dict, or null for "the profile has none")."""
        return "bounds" in self.harness and (self.harness["bounds"] is None or isinstance(self.harness["bounds"], dict))

    @property
    def bounds(self) -> dict:
        """The resolved bounds of the case as recorded; {} when none or not recorded."""
        return as_dict(self.harness.get("bounds"))

    @property
    def bounds_inherited(self) -> set[str]:
        """Names of the bounds that came from the profile's [defaults]."""
        return {name for name in as_list(self.harness.get("bounds_inherited")) if isinstance(name, str)}


def _skip_reason(longrepr: Any) -> str:
    # pytest-json-report stores a skip as the repr of (path, line, "Skipped: reason").
    if isinstance(longrepr, list) and longrepr:
        longrepr = longrepr[-1]
    text = as_text(longrepr).strip()
    match = _SKIP_TUPLE.match(text)
    if match:
        text = match["reason"]
    return text.removeprefix("Skipped: ")


def _derived_outcome(harness: dict) -> str:
    return "failed" if any(as_dict(c).get("passed") is False for c in as_list(harness.get("checks"))) else "passed"


def _from_report(raw: dict) -> SessionTest:
    nodeid = as_text(raw.get("nodeid"), "(no test id)")
    harness = as_dict(as_dict(raw.get("metadata")).get("harness"))
    outcome = raw.get("outcome") if raw.get("outcome") in OUTCOMES else None
    message, skip_reason = "", ""
    for phase in ("setup", "call", "teardown"):
        stage = as_dict(raw.get(phase))
        if stage.get("outcome") in ("failed", "error") and not message:
            message = as_text(stage.get("longrepr"))
        if stage.get("outcome") == "skipped" and not skip_reason:
            skip_reason = _skip_reason(stage.get("longrepr"))
    duration = sum(as_number(as_dict(raw.get(p)).get("duration")) or 0.0 for p in ("setup", "call", "teardown"))
    if outcome == "interrupted":
        skip_reason = "INTERRUPTED: the session stopped while this test ran; not run"
    return SessionTest(nodeid=nodeid, outcome=outcome, harness=harness, message=message, skip_reason=skip_reason,
                       duration_s=duration)


def collect_tests(inputs: RunInputs) -> list[SessionTest]:
    """Every test of the session, from report.json; results only session.json knows are added."""
    tests = [_from_report(as_dict(raw)) for raw in as_list(as_dict(inputs.report).get("tests"))]
    seen = {test.nodeid for test in tests}
    for nodeid, harness in as_dict(as_dict(inputs.session).get("results")).items():
        if nodeid in seen:
            continue
        harness = as_dict(harness)
        tests.append(SessionTest(nodeid=nodeid, outcome=None, harness=harness, outcome_derived=True,
                                 derived_outcome=_derived_outcome(harness)))
    return tests


def first_with_bounds(tests: list[SessionTest], model: str, precision: str) -> SessionTest | None:
    """The first test of ``model`` × ``precision`` whose result records its bounds; None if none does."""
    return next((t for t in tests if t.case and (t.case.model, t.case.precision) == (model, precision)
                 and t.bounds_recorded), None)


def cases_not_recorded(tests: list[SessionTest]) -> str:
    """"" when every benchmark result says which case it was; else how many do not, for a "not recorded" line."""
    count = sum(1 for t in tests if t.case_not_recorded)
    if not count:
        return ""
    results = "result carries" if count == 1 else "results carry"
    return f"{count} {results} no case_id (an older harness version, or a damaged file)"
