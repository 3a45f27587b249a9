"""Where the session's time went (issue 28): its ``timeline`` as a small table, each phase of the
benchmark launches, each other launch and the rest, largest first, against the sign-off budget.

Shape (session.json ``timeline``, written by harness/timeline.py; see docs/report.md)::

    {"total_s": 218.8, "records": 16,
     "phases_s": {"start-up": 5.9, "build": 4.8, "autotune + warm-up (cold)": 44.3, ...},
     "launches_s": {"components": 9.1, "all-reduce 2 GPUs": 5.8}, "other_s": 3.5}

A session that recorded none (a harness version before it) shows nothing; a value that is not a
duration (a string, a negative number, a key not there) is shown as not recorded.
"""

from __future__ import annotations

from typing import Any

from harness.report.format import MISSING, fmt_pct
from harness.report.inputs import RunInputs
from harness.results.reading import as_dict, as_int, as_number, as_text
from harness.timeline import OTHER, PHASES, over_budget

MAX_ROWS = 40
"""Rows shown at most: the phases, the other launches and the rest, bounded for a damaged file."""


def _seconds(value: Any) -> float | None:
    """A duration: a finite number, not below 0; anything else is absent."""
    number = as_number(value)
    return number if number is not None and number >= 0 else None


def _fmt_seconds(seconds: float | None) -> str:
    return MISSING if seconds is None else f"{seconds:,.1f} s"


def _parts(line: dict) -> list[tuple[str, float | None]]:
    """(name, seconds) of every phase (those the session did not record too), every other launch and the
    rest; the largest first, the absent last, ties in the order the session runs them."""
    phases = as_dict(line.get("phases_s"))
    names = list(PHASES) + [name for name in phases if name not in PHASES]  # a phase a later harness adds
    parts = [(name, _seconds(phases.get(name))) for name in names]
    parts += [(as_text(name), _seconds(seconds)) for name, seconds in as_dict(line.get("launches_s")).items()]
    parts = parts[: MAX_ROWS - 1] + [(OTHER, _seconds(line.get("other_s")))]
    return sorted(parts, key=lambda part: (part[1] is None, -(part[1] or 0.0)))


def build_timeline(inputs: RunInputs) -> dict | None:
    """The table of where the time went, or None when the session recorded no timeline.

    session.json's first: it is the one the terminal's last ``time:`` line described (report.json's,
    written a moment earlier, only when session.json is not there)."""
    line = as_dict(inputs.session).get("timeline")
    if line is None:
        line = inputs.header.get("timeline")
    if not isinstance(line, dict):
        return None
    total = _seconds(line.get("total_s"))
    rows = [{"name": name, "seconds": _fmt_seconds(seconds),
             "share": fmt_pct(seconds / total) if seconds is not None and total else MISSING}
            for name, seconds in _parts(line)]
    records = as_int(line.get("records"))
    return {"rows": rows, "total": _fmt_seconds(total), "total_share": "100.0 %" if total else MISSING,
            "over": over_budget(total, line) if total is not None else "",
            "records": records if records is not None and records >= 0 else None}
