"""The soak's time arithmetic (pure, light to import) that the command line (``--soak``,
harness/plugin/options.py) and the spec (harness/launch/spec.py) read: the duration given, the length of its
windows and how few it may run. The windows of a running soak, how many and how much slower the last ran than
the first, are the soak kind's (harness/kinds/soak/windows.py)."""

from __future__ import annotations

import re

MIN_WINDOWS = 2

_DURATION = re.compile(r"(?P<value>\d+(?:\.\d+)?)\s*(?P<unit>[hms]?)", re.I)


def parse_duration(text: str) -> float:
    """``"4h"``, ``"3m"``, ``"90s"``, ``"1h30m"`` or plain seconds -> seconds (> 0)."""
    cleaned = str(text).strip().replace(" ", "")
    position, total, parts = 0, 0.0, []
    for match in _DURATION.finditer(cleaned):
        if match.start() != position:
            break
        parts.append(match["unit"].lower())
        total += float(match["value"]) * {"h": 3600, "m": 60, "s": 1, "": 1}[parts[-1]]
        position = match.end()
    bare_number_among_units = len(parts) > 1 and "" in parts  # "3m4": 4 what?
    if not cleaned or position != len(cleaned) or total <= 0 or bare_number_among_units:
        raise ValueError(f"soak duration {text!r}: expected a positive duration such as 4h, 30m, 90s or 1h30m")
    return total


def window_seconds(duration_s: float) -> float:
    """Windows of 1/12 of the soak, between 5 s and 10 min: enough of them to see a trend, each long
    enough that one host sync per window costs nothing."""
    return min(600.0, max(5.0, duration_s / 12))

