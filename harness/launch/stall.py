"""Hang detection: a rank that shows no progress for longer than its phase allows is hung.

Each rank writes the time its current phase began and how long it should take
(harness/rank.py); a rank silent for ``stall_factor × expected + stall_floor_s`` (or, where
nothing is expected yet, ``setup_timeout_s``) stops the launch long before its time limit.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.launch.cleanup import process_stopped
from harness.launch.spec import LaunchSettings
from harness.rank import rank_identity


@dataclass(frozen=True, kw_only=True, slots=True)
class Stall:
    reason: str
    """Why the run was judged hung, e.g. 'rank 1 (...) showed no progress for 41 s (bound ...)'."""
    phase: str | None = None
    ranks: tuple[int, ...] = ()


def find_stall(launch: LaunchSettings, phases: dict[int, dict], started: float, now: float) -> Stall | None:
    """The first rank that has shown no progress for longer than its phase allows, if any (pure)."""
    if not phases:
        if now - started > launch.setup_timeout_s:
            return Stall(reason=f"no rank started within {launch.setup_timeout_s:.0f} s", phase="setup")
        return None
    for rank, info in sorted(phases.items()):
        if info.get("phase") == "done":
            continue
        expected = info.get("expected_s")
        if expected is None:
            bound = launch.setup_timeout_s
            rule = f"setup bound {launch.setup_timeout_s:.0f} s"
        else:
            bound = launch.stall_factor * expected + launch.stall_floor_s
            rule = f"{launch.stall_factor:g} x expected {expected:.1f} s + {launch.stall_floor_s:.0f} s"
        silent = now - float(info.get("since", started))
        if silent > bound:
            phase = info.get("phase", "setup")
            stopped = [r for r, i in sorted(phases.items()) if process_stopped(i.get("pid"))]
            culprit = (f"; {', '.join(rank_identity(phases, r) for r in stopped)} is stopped (SIGSTOP)"
                       if stopped else "")
            return Stall(reason=f"{rank_identity(phases, rank)} showed no progress for {silent:.0f} s "
                                f"(bound: {rule}){culprit}", phase=phase, ranks=tuple(stopped) or (rank,))
    return None
