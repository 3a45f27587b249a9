"""The one reader of a run directory (harness/run_directory.py, issue 29 item 1): every file that cannot be
used is one problem line naming it, never an exception; what is read comes back as parsed."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from harness.files import JSON_MAX_BYTES
from harness.records import RunRecord
from harness.results.reading import as_int, as_label, as_number, as_text
from harness.run_directory import (RecordError, RunDirectoryError, find_run_dirs, read_json_object, read_run_directory,
                                   run_record)


def _run_dir(root: Path) -> Path:
    (root / "runs").mkdir(parents=True)
    (root / "session.json").write_text(json.dumps({"run_id": "r", "hardware": {"hostname": "n1"}}))
    (root / "report.json").write_text(json.dumps({"tests": []}))
    (root / "runs" / "a.json").write_text(json.dumps({"run_id": "a", "note": "\x1b[2J"}))
    return root


def test_an_intact_directory_is_read_whole_and_uncleaned(tmp_path):
    directory = read_run_directory(_run_dir(tmp_path))
    assert directory.session == {"run_id": "r", "hardware": {"hostname": "n1"}} and directory.report == {"tests": []}
    assert [(r.file, r.name) for r in directory.records] == [("runs/a.json", "a")]
    assert directory.records[0].data["note"] == "\x1b[2J", "cleaning is the report's, not the reader's"
    assert directory.problems == () and directory.has_runs


def _packed(run_dir: Path) -> Path:
    """``run_dir`` archived file by file, as docs/data keeps sessions: every JSON file gzipped in place."""
    for path in [*run_dir.glob("*.json"), *run_dir.glob("runs/*.json")]:
        path.with_name(f"{path.name}.gz").write_bytes(gzip.compress(path.read_bytes()))
        path.unlink()
    return run_dir


def test_an_archived_directory_reads_as_the_directory_it_was(tmp_path):
    plain = read_run_directory(_run_dir(tmp_path / "plain"))
    packed = read_run_directory(_packed(_run_dir(tmp_path / "packed")))
    assert (packed.session, packed.report) == (plain.session, plain.report) and packed.problems == ()
    assert [(r.name, r.data) for r in packed.records] == [(r.name, r.data) for r in plain.records]
    assert [r.file for r in packed.records] == ["runs/a.json.gz"]
    assert find_run_dirs([tmp_path]) == [tmp_path / "packed", tmp_path / "plain"]


def test_a_plain_file_wins_over_its_packed_copy(tmp_path):
    run_dir = _run_dir(tmp_path)
    (run_dir / "runs" / "a.json.gz").write_bytes(gzip.compress(b'{"run_id": "stale"}'))
    (run_dir / "runs" / "b.json.gz").write_bytes(gzip.compress(b'{"run_id": "b"}'))
    assert [(r.name, r.data["run_id"]) for r in read_run_directory(run_dir).records] == [("a", "a"), ("b", "b")]


@pytest.mark.parametrize(("packed", "what"), [
    (b"not gzip at all", "is not a readable gzip file"),
    (gzip.compress(b" " * (JSON_MAX_BYTES + 1)), f"unpacks to more than the {JSON_MAX_BYTES:,} bytes"),
    (gzip.compress(b'{"results": {'), "is not valid JSON at line 1"),
])
def test_an_unusable_packed_file_is_a_problem_naming_it(tmp_path, packed, what):
    run_dir = _packed(_run_dir(tmp_path))
    (run_dir / "session.json.gz").write_bytes(packed)
    directory = read_run_directory(run_dir)
    assert directory.session is None and what in directory.problem_of("session.json")


def _sparse(path: Path, size: int) -> None:
    with open(path, "wb") as handle:
        handle.truncate(size)  # no disk used: only its size is looked at


@pytest.mark.parametrize(("write", "what"), [
    (lambda p: p.write_text('{"results": {'), "is not valid JSON at line 1 (cut short? the session may have been"),
    (lambda p: p.write_text("[1, 2]"), "is not a JSON object (found list)"),
    (lambda p: p.write_text("[" * 100_000 + "]" * 100_000), "not readable JSON: nested too deeply"),
    (lambda p: p.symlink_to("/dev/zero"), "is a symbolic link; the harness reads only regular files here"),
    (lambda p: os.mkfifo(p), "is a named pipe, not a regular file; move it out of the way"),
    (lambda p: _sparse(p, JSON_MAX_BYTES + 1), f"more than the {JSON_MAX_BYTES:,} this reader takes"),
])
def test_each_unusable_file_is_a_problem_naming_it(tmp_path, write, what):
    run_dir = _run_dir(tmp_path / "run")
    for path in (run_dir / "session.json", run_dir / "runs" / "a.json"):
        path.unlink()
        write(path)
    directory = read_run_directory(run_dir)
    assert directory.session is None and directory.records == () and directory.report == {"tests": []}
    assert what in directory.problem_of("session.json")
    assert [p.line for p in directory.record_problems] == [f"runs/a.json {directory.problem_of('runs/a.json')}"]
    assert what in directory.record_problems[0].line


def test_bytes_that_are_not_utf8_are_read_with_replacements(tmp_path):
    run_dir = _run_dir(tmp_path)
    (run_dir / "session.json").write_bytes(b'{"hardware": {"hostname": "n\xff1"}}')
    assert read_run_directory(run_dir).session == {"hardware": {"hostname": "n\ufffd1"}}


def test_a_missing_file_is_a_problem_that_says_missing(tmp_path):
    run_dir = _run_dir(tmp_path)
    (run_dir / "report.json").unlink()
    directory = read_run_directory(run_dir)
    assert directory.problem_of("report.json") == "missing" and directory.problems[0].missing
    assert read_json_object(run_dir / "nothing.json") == (None, "missing")


def test_a_file_name_with_escapes_is_cleaned_in_its_problem_line(tmp_path):
    run_dir = _run_dir(tmp_path)
    (run_dir / "runs" / "\x1b[31mx.json").write_text("{")
    assert "\x1b" not in read_run_directory(run_dir).record_problems[0].line


def test_a_killed_sessions_launch_records_stand_in_only_where_runs_has_none(tmp_path):
    run_dir = _run_dir(tmp_path)
    for case in ("a", "b", "c"):
        (run_dir / "logs" / case).mkdir(parents=True)
        (run_dir / "logs" / case / "record.json").write_text(json.dumps({"run_id": f"log-{case}"}))
    (run_dir / "logs" / "c" / "record.json").write_text("{")
    assert read_run_directory(run_dir).launch_records == (), "read only when asked for"
    launched = read_run_directory(run_dir, launch_records=True).launch_records
    assert [(r.file, r.data["run_id"]) for r in launched] == [("logs/b/record.json", "log-b")]
    # archived packed, as docs/data keeps a cut launch's records
    (run_dir / "logs" / "d").mkdir()
    (run_dir / "logs" / "d" / "record.json.gz").write_bytes(gzip.compress(json.dumps({"run_id": "log-d"}).encode()))
    launched = read_run_directory(run_dir, launch_records=True).launch_records
    assert [(r.file, r.data["run_id"]) for r in launched] == [("logs/b/record.json", "log-b"),
                                                               ("logs/d/record.json.gz", "log-d")]


def test_no_directory_is_the_one_error(tmp_path):
    with pytest.raises(RunDirectoryError, match="run directory .* does not exist; pass the reports/<run-id>/"):
        read_run_directory(tmp_path / "nope")
    (tmp_path / "file").write_text("")
    with pytest.raises(RunDirectoryError, match="is not a directory"):
        read_run_directory(tmp_path / "file")


def test_run_directories_are_found_two_levels_down_and_links_not_followed(tmp_path):
    a = _run_dir(tmp_path / "reports" / "node1" / "a")
    b = _run_dir(tmp_path / "reports" / "b")
    (tmp_path / "reports" / "latest").symlink_to(b)
    assert find_run_dirs([tmp_path / "reports"]) == [b, a]
    with pytest.raises(RunDirectoryError, match="holds no report directory"):
        find_run_dirs([tmp_path / "reports" / "node1" / "a" / "runs"])


def test_the_tolerant_accessors_make_a_wrong_type_absent():
    assert [as_number(v) for v in (True, "1", float("nan"), 10**400, 2)] == [None, None, None, None, 2.0]
    assert [as_int(v) for v in (2.5, 3.0)] == [None, 3]
    assert as_text(None, "-") == "-" and as_text({"a": 1}) == "" and as_text("a\x00") == "a\ufffd"
    assert [as_label(v) for v in (True, "", " n1\nx", {"a": 1})] == [None, None, " n1 x", None]


def test_a_run_record_to_compute_with_has_every_field_of_its_type():
    record = RunRecord(run_id="r", model="tiny_bert", precision="fp32", scaling="weak", world_size=1, nodes=1,
                       device_kind="cpu", batch_size_per_gpu=2, global_batch_size=2, status="ok",
                       throughput_per_gpu=10.0, throughput_total=10.0)
    data = json.loads(record.to_json())
    assert run_record(data) == record
    with pytest.raises(RecordError, match="expected a JSON object, got list"):
        run_record([data])
    with pytest.raises(RecordError, match="throughput_total is not a finite number >= 0"):
        run_record({**data, "throughput_total": 10**400})  # beyond any float: no figure to compute with
