"""The soak's windows once it runs (pure, light to import): how many it runs and how much slower the last ran
than the first. The duration given on the command line and the windows' length stay below the kind's folder
(harness/workloads/soak_windows.py), where ``--soak`` (harness/plugin/options.py) and the spec
(harness/launch/spec.py) read them."""

from __future__ import annotations

from harness.workloads.soak_windows import MIN_WINDOWS


def window_count(duration_s: float, window_s: float) -> int:
    """How many windows the soak runs: its duration in windows, and never fewer than MIN_WINDOWS."""
    return max(MIN_WINDOWS, round(duration_s / window_s))


def throughput_decay(windows: list[dict]) -> float | None:
    """1 - last window's throughput / first window's: 0.05 = the node ended 5 % slower than it started."""
    if len(windows) < MIN_WINDOWS or not windows[0].get("throughput"):
        return None
    return 1.0 - windows[-1]["throughput"] / windows[0]["throughput"]
