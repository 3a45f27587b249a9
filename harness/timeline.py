"""Where a session's time went (issue 28): a per-phase timeline for session.json, the report and the
terminal's last lines. Read from what the session wrote: each run record's ``phases_s`` (start-up,
build, warm-up cold and hot, the straggler probe, the measured window) and the launches beside them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SIGN_OFF_BUDGET_S = 180.0
"""Issue 28's budget for the default session on a 4-GPU node: past it the terminal says where the time went."""
STARTUP = ("process_start", "import", "init")
PHASES = ("start-up", "build", "autotune + warm-up (cold)", "warm-up (hot)", "straggler probe", "windows",
          "confirmations")
"""The phases of the benchmark launches, in the order they run; ``phases_s`` holds each."""
OTHER = "other (launch gaps, checks, outputs)"
"""What the session spent outside the launches: ``other_s``."""


def timeline(run_dir: Path, *, total_s: float, launches_s: dict[str, float]) -> dict[str, Any]:
    """Seconds per phase over every benchmark record in ``run_dir``/runs, the other launches' seconds
    (``launches_s``: components, all-reduce, ...), and what the session spent outside both."""
    phases = dict.fromkeys(PHASES, 0.0)
    records = 0
    for path in sorted((Path(run_dir) / "runs").glob("*.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        times = record.get("phases_s") or {}
        if not isinstance(times, dict):
            continue
        records += 1
        if "-confirm" in str(record.get("run_id", "")):
            phases["confirmations"] += float(times.get("launch_total") or 0.0)
            continue
        settle = ((record.get("settings") or {}).get("launch") or {}).get("settle")
        phases["start-up"] += sum(float(times.get(key) or 0.0) for key in STARTUP)
        phases["build"] += float(times.get("build") or 0.0)
        phases["warm-up (hot)" if settle == "hot" else "autotune + warm-up (cold)"] += float(times.get("warmup") or 0)
        phases["straggler probe"] += float(times.get("probe") or 0.0)
        phases["windows"] += float(times.get("measure") or 0.0)
    accounted = sum(phases.values()) + sum(launches_s.values())
    return {"total_s": round(total_s, 1), "records": records,
            "phases_s": {name: round(value, 1) for name, value in phases.items()},
            "launches_s": {name: round(value, 1) for name, value in launches_s.items()},
            "other_s": round(max(0.0, total_s - accounted), 1)}


def over_budget(total_s: float) -> str:
    """``over the <budget> s a 4-GPU sign-off should take`` past SIGN_OFF_BUDGET_S, else "": the words of the
    terminal's time line and of the report's."""
    return f"over the {SIGN_OFF_BUDGET_S:.0f} s a 4-GPU sign-off should take" if total_s > SIGN_OFF_BUDGET_S else ""


def describe(line: dict[str, Any]) -> str:
    """``time: 230 s — windows 86 s, warm-up (cold) 40 s, ...`` the largest first."""
    parts = {**line["phases_s"], **line["launches_s"], OTHER: line["other_s"]}
    shown = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in sorted(parts.items(), key=lambda kv: -kv[1])
                      if seconds >= 0.5)
    over = over_budget(line["total_s"])
    return f"time: {line['total_s']:.0f} s{f' ({over})' if over else ''} — {shown}"
