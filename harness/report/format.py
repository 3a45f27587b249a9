"""How the report writes numbers, durations, times and units: one place, so every section agrees."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from harness.results.reading import as_number, as_text, by_gpu_count

MISSING = "—"
"""A value that was not measured or not recorded, in a table cell."""


def fmt_number(value: Any) -> str:
    """Like verdict.Check.describe, with significant digits kept for small fractions (a CV of 0.0015)."""
    number = as_number(value)
    if number is None:
        return MISSING
    if abs(number) >= 10 and number == int(number):
        return f"{number:,.0f}"
    if abs(number) >= 100:
        return f"{number:,.1f}"
    if abs(number) >= 0.1 or number == 0:
        return f"{number:.3f}"
    return f"{number:.3g}"


def fmt_rate(value: Any) -> str:
    """A throughput: one decimal whatever its size (56.6 img/s on a CPU, 4,647.6 on an H200)."""
    number = as_number(value)
    return MISSING if number is None else f"{number:,.1f}"


def fmt_pct(value: Any, digits: int = 1) -> str:
    """A fraction as a percentage: 0.258 → ``25.8 %``."""
    number = as_number(value)
    return MISSING if number is None else f"{number * 100:.{digits}f} %"


def fmt_with_unit(value: Any, unit: str) -> str:
    return f"{fmt_number(value)} {unit}" if as_number(value) is not None else MISSING


def fmt_count_table(table: Any) -> str:
    """A GPU-count table: ``2: 0.966 · 4: 0.965``."""
    counts = by_gpu_count(table)
    return " · ".join(f"{n}: {fmt_number(v)}" for n, v in counts.items()) if counts else MISSING


def fmt_bound(value: Any, unit: str = "") -> str:
    """A bound as a profile holds it: a number, or a table by GPU count (``4: 3,782.4 images/s``)."""
    if isinstance(value, dict):
        text = fmt_count_table(value)
        return f"{text} {unit}" if unit and text != MISSING else text
    return fmt_with_unit(value, unit) if unit else fmt_number(value)


def fmt_duration(seconds: float | None) -> str:
    if seconds is None or seconds < 0:
        return "unknown"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min {secs:02d} s"
    if minutes:
        return f"{minutes} min {secs:02d} s"
    return f"{secs} s"


def parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def fmt_time(value: Any) -> str:
    """An ISO time as ``2026-11-21 11:00:32 UTC``; naive times say they are local."""
    moment = parse_time(value)
    if moment is None:
        return as_text(value, "unknown") or "unknown"
    text = moment.strftime("%Y-%m-%d %H:%M:%S")
    offset = moment.utcoffset()
    if offset is None:
        return f"{text} (local time)"
    return f"{text} UTC" if not offset else f"{text} UTC{moment.strftime('%z')}"


def short_unit(unit: str) -> str:
    return unit.replace("images/s", "img/s").replace("sequences/s", "seq/s")


def device_word(device: str, count: int = 1) -> str:
    """What a rank runs on: GPU(s), or rank(s) on a CPU run."""
    if device == "cpu":
        return "rank" if count == 1 else "ranks"
    return "GPU" if count == 1 else "GPUs"


def anchor(*parts: Any) -> str:
    """An HTML id made of ``parts``: letters, digits and ``_.-`` only."""
    return "-".join(re.sub(r"[^A-Za-z0-9_.-]+", "_", str(p)) for p in parts)[:160]
