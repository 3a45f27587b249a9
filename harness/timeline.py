"""Where a session's time went (issue 28): a per-phase timeline for session.json, the report and the
terminal's last lines. Read from what the session wrote: each run record's ``phases_s`` (start-up,
build, warm-up cold and hot, the straggler probe, the measured window) and the launches beside them.
Pure: the caller reads the records (harness/run_directory.py).
"""

from __future__ import annotations

from typing import Any, Iterable

from harness.cases import remeasure_of
from harness.results.reading import as_dict, as_number, as_text

SIGN_OFF_BUDGET_S = 210.0
"""Issue 28's target for the default (standard) session on a node of up to 4 GPUs: 210 s on 4 x H100, and on any
kind ``SIGN_OFF_BUDGETS_S`` does not name. Past it the terminal and the report say where the time went. A target
for the harness's speed, never a bound on the node."""
SIGN_OFF_BUDGETS_S = {"h200": 180.0}
"""Per profile (a kind of GPU), where issue 28 set its own target: 180 s on 4 x H200, whose steps are the faster."""
QUICK_BUDGET_S = 45.0
"""Issue 28's target for ``--level quick`` (a Slurm prolog)."""
WIDE_NODE_FACTOR = 1.3
"""Above 4 GPUs the design grows to about 1.3x the 4-GPU time (docs/usage.md says what grows)."""
STARTUP = ("process_start", "import", "init")
PHASES = ("start-up", "build", "autotune + warm-up (cold)", "warm-up (hot)", "straggler probe", "windows",
          "confirmations")
"""The phases of the benchmark launches, in the order they run; ``phases_s`` holds each."""
OTHER = "other (launch gaps, checks, outputs)"
"""What the session spent outside the launches: ``other_s``."""


def budget(level: str, device: str, gpus: int, kind: str = "") -> tuple[float, str] | None:
    """(seconds, what they are the budget of) for a session of ``level`` on ``gpus`` GPUs of profile ``kind``; None
    where no target is set: a CPU self-check (a check of the harness, at a CPU's speed) and the long level (its
    soak lasts as long as asked)."""
    if device != "cuda":
        return None
    if level == "quick":
        return QUICK_BUDGET_S, "a quick check should take"
    if level != "standard":
        return None
    sign_off_s = SIGN_OFF_BUDGETS_S.get(kind, SIGN_OFF_BUDGET_S)
    if gpus > 4:
        return sign_off_s * WIDE_NODE_FACTOR, f"a sign-off of {gpus} GPUs should take"
    return sign_off_s, "a sign-off of up to 4 GPUs should take"


def timeline(records: Iterable[dict], *, total_s: float, launches_s: dict[str, float],
             budget_of: tuple[float, str] | None = None) -> dict[str, Any]:
    """Seconds per phase over the session's benchmark ``records`` (runs/*.json as read), the other launches'
    seconds (``launches_s``: components, all-reduce, ...), what the session spent outside both, and the
    session's time budget (``budget``) when it has one. A value that is not a number counts as none."""
    phases = dict.fromkeys(PHASES, 0.0)
    counted = 0
    for record in records:
        times = record.get("phases_s")
        if not isinstance(times, dict):
            continue
        counted += 1
        if remeasure_of(as_text(record.get("run_id"))) is not None:
            phases["confirmations"] += _seconds(times, "launch_total")
            continue
        settle = as_dict(as_dict(record.get("settings")).get("launch")).get("settle")
        phases["start-up"] += _seconds(times, *STARTUP)
        phases["build"] += _seconds(times, "build")
        phases["warm-up (hot)" if settle == "hot" else "autotune + warm-up (cold)"] += _seconds(times, "warmup")
        phases["straggler probe"] += _seconds(times, "probe")
        phases["windows"] += _seconds(times, "measure")
    accounted = sum(phases.values()) + sum(launches_s.values())
    return {"total_s": round(total_s, 1), "records": counted,
            "phases_s": {name: round(value, 1) for name, value in phases.items()},
            "launches_s": {name: round(value, 1) for name, value in launches_s.items()},
            "other_s": round(max(0.0, total_s - accounted), 1),
            **({"budget_s": round(budget_of[0], 1), "budget_of": budget_of[1]} if budget_of is not None else {})}


def _seconds(times: dict, *keys: str) -> float:
    """The sum of a record's ``phases_s`` entries ``keys``; one that is not a number counts as none."""
    return sum(as_number(times.get(key)) or 0.0 for key in keys)


def over_budget(total_s: float, line: dict[str, Any]) -> str:
    """``over the 210 s a sign-off of up to 4 GPUs should take`` past the budget the timeline ``line`` records,
    else "" (also for a timeline that records none): the words of the terminal's time line and the report's."""
    budget_s, budget_of = line.get("budget_s"), line.get("budget_of")
    if not isinstance(budget_s, (int, float)) or isinstance(budget_s, bool) or not isinstance(budget_of, str):
        return ""
    return f"over the {budget_s:.0f} s {budget_of}" if total_s > budget_s else ""


def describe(line: dict[str, Any]) -> str:
    """``time: 230 s — windows 86 s, warm-up (cold) 40 s, ...`` the largest first."""
    parts = {**line["phases_s"], **line["launches_s"], OTHER: line["other_s"]}
    shown = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in sorted(parts.items(), key=lambda kv: -kv[1])
                      if seconds >= 0.5)
    over = over_budget(line["total_s"], line)
    return f"time: {line['total_s']:.0f} s{f' ({over})' if over else ''} — {shown}"
