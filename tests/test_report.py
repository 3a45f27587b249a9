"""The HTML sign-off report: built from saved JSON alone, honest about failures and gaps, safe to open.

Fast: no browser, no benchmark. The real 4 × H200 acceptance run in docs/data/ is the main input,
brought to the plugin↔report data contract first (``contract_copy``: each result's ``case_id``,
resolved ``bounds`` and ``bounds_inherited``, each check's ``key``), as the plugin writes them now;
failures, interruptions and hostile strings are made by editing a copy of it.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import re
import shutil
from pathlib import Path

import pytest

from harness.cases import CaseId
from harness.profile.bounds import CaseBounds
from harness.profile.schema import CASE_FIELDS
from harness.report import charts as svg
from harness.results import reading
from support.report import build_report, cli_report, write_report
from harness.report.sections.cases import record_facts

ROOT = Path(__file__).resolve().parents[1]
H200_RUN = ROOT / "docs" / "data" / "2026-11-21-h200x4-acceptance"
CPU_RUN = ROOT / "docs" / "examples" / "cpu" / "run"
VERDICTS = ROOT / "docs" / "data" / "2026-11-24-h200x1-verdicts"
"""Sessions on one H200 that recorded their verdict; the dataset kept their session.json only."""
HOSTILE = "<script>alert(1)</script>"
FAILED_NODE = "test_scaling.py::test_weak_scaling[resnet152-bf16-4gpu]"
SLOW_NODE = "test_scaling.py::test_weak_scaling[vit_b_16-fp16-2gpu]"
CHECK_KEYS = {"per-GPU throughput": "throughput_per_gpu", "weak-scaling efficiency": "weak_efficiency",
              "strong-scaling efficiency": "strong_efficiency", "mean GPU utilization": "gpu_utilization"}
"""The explicit keys of harness.kinds.ddp_scaling.checks; any other check's key is the slug of its name."""


# --- run directories in the plugin↔report data contract ----------------------------------------


def _check_key(name: str) -> str:
    return CHECK_KEYS.get(name) or re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def resolved_bounds(raw_profile: dict, model: str, precision: str) -> tuple[dict | None, list[str]]:
    """What the plugin records: ``dataclasses.asdict(profile.bounds(...))`` made JSON-safe, and the
    names taken from [defaults] (the profile code's merge, applied to the profile the run recorded)."""
    case = raw_profile.get("models", {}).get(model, {}).get(precision)
    if case is None:
        return None, []
    defaults = raw_profile.get("defaults", {})
    inherited = [f.key for f in CASE_FIELDS if f.inherit and f.key in defaults and f.key not in case]
    source = case["source"] + (f"; {', '.join(inherited)} from [defaults]: {defaults['source']}" if inherited else "")
    bounds = CaseBounds(model=model, precision=precision, source=source, **{k: defaults[k] for k in inherited},
                        **{k: v for k, v in case.items() if k != "source"})
    return json.loads(json.dumps(dataclasses.asdict(bounds))), sorted(inherited)


def _to_contract(harness: dict, raw_profile: dict) -> None:
    """Add what the plugin writes now to one result written before the contract."""
    record = harness.get("record") or {}
    for check in harness.get("checks", []):
        check.setdefault("key", _check_key(check["name"]))
    if "interconnect" in harness:  # the all-reduce result
        table = raw_profile.get("interconnect", {}).get("min_allreduce_busbw_gbps")
        harness["bounds"] = {"min_allreduce_busbw_gbps": table} if table is not None else None
    if not record.get("model"):
        return
    nodes = record.get("nodes") or 1
    case = CaseId(model=record["model"], precision=record["precision"], gpus=record["world_size"] // nodes,
                  scaling=harness.get("scaling") or record.get("scaling") or "weak", nodes=nodes)
    harness["case_id"] = case.to_dict()
    harness["bounds"], harness["bounds_inherited"] = resolved_bounds(raw_profile, case.model, case.precision)


def contract_copy(source: Path, target: Path) -> Path:
    """A copy of the run directory ``source`` whose results carry case_id, bounds and check keys."""
    shutil.copytree(source, target)
    for name in ("report.json", "session.json"):
        data = _load(target / name)
        raw_profile = (data.get("harness") or data)["profile"]["raw"]
        results = ([t["metadata"]["harness"] for t in data["tests"] if "harness" in t.get("metadata", {})]
                   if name == "report.json" else list(data["results"].values()))
        for harness in results:
            _to_contract(harness, raw_profile)
        _save(target / name, data)
    return target


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


def _save(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=1))


def _test(report_json: dict, nodeid: str) -> dict:
    return next(t for t in report_json["tests"] if t["nodeid"] == nodeid)


@pytest.fixture
def h200_dir(tmp_path: Path) -> Path:
    return contract_copy(H200_RUN, tmp_path / "20261121-110032-vm-h200")


def _crash(harness: dict, *, reason: str, log_line: str) -> None:
    """Turn a test's metadata into a crashed launch, as launch.failure_record writes it."""
    record = harness["record"]
    for key in ("throughput_per_gpu", "throughput_total", "step_time_ms", "straggler", "straggler_ratio", "mfu"):
        record[key] = None
    record["status"] = "failed"
    record["per_rank"] = []
    record["failure"] = {"reason": reason, "phase": "measure", "rank": 2, "log_tails": {
        "rank0.log": "step 1\nstep 2\nwaiting on all-reduce", "rank2.log": f"step 1\n{log_line}\nKilled",
        "torchrun.log": "Root Cause (first observed failure):\n  rank: 2\n  exitcode: -9"}}
    harness["checks"] = [{"key": "run_completed", "name": "run completed", "kind": "sanity", "measured": None,
                          "bound": None, "unit": "", "comparison": "==", "passed": False, "note": reason, "source": ""}]


def make_failed(run: Path) -> Path:
    """One crashed 4-GPU case (rank 2 killed) and one slow 2-GPU case (throughput under its bound)."""
    data = _load(run / "report.json")
    reason = "rank 2 (host vm, GPU 2) was killed by SIGKILL in phase measure"
    crashed = _test(data, FAILED_NODE)
    crashed["outcome"] = "failed"
    crashed["call"]["outcome"] = "failed"
    crashed["call"]["longrepr"] = (f"run completed: FAILED — {reason}\n"
                                   "rank logs: reports/x/logs/resnet152-bf16-weak-4gpu/")
    _crash(crashed["metadata"]["harness"], reason=reason, log_line="NCCL watchdog timeout on rank 2")
    slow = _test(data, SLOW_NODE)
    slow["outcome"] = "failed"
    slow["call"]["outcome"] = "failed"
    slow["call"]["longrepr"] = "per-GPU throughput 1,900.0 images/s < 2,056.0 images/s (h200, vit_b_16 fp16, 2 GPUs)"
    check = next(c for c in slow["metadata"]["harness"]["checks"] if c["name"] == "per-GPU throughput")
    check.update(measured=1900.0, passed=False)
    slow["metadata"]["harness"]["record"]["throughput_per_gpu"] = 1900.0
    data["summary"].update(passed=22, failed=2)
    data["exitcode"] = 1
    _save(run / "report.json", data)
    session = _load(run / "session.json")
    session["exitstatus"] = 1
    _save(run / "session.json", session)
    return run


@pytest.fixture
def failed_dir(h200_dir: Path) -> Path:
    return make_failed(h200_dir)


def _verdict(html: str) -> str:
    return re.search(r'data-verdict="([A-Z]+)"', html).group(1)


def _matrix(html: str) -> str:
    return re.search(r'<table class="matrix">.*?</table>', html, re.S).group(0)


# --- a complete, passing run -----------------------------------------------------------------


def test_h200_example_is_a_pass_with_every_count(h200_dir: Path):
    html = build_report(h200_dir)
    assert _verdict(html) == "PASS"
    assert "24 passed" in html and "0 failed" in html and "9 skipped" in html and "0 errors" in html
    assert "Incomplete" not in html
    matrix = _matrix(html)
    header = re.search(r"<thead>(.*?)</thead>", matrix, re.S).group(1)
    # The 8-GPU cases were skipped before a result was written, so nothing records their case_id:
    # they are listed with their reason under Skipped, not placed by parsing their test ids.
    assert re.findall(r"<th>(\d) GPUs?</th>", header) == ["1", "2", "4"]
    rows = re.findall(r"<tr>\s*(?:<th[^>]*>([^<]*)</th>\s*)?<td>(bf16|fp16)</td>", matrix)
    assert len(rows) == 8
    assert [m for m, _ in rows if m] == ["resnet50", "resnet152", "vit_b_16", "bert_large"]
    assert matrix.count('<span class="badge pass">PASS</span>') == 24
    skipped = re.search(r"<h3>Skipped \(9\)</h3>.*?</table>", html, re.S).group(0)
    assert skipped.count("needs 8 GPUs; this node has 4") == 8
    assert "test_weak_scaling[resnet50-bf16-8gpu]" in skipped
    assert "4,647.6 img/s" in matrix  # resnet50 bf16, 1 GPU
    assert "efficiency 0.994 vs 1" in matrix  # resnet50 bf16, 4 GPUs


def test_h200_signoff_record_names_hardware_software_and_profile(h200_dir: Path):
    html = build_report(h200_dir)
    signoff = re.search(r'<section id="signoff">.*?</section>', html, re.S).group(0)
    assert "4 × NVIDIA H200 (140.4 GiB each)" in signoff
    for fact in ("580.159.04", "driver API 13.0, runtime 13.0", "2.28.9", "2.11.0+cu130", "0.1.0 (git commit unknown)",
                 "c91069bf06c55d25abff3ef68a906f7bd1c6501fd89f9f1054f3564663227c6c",
                 "-m pytest -p harness.plugin acceptance --harness-report-dir=/tmp/reports -v -rs",
                 "GPU-6ea4bf66-c8db-bcb0-a3a1-f4dccc37eadf", "not recorded (this harness version does not record"):
        assert fact in signoff, fact
    assert "2026-11-21 11:00:32 UTC" in html and "8 min 22 s" in html


def test_each_check_is_measured_against_its_bound(h200_dir: Path):
    html = build_report(h200_dir)
    case = re.search(r'<article class="case pass" id="case-test_scaling.py_test_weak_scaling_bert_large-fp16-4gpu_">'
                     r".*?</article>", html, re.S).group(0)
    assert re.search(r'per-GPU throughput</td>\s*<td class="muted">performance</td>\s*<td class="num">993.4 sequences/s'
                     r'</td>\s*<td class="num">≥ 917.0 sequences/s</td>\s*<td><span class="badge pass">PASS', case)
    assert re.search(r"weak-scaling efficiency</td>.*?0.974.*?≥ 0.948.*?PASS", case, re.S)
    assert "straggler ratio (slowest/fastest rank)" in case
    assert "slowest rank 3 (host vm, GPU 3), fastest rank 2 (host vm, GPU 2)" in case
    assert "NOT EVALUATED" in case and "GPU telemetry is not collected by this harness version yet" in case
    assert "MFU" in case and "25.8 %" in case and "95 % CI ±0.08 %" in case
    assert "the noise within this window, not between runs" in case


def test_thresholds_section_shows_the_bounds_and_their_sources(h200_dir: Path):
    html = build_report(h200_dir)
    section = re.search(r'<section id="thresholds">.*?</section>', html, re.S).group(0)
    assert "2: 0.966 · 4: 0.965 · 8: 0.955" in section  # resnet50 bf16 min_weak_efficiency
    assert "4,176 img/s" in section
    assert "measured on nvidia-h200-x4 2026-11-21: 4640.7 / 4623.8 / 4620.3 img/s" in section
    assert "c91069bf06c55d25abff3ef68a906f7bd1c6501fd89f9f1054f3564663227c6c" in section


def test_charts_are_inline_svg_with_the_threshold_drawn(h200_dir: Path):
    html = build_report(h200_dir)
    charts = re.search(r'<section id="charts">.*?</section>', html, re.S).group(0)
    assert charts.count("<svg") == 8  # efficiency and throughput, per model
    assert "resnet50: weak-scaling efficiency" in charts
    assert "bf16 bound" in charts and "stroke-dasharray" in charts
    assert "Not recorded: this harness version collects no GPU utilization" in charts


def test_the_page_references_nothing_outside_itself(h200_dir: Path):
    html = build_report(h200_dir)
    for needle in ('src="http', "src='http", 'href="http', "href='http", "<link", "@import", "url(", "<iframe"):
        assert needle not in html, needle


# --- failures --------------------------------------------------------------------------------


def test_a_failed_case_makes_the_run_fail_with_its_reason_and_log_tails(failed_dir: Path):
    html = build_report(failed_dir)
    assert _verdict(html) == "FAIL"
    assert "22 passed" in html and "2 failed" in html
    case = re.search(r'<article class="case fail" id="case-test_scaling.py_test_weak_scaling_resnet152-bf16-4gpu_">'
                     r".*?</article>", html, re.S).group(0)
    assert "rank 2 (host vm, GPU 2) was killed by SIGKILL in phase measure" in case
    logs = re.search(r'<details class="logs">(.*?)</details>', case, re.S).group(1)
    assert "rank2.log" in logs and "NCCL watchdog timeout on rank 2" in logs and "torchrun.log" in logs
    assert "<details class=\"logs\" open" not in case  # collapsed on screen
    matrix = _matrix(html)
    assert matrix.count('<span class="badge fail">FAIL</span>') == 2
    assert "failed: per-GPU throughput" in matrix


def test_failed_cases_come_first(failed_dir: Path):
    html = build_report(failed_dir)
    articles = re.findall(r'<article class="case (\w+)"', html)
    assert articles[:2] == ["fail", "fail"] and set(articles[2:]) == {"pass"}


def test_a_missed_bound_shows_measured_against_bound(failed_dir: Path):
    html = build_report(failed_dir)
    case = re.search(r'<article class="case fail" id="case-test_scaling.py_test_weak_scaling_vit_b_16-fp16-2gpu_">'
                     r".*?</article>", html, re.S).group(0)
    assert re.search(r'<tr class="fail" data-check="throughput_per_gpu">\s*<td>per-GPU throughput</td>'
                     r".*?1,900.0 images/s.*?≥ 2,056.0 images/s.*?FAIL", case, re.S)
    assert "per-GPU throughput 1,900.0 images/s &lt; 2,056.0 images/s" in case


# --- incomplete runs -------------------------------------------------------------------------


def test_missing_report_json_and_an_interrupted_session_is_incomplete(h200_dir: Path):
    (h200_dir / "report.json").unlink()
    session = _load(h200_dir / "session.json")
    session.update(interrupted=True, exitstatus=2, finished_at=session["finished_at"])
    for nodeid in list(session["results"])[12:]:
        del session["results"][nodeid]
    _save(h200_dir / "session.json", session)
    html = build_report(h200_dir)
    assert _verdict(html) == "INCOMPLETE"
    assert "report.json missing" in html and "the session was interrupted (exit status 2)" in html
    assert "12 without outcome" in html
    assert "pytest recorded no outcome for this test" in html
    assert "Run records without a test result (12)" in html  # runs/ still has the later launches


def _session_only(name: str, tmp_path: Path) -> Path:
    run_dir = tmp_path / name
    run_dir.mkdir()
    (run_dir / "session.json").write_bytes(gzip.decompress((VERDICTS / f"{name}-session.json.gz").read_bytes()))
    return run_dir


def _banner(html: str) -> str:
    return re.search(r'<header class="banner.*?</header>', html, re.S).group(0)


def test_a_recorded_verdict_without_report_json_is_shown_with_the_session_tally_and_a_note(tmp_path: Path):
    banner = _banner(build_report(_session_only("matrix1", tmp_path)))
    assert _verdict(banner) == "PASS" and 'data-recorded="yes"' in banner
    assert "PASS — full: 14 profile cases of this node" in banner
    assert "14 passed" in banner and "29 skipped" in banner and "without outcome" not in banner
    # The session wrote session.json at its end: it was not killed, and the verdict is its own.
    assert "probably killed" not in banner and "Incomplete:" not in banner
    assert "Note: report.json missing, though the session ended" in banner


def test_a_recorded_fail_names_its_causes_and_a_recorded_incomplete_what_did_not_run(tmp_path: Path):
    failed = _banner(build_report(_session_only("selftest-1-foreign_load", tmp_path)))
    assert _verdict(failed) == "FAIL" and "1 failed" in failed and "0 passed" in failed
    assert "Failed: foreign_processes ×1, on pid 688 (python3) on GPU 0" in failed
    assert "no all-reduce bandwidth test ran in this session" in build_report(tmp_path / "selftest-1-foreign_load")
    partial = _banner(build_report(_session_only("path2", tmp_path)))
    assert _verdict(partial) == "INCOMPLETE" and "scope: partial: 6 of 14 profile cases · exit status 6" in partial
    assert partial.count("Did not run: ") == 9 and "6 passed" in partial and "11 skipped" in partial
    assert "None: no benchmark ran in this session" in build_report(tmp_path / "path2")


def test_without_a_recorded_verdict_a_missing_report_json_still_says_the_session_was_probably_killed(
        h200_dir: Path):
    (h200_dir / "report.json").unlink()
    html = build_report(h200_dir)
    assert "Incomplete: report.json missing" in html and "probably killed" in html
    assert "24 without outcome" in html


def test_a_report_json_cut_short_is_read_as_missing(h200_dir: Path):
    text = (h200_dir / "report.json").read_text()
    (h200_dir / "report.json").write_text(text[: len(text) // 2])
    html = build_report(h200_dir)
    assert _verdict(html) == "INCOMPLETE"
    assert "report.json is not valid JSON at line" in html
    assert "c91069bf06c55d25abff3ef68a906f7bd1c6501fd89f9f1054f3564663227c6c" in html  # from session.json


def test_a_failure_in_an_interrupted_run_is_a_fail(failed_dir: Path):
    session = _load(failed_dir / "session.json")
    session.update(interrupted=True, exitstatus=2)
    _save(failed_dir / "session.json", session)
    html = build_report(failed_dir)
    assert _verdict(html) == "FAIL"
    assert "Incomplete: the session was interrupted" in html


def test_a_run_where_everything_was_skipped_is_not_a_pass(h200_dir: Path):
    data = _load(h200_dir / "report.json")
    for test in data["tests"]:
        test["outcome"] = "skipped"
        test.pop("metadata", None)
    _save(h200_dir / "report.json", data)
    html = build_report(h200_dir)
    assert _verdict(html) == "INCOMPLETE"
    assert "no test ran: every test was skipped" in html


def test_only_run_records_left_still_gives_an_incomplete_report(h200_dir: Path):
    (h200_dir / "report.json").unlink()
    (h200_dir / "session.json").unlink()
    html = build_report(h200_dir)
    assert _verdict(html) == "INCOMPLETE"
    assert "Run records without a test result (24)" in html


# --- hostile input ---------------------------------------------------------------------------


def _poison(run: Path) -> None:
    data = _load(run / "report.json")
    session = _load(run / "session.json")
    for summary in (data["harness"], session):
        summary["profile"]["description"] = HOSTILE
        summary["profile"]["raw"]["hardware"]["description"] = HOSTILE
        summary["hardware"]["hostname"] = HOSTILE
        summary["command_line"].append(HOSTILE)
    test = _test(data, FAILED_NODE)
    test["outcome"] = "failed"
    test["nodeid"] = f"test_scaling.py::test_weak_scaling[{HOSTILE}-bf16-4gpu]"
    test["call"]["longrepr"] = f"run completed: FAILED — {HOSTILE}"
    _crash(test["metadata"]["harness"], reason=f"rank 2 {HOSTILE}",
           log_line=f"{HOSTILE} \x00\x07\x1b[31mred\x1b[0m \u202eevil " + "A" * 100_000)
    test["metadata"]["harness"]["record"]["hosts"] = [HOSTILE]
    test["metadata"]["harness"]["record"]["model"] = HOSTILE
    test["metadata"]["harness"]["case_id"]["model"] = HOSTILE
    _save(run / "report.json", data)
    _save(run / "session.json", session)


def test_every_input_string_is_escaped(h200_dir: Path):
    _poison(h200_dir)
    html = build_report(h200_dir)
    assert "<script>alert(1)" not in html
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;"
    signoff = re.search(r'<section id="signoff">.*?</section>', html, re.S).group(0)
    assert signoff.count(escaped) >= 3  # hostname, description, command line
    case = re.search(r'<article class="case fail".*?</article>', html, re.S).group(0)
    assert case.count(escaped) >= 4  # title, node id, reason, log line
    assert escaped in re.search(r'<section id="thresholds">.*?</section>', html, re.S).group(0)
    assert escaped in _matrix(html)


def test_control_characters_and_huge_lines_are_cut(h200_dir: Path):
    _poison(h200_dir)
    html = build_report(h200_dir)
    assert not re.search("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u202e]", html)
    assert "[31m" not in html and "red" in html
    assert "A" * (reading.LOG_LINE_CHARS + 1) not in html
    assert "A" * (reading.LOG_LINE_CHARS - 60) in html
    assert len(html) < 400_000


def test_clean_log_tail_keeps_the_end():
    text = "\n".join(f"line {i}" for i in range(1000)) + "\n\n"
    tail = reading.clean_log_tail(text)
    lines = tail.splitlines()
    assert lines[0] == "… (960 earlier lines not shown)"
    assert lines[1] == "line 960" and lines[-1] == "line 999" and len(lines) == reading.LOG_TAIL_LINES + 1


def test_clean_text_cuts_one_field_and_says_so():
    cleaned = reading.clean_text("x" * 10_000)
    assert cleaned.startswith("x" * reading.FIELD_CHARS) and cleaned.endswith("[6,000 more characters cut]")
    assert reading.clean_text("a\x00b\ud800c") == "a\ufffdb\ufffdc"


# --- the command line and the file -----------------------------------------------------------


def test_cli_report_on_a_missing_directory_says_what_and_where(tmp_path: Path, capsys):
    missing = tmp_path / "nope"
    assert cli_report(str(missing)) == 4
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(missing) in err and "reports/<run-id>/" in err and "Traceback" not in err


def test_cli_report_on_a_directory_without_run_data(tmp_path: Path, capsys):
    (tmp_path / "report.json").write_text("{not json")
    assert cli_report(str(tmp_path)) == 4
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "report.json is not valid JSON" in err and "session.json missing" in err


def test_cli_report_rebuilds_the_example(h200_dir: Path, capsys):
    assert cli_report(str(h200_dir)) == 0
    out = capsys.readouterr().out.strip()
    assert out == str(h200_dir / "report.html")
    assert _verdict((h200_dir / "report.html").read_text()) == "PASS"
    assert [p.name for p in h200_dir.iterdir() if p.name.startswith(".report.html")] == []


def test_write_report_replaces_an_old_report(h200_dir: Path):
    (h200_dir / "report.html").write_text("old")
    path = write_report(h200_dir)
    assert path == h200_dir / "report.html" and path.read_text().startswith("<!DOCTYPE html>")


@pytest.mark.skipif(not CPU_RUN.is_dir(), reason="docs/examples/cpu/run/ is not in this checkout")
def test_cpu_example_names_ranks_not_gpus(tmp_path: Path):
    html = build_report(contract_copy(CPU_RUN, tmp_path / "cpu"))
    assert _verdict(html) == "PASS"
    assert "<th>1 rank</th>" in html and "<th>2 ranks</th>" in html
    assert "none: a CPU run" in html and "not used (CPU run, gloo)" in html


# --- future measurements: drawn when recorded, never invented --------------------------------


def test_telemetry_is_drawn_when_a_record_has_it(h200_dir: Path):
    data = _load(h200_dir / "report.json")
    record = _test(data, FAILED_NODE)["metadata"]["harness"]["record"]
    record["telemetry"] = {"metrics": {"util_pct": {"label": "GPU utilization", "unit": "%", "per_gpu": {
        "0": [[0, 97.0], [1, 98.5], [2, 99.0]], "1": [[0, 96.0], [1, 97.5], [2, 98.0]]}}}}
    _save(h200_dir / "report.json", data)
    html = build_report(h200_dir)
    charts = re.search(r'<section id="charts">.*?</section>', html, re.S).group(0)
    assert "<title>GPU utilization</title>" in charts and "Not recorded: this harness version collects" not in charts


def _add_allreduce(h200_dir: Path, bounds: dict | None) -> None:
    """An all-reduce sweep on 4 GPUs, its result carrying ``bounds`` as the plugin records them."""
    data = _load(h200_dir / "report.json")
    data["harness"]["interconnect"] = {"allreduce": [{"gpus": 4, "size_bytes": 2 ** p, "busbw_gbps": 10.0 * p}
                                                     for p in range(20, 31)]}
    check = {"key": "allreduce_busbw", "name": "all-reduce bus bandwidth at 1 GiB", "kind": "performance",
             "measured": 300.0, "bound": 250.0, "unit": "GB/s", "comparison": ">=", "passed": True, "note": "",
             "source": "test"}
    data["tests"].append({"nodeid": "test_interconnect.py::test_allreduce_bus_bandwidth[4gpu]", "outcome": "passed",
                          "call": {"outcome": "passed", "duration": 5.0},
                          "metadata": {"harness": {"case": "allreduce-4gpu", "context": "h200, all-reduce, 4 GPUs",
                                                   "checks": [check], "interconnect": {"gpus": 4},
                                                   "record": {"run_id": "allreduce"}, "bounds": bounds}}})
    _save(h200_dir / "report.json", data)


def test_interconnect_bandwidth_is_drawn_against_its_bound_when_measured(h200_dir: Path):
    _add_allreduce(h200_dir, {"min_allreduce_busbw_gbps": {"4": 250.0}})
    html = build_report(h200_dir)
    assert "all-reduce bus bandwidth (GB/s)" in html and "4 GPUs bound" in html
    assert "Bound: not recorded" not in html


def test_the_interconnect_bound_is_the_recorded_one_never_the_raw_profile(h200_dir: Path):
    _add_allreduce(h200_dir, None)
    data = _load(h200_dir / "report.json")
    data["harness"]["profile"]["raw"]["interconnect"] = {"min_allreduce_busbw_gbps": {"4": 250.0}, "source": "test"}
    _save(h200_dir / "report.json", data)
    html = build_report(h200_dir)
    assert "all-reduce bus bandwidth (GB/s)" in html and "4 GPUs bound" not in html
    assert "Bound: not recorded with the all-reduce results" in html


def test_inherited_bounds_are_marked_from_the_recorded_names(h200_dir: Path):
    """The "d" marks follow bounds_inherited as recorded, not a re-merge of [defaults] (which says all three)."""
    for name in ("report.json", "session.json"):
        data = _load(h200_dir / name)
        results = ([t["metadata"]["harness"] for t in data["tests"] if "harness" in t.get("metadata", {})]
                   if name == "report.json" else list(data["results"].values()))
        for harness in results:
            if harness["case_id"]["model"] == "resnet50" and harness["case_id"]["precision"] == "bf16":
                harness["bounds_inherited"] = ["max_straggler_ratio"]
        _save(h200_dir / name, data)
    section = re.search(r'<section id="thresholds">.*?</section>', build_report(h200_dir), re.S).group(0)
    row = re.search(r"<tr><td>resnet50</td><td>bf16</td>.*?</tr>", section, re.S).group(0)
    assert row.count('<sup class="d">d</sup>') == 1 and '1.050<sup class="d">d</sup>' in row
    other = re.search(r"<tr><td>resnet50</td><td>fp16</td>.*?</tr>", section, re.S).group(0)
    assert other.count('<sup class="d">d</sup>') == 3


# --- the data contract: the report shows what the session recorded ----------------------------


def _results(data: dict) -> list[dict]:
    """The harness results of report.json (metadata.harness) or session.json (results)."""
    if "tests" in data:
        return [t["metadata"]["harness"] for t in data["tests"] if "harness" in t.get("metadata", {})]
    return list(data["results"].values())


def _edit_results(run: Path, edit) -> None:
    for name in ("report.json", "session.json"):
        data = _load(run / name)
        for harness in _results(data):
            edit(harness)
        _save(run / name, data)


def _row(html: str, model: str, precision: str) -> str:
    section = re.search(r'<section id="thresholds">.*?</section>', html, re.S).group(0)
    return re.search(rf"<tr><td>{model}</td><td>{precision}</td>.*?</tr>", section, re.S).group(0)


def test_bounds_are_the_recorded_ones_never_the_raw_profile_merged_again(h200_dir: Path):
    def edit(harness: dict) -> None:
        if (harness["case_id"]["model"], harness["case_id"]["precision"]) == ("resnet50", "bf16"):
            harness["bounds"]["min_weak_efficiency"] = {"2": 0.5, "4": 0.25}
            harness["bounds"]["min_samples_per_sec_per_gpu"] = 1234

    _edit_results(h200_dir, edit)
    for name in ("report.json", "session.json"):  # the raw profile no longer has the tables
        data = _load(h200_dir / name)
        (data.get("harness") or data)["profile"]["raw"].pop("models")
        _save(h200_dir / name, data)
    html = build_report(h200_dir)
    row = _row(html, "resnet50", "bf16")
    assert "2: 0.500 · 4: 0.250" in row and "1,234 img/s" in row
    assert "0.966" not in row  # the raw profile's value for this case
    charts = re.search(r'<section id="charts">.*?</section>', html, re.S).group(0)
    assert "bf16 bound: 0.500" in charts and "bf16 bound: 0.250" in charts  # the efficiency chart's bound


def test_a_case_whose_profile_has_no_bounds_says_so(h200_dir: Path):
    def edit(harness: dict) -> None:
        if (harness["case_id"]["model"], harness["case_id"]["precision"]) == ("vit_b_16", "bf16"):
            harness["bounds"], harness["bounds_inherited"] = None, []

    _edit_results(h200_dir, edit)
    assert "no [models.vit_b_16.bf16] table in the profile" in _row(build_report(h200_dir), "vit_b_16", "bf16")


def test_a_run_written_before_the_contract_renders_with_not_recorded(tmp_path: Path):
    run = tmp_path / "old"
    shutil.copytree(H200_RUN, run)  # no case_id, bounds or check keys
    html = build_report(run)
    assert _verdict(html) == "PASS" and "24 passed" in html
    assert '<table class="matrix">' not in html
    assert "Case identities not recorded: 24 results carry no case_id" in html
    assert "Not charted, case identities not recorded" in html
    assert "Bounds of the cases not recorded: 24 results carry no case_id" in html
    assert "test_scaling.py::test_weak_scaling[resnet50-bf16-4gpu]" in html  # listed by test id
    assert "4,647.6 images/s" in html  # its measurements are still shown


def test_damaged_contract_fields_are_not_recorded_not_a_crash(h200_dir: Path):
    damage = iter([{"model": "resnet50"}, "resnet50-bf16-1gpu", {"model": "x", "precision": "bf16", "gpus": "many"},
                   {"model": "x", "precision": "bf16", "gpus": 0}, {"model": "x", "precision": "bf16", "gpus": 2,
                                                                    "scaling": HOSTILE}, None, 7, []] * 10)

    def edit(harness: dict) -> None:
        harness["case_id"] = next(damage)
        harness["bounds"] = "every bound"
        harness["bounds_inherited"] = {"not": "a list"}
        for check in harness.get("checks", []):
            check["key"] = 3

    _edit_results(h200_dir, edit)
    html = build_report(h200_dir)
    assert _verdict(html) == "PASS"
    assert "Case identities not recorded: 24 results carry no case_id" in html


def test_checks_are_identified_by_key_not_by_name(h200_dir: Path):
    def edit(harness: dict) -> None:
        for check in harness["checks"]:
            if check["key"] == "weak_efficiency":
                check["name"] = "scaling (renamed)"
            elif check["key"] == "throughput_per_gpu":
                check["key"] = "something_else"  # named "per-GPU throughput", no longer keyed as it

    _edit_results(h200_dir, edit)
    html = build_report(h200_dir)
    assert "efficiency 0.994 vs 1" in _matrix(html)  # resnet50 bf16, 4 GPUs: found by key
    charts = re.search(r'<section id="charts">.*?</section>', html, re.S).group(0)
    assert "(min 4,176)" in charts  # no throughput check by key: the recorded bound, not the check's


def test_a_skipped_case_that_records_its_case_id_gets_a_cell(h200_dir: Path):
    data = _load(h200_dir / "report.json")
    skipped = _test(data, "test_scaling.py::test_weak_scaling[resnet50-bf16-8gpu]")
    skipped["metadata"] = {"harness": {"case_id": CaseId(model="resnet50", precision="bf16", gpus=8).to_dict()}}
    skipped["setup"] = {"outcome": "skipped", "longrepr": "('x.py', 1, 'Skipped: needs 8 GPUs; this node has 4')"}
    _save(h200_dir / "report.json", data)
    html = build_report(h200_dir)
    matrix = _matrix(html)
    assert re.findall(r"<th>(\d) GPUs?</th>", matrix) == ["1", "2", "4", "8"]
    assert matrix.count('<span class="badge skip">SKIP</span>') == 1 and "needs 8 GPUs; this node has 4" in matrix
    assert "<h3>Skipped (9)</h3>" in html  # still listed with the other skips


def test_multi_node_cases_get_their_own_columns(h200_dir: Path):
    data = _load(h200_dir / "report.json")
    two_nodes = json.loads(json.dumps(_test(data, "test_scaling.py::test_weak_scaling[resnet50-bf16-1gpu]")))
    two_nodes["nodeid"] = "test_scaling.py::test_weak_scaling[resnet50-bf16-2x1gpu]"
    two_nodes["metadata"]["harness"]["case_id"] = CaseId(model="resnet50", precision="bf16", gpus=1,
                                                         nodes=2).to_dict()
    data["tests"].append(two_nodes)
    _save(h200_dir / "report.json", data)
    html = build_report(h200_dir)
    header = re.search(r"<thead>(.*?)</thead>", _matrix(html), re.S).group(1)
    assert re.findall(r"<th>([^<]*GPUs?)</th>", header) == ["1 GPU", "2 GPUs", "2 × 1 GPU", "4 GPUs"]
    assert "resnet50 · bf16 · 2 GPUs on 2 nodes" in html


# --- svg -------------------------------------------------------------------------------------


def test_nice_ticks_cover_the_range_with_round_steps():
    assert svg.nice_ticks(0, 5000) == [0, 1000, 2000, 3000, 4000, 5000]
    assert svg.nice_ticks(0.93, 1.01) == pytest.approx([0.94, 0.96, 0.98, 1.0])


def test_svg_labels_are_escaped():
    chart = svg.line_chart(title=HOSTILE, series=[svg.Series(label=HOSTILE, points=((0, 1), (1, 0.9)), color="#000")],
                           x_ticks=[(0, "1"), (1, "2")])
    assert "<script>" not in chart and "&lt;script&gt;" in chart


def test_the_window_rule_repeats_and_a_shared_launch_are_stated():
    record = {"sample_unit": "images", "device_kind": "cuda", "throughput_per_gpu": 2000.0,
              "throughput_ci95_rel": 0.004, "ci_blocks": 6, "measure_s": 2.4, "measured_steps": 40, "warmup_steps": 30,
              "warmup_s": 2.1,
              "phases_s": {"launch_total": 9.5},
              "settings": {"ci_target": 0.01, "measure_stop_reason": "CI target", "launch": {"cases": 8, "index": 2},
                           "repeats": {"rule": "median of 3", "spread_rel": 0.003,
                                       "runs": [{"throughput_per_gpu": 1999.0}, {"throughput_per_gpu": 2000.0},
                                                {"status": "failed"}]}}}
    facts = dict(record_facts(record))
    assert facts["Window"].endswith("adaptive: stopped on CI target (target ±1 %)")
    assert facts["Repeats"] == "median of 3: 1,999.0, 2,000.0, failed images/s per GPU; spread 0.30 %"
    assert facts["Launch wall time"].startswith("9.500 s (case 3 of 8 sharing one launch")
    fixed = dict(record_facts({**record, "settings": {"measure_stop_reason": "fixed window"}}))
    assert fixed["Window"].endswith("; fixed window") and "Repeats" not in fixed


def test_a_compiled_record_says_whether_its_graphs_were_cached():
    record = {"sample_unit": "images", "device_kind": "cuda", "batch_size_per_gpu": 256, "precision": "bf16",
              "compile": True, "compile_cache": {"aot_autograd_hits": 0, "aot_autograd_misses": 0,
                                                 "aot_autograd_bypasses": 40, "fx_graph_hits": 80, "fx_graph_misses": 0,
                                                 "fx_graph_bypasses": 0, "ranks": 4, "ranks_with_misses": []}}
    facts = dict(record_facts(record))
    assert facts["Batch"] == "256 per GPU, bf16, torch.compile"
    assert facts["Compile caches"] == "warm: 80 cache hits, 0 misses, 40 not cacheable over 4 ranks"
    assert "Compile caches" not in dict(record_facts({**record, "compile": False, "compile_cache": None}))
