"""The one reader of a run directory: what an acceptance session leaves in ``reports/<run-id>/``.

``session.json`` (the harness's own summary, written even when pytest-json-report is not),
``report.json`` (pytest-json-report, each test's result attached) and ``runs/*.json`` (the run
records). A session killed outright (SIGKILL, the OOM killer) never copied its finished launches'
records into ``runs/``: each launch left its own in ``logs/<case>/record.json``, under the same name.

The report, the fleet, ``harness compare`` and ``harness calibrate-fit`` read a run directory here and
only here, so a change of that layout is mended in one place. Every file goes through the one bounded
reader (harness/files.py: regular files only, a size cap, a nesting cap). Reading never fails on a
damaged file: each file that cannot be used is a ``Problem`` naming it and saying what is wrong, and
what to do about one is the caller's (the report shows it, compare and calibrate-fit refuse a damaged
run record). What is read comes back as parsed, not cleaned: the report cleans every string
(``sanitize`` of harness/results/reading.py), compare judges its records strictly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.files import InputFileError, read_json_file
from harness.records import RunRecord, record_case
from harness.results.reading import as_number, clean_text

PACKED = ".gz"
"""A run directory archived file by file (``session.json.gz``, ``runs/<case>.json.gz``, as docs/data keeps
them) reads as the directory it was: each file is read packed where the plain one is not there."""
SESSION_FILE = "session.json"
REPORT_FILE = "report.json"
RUNS_DIR = "runs"
MISSING = "missing"
"""What a Problem says of a file that is not there."""
RUN_DIR_HINT = "pass the reports/<run-id>/ directory an acceptance session wrote (e.g. reports/latest)"


class RunDirectoryError(Exception):
    """A path that is no run directory to read: ``str(err)`` names it and what to pass instead."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Problem:
    """A file of the run directory that could not be used."""

    file: str
    """Its path in the run directory: ``session.json``, ``runs/<case>.json``."""
    what: str
    """What is wrong, to follow its name: "missing", "is not valid JSON at line 3 (...)"."""

    @property
    def missing(self) -> bool:
        return self.what == MISSING

    @property
    def line(self) -> str:
        """``<file> <what>`` on one line, safe to show (a file name is data, never a terminal escape)."""
        return clean_text(f"{self.file} {self.what}", one_line=True)


@dataclass(frozen=True, kw_only=True, slots=True)
class RecordFile:
    """One run record as read: its file, its case's name and its JSON object."""

    file: str
    """``runs/<case>.json``, or ``logs/<case>/record.json`` for a launch of a killed session."""
    name: str
    """``<case>``: the name the session gave the run (the file's stem, the launch's directory)."""
    data: dict


@dataclass(frozen=True, kw_only=True, slots=True)
class RunDirectory:
    """What a run directory holds, as read; each file that could not be used is a Problem."""

    path: Path
    session: dict | None
    """session.json; None when it is missing or damaged (its Problem says which)."""
    report: dict | None
    """report.json; None when it is missing or damaged (its Problem says which)."""
    has_runs: bool
    """Whether there is a ``runs/`` directory (even an empty one)."""
    records: tuple[RecordFile, ...]
    """``runs/*.json`` that are JSON objects, in file-name order."""
    launch_records: tuple[RecordFile, ...] = ()
    """``logs/<case>/record.json`` of the cases without a readable ``runs/<case>.json`` (read only when
    asked for: a killed session's finished launches). A damaged one is no Problem: it is a fallback."""
    problems: tuple[Problem, ...] = ()
    """session.json, report.json (missing ones included), then each ``runs/*.json`` that is unusable."""

    def problem_of(self, file: str) -> str | None:
        """What is wrong with ``file`` (``session.json``, ``runs/x.json``), or None when it was read."""
        return next((problem.what for problem in self.problems if problem.file == file), None)

    @property
    def record_problems(self) -> tuple[Problem, ...]:
        return tuple(problem for problem in self.problems if problem.file.startswith(f"{RUNS_DIR}/"))


def read_json_object(path: Path) -> tuple[dict | None, str | None]:
    """A run directory's JSON object as ``(data, None)``, or ``(None, what is wrong)`` ("missing", "is a
    named pipe, ...", "is not valid JSON at line 3 (...)", "is not a JSON object (found list)")."""
    try:
        data = read_json_file(path)
    except FileNotFoundError:
        return None, MISSING
    except InputFileError as exc:
        return None, str(exc).removeprefix(f"{path}: ")
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror or exc})"
    except (ValueError, RecursionError) as exc:
        where = f" at line {exc.lineno}" if isinstance(exc, json.JSONDecodeError) else ""
        return None, f"is not valid JSON{where} (cut short? the session may have been killed while writing it)"
    if not isinstance(data, dict):
        return None, f"is not a JSON object (found {type(data).__name__})"
    return data, None


def read_run_directory(path: Path, *, launch_records: bool = False) -> RunDirectory:
    """Everything ``path`` holds; raises RunDirectoryError only when it is no directory at all.
    ``launch_records``: also read ``logs/<case>/record.json`` of the cases missing from ``runs/``."""
    path = Path(path)
    if not path.exists():
        raise RunDirectoryError(f"run directory {path} does not exist; {RUN_DIR_HINT}")
    if not path.is_dir():
        raise RunDirectoryError(f"{path} is not a directory; {RUN_DIR_HINT}")
    problems: list[Problem] = []
    summaries: dict[str, dict | None] = {}
    for name in (SESSION_FILE, REPORT_FILE):
        summaries[name], what = read_json_object(_stored(path / name))
        if what is not None:
            problems.append(Problem(file=name, what=what))
    runs = path / RUNS_DIR
    records: list[RecordFile] = []
    for file in _run_files(runs) if runs.is_dir() else ():
        data, what = read_json_object(file)
        name = file.name.removesuffix(PACKED).removesuffix(".json")
        if data is None:
            problems.append(Problem(file=f"{RUNS_DIR}/{file.name}", what=what or MISSING))
        else:
            records.append(RecordFile(file=f"{RUNS_DIR}/{file.name}", name=name, data=data))
    return RunDirectory(path=path, session=summaries[SESSION_FILE], report=summaries[REPORT_FILE],
                        has_runs=runs.is_dir(), records=tuple(records), problems=tuple(problems),
                        launch_records=_launch_records(path, {r.name for r in records}) if launch_records else ())


def _stored(path: Path) -> Path:
    """``path``, or its packed copy (``<name>.gz``) where only that is there."""
    packed = path.with_name(f"{path.name}{PACKED}")
    return packed if not path.exists() and packed.exists() else path


def _run_files(runs: Path) -> list[Path]:
    """``runs/*.json``, and ``runs/*.json.gz`` of the cases with no plain file, in case-name order."""
    plain = {file.name: file for file in runs.glob("*.json")}
    packed = {file.name.removesuffix(PACKED): file for file in runs.glob(f"*.json{PACKED}")}
    return [plain.get(name) or packed[name] for name in sorted({**packed, **plain})]


def _launch_records(path: Path, read: set[str]) -> tuple[RecordFile, ...]:
    """Each launch's own ``logs/<case>/record.json`` (or its packed copy) whose case ``runs/`` does not hold
    readable: a launch cut short (a time limit) leaves them there before the session collects them."""
    found = []
    cases = sorted({file.parent for file in path.glob("logs/*/record.json*")
                    if file.name in ("record.json", f"record.json{PACKED}")})
    for case in cases:
        file = _stored(case / "record.json")
        if case.name not in read:
            data, _ = read_json_object(file)
            if data is not None:
                found.append(RecordFile(file=f"logs/{case.name}/{file.name}", name=case.name, data=data))
    return tuple(found)


# --- typed run records ---------------------------------------------------------------------------


class RecordError(ValueError):
    """A JSON object that is no usable run record: ``str(err)`` says why, to follow the file's name."""


def run_record(data: Any) -> RunRecord:
    """The run record in ``data``, every field a reader computes with checked for its type and range
    (the report reads records tolerantly as dicts; compare and calibrate-fit compute with them).
    Raises RecordError."""
    if not isinstance(data, dict):
        raise RecordError(f"expected a JSON object, got {type(data).__name__}")
    try:
        record = RunRecord.from_dict(data)
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        raise RecordError(str(exc)) from None
    problem = _record_problem(record)
    if problem is not None:
        raise RecordError(problem)
    return record


_TEXT_FIELDS = ("run_id", "model", "precision", "status", "sample_unit")
_OPTIONAL_TEXT_FIELDS = ("device_name", "started_at")
_RATE_FIELDS = ("throughput_per_gpu", "throughput_total", "throughput_ci95_rel")


def _is_rate(value: Any) -> bool:
    number = as_number(value)
    return number is not None and number >= 0


def _record_problem(record: RunRecord) -> str | None:
    """What makes ``record`` unusable to compute with (a field of the wrong type or range), or None."""
    for name in _TEXT_FIELDS:
        if not isinstance(getattr(record, name), str):
            return f"{name} is not a string: {getattr(record, name)!r}"
    for name in _OPTIONAL_TEXT_FIELDS:
        if getattr(record, name) is not None and not isinstance(getattr(record, name), str):
            return f"{name} is not a string: {getattr(record, name)!r}"
    for name in _RATE_FIELDS:
        if getattr(record, name) is not None and not _is_rate(getattr(record, name)):
            return f"{name} is not a finite number >= 0: {getattr(record, name)!r}"
    if not all(isinstance(host, str) for host in record.hosts):
        return f"hosts is not a list of host names: {list(record.hosts)!r}"
    if record.versions is not None and not all(isinstance(value, (str, type(None)))
                                               for value in (record.versions.driver, record.versions.cuda,
                                                             record.versions.nccl, record.versions.torch,
                                                             record.versions.harness)):
        return "versions holds a value that is not a string"
    for name in ("world_size", "nodes"):
        if isinstance(getattr(record, name), bool) or not isinstance(getattr(record, name), int):
            return f"{name} is not an integer: {getattr(record, name)!r}"
    try:
        record_case(record)
    except ValueError as exc:  # scaling, GPUs or nodes out of range
        return str(exc)
    return None


# --- finding run directories -------------------------------------------------------------------


def is_run_dir(path: Path) -> bool:
    """A directory an acceptance session wrote: it holds session.json or report.json."""
    return any(_stored(path / name).is_file() for name in (SESSION_FILE, REPORT_FILE))


def find_run_dirs(paths: list[Path]) -> list[Path]:
    """Each path is a run directory, or holds run directories up to two levels down (a reports/
    root, or a fleet job's reports/<node>/<run-id>/). Links (``reports/latest``) are not followed:
    they point at a directory found anyway. Raises RunDirectoryError for a path that holds none."""
    found: list[Path] = []
    for path in paths:
        if not path.is_dir():
            raise RunDirectoryError(f"{path}: no such directory; pass report directories (reports/<run-id>/) or "
                                    "a directory that holds them")
        if is_run_dir(path):
            found.append(path)
            continue
        level, before = [path], len(found)
        for _ in range(2):
            children = [c for p in level for c in sorted(p.iterdir()) if c.is_dir() and not c.is_symlink()]
            found += [c for c in children if is_run_dir(c)]
            level = [c for c in children if not is_run_dir(c)]
        if len(found) == before:
            raise RunDirectoryError(f"{path}: holds no report directory (no session.json or report.json in it or "
                                    "two levels below); pass the --harness-report-dir the sessions wrote")
    return list(dict.fromkeys(found))
