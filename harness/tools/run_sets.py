"""Reading one side of ``harness compare``: the run records, verdicts and all-reduce rows of a run directory.

A side is a run directory as ``make acceptance`` writes them (``reports/<run-id>/``, whose
``runs/*.json`` are the run records) or as ``harness calibrate`` writes them (several repeats of a
case each), or a ``session.json`` / ``report.json`` of such a directory.

Its files are read by the one run-directory reader (harness/run_directory.py), and they may be damaged
or hand-edited: every way a file can be unusable is a ``CompareError`` naming the file, one line, never a
traceback. A run directory whose
session.json (or report.json) is damaged but whose ``runs/*.json`` are intact is still compared,
from the records, with a note saying that its verdicts could not be read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.cases import CaseId
from harness.records import RunRecord, record_case
from harness.results.reading import as_number
from harness.run_directory import (MISSING, REPORT_FILE, SESSION_FILE, RecordError, RunDirectory, read_json_object,
                                   is_run_dir, read_run_directory, run_record)


class CompareError(Exception):
    """A run directory that cannot be read; the message says which and what was expected."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunSet:
    """The records of one run directory, and its verdicts when it has them."""

    path: Path
    records: tuple[RunRecord, ...]
    verdicts: dict[str, str]
    """run_id -> "PASS" / "FAIL" (from the checks in session.json or report.json)."""
    profile: str | None = None
    """The threshold profile the run was judged against, when known."""
    read_from: str = ""
    allreduce_busbw_gbps: dict[tuple[int, int], float] = field(default_factory=dict)
    """(GPUs, message bytes) -> all-reduce bus bandwidth in GB/s, from session.json when the run had
    the all-reduce test."""
    cases: dict[str, CaseId] = field(default_factory=dict)
    """run_id -> the case as the session recorded it (each result's ``case_id``); empty for a directory
    of run records only, and for files written before results carried a case_id."""
    notes: tuple[str, ...] = ()
    """What could not be read and was done without (a damaged session.json beside intact records)."""
    efficiencies: dict[str, float] = field(default_factory=dict)
    """run_id -> the scaling efficiency its check computed (``weak_efficiency`` / ``strong_efficiency``,
    ``measured``): the figure the verdict and the report show. Empty for records without a session."""

    def case_of(self, record: RunRecord) -> CaseId:
        """The recorded case of this run, else the one its record's fields describe."""
        return self.cases.get(record.run_id) or record_case(record)


# Keys that mark a session result as something other than a benchmark case (see harness.plugin).
NOT_BENCHMARK_RESULTS = ("interconnect", "topology", "soak", "components")
SUMMARY_FILES = (SESSION_FILE, REPORT_FILE)


@dataclass(frozen=True, kw_only=True, slots=True)
class _Summary:
    """What a session.json or report.json holds for compare."""

    records: list[RunRecord] = field(default_factory=list)
    verdicts: dict[str, str] = field(default_factory=dict)
    profile: str | None = None
    allreduce: dict[tuple[int, int], float] = field(default_factory=dict)
    cases: dict[str, CaseId] = field(default_factory=dict)
    efficiencies: dict[str, float] = field(default_factory=dict)


EFFICIENCY_CHECKS = ("weak_efficiency", "strong_efficiency")
"""The checks whose ``measured`` is the case's scaling efficiency (harness/kinds/ddp_scaling/checks.py)."""


def load_run_set(path: str | Path) -> RunSet:
    """Records and verdicts of a run directory, or of its session.json / report.json."""
    path = Path(path)
    if not path.exists():
        raise CompareError(f"{path}: no such file or directory; give a run directory such as reports/<run-id>/ "
                           "(or reports/latest)")
    if path.is_file():
        summary = _read_summary_file(path)
        if not summary.records:
            raise CompareError(f"{path}: holds no run records (no test ran a benchmark)")
        return RunSet(path=path, records=tuple(summary.records), verdicts=summary.verdicts, profile=summary.profile,
                      read_from=path.name, allreduce_busbw_gbps=summary.allreduce, cases=summary.cases,
                      efficiencies=summary.efficiencies)
    if not path.is_dir():
        raise CompareError(f"{path}: neither a run directory nor a JSON file (a pipe or a device?); give a run "
                           "directory such as reports/<run-id>/")
    directory = read_run_directory(path)
    have_records = bool(directory.records or directory.record_problems)
    summary, summary_file, notes = _directory_summary(directory, have_records=have_records)
    if have_records:
        records = _records_of(directory)
        read_from = "runs/*.json" + (f" + {summary_file.name}" if summary_file else "")
    elif summary.records and summary_file is not None:
        records = summary.records
        read_from = summary_file.name
    else:
        raise CompareError(f"{path}: no run records here: expected runs/*.json, session.json or report.json "
                           f"(a run directory of `make acceptance` or `harness calibrate`){_subdir_hint(path)}")
    return RunSet(path=path, records=tuple(records), verdicts=summary.verdicts, profile=summary.profile,
                  read_from=read_from, allreduce_busbw_gbps=summary.allreduce, cases=summary.cases, notes=notes,
                  efficiencies=summary.efficiencies)


def _directory_summary(directory: RunDirectory, *, have_records: bool) -> tuple[_Summary, Path | None, tuple[str, ...]]:
    """The first readable summary file of a run directory, the file, and notes on the damaged ones
    skipped. A damaged one is an error only when nothing else here holds the records."""
    notes: list[str] = []
    first_error: CompareError | None = None
    for name, data in ((SESSION_FILE, directory.session), (REPORT_FILE, directory.report)):
        file, what = directory.path / name, directory.problem_of(name)
        if what == MISSING:
            continue
        try:
            if data is None:
                raise CompareError(f"{file}: {what}")
            return _summary_of(file, data), file, tuple(notes)
        except CompareError as exc:
            first_error = first_error or exc
            notes.append(f"{exc}; its verdicts are not shown (statuses are the runs' own)")
    if first_error is not None and not have_records:
        raise first_error
    return _Summary(), None, tuple(notes)


def _records_of(directory: RunDirectory) -> list[RunRecord]:
    """Every ``runs/*.json`` as a run record; the first that is unusable is the CompareError, naming it."""
    if directory.record_problems:
        problem = directory.record_problems[0]
        raise CompareError(f"{directory.path / problem.file}: {problem.what}")
    return [_record_from(record.data, f"{directory.path / record.file}: not a readable run record")
            for record in directory.records]


def _allreduce_of(data: dict) -> dict[tuple[int, int], float]:
    """(GPUs, bytes) -> bus bandwidth from a session.json's ``interconnect.allreduce`` rows; {} when it
    has none (a report.json, a run without the all-reduce test) or they are malformed."""
    try:
        rows = ((data.get("interconnect") or {}).get("allreduce")) or []
        busbw = {(int(row["gpus"]), int(row["size_bytes"])): float(row["busbw_gbps"])
                 for row in rows if row.get("correct", True) and row.get("busbw_gbps")}
    except (ValueError, TypeError, KeyError, AttributeError):
        return {}  # the cases are what compare is for; a damaged interconnect section only loses its rows
    return {key: gbps for key, gbps in busbw.items() if 0 < gbps < math.inf}


def _subdir_hint(path: Path) -> str:
    runs = sorted(child.name for child in path.iterdir()
                  if child.is_dir() and ((child / "runs").is_dir() or is_run_dir(child)))
    if not runs:
        return ""
    shown = ", ".join(runs[-3:])
    return f"; it holds run directories ({shown}): pick one, e.g. {path / runs[-1]}"


def _record_from(data: Any, what: str) -> RunRecord:
    """The run record in ``data`` (harness/run_directory.py ``run_record``); CompareError "<what>: why"."""
    try:
        return run_record(data)
    except RecordError as exc:
        raise CompareError(f"{what}: {exc}") from None


def _results_of(file: Path, data: dict) -> tuple[list[Any], str | None]:
    """The benchmark results of a session.json or a report.json, and the profile's name."""
    if "results" in data:  # session.json
        if not isinstance(data["results"], dict):
            raise CompareError(f"{file}: 'results' is not an object of test results; the file is damaged")
        return list(data["results"].values()), _name_of(data.get("profile"))
    if "tests" in data:  # report.json
        tests = data["tests"]
        if not isinstance(tests, list) or not all(isinstance(test, dict) for test in tests):
            raise CompareError(f"{file}: 'tests' is not a list of test objects; the file is damaged")
        metadata = [test.get("metadata") for test in tests]
        results = [meta.get("harness") for meta in metadata if isinstance(meta, dict)]
        harness = data.get("harness")
        return [result for result in results if result], _name_of(harness.get("profile")
                                                                   if isinstance(harness, dict) else None)
    raise CompareError(f"{file}: neither a session.json (no 'results') nor a report.json (no 'tests')")


def _name_of(profile: Any) -> str | None:
    name = profile.get("name") if isinstance(profile, dict) else None
    return name if isinstance(name, str) else None


def _read_summary_file(file: Path) -> _Summary:
    """session.json (plugin summary) or report.json (pytest-json-report): records, verdicts, profile,
    all-reduce bus bandwidths and the recorded case of each run."""
    data, what = read_json_object(file)
    if data is None:
        raise CompareError(f"{file}: {what}")
    return _summary_of(file, data)


def _summary_of(file: Path, data: dict) -> _Summary:
    """What a session.json or report.json (``file``, read into ``data``) holds for compare."""
    results, profile = _results_of(file, data)
    summary = _Summary(profile=profile, allreduce=_allreduce_of(data))
    for result in results:
        if not isinstance(result, dict):
            raise CompareError(f"{file}: a result is not an object: {result!r:.60}")
        if any(key in result for key in NOT_BENCHMARK_RESULTS):
            continue  # all-reduce, topology, soak and component results hold no benchmark run record to compare
        if result.get("record") is None and not {"scaling", "case_id"} & set(result):
            continue  # nor do the node-shape, GPU-state and component tests; a benchmark case names its scaling
        record = _record_from(result.get("record"), f"{file}: a result without a readable run record")
        checks = result.get("checks") or []
        if not isinstance(checks, list) or not all(isinstance(check, dict) for check in checks):
            raise CompareError(f"{file}: the checks of {record.run_id} are not a list of objects; the file is damaged")
        summary.records.append(record)
        summary.verdicts[record.run_id] = "FAIL" if any(check.get("passed") is False for check in checks) else "PASS"
        efficiency = next((measured for check in checks if check.get("key") in EFFICIENCY_CHECKS
                           and (measured := as_number(check.get("measured"))) is not None and measured >= 0), None)
        if efficiency is not None:
            summary.efficiencies[record.run_id] = efficiency
        case = _recorded_case(result.get("case_id"))
        if case is not None:
            summary.cases[record.run_id] = case
    return summary


def _recorded_case(data: Any) -> CaseId | None:
    """The case a result recorded; None when absent (older files) or damaged (then its record says)."""
    try:
        return CaseId.from_dict(data)
    except OverflowError:  # "gpus": Infinity, which CaseId.from_dict does not expect
        return None
