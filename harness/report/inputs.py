"""The report's input edge: a run directory's JSON read safely, every string cleaned, values typed.

Inputs are the files an acceptance session leaves in ``reports/<run-id>/``: ``report.json``
(pytest-json-report, each test's result attached), ``session.json`` (the harness's own summary,
written even when pytest-json-report is not), and ``runs/*.json`` (run records). When the session
was killed, report.json may be missing or cut short: the report is then built from what is left.

Every string read from any input is cleaned here (control characters replaced, each field and
log line cut to a size), because it ends up in a page people open in a browser: a hostname or a
log line is data, never markup. The ``as_*`` readers turn a value of the wrong type into "absent"
rather than an exception: the report never crashes on its input.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.files import InputFileError, read_json_file

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
_RUN_DIR_HINT = "pass the reports/<run-id>/ directory an acceptance session wrote (e.g. reports/latest)"


class ReportError(Exception):
    """The report cannot be built: ``str(err)`` is the one line to show (what, where, what to do)."""


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


# --- the run directory -----------------------------------------------------------------------


@dataclass(kw_only=True)
class RunInputs:
    """What a run directory holds, parsed and cleaned; a file that cannot be used has a problem line."""

    run_dir: Path
    report: dict | None = None
    report_problem: str | None = None
    session: dict | None = None
    session_problem: str | None = None
    records: dict[str, dict] = field(default_factory=dict)
    """runs/<label>.json, keyed by label."""
    record_problems: list[str] = field(default_factory=list)

    @property
    def header(self) -> dict:
        """The session's summary (hardware, profile, command line, times): session.json, then report.json's."""
        header = {key: value for key, value in as_dict(self.session).items() if key != "results"}
        header.update(as_dict(as_dict(self.report).get("harness")))
        return header


def _read_json(path: Path) -> tuple[Any, str | None]:
    """A run directory's JSON through the one bounded reader (harness/files.py: regular files only, a size
    cap, a nesting cap), as (data, None) or (None, why not)."""
    try:
        data = read_json_file(path)
    except FileNotFoundError:
        return None, "missing"
    except InputFileError as exc:
        return None, str(exc).removeprefix(f"{path}: ")
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror or exc})"
    except (ValueError, RecursionError) as exc:
        where = f" at line {exc.lineno}" if isinstance(exc, json.JSONDecodeError) else ""
        return None, f"is not valid JSON{where} (cut short? the session may have been killed while writing it)"
    if not isinstance(data, dict):
        return None, f"is not a JSON object (found {type(data).__name__})"
    return sanitize(data), None


def load_inputs(run_dir: Path) -> RunInputs:
    """Read ``run_dir``; raises ReportError when it holds nothing usable."""
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise ReportError(f"run directory {run_dir} does not exist; {_RUN_DIR_HINT}")
    if not run_dir.is_dir():
        raise ReportError(f"{run_dir} is not a directory; {_RUN_DIR_HINT}")
    inputs = RunInputs(run_dir=run_dir)
    inputs.report, inputs.report_problem = _read_json(run_dir / "report.json")
    inputs.session, inputs.session_problem = _read_json(run_dir / "session.json")
    runs = run_dir / "runs"
    if runs.is_dir():
        for path in sorted(runs.glob("*.json")):
            record, problem = _read_json(path)
            if record is None:
                inputs.record_problems.append(clean_text(f"runs/{path.name} {problem}", one_line=True))
            else:
                inputs.records[clean_text(path.stem, KEY_CHARS, one_line=True)] = record
    # A session killed outright (SIGKILL, the OOM killer) never copied its finished launches' records
    # into runs/: each launch left its own in logs/<case>/record.json, under the same name.
    for path in sorted(run_dir.glob("logs/*/record.json")):
        key = clean_text(path.parent.name, KEY_CHARS, one_line=True)
        if key not in inputs.records:
            record, problem = _read_json(path)
            if record is not None:
                inputs.records[key] = record
    if inputs.report is None and inputs.session is None and not inputs.records:
        raise ReportError(
            f"no usable run data in {run_dir}: report.json {inputs.report_problem}, session.json "
            f"{inputs.session_problem}, no readable runs/*.json; pass the reports/<run-id>/ directory an "
            "acceptance session wrote, or rerun `make acceptance`")
    return inputs
