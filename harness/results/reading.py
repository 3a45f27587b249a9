"""Reading JSON that others wrote: every string cleaned, every value typed, nothing trusted.

Run directories, history stores and session files come from other hosts, older harnesses and people;
what is read from them ends up in a page people open in a browser and on a terminal. Here, on the
ground floor, is the one way the harness reads such values:

- ``clean_text`` / ``clean_log_tail`` / ``sanitize``: control characters and terminal escapes replaced,
  each field and log line cut to a size (a hostname or a log line is data, never markup);
- ``as_dict`` / ``as_list`` / ``as_number`` / ``as_int`` / ``as_text`` / ``as_label`` / ``by_gpu_count``:
  a value of the wrong type is "absent", never an exception, so no reader crashes on its input.

It imports nothing else of the harness.
"""

from __future__ import annotations

import math
import re
from typing import Any

FIELD_CHARS = 4000
"""Longest single string kept from any input (a profile description, a failure message)."""
LOG_TAIL_LINES = 40
"""Last lines of each rank's log shown for a failed run."""
LOG_LINE_CHARS = 300
"""Longest log line shown; torch stack dumps and progress bars can make one line megabytes."""
KEY_CHARS = 200
"""Longest dictionary key or file label kept (a test id, a run record's name)."""

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
# C0 controls except tab and newline, DEL, C1 controls, bidi overrides (they reorder what a
# reader sees), lone surrogates (unencodable) and non-characters.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]")


# --- cleaning every input string -------------------------------------------------------------


def clean_text(value: Any, limit: int = FIELD_CHARS, *, one_line: bool = False) -> str:
    """``value`` as text that is safe to show: no control characters, at most ``limit`` characters."""
    text = value if isinstance(value, str) else str(value)
    original = len(text)
    text = text[: limit * 2]  # cleaning only shortens, so never look at more than this
    text = _ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n")
    if one_line:
        text = text.replace("\n", " ").replace("\t", " ")
    text = _CONTROL.sub("\ufffd", text)
    if len(text) > limit or original > limit * 2:
        cut = original - limit if original > limit * 2 else len(text) - limit
        text = f"{text[:limit]} … [{cut:,} more characters cut]"
    return text


def clean_log_tail(value: Any, lines: int = LOG_TAIL_LINES, line_chars: int = LOG_LINE_CHARS) -> str:
    """The last ``lines`` lines of a log, each cut to ``line_chars``: the end is what explains a crash."""
    text = value if isinstance(value, str) else str(value)
    window = lines * line_chars * 4  # enough for the last lines unless they are very long
    cut_earlier = len(text) > window
    text = _ANSI.sub("", text[-window:]).replace("\r\n", "\n").replace("\r", "\n")
    all_lines = text.split("\n")
    while all_lines and not all_lines[-1].strip():
        all_lines.pop()
    shown = [clean_text(line, line_chars, one_line=True) for line in all_lines[-lines:]]
    if cut_earlier:
        shown.insert(0, "… (earlier lines not shown)")
    elif len(all_lines) > lines:
        shown.insert(0, f"… ({len(all_lines) - lines} earlier lines not shown)")
    return "\n".join(shown)


def sanitize(data: Any) -> Any:
    """A copy of parsed JSON with every string cleaned (log tails keep their end, not their start)."""
    if isinstance(data, str):
        return clean_text(data)
    if isinstance(data, dict):
        cleaned = {}
        for key, value in data.items():
            key = clean_text(key, KEY_CHARS, one_line=True)
            if key == "log_tails" and isinstance(value, dict):
                cleaned[key] = {clean_text(k, KEY_CHARS, one_line=True): clean_log_tail(v) for k, v in value.items()}
            else:
                cleaned[key] = sanitize(value)
        return cleaned
    if isinstance(data, (list, tuple)):
        return [sanitize(item) for item in data]
    if isinstance(data, float) and not math.isfinite(data):
        return None  # Python's json reads NaN/Infinity; a bound or measurement that is not a number is absent
    return data


# --- typed reads of cleaned JSON -------------------------------------------------------------


def as_dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list:
    return value if isinstance(value, list) else []


def as_number(value: Any) -> float | None:
    """A finite number, or None for anything else (a bool, a string, an integer beyond any float)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer beyond any float, e.g. 10**400 in a hand-edited file
        return None
    return number if math.isfinite(number) else None


def as_int(value: Any) -> int | None:
    number = as_number(value)
    return int(number) if number is not None and number == int(number) else None


def as_text(value: Any, default: str = "") -> str:
    if value is None or isinstance(value, (dict, list)):
        return default
    return clean_text(value)


def as_label(value: Any) -> str | None:
    """A short one-line name (a host, a version, a key), or None: absent, empty, or not a name at all
    (an object, a list, a bool: ``true`` names no host)."""
    if value is None or isinstance(value, (dict, list, bool)):
        return None
    return clean_text(value, KEY_CHARS, one_line=True) or None


def by_gpu_count(table: Any) -> dict[int, float]:
    """A GPU-count table as written to JSON (``{"2": 0.97}``), numerically keyed and sorted."""
    counts = {}
    for key, value in as_dict(table).items():
        key = str(key)
        count = int(key) if key.isascii() and key.isdigit() and len(key) < 6 else None
        number = as_number(value)
        if count is not None and number is not None:
            counts[count] = number
    return dict(sorted(counts.items()))
