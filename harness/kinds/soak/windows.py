"""The soak's time arithmetic (pure, light to import): the duration ``--soak`` gives (its option, job.py
``SOAK_OPTION``, which the plugin declares and parses through the soak's Job), the length of its windows (read by
the spec), and once it runs, how many windows it runs and how much slower the last ran than the first."""

from __future__ import annotations

import re

from harness.durations import MAX_SECONDS

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


MIN_SOAK_S = 1.0
"""The shortest --soak accepted: less is a typo (1e-7s), not a burn-in."""


def soak_duration(text: str) -> float:
    """Seconds of soak from ``--soak``; a ValueError, whose message is the usage error, for one that overflows
    (``--soak 1e400h`` is inf, which failed the node), runs past MAX_SECONDS, or is shorter than MIN_SOAK_S
    (``1e-7s`` counted as a burn-in; the soak runs at least MIN_WINDOWS windows whatever it is given)."""
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise ValueError(f"--soak: {exc}") from None
    if not MIN_SOAK_S <= seconds <= MAX_SECONDS:
        raise ValueError(f"--soak {text}: {seconds:g} s; a soak lasts from {MIN_SOAK_S:g} s (it runs at least "
                         f"{MIN_WINDOWS} windows of {window_seconds(0.0):g} s) to a week ({MAX_SECONDS:g} s), "
                         "e.g. --soak 30m or --soak 4h")
    return seconds


def window_count(duration_s: float, window_s: float) -> int:
    """How many windows the soak runs: its duration in windows, and never fewer than MIN_WINDOWS."""
    return max(MIN_WINDOWS, round(duration_s / window_s))


def throughput_decay(windows: list[dict]) -> float | None:
    """1 - last window's throughput / first window's: 0.05 = the node ended 5 % slower than it started."""
    if len(windows) < MIN_WINDOWS or not windows[0].get("throughput"):
        return None
    return 1.0 - windows[-1]["throughput"] / windows[0]["throughput"]
