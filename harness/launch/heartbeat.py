"""A line every ``HEARTBEAT_S`` seconds while a launch runs: which case and phase each launch is in,
and about how long is left by its plan (the launch's plan.json), so a long launch is never silent.

    harness: launch 20261127-…-g2: 1 min 35 s in; case 3/6 tiny_bert fp32 weak, rank 0 measure for
    12 s; about 2 min 05 s left of a planned 3 min 40 s

``run_job`` (supervise.py) calls ``Heartbeat.tick`` from its wait loop; the line goes to ``SINK``:
the acceptance plugin points it at pytest's terminal (harness/plugin/progress.py), elsewhere (``harness
run``, calibrate) it is stderr. Reading the plan and the phase files is best effort: a line that
cannot be made is skipped, never an error in the launch it describes.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from harness.workloads.plan import FOLLOW_ON_FILE, PLAN_FILE, PLANNED_STEPS

HEARTBEAT_S = 20.0
"""At most this long between two lines of one launch (the issue asked for one at least every 30 s)."""


def to_stderr(line: str) -> None:
    print(f"harness: {line}", file=sys.stderr, flush=True)


SINK: Callable[[str], None] = to_stderr
"""Where heartbeat lines go (without the ``harness: `` prefix, which the sink adds)."""


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def plan_steps(plan: Any) -> list[tuple[str, float]]:
    """(what, planned seconds) of each step of a launch plan as plan.json holds it (``PLANNED_STEPS``, which each
    kind's plan says of itself: harness/workloads/plan.py ``StepsPlanned``); [] for a plan that says none."""
    steps = plan.get(PLANNED_STEPS) if isinstance(plan, dict) else None
    if not isinstance(steps, list):
        return []
    return [(str(step[0]), _number(step[1])) for step in steps if isinstance(step, list) and len(step) == 2]


def duration_text(seconds: float) -> str:
    """``45 s``, ``1 min 35 s``, ``2 h 05 min``."""
    seconds = max(seconds, 0.0)
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"


def heartbeat_line(run_id: str, steps: list[tuple[str, float]], phases: dict[int, dict], elapsed_s: float,
                   now: float) -> str:
    """The line for one launch: how long it has run, where rank 0 (else the lowest rank) is, the ETA."""
    parts = [f"launch {run_id}: {duration_text(elapsed_s)} in"]
    rank = min(phases) if phases else None
    info = phases.get(rank, {}) if rank is not None else {}
    case = info.get("case") if isinstance(info.get("case"), int) else None
    where = ""
    if case is not None and 0 <= case < len(steps):
        where = f"case {case + 1}/{len(steps)} {steps[case][0]}, "
    elif len(steps) == 1:
        where = f"{steps[0][0]}, "
    if info.get("phase"):
        since = _number(info.get("since"))
        phase_for = f" for {duration_text(now - since)}" if since else ""
        parts.append(f"{where}rank {rank} {info['phase']}{phase_for}")
    elif where:
        parts.append(where.rstrip(", ") + ", starting")
    else:
        parts.append("starting (no rank has reported yet)")
    planned = sum(seconds for _, seconds in steps)
    if planned > 0:
        later = sum(seconds for _, seconds in steps[case + 1:]) if case is not None else 0.0
        left = max(planned - elapsed_s, later)
        parts.append(f"about {duration_text(left)} left of a planned {duration_text(planned)}"
                     if left > 0 else f"past its planned {duration_text(planned)}")
    return "; ".join(parts)


@dataclass
class Heartbeat:
    """One launch's heartbeat: ``tick`` from the wait loop prints when HEARTBEAT_S have passed."""

    run_dir: Path
    run_id: str
    started: float
    period_s: float | None = None
    """Default: HEARTBEAT_S (read when the launch starts)."""
    next_at: float = 0.0
    steps: list[tuple[str, float]] | None = field(default=None)
    follow_ons: int = 0
    """Follow-on plans read into ``steps`` so far."""

    def __post_init__(self) -> None:
        if self.period_s is None:
            self.period_s = HEARTBEAT_S
        self.next_at = self.started + self.period_s

    def tick(self, phases_of: Callable[[Path], dict[int, dict]], now: float | None = None) -> None:
        now = time.time() if now is None else now
        if now < self.next_at:
            return
        self.next_at = now + (self.period_s or HEARTBEAT_S)
        try:
            if self.steps is None:
                plan_path = self.run_dir / PLAN_FILE
                self.steps = plan_steps(json.loads(plan_path.read_text())) if plan_path.is_file() else []
            # A holding launch's follow-on cases (launch/group.py) count on from its plan's.
            while (more := self.run_dir / FOLLOW_ON_FILE.format(number=self.follow_ons + 1)).is_file():
                self.steps += plan_steps(json.loads(more.read_text()))
                self.follow_ons += 1
            SINK(heartbeat_line(self.run_id, self.steps, phases_of(self.run_dir), now - self.started, now))
        except Exception:  # noqa: BLE001 - a progress line must never cost the launch it describes
            return


@contextmanager
def every(period_s: float, report: Callable[[float], None], name: str = "progress") -> Iterator[None]:
    """While the block runs, a daemon thread calls ``report(seconds since the start)`` every
    ``period_s`` (a soak's state, a selftest row's); stopped and joined when the block ends."""
    stop = threading.Event()
    started = time.monotonic()

    def run() -> None:
        while not stop.wait(period_s):
            report(time.monotonic() - started)

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=period_s + 5)
