"""The selftest's table: printed, and written as selftest.json and selftest.md in its directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.files import write_json_atomic
from harness.selftest.judge import RowOutcome

HEADER = ("#", "injected", "expected to fail", "failed", "cause named", "seen")


def _failed_cell(outcome: RowOutcome) -> str:
    if not outcome.applicable:
        return outcome.summary  # "not applicable: <why>", never "passed"
    if outcome.failed:
        return f"yes ({', '.join(outcome.failed_keys)})" if outcome.failed_keys else "yes"
    return "no"


def _cause_cell(outcome: RowOutcome) -> str:
    if not outcome.applicable:
        return ""
    if outcome.cause_named is None:
        return f"not expected: {outcome.cause_note}" if outcome.cause_note else ""
    return "yes" if outcome.cause_named else "no"


def rows_of(outcomes: list[RowOutcome]) -> list[tuple[str, ...]]:
    return [(str(i), o.injected, o.expected, _failed_cell(o), _cause_cell(o),
             ("" if not o.applicable else ("ok: " if o.ok else "SELFTEST FAILED: ") + o.summary))
            for i, o in enumerate(outcomes, start=1)]


def selftest_passed(outcomes: list[RowOutcome]) -> bool:
    """Every applicable row held, and at least one applied (a selftest that tested nothing proves nothing)."""
    return all(o.ok for o in outcomes) and any(o.applicable for o in outcomes)


def closing_line(outcomes: list[RowOutcome]) -> str:
    applied = [o for o in outcomes if o.applicable]
    held = [o for o in applied if o.ok]
    skipped = len(outcomes) - len(applied)
    if not applied:
        return f"SELFTEST FAILED: no row applies on this node ({skipped} not applicable); nothing was proven"
    word = "PASSED" if selftest_passed(outcomes) else "FAILED"
    return (f"SELFTEST {word}: {len(held)} of {len(applied)} injected degradations caught with their cause"
            f"{f'; {skipped} not applicable' if skipped else ''}")


def text_table(outcomes: list[RowOutcome]) -> str:
    """Plain text for the terminal: one block per row (cells are long sentences)."""
    lines = []
    for row in rows_of(outcomes):
        number, injected, expected, failed, cause, seen = row
        lines.append(f"{number}. injected: {injected}")
        lines.append(f"   expected to fail: {expected}")
        lines.append(f"   failed: {failed}")
        if cause:
            lines.append(f"   cause named: {cause}")
        if seen:
            lines.append(f"   {seen}")
    lines.append(closing_line(outcomes))
    return "\n".join(lines)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(outcomes: list[RowOutcome], facts: dict[str, Any]) -> str:
    lines = [f"# harness selftest — {facts.get('host', '?')}, profile {facts.get('profile', '?')}", "",
             f"{closing_line(outcomes)}", "",
             "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(_md_cell(cell) for cell in row) + " |" for row in rows_of(outcomes)]
    lines += ["", "Each row's session (report.html, session.json, logs) is in its own directory beside this file."]
    return "\n".join(lines) + "\n"


def write_outputs(directory: Path, outcomes: list[RowOutcome], facts: dict[str, Any]) -> tuple[Path, Path]:
    """selftest.json (every outcome and the facts of the run) and selftest.md; their paths."""
    json_path, md_path = directory / "selftest.json", directory / "selftest.md"
    payload = {**facts, "passed": selftest_passed(outcomes), "closing_line": closing_line(outcomes),
               "rows": [o.to_dict() for o in outcomes]}
    write_json_atomic(json_path, json.dumps(payload, indent=1, default=str))
    md_path.write_text(markdown_table(outcomes, facts))
    return json_path, md_path
