"""harness compare: two synthetic run directories, written with harness.records.write_record."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.cases import CaseId
from harness.records import RunRecord, StepTimeStats, Versions, write_record
from harness.results.job import Failure
from harness.tools.compare import cli_compare, compare, format_comparison, summarize
from harness.tools.run_sets import CompareError, load_run_set, record_case


def make_record(model="tiny_bert", precision="bf16", gpus=1, per_gpu=100.0, *, scaling="weak", batch=4,
                status="ok", ci=0.005, run_id=None, driver="580.159.04", started_at="2026-11-21T10:00:00+00:00"):
    ok = status == "ok"
    global_batch = batch if scaling == "strong" else batch * gpus
    per_gpu_batch = global_batch // gpus if scaling == "strong" else batch
    return RunRecord(
        run_id=run_id or f"{model}-{precision}-{scaling}-{gpus}gpu-{per_gpu}",
        model=model, precision=precision, scaling=scaling, world_size=gpus, nodes=1, device_kind="cuda",
        batch_size_per_gpu=per_gpu_batch, global_batch_size=global_batch, status=status,
        failure=None if ok else Failure(reason="rank 1 (host n1, GPU 1) was killed by SIGKILL", phase="measure"),
        sample_unit="sequences" if model == "tiny_bert" else "images",
        throughput_per_gpu=per_gpu if ok else None, throughput_total=per_gpu * gpus if ok else None,
        throughput_ci95_rel=ci if ok else None,
        step_time_ms=StepTimeStats(mean_ms=40, median_ms=40, p95_ms=41, p99_ms=42, cv=0.01, steps=25) if ok else None,
        loss_finite=True if ok else None, device_name="NVIDIA H200", hosts=("n1",),
        versions=Versions(torch="2.11.0+cu130", cuda="13.0", nccl="2.28.9", driver=driver, python="3.11.7",
                          harness="0.1.0"),
        started_at=started_at)


def write_run_dir(root: Path, records, *, verdicts=None, profile="h200") -> Path:
    """A reports/<run-id>/ directory: runs/<case>.json, and session.json when verdicts are given."""
    root.mkdir(parents=True, exist_ok=True)
    for index, record in enumerate(records):
        write_record(root / "runs" / f"{record_case(record).key}-{index}.json", record)
    if verdicts is not None:
        results = {}
        for record in records:
            passed = verdicts.get(record.run_id, True)
            checks = [{"name": "run completed", "passed": True},
                      {"name": "per-GPU throughput", "passed": passed}]
            results[f"test_scaling.py::test_weak_scaling[{record.run_id}]"] = {
                "case": record.run_id, "record": record.to_dict(), "checks": checks}
        (root / "session.json").write_text(json.dumps({"profile": {"name": profile}, "results": results}))
    return root


@pytest.fixture
def two_runs(tmp_path):
    """A: before the driver upgrade; B: after (5 % slower, worse scaling, one case failed its bound)."""
    a = write_run_dir(tmp_path / "before", [
        make_record(gpus=1, per_gpu=100.0, run_id="a1"),
        make_record(gpus=2, per_gpu=90.0, run_id="a2"),
        make_record(model="resnet18", precision="fp32", gpus=1, per_gpu=50.0, run_id="a3"),
    ], verdicts={})
    b = write_run_dir(tmp_path / "after", [
        make_record(gpus=1, per_gpu=95.0, run_id="b1", driver="590.10"),
        make_record(gpus=2, per_gpu=81.0, run_id="b2", driver="590.10"),
        make_record(gpus=2, per_gpu=40.0, scaling="strong", batch=8, run_id="b4", driver="590.10"),
    ], verdicts={"b2": False})
    return a, b


def test_throughput_change_is_relative_and_efficiency_change_in_points(two_runs):
    comparison = compare(load_run_set(two_runs[0]), load_run_set(two_runs[1]))
    rows = {row.case.key: row for row in comparison.rows}
    assert set(rows) == {"tiny_bert-bf16-weak-1gpu", "tiny_bert-bf16-weak-2gpu"}
    one, two = rows["tiny_bert-bf16-weak-1gpu"], rows["tiny_bert-bf16-weak-2gpu"]
    assert one.throughput_change == pytest.approx(-0.05)
    assert one.a.efficiency is None  # 1 GPU: nothing to scale against
    assert two.a.efficiency == pytest.approx(0.90)
    assert two.b.efficiency == pytest.approx(81.0 / 95.0)
    assert two.efficiency_change == pytest.approx(81.0 / 95.0 - 0.90)


def test_cases_on_one_side_only_are_listed(two_runs):
    comparison = compare(load_run_set(two_runs[0]), load_run_set(two_runs[1]))
    assert [s.case.key for s in comparison.only_a] == ["resnet18-fp32-weak-1gpu"]
    assert [s.case.key for s in comparison.only_b] == ["tiny_bert-bf16-strong-2gpu"]
    text = format_comparison(comparison)
    assert "only in A:" in text and "only in B:" in text
    assert "resnet18-fp32-weak-1gpu" in text.split("only in A:")[1].split("only in B:")[0]


def test_status_is_the_verdict_when_the_directory_has_one(two_runs):
    comparison = compare(load_run_set(two_runs[0]), load_run_set(two_runs[1]))
    rows = {row.case.key: row for row in comparison.rows}
    assert rows["tiny_bert-bf16-weak-2gpu"].a.status == "PASS"
    assert rows["tiny_bert-bf16-weak-2gpu"].b.status == "FAIL"


def test_status_falls_back_to_the_run_status_without_verdicts(tmp_path):
    run = write_run_dir(tmp_path / "r", [make_record(gpus=1), make_record(gpus=2, status="failed", run_id="x")])
    summaries = {case.key: s for case, s in summarize(load_run_set(run)).items()}
    assert summaries["tiny_bert-bf16-weak-1gpu"].status == "OK"
    assert summaries["tiny_bert-bf16-weak-2gpu"].status == "FAILED"
    assert summaries["tiny_bert-bf16-weak-2gpu"].throughput_per_gpu is None


def test_strong_efficiency_uses_the_one_gpu_run_at_the_same_global_batch(tmp_path):
    run = write_run_dir(tmp_path / "r", [
        make_record(gpus=1, per_gpu=100.0, batch=8, run_id="base8"),  # weak 1 GPU at batch 8 = strong baseline
        make_record(gpus=1, per_gpu=60.0, batch=4, run_id="base4"),
        make_record(gpus=2, per_gpu=40.0, scaling="strong", batch=8, run_id="s2"),
    ])
    summaries = {case.key: s for case, s in summarize(load_run_set(run)).items()}
    assert summaries["tiny_bert-bf16-strong-2gpu"].efficiency == pytest.approx(80.0 / 100.0 / 2)


def test_repeats_of_a_case_are_summarised_by_their_median(tmp_path):
    run = write_run_dir(tmp_path / "calibration", [
        make_record(gpus=1, per_gpu=value, run_id=f"r{index}") for index, value in enumerate((100.0, 130.0, 98.0))
    ])
    summary = next(iter(summarize(load_run_set(run)).values()))
    assert summary.runs == 3
    assert summary.throughput_per_gpu == 100.0
    assert summary.status == "OK x3"


def test_a_session_json_or_report_json_is_accepted_directly(two_runs, tmp_path):
    before, after = two_runs
    from_session = load_run_set(after / "session.json")
    assert from_session.read_from == "session.json"
    assert len(from_session.records) == 3
    report = {"tests": [{"nodeid": "t", "outcome": "failed", "metadata": {"harness": {
        "record": make_record(gpus=2, per_gpu=81.0, run_id="b2").to_dict(),
        "checks": [{"name": "per-GPU throughput", "passed": False}]}}}],
        "harness": {"profile": {"name": "h200"}}}
    (tmp_path / "report.json").write_text(json.dumps(report))
    from_report = load_run_set(tmp_path / "report.json")
    assert from_report.profile == "h200"
    assert from_report.verdicts == {"b2": "FAIL"}


def test_a_directory_with_only_session_json_is_read_from_it(two_runs, tmp_path):
    only_session = tmp_path / "only-session"
    only_session.mkdir()
    (only_session / "session.json").write_text((two_runs[1] / "session.json").read_text())
    run_set = load_run_set(only_session)
    assert run_set.read_from == "session.json"
    assert {r.run_id for r in run_set.records} == {"b1", "b2", "b4"}


def test_a_missing_directory_is_a_clear_error(tmp_path, capsys):
    with pytest.raises(CompareError, match="no such file or directory"):
        load_run_set(tmp_path / "nope")
    assert cli_compare(tmp_path / "nope", tmp_path) == 4
    assert "harness compare:" in capsys.readouterr().err


def test_a_directory_without_records_says_what_was_expected(tmp_path):
    with pytest.raises(CompareError, match="expected runs/\\*.json, session.json or report.json"):
        load_run_set(tmp_path)


def test_the_reports_root_points_at_its_run_directories(two_runs, tmp_path):
    with pytest.raises(CompareError, match="it holds run directories \\(after, before\\): pick one"):
        load_run_set(tmp_path)


def test_an_invalid_record_names_its_file(tmp_path):
    (tmp_path / "bad" / "runs").mkdir(parents=True)
    (tmp_path / "bad" / "runs" / "x.json").write_text('{"schema_version": 99}')
    with pytest.raises(CompareError, match="x.json: not a readable run record: .*schema_version 99"):
        load_run_set(tmp_path / "bad")


def test_cli_prints_the_table_and_what_changed(two_runs, capsys):
    assert cli_compare(*two_runs) == 0
    out = capsys.readouterr().out
    assert "driver:   580.159.04  ->  590.10   (changed)" in out
    assert "torch:    2.11.0+cu130\n" in out
    line = next(line for line in out.splitlines() if line.startswith("tiny_bert-bf16-weak-2gpu"))
    assert "90.0" in line and "81.0" in line and "-10.0 %" in line
    assert "0.900" in line and "0.853" in line and "-4.7 pt" in line
    assert line.rstrip().endswith("PASS -> FAIL")


def test_changes_beyond_both_confidence_intervals_are_flagged(tmp_path):
    a = load_run_set(write_run_dir(tmp_path / "a", [make_record(per_gpu=100.0, ci=0.01)]))
    b_small = load_run_set(write_run_dir(tmp_path / "b", [make_record(per_gpu=99.0, ci=0.01)]))
    b_large = load_run_set(write_run_dir(tmp_path / "c", [make_record(per_gpu=95.0, ci=0.01)]))
    assert not compare(a, b_small).rows[0].beyond_noise  # 1 % < 1 % + 1 %
    assert compare(a, b_large).rows[0].beyond_noise  # 5 % > 2 %


def test_results_without_a_benchmark_record_are_left_out_not_refused(two_runs, tmp_path):
    """A default run's session.json also holds the all-reduce, topology and soak tests, which carry no
    benchmark record (found on 4 x H200: compare refused every default run directory)."""
    after = two_runs[1]
    session = json.loads((after / "session.json").read_text())
    session["results"].update({
        "test_interconnect.py::test_allreduce_bus_bandwidth[2gpu]": {
            "case": "allreduce-2gpu", "checks": [], "interconnect": {"busbw_gbps": 343.5},
            "record": {"run_id": "ar2", "telemetry": None}},
        "test_interconnect.py::test_topology": {"case": "topology", "checks": [], "topology": {}},
        "test_soak.py::test_soak": {"case": "soak", "checks": [], "soak": {},
                                    "record": {"run_id": "s", "telemetry": None}},
        # the node-shape, GPU-state and component tests: checks only, no benchmark record
        "test_node.py::test_node_shape": {"case": "node shape", "checks": [], "bounds": None},
        "test_gpu_state.py::test_gpu_state[gpu0]": {"case": "GPU state", "checks": [], "bounds": None},
        "test_gpu_state.py::test_gpu_state[gpu1]": {"case": "GPU state", "checks": [], "gpu_state": {}},
        "test_components.py::test_gemm[gpu0]": {"case": "gemm", "checks": [], "bounds": None, "components": {},
                                                "record": {"run_id": "g", "telemetry": None}},
    })
    (after / "session.json").write_text(json.dumps(session))
    (after / "runs").rename(tmp_path / "moved-runs")  # read the records from session.json itself
    run_set = load_run_set(after)
    assert {r.run_id for r in run_set.records} == {"b1", "b2", "b4"}
    assert run_set.verdicts["b2"] == "FAIL"


def _with_allreduce(run_dir: Path, rows) -> None:
    session = json.loads((run_dir / "session.json").read_text())
    session["interconnect"] = {"allreduce": rows}
    (run_dir / "session.json").write_text(json.dumps(session))


def test_allreduce_bandwidth_is_compared_at_the_largest_size_both_sides_ran(two_runs):
    before, after = two_runs
    gib = 1 << 30
    _with_allreduce(before, [{"gpus": 2, "size_bytes": gib, "busbw_gbps": 340.0, "correct": True},
                             {"gpus": 2, "size_bytes": 8 * gib, "busbw_gbps": 343.5, "correct": True},
                             {"gpus": 4, "size_bytes": gib, "busbw_gbps": 353.3, "correct": True}])
    _with_allreduce(after, [{"gpus": 2, "size_bytes": gib, "busbw_gbps": 300.0, "correct": True},
                            {"gpus": 2, "size_bytes": 8 * gib, "busbw_gbps": 5.259, "correct": True},
                            {"gpus": 8, "size_bytes": gib, "busbw_gbps": 330.0, "correct": True}])
    comparison = compare(load_run_set(before), load_run_set(after))
    assert [(row.gpus, row.size_bytes) for row in comparison.allreduce] == [(2, 8 * gib)]  # 4 and 8: one side only
    assert comparison.allreduce[0].change == pytest.approx(5.259 / 343.5 - 1)
    text = format_comparison(comparison)
    assert "2 GPUs, 8 GiB" in text and "343.5" in text and "-98.5 %" in text


def test_a_run_without_the_allreduce_test_shows_no_allreduce_section(two_runs):
    before, after = two_runs
    _with_allreduce(before, [{"gpus": 2, "size_bytes": 1 << 30, "busbw_gbps": 340.0}])
    _with_allreduce(after, "not a list of rows")  # a damaged section loses its rows, not the comparison
    comparison = compare(load_run_set(before), load_run_set(after))
    assert comparison.allreduce == ()
    assert "all-reduce" not in format_comparison(comparison)


def _with_case_ids(run_dir: Path, case_ids: dict[str, object]) -> None:
    """Give the session's results the ``case_id`` the plugin writes (run_id -> dict, or something damaged)."""
    session = json.loads((run_dir / "session.json").read_text())
    for result in session["results"].values():
        if result["record"]["run_id"] in case_ids:
            result["case_id"] = case_ids[result["record"]["run_id"]]
    (run_dir / "session.json").write_text(json.dumps(session))


def test_the_case_is_the_case_id_the_session_recorded(two_runs):
    """The recorded case wins over what the record's fields would say: compare never re-derives it."""
    _, after = two_runs
    recorded = CaseId(model="tiny_bert", precision="bf16", gpus=2, scaling="weak")
    _with_case_ids(after, {"b2": recorded.to_dict(), "b4": CaseId(model="tiny_bert", precision="bf16", gpus=1,
                                                                   nodes=2, scaling="strong").to_dict()})
    run_set = load_run_set(after)
    assert run_set.cases["b2"] == recorded
    assert set(summarize(run_set)) == {CaseId(model="tiny_bert", precision="bf16", gpus=1), recorded,
                                       CaseId(model="tiny_bert", precision="bf16", gpus=1, nodes=2, scaling="strong")}
    assert "tiny_bert-bf16-strong-2x1gpu" in format_comparison(compare(load_run_set(two_runs[0]), run_set))


def test_results_without_a_readable_case_id_take_the_case_from_their_record(two_runs):
    """Run directories written before results carried case_id (and damaged ones) still compare."""
    before, after = two_runs
    _with_case_ids(after, {"b2": {"model": "tiny_bert"}, "b4": "not a case"})
    run_set = load_run_set(after)
    assert run_set.cases == {}
    rows = {row.case.key: row for row in compare(load_run_set(before), run_set).rows}
    assert set(rows) == {"tiny_bert-bf16-weak-1gpu", "tiny_bert-bf16-weak-2gpu"}


# --- damaged and degenerate input (issue 20): one line naming the file, exit 2; never a traceback --


def _refused(capsys, a: Path, b: Path) -> str:
    assert cli_compare(a, b) == 4
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("harness compare: ") and err.count("\n") == 1, err
    return err.strip()


@pytest.mark.parametrize(("text", "complaint"), [
    ("[]", "x.json: is not a JSON object (found list)"),
    ("[" * 100_000 + "]" * 100_000, "x.json: not readable JSON: nested too deeply"),
])
def test_a_damaged_run_record_is_one_line_naming_it(two_runs, tmp_path, capsys, text, complaint):
    (two_runs[1] / "runs" / "x.json").write_text(text)
    assert complaint in _refused(capsys, two_runs[0], two_runs[1])


@pytest.mark.parametrize(("field", "value", "complaint"), [
    ("throughput_per_gpu", "fast", "throughput_per_gpu is not a finite number >= 0: 'fast'"),
    ("throughput_ci95_rel", -0.5, "throughput_ci95_rel is not a finite number >= 0: -0.5"),
    ("hosts", [1, 2], "hosts is not a list of host names: [1, 2]"),
    ("model", None, "model is not a string: None"),
    ("world_size", 0, "gpus and nodes must be >= 1, not gpus=0 nodes=1"),
])
def test_a_record_field_compare_cannot_use_is_named(two_runs, tmp_path, capsys, field, value, complaint):
    path = next((two_runs[1] / "runs").glob("*.json"))
    data = json.loads(path.read_text())
    data[field] = value
    path.write_text(json.dumps(data))
    err = _refused(capsys, two_runs[0], two_runs[1])
    assert err == f"harness compare: {path}: not a readable run record: {complaint}"


@pytest.mark.parametrize(("session", "complaint"), [
    ({"results": [1, 2]}, "'results' is not an object of test results; the file is damaged"),
    ({"results": {"t": 5}}, "a result is not an object: 5"),
    ({"results": {"t": {"record": "RECORD", "checks": "passed"}}}, "the checks of r1 are not a list of objects"),
    ({"tests": {"not": "a list"}}, "'tests' is not a list of test objects; the file is damaged"),
])
def test_a_damaged_session_without_records_beside_it_is_one_line(tmp_path, capsys, session, complaint):
    run_dir = tmp_path / "damaged"
    run_dir.mkdir()
    text = json.dumps(session).replace('"RECORD"', json.dumps(make_record(run_id="r1").to_dict()))
    (run_dir / "session.json").write_text(text)
    err = _refused(capsys, run_dir, run_dir)
    assert err.startswith(f"harness compare: {run_dir / 'session.json'}: {complaint}")


def test_a_corrupt_session_falls_back_to_the_intact_run_records_and_says_so(two_runs, capsys):
    before, after = two_runs
    (after / "session.json").write_text('{"results": {')  # cut off mid-write
    assert cli_compare(before, after) == 0
    out = capsys.readouterr().out
    assert "B: " in out and "(3 records from runs/*.json)" in out
    assert f"   note: {after / 'session.json'}: is not valid JSON at line 1 (cut short? " in out
    assert "its verdicts are not shown (statuses are the runs' own)" in out
    assert "PASS -> OK" in out  # the failed bound of b2 is unknown now: the run's own status is shown


def test_a_report_json_stands_in_for_a_corrupt_session(two_runs, capsys):
    _, after = two_runs
    session = json.loads((after / "session.json").read_text())
    report = {"harness": {"profile": {"name": "h200"}},
              "tests": [{"metadata": {"harness": result}} for result in session["results"].values()]}
    (after / "report.json").write_text(json.dumps(report))
    (after / "session.json").write_text("\x00\x00")
    run_set = load_run_set(after)
    assert run_set.verdicts["b2"] == "FAIL" and run_set.read_from == "runs/*.json + report.json"
    assert len(run_set.notes) == 1 and "session.json: is not valid JSON" in run_set.notes[0]


def test_a_zero_baseline_shows_a_dash_not_a_traceback(tmp_path, capsys):
    a = write_run_dir(tmp_path / "a", [make_record(per_gpu=0.0)])
    b = write_run_dir(tmp_path / "b", [make_record(per_gpu=90.0)])
    comparison = compare(load_run_set(a), load_run_set(b))
    assert comparison.rows[0].throughput_change is None
    assert cli_compare(a, b) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("tiny_bert-bf16-weak-1gpu"))
    assert row.split()[1:4] == ["0.0", "90.0", "—"]


def test_a_pipe_is_neither_a_run_directory_nor_a_file(tmp_path, capsys):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert _refused(capsys, fifo, tmp_path) == (f"harness compare: {fifo}: neither a run directory nor a JSON file "
                                                "(a pipe or a device?); give a run directory such as reports/<run-id>/")


def test_efficiency_is_the_checks_own_figure_not_a_baseline_rebuilt_from_every_one_gpu_record(tmp_path):
    # The session judged the 2-GPU case against its own baseline (1.222 weak, 0.662 strong: the
    # figures the terminal and the report printed). Rebuilding a baseline from every 1-GPU record of
    # the batch (the strong one at batch 8 included) gave other numbers: two answers for one figure.
    records = [make_record(gpus=1, per_gpu=100.0, batch=4, run_id="w1"),
               make_record(gpus=1, per_gpu=60.0, batch=4, run_id="w1b"),
               make_record(gpus=2, per_gpu=97.8, batch=4, run_id="w2"),
               make_record(gpus=1, per_gpu=100.0, batch=8, run_id="s1"),
               make_record(gpus=2, per_gpu=40.0, scaling="strong", batch=8, run_id="s2")]
    run = write_run_dir(tmp_path / "r", records, verdicts={})
    session = json.loads((run / "session.json").read_text())
    for key, run_id, value in (("weak_efficiency", "w2", 1.222), ("strong_efficiency", "s2", 0.662)):
        result = session["results"][f"test_scaling.py::test_weak_scaling[{run_id}]"]
        result["checks"].append({"key": key, "name": key.replace("_", " "), "measured": value, "bound": 0.5,
                                 "passed": True})
    (run / "session.json").write_text(json.dumps(session))
    summaries = {case.key: s for case, s in summarize(load_run_set(run)).items()}
    weak, strong = summaries["tiny_bert-bf16-weak-2gpu"], summaries["tiny_bert-bf16-strong-2gpu"]
    assert (weak.efficiency, weak.efficiency_recomputed) == (1.222, False)
    assert (strong.efficiency, strong.efficiency_recomputed) == (0.662, False)
    text = format_comparison(compare(load_run_set(run), load_run_set(run)))
    assert " 1.222  1.222 " in text and "r = efficiency recomputed" not in text


def test_records_without_a_judged_check_have_their_efficiency_recomputed_and_marked(two_runs):
    a, b = two_runs
    text = format_comparison(compare(load_run_set(a), load_run_set(b)))
    assert "0.900r" in text and "r = efficiency recomputed from the run records" in text
