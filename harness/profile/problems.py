"""How a threshold file's problems are worded and collected: one line each, naming the file, the key
path, the value as the user wrote it, and what is allowed.

Validation (harness/profile/schema.py, harness/profile/rules.py) adds every problem it finds to one
``ProblemReport`` per file, so a user fixes them all in one pass instead of one per run.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

KeyPath = tuple  # of str (table keys), int (GPU counts) and ArrayIndex (array positions)

ABSENT = object()
"""A key that is not in the file (distinct from any TOML value)."""
INVALID = object()
"""What a check returns for a value it has reported as a problem."""

_MAX_SHOWN_CHARS = 80
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


class ArrayIndex(int):
    """A position in a TOML array; shown as ``[i]`` in a key path, unlike a GPU-count key."""


@dataclass(slots=True)
class ProblemReport:
    """The problems found in one file, each already formatted as its final line."""

    label: str
    """The file as the user gave it: messages should name what they typed."""
    lines: list[str] = field(default_factory=list)
    sections: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    """Every table of the file's schema by heading (its fields), for the hint "this key belongs in [x]"."""

    def add(self, where: KeyPath, complaint: str, value: Any = ABSENT) -> None:
        subject = _key_path(where)
        if value is not ABSENT:
            subject = f"{subject} = {_shown(value)}"
        self.lines.append(f"{self.label}: {subject}: {complaint}" if subject else f"{self.label}: {complaint}")


def _key_path(where: KeyPath) -> str:
    text = ""
    for part in where:
        if isinstance(part, ArrayIndex):
            text += f"[{int(part)}]"
            continue
        part = str(part)
        shown = part if _BARE_KEY.fullmatch(part) else json.dumps(part, ensure_ascii=False)
        text = f"{text}.{shown}" if text else shown
    return text


def toml_repr(value: Any) -> str:
    """``value`` as it would be written in TOML: the user should recognise what they typed."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (int, float)):
        return repr(value)  # nan, inf and 1e+20 are valid TOML as Python writes them
    if isinstance(value, list):
        return "[" + ", ".join(toml_repr(item) for item in value) + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = ", ".join(f"{_key_path((key,))} = {toml_repr(item)}" for key, item in value.items())
        return "{ " + items + " }"
    if hasattr(value, "isoformat"):  # TOML dates and times
        return value.isoformat()
    return str(value)


def _shown(value: Any) -> str:
    text = toml_repr(value)
    return text if len(text) <= _MAX_SHOWN_CHARS else text[: _MAX_SHOWN_CHARS - 3] + "..."


def toml_type(value: Any) -> str:
    """The TOML name of a parsed value's type (bool first: it is an int to Python)."""
    for python_type, toml_name in ((bool, "boolean"), (str, "string"), (int, "integer"), (float, "float"),
                                   (list, "array"), (dict, "table")):
        if isinstance(value, python_type):
            return toml_name
    return type(value).__name__  # datetime, date, time

