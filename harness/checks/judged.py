"""Checks judged against bounds of another measurement definition: shown, not judged (issue 27).

A profile records how each family of its bounds was measured (``[definitions]``, harness/definitions.py);
where this harness measures the family another way, every check against one of those bounds becomes
*not evaluated*, saying why, and keeps its measured figure. Pure.
"""

from __future__ import annotations

from dataclasses import replace

from harness.results.check import Check


def not_judged(checks: list[Check], why: str | None) -> list[Check]:
    """``checks`` with every check against a profile bound made *not evaluated* because of ``why`` (the
    bounds were measured under another definition: harness/definitions.py); sanity checks and rules
    without a bound (foreign processes, throttling, ECC) still hold. ``why`` None: unchanged."""
    if why is None:
        return checks
    return [replace(c, passed=None, note=f"not evaluated: {why}" + (f" (measured {c.note})" if c.note else ""))
            if c.bound is not None and c.evaluated else c for c in checks]
