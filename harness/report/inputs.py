"""The report's input edge: a run directory as harness/run_directory.py reads it, every string cleaned.

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

from dataclasses import dataclass
from pathlib import Path

from harness.results.reading import KEY_CHARS, as_dict, clean_text, sanitize
from harness.run_directory import REPORT_FILE, SESSION_FILE, RunDirectoryError, read_run_directory


class ReportError(Exception):
    """The report cannot be built: ``str(err)`` is the one line to show (what, where, what to do)."""


@dataclass(frozen=True, kw_only=True)
class RunInputs:
    """What a run directory holds, parsed and cleaned; a file that cannot be used has a problem line."""

    run_dir: Path
    report: dict | None = None
    report_problem: str | None = None
    session: dict | None = None
    session_problem: str | None = None
    records: dict[str, dict]
    """runs/<label>.json, keyed by label (a killed session's logs/<label>/record.json where runs/ has none)."""
    record_problems: tuple[str, ...] = ()

    @property
    def header(self) -> dict:
        """The session's summary (hardware, profile, command line, times): session.json, then report.json's."""
        header = {key: value for key, value in as_dict(self.session).items() if key != "results"}
        header.update(as_dict(as_dict(self.report).get("harness")))
        return header


def load_inputs(run_dir: Path) -> RunInputs:
    """Read ``run_dir`` (harness/run_directory.py) and clean it; raises ReportError when it holds nothing usable."""
    try:
        directory = read_run_directory(run_dir, launch_records=True)
    except RunDirectoryError as exc:
        raise ReportError(str(exc)) from None
    records = {clean_text(r.name, KEY_CHARS, one_line=True): sanitize(r.data) for r in directory.records}
    for record in directory.launch_records:
        records.setdefault(clean_text(record.name, KEY_CHARS, one_line=True), sanitize(record.data))
    inputs = RunInputs(run_dir=directory.path, report=sanitize(directory.report),
                       report_problem=directory.problem_of(REPORT_FILE), session=sanitize(directory.session),
                       session_problem=directory.problem_of(SESSION_FILE), records=records,
                       record_problems=tuple(problem.line for problem in directory.record_problems))
    if inputs.report is None and inputs.session is None and not inputs.records:
        raise ReportError(
            f"no usable run data in {directory.path}: report.json {inputs.report_problem}, session.json "
            f"{inputs.session_problem}, no readable runs/*.json; pass the reports/<run-id>/ directory an "
            "acceptance session wrote, or rerun `make acceptance`")
    return inputs
