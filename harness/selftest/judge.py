"""Judge one selftest row: (row spec, what its session left) -> the row's outcome. Pure.

A row holds when its degradation was caught: the expected checks FAILED (or the session refused to
start, where that is the expected answer), the injected cause was named, and nothing read PASS —
neither the session verdict nor the exit code. Anything else is a selftest failure, said in words:
the degradation passed, the check was not found, the session did not run, the cause went unnamed.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.selftest.rows import RowSpec


@dataclass(frozen=True, kw_only=True, slots=True)
class RowRun:
    """What a row's session left: its exit status, the tail of its output, its session.json."""

    exit_code: int
    output_tail: str = ""
    session: dict[str, Any] | None = None
    """session.json as read; None: the session wrote none (refused, or crashed before)."""
    cause_tokens: tuple[str, ...] = ()
    """Known only once it ran (the foreign process's pid), added to the spec's."""
    problem: str = ""
    """Why the row could not be run as planned (the foreign load did not start, ...); empty: none."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RowOutcome:
    key: str
    injected: str
    expected: str
    """The expected check keys, as the table shows them ("a and b", "a or b", "session refused")."""
    applicable: bool
    failed: bool | None
    """The degradation turned the expected checks FAIL; None: not applicable."""
    failed_keys: list[str] = field(default_factory=list)
    other_failed: list[str] = field(default_factory=list)
    """Checks that failed beside the expected ones (e.g. step_time_cv under a host sync): shown, not counted."""
    cause_named: bool | None = None
    """None: not applicable, or no check can name the cause here (``cause_note`` says why)."""
    cause_note: str = ""
    headline_named: bool | None = None
    """The session verdict's headline names the GPU the fault was put on (and the foreign pid); None: the
    row asks nothing of the headline."""
    headline_note: str = ""
    verdict: str | None = None
    """session.json's session_verdict.verdict, when recorded."""
    ok: bool = True
    """The row holds (or does not apply); False fails the selftest."""
    summary: str = ""
    """One line: what was seen, or why the row failed or does not apply."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _expected_text(spec: RowSpec) -> str:
    if spec.expect_refusal:
        return "session refused to start"
    return (" and " if spec.require == "all" else " or ").join(spec.expected_keys)


def session_checks(session: dict[str, Any]) -> list[dict[str, Any]]:
    """Every check of every result in session.json, in order."""
    results = session.get("results") or {}
    return [check for result in results.values() if isinstance(result, dict)
            for check in result.get("checks") or [] if isinstance(check, dict)]


def session_verdict(session: dict[str, Any] | None) -> str | None:
    verdict = (session or {}).get("session_verdict")
    if isinstance(verdict, dict):
        return str(verdict.get("verdict")) if verdict.get("verdict") is not None else None
    return str(verdict) if verdict else None


def _named(tokens: tuple[str, ...], text: str) -> bool:
    """A token names the cause where it starts a word and no digit runs on (pid 123 is not named by 41234
    nor 1234; "1 CPU core" is named by "1 CPU cores")."""
    return any(re.search(rf"(?<![\w-]){re.escape(token)}(?![\d-])", text) for token in tokens if token)


def judge(spec: RowSpec, run: RowRun | None) -> RowOutcome:
    """The row's outcome; ``run`` is None exactly when the row does not apply."""
    base: dict[str, Any] = {"key": spec.key, "injected": spec.injected, "expected": _expected_text(spec)}
    if spec.not_applicable is not None or run is None:
        return RowOutcome(**base, applicable=False, failed=None, ok=True,
                          summary=f"not applicable: {spec.not_applicable or 'not run'}")
    verdict = session_verdict(run.session)
    if run.problem:
        return RowOutcome(**base, applicable=True, failed=False, verdict=verdict, ok=False, summary=run.problem)
    if spec.expect_refusal or (spec.refusal_counts and run.session is None and run.exit_code not in (0, -1)):
        return _judge_refusal(spec, run, base, verdict)
    if run.session is None:
        last = run.output_tail.strip().splitlines()[-1:] or ["no output"]
        return RowOutcome(**base, applicable=True, failed=False, ok=False,
                          summary=f"session did not run (exit {run.exit_code}, no session.json): {last[0]}")
    checks = session_checks(run.session)
    found = {c.get("key") for c in checks}
    missing = [k for k in spec.expected_keys if k not in found]
    failed_keys = sorted({str(c["key"]) for c in checks if c.get("key") in spec.expected_keys
                          and c.get("passed") is False})
    if (spec.require == "all" and missing) or len(missing) == len(spec.expected_keys):
        first = next((c for c in checks if c.get("kind") == "sanity" and c.get("passed") is False), None)
        why = f" (the run failed first: {first.get('key')}: {first.get('note')})" if first else ""
        return RowOutcome(**base, applicable=True, failed=False, failed_keys=failed_keys, verdict=verdict, ok=False,
                          summary=f"check not found in session.json: {', '.join(missing)}{why}")
    wanted = set(spec.expected_keys) - set(missing)
    failed = (set(failed_keys) >= wanted) if spec.require == "all" else bool(failed_keys)
    cause_named, cause_note = _cause(spec, run, [c for c in checks if c.get("key") in failed_keys])
    headline_named, headline_note = _headline(spec, run)
    problems = []
    if not failed:
        passed = sorted(wanted - set(failed_keys))
        problems.append(f"degradation PASSED: {', '.join(passed)} did not fail")
    if failed and cause_named is False:
        problems.append(f"cause not named ({cause_note})")
    if failed and headline_named is False:
        problems.append(f"headline blames the wrong place ({headline_note})")
    if verdict == "PASS":
        problems.append("session verdict PASS")
    if run.exit_code == 0:
        problems.append("session exit code 0")
    other = sorted({str(c.get("key")) for c in checks if c.get("passed") is False} - set(spec.expected_keys))
    also = f"; also failed: {', '.join(other)}" if other else ""
    seen = f"failed: {', '.join(failed_keys)}" if failed_keys else "nothing failed"
    return RowOutcome(**base, applicable=True, failed=failed, failed_keys=failed_keys, other_failed=other,
                      cause_named=cause_named, cause_note=cause_note, headline_named=headline_named,
                      headline_note=headline_note, verdict=verdict, ok=not problems,
                      summary=("; ".join(problems) if problems else seen) + also)


def _cause(spec: RowSpec, run: RowRun, failed_checks: list[dict[str, Any]]) -> tuple[bool | None, str]:
    if spec.cause_not_expected is not None:
        return None, spec.cause_not_expected
    tokens = spec.cause_tokens + run.cause_tokens
    if spec.cause_in == "overrides":
        overrides = (run.session or {}).get("overrides")
        if overrides is None:
            return False, "session.json has no overrides"
        text = json.dumps(overrides)
        return _named(tokens, text), f"looked for {' / '.join(tokens)} in session.json overrides"
    if spec.cause_in == "output":
        return _named(tokens, run.output_tail), f"looked for {' / '.join(tokens)} in the session's output"
    notes = " | ".join(str(c.get("note") or "") for c in failed_checks)
    return _named(tokens, notes), f"looked for {' / '.join(tokens)} in the failed checks' notes"


def _headline(spec: RowSpec, run: RowRun) -> tuple[bool | None, str]:
    """Whether the session verdict's headline names every ``headline_tokens`` and, for a cause found in the
    notes, one of the run's own cause tokens (the foreign pid)."""
    if not spec.headline_tokens:
        return None, ""
    stored = (run.session or {}).get("session_verdict")
    headline = str(stored.get("headline") or "") if isinstance(stored, dict) else ""
    wanted: list[tuple[str, ...]] = [(token,) for token in spec.headline_tokens]
    if spec.cause_in == "notes" and run.cause_tokens:
        wanted.append(run.cause_tokens)
    missing = [" / ".join(tokens) for tokens in wanted if not _named(tokens, headline)]
    looked = ", ".join(" / ".join(tokens) for tokens in wanted)
    return not missing, f"looked for {looked} in the headline {headline or '(none)'!r}" + (
        f"; missing: {', '.join(missing)}" if missing else "")


def _judge_refusal(spec: RowSpec, run: RowRun, base: dict[str, Any], verdict: str | None) -> RowOutcome:
    ran = bool(run.session and run.session.get("results"))
    refused = run.exit_code != 0 and not ran
    tokens = spec.cause_tokens + run.cause_tokens
    named, note = _named(tokens, run.output_tail), f"looked for {' / '.join(tokens)} in the session's output"
    if not refused:
        why = "tests ran" if ran else "exit code 0"
        return RowOutcome(**base, applicable=True, failed=False, cause_named=named, cause_note=note, verdict=verdict,
                          ok=False, summary=f"degradation PASSED: the session started ({why}) instead of refusing")
    if not named:
        return RowOutcome(**base, applicable=True, failed=True, cause_named=False, cause_note=note, verdict=verdict,
                          ok=False, summary=f"refused (exit {run.exit_code}) but the cause was not named ({note})")
    return RowOutcome(**base, applicable=True, failed=True, cause_named=True, cause_note=note, verdict=verdict,
                      ok=True, summary=f"refused to start (exit {run.exit_code}), naming the cause")
