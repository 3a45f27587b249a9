"""The soak's time arithmetic (pure, light to import): the duration given on the command line,
the length of its windows, and how much slower the last window ran than the first."""

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


def window_count(duration_s: float, window_s: float) -> int:
    """How many windows the soak runs: its duration in windows, and never fewer than MIN_WINDOWS."""
    return max(MIN_WINDOWS, round(duration_s / window_s))


def throughput_decay(windows: list[dict]) -> float | None:
    """1 - last window's throughput / first window's: 0.05 = the node ended 5 % slower than it started."""
    if len(windows) < MIN_WINDOWS or not windows[0].get("throughput"):
        return None
    return 1.0 - windows[-1]["throughput"] / windows[0]["throughput"]
