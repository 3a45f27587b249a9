"""harness fleet: sessions read from report directories, the fleet view and page (HTML, JSON, CSV),
the Prometheus textfile, the session-end call, and the command's errors. Made-up GPU nodes
(tests/fleet_sessions.py); real CPU sessions are in test_fleet_e2e.py."""

from __future__ import annotations

import csv
import io
import gzip
import json
import math
import re
import shutil
from pathlib import Path

import pytest

from fleet_sessions import NodePlan, fleet_plans, uuid_of, write_node
from harness.cli import main
from harness.fleet import prometheus, session_end, store
from harness.fleet.collect import CollectError, find_run_dirs, read_session
from harness.fleet.facts import CheckFact, SessionFacts
from harness.fleet.page import render_csv, render_html, render_json
from harness.fleet.view import build_fleet


@pytest.fixture(scope="module")
def fleet_root(tmp_path_factory) -> Path:
    """Six made-up H200 nodes: gpu-node04 has GPU 3 4 % slower (within its bounds), gpu-node05 fails."""
    root = tmp_path_factory.mktemp("fleet")
    for plan in fleet_plans():
        write_node(root, plan)
    return root


def run_fleet(capsys, *args) -> tuple[int, str, str]:
    code = main(["fleet", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_fleet_fails_on_the_failing_node_and_flags_the_slow_gpu_of_a_passing_one(fleet_root, tmp_path, capsys):
    code, out, _ = run_fleet(capsys, fleet_root, "--output", tmp_path)
    assert code == 1
    assert out.startswith("FAIL: 6 nodes (5 passed, 1 failed, 0 incomplete)")
    assert re.search(r"gpu-node04 GPU 3: 3\.\d % below the fleet median \(resnet50-bf16-weak-8gpu, compute throughput",
                     out), out
    view = json.loads((tmp_path / "fleet.json").read_text())
    verdicts = {n["node"]: n["verdict"] for n in view["nodes"]}
    assert verdicts == {f"gpu-node0{i}": "FAIL" if i == 5 else "PASS" for i in range(1, 7)}
    assert view["reasons"] == ["1 node failed: gpu-node05"]
    assert {(f["node"], f["check"]) for f in view["failed_checks"]} == {("gpu-node05", "per-GPU throughput")}
    # The outlier node passed every bound, yet its slow GPU stands out among the fleet's 48 GPUs.
    node04 = next(n for n in view["nodes"] if n["node"] == "gpu-node04")
    assert node04["failed_count"] == 0 and node04["worse_outliers"] >= 1
    compute = next(f for f in view["figures"] if f["key"] == "compute_throughput")
    assert compute["count"] == 48 and compute["level"] == "gpu"
    flagged = {(r["node"], r["gpu"]) for r in compute["rows"] if r["outlier"]}
    assert ("gpu-node04", "GPU 3") in flagged
    assert {node for node, _ in flagged} == {"gpu-node04", "gpu-node05"}
    slow = next(r for r in compute["rows"] if (r["node"], r["gpu"]) == ("gpu-node04", "GPU 3"))
    assert slow["uuid"] == uuid_of("gpu-node04", 3) and slow["worse"] and -0.045 < slow["deviation"] < -0.035


def test_the_page_is_one_self_contained_file_with_sortable_tables_and_a_chart_per_figure(fleet_root, tmp_path, capsys):
    run_fleet(capsys, fleet_root, "--output", tmp_path)
    html = (tmp_path / "fleet.html").read_text()
    view = json.loads((tmp_path / "fleet.json").read_text())
    assert 'data-verdict="FAIL"' in html
    assert html.count("<svg") == len(view["figures"]) > 10
    assert 'class="sortable"' in html and "addEventListener" in html
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html), "nothing is fetched from elsewhere"
    assert "gpu-node04 GPU 3: " in html


def test_the_csv_has_one_row_per_value_with_the_fleet_median(fleet_root, tmp_path, capsys):
    run_fleet(capsys, fleet_root, "--output", tmp_path)
    rows = list(csv.DictReader(io.StringIO((tmp_path / "fleet.csv").read_text())))
    view = json.loads((tmp_path / "fleet.json").read_text())
    assert len(rows) == sum(len(f["rows"]) for f in view["figures"])
    slow = next(r for r in rows if r["figure_key"] == "compute_throughput" and r["node"] == "gpu-node04"
                and r["gpu"] == "GPU 3")
    assert slow["outlier"] == "True" and slow["worse_side"] == "True" and slow["node_verdict"] == "PASS"
    assert float(slow["value"]) < float(slow["fleet_median"])


def test_a_healthy_fleet_passes_with_no_outlier(tmp_path, capsys):
    for plan in fleet_plans(4, outlier="none", failing="none"):
        write_node(tmp_path / "reports", plan)
    code, out, _ = run_fleet(capsys, tmp_path / "reports", "--output", tmp_path / "out")
    assert (code, out.splitlines()[0]) == (0, "PASS: 4 nodes (4 passed, 0 failed, 0 incomplete), 0 outliers (0 on the "
                                              "worse side)")


def test_an_expected_node_without_a_session_makes_the_fleet_incomplete(tmp_path, capsys):
    for plan in fleet_plans(3, outlier="none", failing="none"):
        write_node(tmp_path, plan)
    code, out, _ = run_fleet(capsys, tmp_path, "--expect-nodes", "gpu-node[01-04]", "--output", tmp_path / "out")
    assert code == 6 and out.startswith("INCOMPLETE: 3 nodes")
    assert "1 expected node has no session: gpu-node04" in out


def test_each_node_counts_with_its_latest_session_and_the_earlier_are_listed(tmp_path, capsys):
    for plan in fleet_plans(5, outlier="none"):
        write_node(tmp_path, plan)
    write_node(tmp_path, NodePlan(node="gpu-node05", started_at="2026-11-21T09:00:00+00:00"))  # repaired
    code, out, _ = run_fleet(capsys, tmp_path, "--output", tmp_path / "out")
    view = json.loads((tmp_path / "out" / "fleet.json").read_text())
    assert code == 0 and view["verdict"] == "PASS"
    assert [(e["node"], e["verdict"]) for e in view["earlier"]] == [("gpu-node05", "FAIL")]


def test_nodes_of_another_profile_are_compared_among_themselves(fleet_root, tmp_path):
    run_dir = shutil.copytree(next(d for d in find_run_dirs([fleet_root]) if "node01" in d.name), tmp_path / "other")
    for name in ("session.json", "report.json"):
        data = json.loads((run_dir / name).read_text())
        header = data.get("harness", data)
        header["profile"]["name"], header["hardware"]["hostname"] = "h100-80gb", "h100-node01"
        (run_dir / name).write_text(json.dumps(data))
    view = build_fleet([read_session(d) for d in find_run_dirs([fleet_root, tmp_path])])
    assert any("different profiles" in note for note in view["notes"])
    h100 = [f for f in view["figures"] if f["profile"] == "h100-80gb" and f["level"] == "node"]
    assert h100 and all(f["count"] == 1 and not f["judged"] for f in h100)


HOSTILE = '<script>alert(1)</script>=cmd|" calc"!A0'


def test_strings_from_the_inputs_are_escaped_in_the_page_and_defused_in_the_csv(fleet_root, tmp_path, capsys):
    for plan in fleet_plans(3, outlier="none", failing="none"):
        write_node(tmp_path / "in", plan)
    write_node(tmp_path / "in", NodePlan(node="=" + HOSTILE))
    run_fleet(capsys, tmp_path / "in", "--output", tmp_path / "out")
    html = (tmp_path / "out" / "fleet.html").read_text()
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    cells = [row[7] for row in csv.reader(io.StringIO((tmp_path / "out" / "fleet.csv").read_text()))]
    assert "'=" + HOSTILE in cells and "=" + HOSTILE not in cells


# --- reading report directories ----------------------------------------------------------------


def test_a_cut_short_session_json_without_report_json_is_a_problem_naming_the_file(fleet_root, tmp_path, capsys):
    broken = tmp_path / "reports" / "20261120-100000-gpu-node09-h200"
    broken.mkdir(parents=True)
    (broken / "session.json").write_text('{"run_id": "20261120-100000-gpu-node09-h200", "hardw')
    for plan in fleet_plans(3, outlier="none", failing="none"):
        write_node(tmp_path / "reports", plan)
    code, out, _ = run_fleet(capsys, tmp_path / "reports", "--output", tmp_path / "out")
    view = json.loads((tmp_path / "out" / "fleet.json").read_text())
    assert code == 6 and view["verdict"] == "INCOMPLETE"
    assert "1 input could not be read (listed below)" in view["reasons"]
    assert str(broken) in view["problems"][0] and "is not valid JSON" in view["problems"][0]


def test_a_session_json_that_names_no_host_says_so_and_which_file(fleet_root, tmp_path):
    run_dir = shutil.copytree(find_run_dirs([fleet_root])[0], tmp_path / "old")
    (run_dir / "report.json").unlink()
    data = json.loads((run_dir / "session.json").read_text())
    del data["hardware"]
    (run_dir / "session.json").write_text(json.dumps(data))
    with pytest.raises(CollectError, match=rf"{re.escape(str(run_dir / 'session.json'))}: no hardware.hostname"):
        read_session(run_dir)


def test_a_check_is_known_by_its_key_and_without_one_by_its_name(fleet_root, tmp_path):
    run_dir = shutil.copytree(find_run_dirs([fleet_root])[0], tmp_path / "run")
    for name in ("session.json", "report.json"):
        data = json.loads((run_dir / name).read_text())
        results = data["results"].values() if "results" in data else [t["metadata"]["harness"] for t in data["tests"]]
        for result in results:
            for check in result["checks"]:
                check.pop("key", None)  # as a session written before checks had keys
                if check["name"] == "step-time CV":
                    check["key"] = "step_time_cv"
        (run_dir / name).write_text(json.dumps(data))
    session = read_session(run_dir)
    keys = {c.name: c.key for c in session.checks}
    assert keys["per-GPU throughput"] == "per-GPU throughput" and keys["step-time CV"] == "step_time_cv"
    session = read_session(find_run_dirs([fleet_root])[0])
    assert session.node == "gpu-node01" and session.verdict == "PASS" and session.gpu_count == 8
    assert session.gpus[3].uuid == uuid_of("gpu-node01", 3) and session.profile_name == "h200"


@pytest.mark.parametrize("args, says", [
    ((), "nothing to read: pass report directories"),
    (("/no/such/dir",), "/no/such/dir: no such directory"),
    (("{tmp}",), "holds no report directory"),
    (("{root}", "--since", "last week"), "--since 'last week': expected a date YYYY-MM-DD"),
    (("{root}", "--expect-nodes", "n[3-1]"), "runs backwards"),
    (("{root}", "--outlier-z", "0"), "z_threshold must be > 0"),
    (("{root}", "--min-deviation", "2"), "min_relative must be a fraction"),
    (("--store", "{tmp}/none.sqlite"), "no history store at"),
])
def test_bad_input_is_one_line_and_exit_status_4(fleet_root, tmp_path, capsys, args, says):
    args = [a.format(tmp=tmp_path, root=fleet_root) for a in args]
    code, out, err = run_fleet(capsys, *args, "--output", tmp_path / "out")
    assert code == 4 and out == ""
    assert err.startswith("harness fleet: ") and says in err and err.count("\n") == 1


def test_the_fleet_reads_the_store_as_well_as_report_directories(fleet_root, tmp_path, capsys):
    for run_dir in find_run_dirs([fleet_root]):
        store.write_session(tmp_path / "h.sqlite", read_session(run_dir))
    code, out, _ = run_fleet(capsys, "--store", tmp_path / "h.sqlite", "--output", tmp_path / "a")
    assert code == 1 and out.startswith("FAIL: 6 nodes")
    code, out, _ = run_fleet(capsys, fleet_root, "--store", tmp_path / "h.sqlite", "--output", tmp_path / "b")
    assert out.startswith("FAIL: 6 nodes"), "a session in both counts once"
    code, out, _ = run_fleet(capsys, "--store", tmp_path / "h.sqlite", "--since", "2026-12-01",
                             "--output", tmp_path / "c")
    assert out.startswith("INCOMPLETE: 0 nodes")


FULL_SIGN_OFF = {"scope": "full", "level": "standard", "sign_off": True, "cpu_self_check": False}


def _clock_session(node: str, clock_mhz: float) -> SessionFacts:
    """A node whose one figure is a quantised SM clock: most nodes report the very same value."""
    check = CheckFact(test="test_gpu_state.py::test_gpu_state[gpu0]", case_key="gpu-state-gpu0", key="clocks",
                      name="SM clock", kind="health", measured=clock_mhz, bound=1755.0, unit="MHz",
                      comparison=">=", passed=clock_mhz >= 1755.0)
    return SessionFacts(run_id=f"20261124-{node}", node=node, verdict="PASS", profile_name="h200",
                        finished_at="2026-11-24T06:00:00+00:00", checks=(check,), **FULL_SIGN_OFF)


def test_a_fleet_of_identical_values_and_one_capped_node_has_finite_scores_everywhere():
    # Eleven nodes at exactly 1980 MHz: the MAD is 0. The twelfth, capped at 1785 MHz (within the
    # bound), is 9.8 % below: flagged, with a score the page, the JSON and the CSV can all print.
    sessions = [_clock_session(f"gpu-node{i:02d}", 1980.0) for i in range(1, 12)]
    view = build_fleet([*sessions, _clock_session("gpu-node12", 1785.0)])
    (figure,) = view["figures"]
    assert figure["mad"] == 0 and figure["scale_basis"] == "floor"
    assert "robust SD 11.31 MHz (the floor, 2 % of the median / 3.5: 1.4826 × MAD is 0)" == figure["scale_text"]
    assert [(o["node"], o["robust_z_text"]) for o in view["outliers"]] == [("gpu-node12", "-17.2")]
    assert {r["robust_z_text"] for r in figure["rows"] if r["node"] != "gpu-node12"} == {"+0.0"}
    html, text, table = render_html(view), render_json(view), render_csv(view)
    assert figure["scale_text"] in html
    for shown in (html, text, table):
        assert not re.search(r"∞|\binf\b|\bnan\b|Infinity", shown, re.IGNORECASE)
    rows = {row["node"]: row for row in csv.DictReader(io.StringIO(table))}
    assert float(rows["gpu-node12"]["robust_z"]) == pytest.approx((1785 - 1980) / (0.02 * 1980 / 3.5))
    assert json.loads(text)["outliers"][0]["robust_z"] == pytest.approx(-17.235, abs=1e-3)


def test_identical_healthy_nodes_are_not_outliers():
    view = build_fleet([_clock_session(f"gpu-node{i:02d}", 1980.0) for i in range(1, 9)])
    assert view["verdict"] == "PASS" and view["outliers"] == []
    assert view["figures"][0]["scale_basis"] == "floor"


# --- Prometheus --------------------------------------------------------------------------------

SAMPLE = re.compile(r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)\{(?P<labels>.*)\} (?P<value>\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)')


def parse_exposition(text: str) -> dict[tuple[str, tuple], float]:
    """The text format read back strictly: every sample typed and helped first, no series twice."""
    assert text.endswith("\n")
    typed, helped, samples = {}, set(), {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            helped.add(line.split()[2])
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            typed[name] = kind
        else:
            match = SAMPLE.match(line)
            assert match, f"not a sample line: {line!r}"
            labels, rest = [], match["labels"]
            while rest:
                label = LABEL.match(rest)
                assert label, f"bad labels in {line!r}"
                value = re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m[1], m[1]), label[2])
                labels.append((label[1], value))
                rest = rest[label.end():]
            assert match["name"] in typed and match["name"] in helped, line
            key = (match["name"], tuple(labels))
            assert key not in samples, f"series twice: {line!r}"
            samples[key] = float(match["value"])
    return samples


def test_the_prometheus_text_reads_back_with_the_verdict_one_hot_and_every_figure(fleet_root):
    session = read_session(next(d for d in find_run_dirs([fleet_root]) if "node05" in d.name))
    samples = parse_exposition(prometheus.exposition(session))
    verdicts = {dict(labels)["verdict"]: v for (name, labels), v in samples.items()
                if name == "harness_session_verdict"}
    assert verdicts == {"PASS": 0, "FAIL": 1, "INCOMPLETE": 0}
    figures = [(dict(labels), v) for (name, labels), v in samples.items()
               if name == "harness_gpu_figure_images_per_second"]
    compute = [(labels, v) for labels, v in figures if labels["figure"] == "compute_throughput"]
    assert len(compute) == 8
    assert {labels["uuid"] for labels, _ in compute} == {uuid_of("gpu-node05", i) for i in range(8)}
    def passed_in(case: str) -> dict:
        return {dict(labels)["check"]: v for (name, labels), v in samples.items() if name == "harness_check_passed"
                and dict(labels)["case"] == case}

    key = {c.name: c.key for c in session.checks}
    # The slow GPU misses its own rate in the 1-GPU case; the 8-GPU case is judged by its efficiency.
    assert passed_in("resnet50-bf16-weak-1gpu")[key["per-GPU throughput"]] == 0
    assert passed_in("resnet50-bf16-weak-8gpu")[key["weak-scaling efficiency"]] == 1
    checks = {dict(labels)["result"]: v for (name, labels), v in samples.items() if name == "harness_session_checks"}
    assert checks["failed"] == len(session.failed_checks) == 1


def test_each_prometheus_metric_has_one_unit_and_the_ratio_to_the_bound_is_unitless(fleet_root):
    session = read_session(next(d for d in find_run_dirs([fleet_root]) if "node05" in d.name))
    samples = parse_exposition(prometheus.exposition(session))
    assert not any("unit" in dict(labels) for _, labels in samples), "the unit is in the metric's name"
    throughput = next(c for c in session.checks if c.name == "per-GPU throughput" and c.measured is not None)
    labels = (("node", "gpu-node05"), ("case", throughput.case_key), ("check", throughput.key))
    assert samples[("harness_check_measured_images_per_second", labels)] == pytest.approx(throughput.measured)
    assert samples[("harness_check_bound_images_per_second", labels)] == pytest.approx(throughput.bound)
    assert samples[("harness_check_ratio_to_bound", labels)] == pytest.approx(throughput.measured / throughput.bound)
    assert samples[("harness_check_ratio_to_bound", labels)] < 1, "node05 runs 15 % slow"
    assert prometheus.unit_suffix("GB/s") == "gigabytes_per_second"
    assert prometheus.unit_suffix("frames/s") == "frames_per_second"


@pytest.mark.parametrize(("plan", "scope", "sign_off"), [
    ({}, {"scope": "full", "level": "standard", "cpu_self_check": "false", "sign_off": "true"}, 1),
    ({"scope": "partial: 1 of 20 profile cases"},
     {"scope": "partial", "level": "standard", "cpu_self_check": "false", "sign_off": "false"}, 0),
    ({"level": "quick"}, {"scope": "full", "level": "quick", "cpu_self_check": "false", "sign_off": "false"}, 0),
    ({"cpu_self_check": True},
     {"scope": "full", "level": "standard", "cpu_self_check": "true", "sign_off": "false"}, 0),
    ({"scope": None}, {"scope": "unknown", "level": "unknown", "cpu_self_check": "unknown", "sign_off": "unknown"}, 0)])
def test_the_prometheus_verdict_carries_the_scope_so_a_partial_pass_is_no_sign_off(tmp_path, plan, scope, sign_off):
    session = read_session(write_node(tmp_path, NodePlan(node="gpu-node01", **plan)))
    samples = parse_exposition(prometheus.exposition(session))
    verdicts = {dict(labels)["verdict"]: (dict(labels), v) for (name, labels), v in samples.items()
                if name == "harness_session_verdict"}
    labels, value = verdicts["PASS"]
    assert value == 1 and {k: labels[k] for k in scope} == scope
    assert samples[("harness_session_sign_off", (("node", "gpu-node01"),))] == sign_off


def test_label_values_with_quotes_backslashes_and_newlines_round_trip(fleet_root):
    session = read_session(find_run_dirs([fleet_root])[0])
    odd = 'n"1\\x\ny'
    text = prometheus.exposition(session.__class__(**{**{f: getattr(session, f) for f in session.__slots__},
                                                      "node": odd}))
    samples = parse_exposition(text)
    assert all(dict(labels)["node"] == odd for _, labels in samples)


def test_a_value_that_is_not_a_number_is_left_out_of_the_prometheus_text(fleet_root):
    session = read_session(find_run_dirs([fleet_root])[0])
    odd = [CheckFact(test="t", case_key="c", key=key, name=key, kind="health", measured=value, bound=bound,
                     unit="x", comparison=">=", passed=None)
           for key, value, bound in (("nan", math.nan, 1.0), ("inf", math.inf, 1.0), ("bound_inf", 2.0, -math.inf))]
    text = prometheus.exposition(session.__class__(**{**{f: getattr(session, f) for f in session.__slots__},
                                                      "checks": (*session.checks, *odd)}))
    assert not re.search(r"NaN|Inf", text)
    samples = parse_exposition(text)
    measured = {dict(labels)["check"] for (name, labels), _ in samples.items()
                if name == "harness_check_measured_ratio"}
    bounds = {dict(labels)["check"] for (name, labels), _ in samples.items() if name == "harness_check_bound_ratio"}
    assert {"nan", "inf"}.isdisjoint(measured) and "bound_inf" in measured and "bound_inf" not in bounds


# --- the session's end -------------------------------------------------------------------------


def test_session_end_writes_the_store_file_and_both_prometheus_files(fleet_root, tmp_path):
    run_dir = shutil.copytree(find_run_dirs([fleet_root])[0], tmp_path / "run")
    lines = session_end.record_session(run_dir, store=tmp_path / "h.sqlite", textfile_dir=tmp_path / "textfile")
    assert len(lines) == 2 and lines[0].startswith(f"harness: history store {tmp_path}/h.sqlite.d/gpu-node01.")
    assert lines[1] == f"harness: Prometheus textfile {tmp_path}/textfile/harness_acceptance.prom"
    assert [s.node for s in store.load(tmp_path / "h.sqlite").sessions] == ["gpu-node01"]
    assert (run_dir / "metrics.prom").read_text() == (tmp_path / "textfile" / "harness_acceptance.prom").read_text()


def test_a_store_that_cannot_be_written_costs_a_line_never_an_exception(fleet_root, tmp_path):
    run_dir = shutil.copytree(find_run_dirs([fleet_root])[0], tmp_path / "run")
    (tmp_path / "full").write_text("")
    lines = session_end.record_session(run_dir, store=tmp_path / "full" / "h.sqlite",
                                       textfile_dir=tmp_path / "full" / "prom")
    assert lines[0].startswith(f"harness: history store not written: cannot write {tmp_path}/full/h.sqlite.d/")
    assert f"harness history --store {tmp_path}/full/h.sqlite --add {run_dir}" in lines[0]
    assert lines[1].startswith(f"harness: Prometheus file not written: cannot write {tmp_path}/full/prom/")
    assert (run_dir / "metrics.prom").is_file(), "what could be written was"
    assert session_end.record_session(tmp_path / "nothing", store=tmp_path / "h.sqlite")[0].startswith(
        "harness: fleet facts not recorded: run directory")


def test_the_store_path_is_the_option_else_the_environment_else_beside_the_reports():
    assert session_end.store_path("/a.sqlite", "reports", {"HARNESS_STORE": "/b"}) == Path("/a.sqlite")
    assert session_end.store_path(None, "reports", {"HARNESS_STORE": "/b"}) == Path("/b")
    assert session_end.store_path(None, "out", {}) == Path("out/history.sqlite")
    assert session_end.prometheus_dir(None, {}) is None
    assert session_end.prometheus_dir(None, {"HARNESS_PROMETHEUS_DIR": "/t"}) == Path("/t")


# --- scope: only a full GPU session at level standard or long signs a node off ------------------


def _scoped_fleet(tmp_path: Path, plans: list[NodePlan]) -> dict:
    for plan in plans:
        write_node(tmp_path, plan)
    return build_fleet([read_session(d) for d in find_run_dirs([tmp_path])])


NARROWER = [({"scope": "partial: 1 of 20 profile cases"}, "partial: 1 of 20 profile cases"),
            ({"level": "quick"}, "quick health check"),
            ({"cpu_self_check": True}, "CPU self-check"),
            ({"scope": None}, "scope not recorded")]
"""Sessions that are no node sign-off, whatever their verdict, and how the fleet names them."""


@pytest.mark.parametrize(("later", "scope_text"), NARROWER)
def test_a_later_narrower_pass_never_turns_a_failed_node_green(tmp_path, later, scope_text):
    view = _scoped_fleet(tmp_path, [NodePlan(node="gpu-node01", speed=0.85),
                                    NodePlan(node="gpu-node01", started_at="2026-11-21T10:00:00+00:00", **later)])
    (node,) = view["nodes"]
    assert (view["verdict"], node["verdict"], node["scope"]) == ("FAIL", "FAIL", "full sign-off run at level standard")
    assert node["run_id"].startswith("20261120"), "judged on the full session, not the later narrower one"
    assert f"later session not counted (not a full sign-off): PASS ({scope_text}" in node["reasons"][0]
    assert [(e["verdict"], e["scope"]) for e in view["earlier"]] == [("PASS", scope_text)]


@pytest.mark.parametrize(("only", "scope_text"), NARROWER)
def test_a_node_with_only_a_narrower_pass_is_not_signed_off_and_says_what_it_ran(tmp_path, only, scope_text):
    view = _scoped_fleet(tmp_path, [NodePlan(node="gpu-node01"), NodePlan(node="gpu-node02", **only)])
    assert view["verdict"] == "INCOMPLETE"
    assert view["reasons"] == ["1 node is incomplete: gpu-node02"]
    node = {n["node"]: n for n in view["nodes"]}
    assert node["gpu-node01"]["verdict"] == "PASS" and node["gpu-node01"]["sign_off"]
    assert node["gpu-node02"]["verdict"] == "INCOMPLETE" and node["gpu-node02"]["scope"] == scope_text
    assert node["gpu-node02"]["reasons"][0].startswith(
        f"no full sign-off of a GPU profile: the latest session is PASS ({scope_text}, ")
    assert scope_text in render_html(view)


def test_a_later_narrower_fail_fails_a_signed_off_node_and_a_later_full_run_is_judged(tmp_path):
    view = _scoped_fleet(tmp_path, [NodePlan(node="gpu-node01"),
                                    NodePlan(node="gpu-node01", speed=0.85, level="quick",
                                             started_at="2026-11-21T10:00:00+00:00")])
    (node,) = view["nodes"]
    assert node["verdict"] == "FAIL" and node["reasons"][0].startswith("failed in a later session: FAIL (quick")
    assert node["failed_count"] >= 1, "the later session's failed checks are listed"
    later_full = _scoped_fleet(tmp_path, [NodePlan(node="gpu-node01", started_at="2026-11-22T10:00:00+00:00")])
    assert later_full["verdict"] == "PASS" and later_full["nodes"][0]["run_id"].startswith("20261122")


def test_fleet_and_history_show_the_checks_own_efficiency_never_a_recomputed_one(fleet_root):
    from harness.fleet.history import node_history

    run_dirs = find_run_dirs([fleet_root])
    recorded = {}
    for run_dir in run_dirs:
        results = json.loads((run_dir / "session.json").read_text())["results"].values()
        recorded.update({run_dir.name.split("-", 2)[2].rsplit("-", 1)[0]: c["measured"] for r in results
                         for c in r["checks"] if c.get("key") == "weak_efficiency"})
    view = build_fleet([read_session(d) for d in run_dirs])
    (figure,) = [f for f in view["figures"] if f["key"] == "weak_efficiency"]
    assert {r["node"]: r["value"] for r in figure["rows"]} == recorded
    history = node_history([read_session(d) for d in run_dirs], "gpu-node01")
    (trend,) = [t for t in history if t.key == "weak_efficiency"]
    assert [p.value for p in trend.points] == [recorded["gpu-node01"]]


def test_a_1_gpu_case_on_every_gpu_at_once_gives_each_gpu_its_own_rate():
    """A 4 x H200 default session's ResNet-50 bf16 1-GPU case ran on all four GPUs at once (docs/data/2026-11-28-
    h200x4-held-out): the fleet takes each GPU's own rate under its own UUID. It took the four GPUs' median and put it
    on GPU 0, so a slow GPU of such a node could never stand out of the fleet."""
    from harness.fleet.collect import gpu_figures

    packed = (Path(__file__).resolve().parent.parent / "docs" / "data" / "2026-11-28-h200x4-held-out" / "sessions" /
              "20261128-162426-vm-h200-958" / "runs" / "resnet50-bf16-weak-1gpu.json.gz")
    record = json.loads(gzip.decompress(packed.read_bytes()))
    alone = [f for f in gpu_figures("resnet50-bf16-weak-1gpu", record, "vm") if f.key == "throughput_alone"]
    assert [(f.gpu_index, f.gpu_uuid, f.value) for f in alone] == [
        (rank["gpu_index"], rank["gpu_uuid"], rank["throughput"]) for rank in record["per_rank"]]
    assert len({f.gpu_uuid for f in alone}) == 4
