"""The report's input edge: a run directory's JSON read safely, every string cleaned, values typed.

Inputs are the files an acceptance session leaves in ``reports/<run-id>/``: ``report.json``
(pytest-json-report, each test's result attached), ``session.json`` (the harness's own summary,
written even when pytest-json-report is not), and ``runs/*.json`` (run records). When the session
was killed, report.json may be missing or cut short: the report is then built from what is left.

Every string read from any input is cleaned on its way in (``sanitize`` of harness/results/reading.py:
control characters replaced, each field and log line cut to a size), because it ends up in a page
people open in a browser: a hostname or a log line is data, never markup. The ``as_*`` readers there
turn a value of the wrong type into "absent" rather than an exception: the report never crashes on its
input.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.files import InputFileError, read_json_file
from harness.results.reading import KEY_CHARS, as_dict, clean_text, sanitize

_RUN_DIR_HINT = "pass the reports/<run-id>/ directory an acceptance session wrote (e.g. reports/latest)"


class ReportError(Exception):
    """The report cannot be built: ``str(err)`` is the one line to show (what, where, what to do)."""


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
