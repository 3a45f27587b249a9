"""harness history: a node's or a GPU's figures over its sessions, drift against earlier sign-offs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fleet_sessions import NodePlan, uuid_of, write_node
from harness.cli import main
from harness.fleet import store
from harness.fleet.collect import read_session
from harness.fleet.facts import SessionFacts
from harness.fleet.history import drift_points, gpu_history, node_history

DATES = ("2026-09-01", "2026-10-01", "2026-11-01")


def facts(run_id: str, verdict: str = "PASS", **scope) -> SessionFacts:
    scope = {"scope": "full", "level": "standard", "cpu_self_check": False, "sign_off": verdict == "PASS"} | scope
    return SessionFacts(run_id=run_id, node="n1", verdict=verdict, started_at=run_id, **scope)


def test_each_point_is_compared_with_the_median_of_the_earlier_sign_offs():
    series = [(facts("1"), 100.0), (facts("2"), 102.0), (facts("3"), 90.0), (facts("4"), 96.0)]
    points = drift_points(series, "higher", 0.03)
    assert [p.reference for p in points] == [None, 100.0, 101.0, 100.0]
    assert [p.flagged for p in points] == [False, False, True, True]
    assert points[3].drift == pytest.approx(-0.04)


def test_a_failed_session_is_no_reference():
    series = [(facts("1"), 100.0), (facts("2", "FAIL"), 50.0), (facts("3"), 99.0)]
    assert [p.reference for p in drift_points(series, "higher", 0.03)] == [None, 100.0, 100.0]


@pytest.mark.parametrize("scope", [{"scope": "partial: 1 of 20 profile cases"}, {"level": "quick"},
                                   {"cpu_self_check": True}, {"scope": None}])
def test_a_partial_quick_cpu_or_unknown_pass_is_no_reference(scope):
    series = [(facts("1", **scope, sign_off=False), 100.0), (facts("2"), 90.0), (facts("3"), 89.0)]
    assert [p.reference for p in drift_points(series, "higher", 0.03)] == [None, None, 90.0]


def test_a_history_without_an_earlier_sign_off_says_so_never_no_drift(tmp_path, capsys):
    for day in DATES[:2]:
        write_node(tmp_path / "reports", NodePlan(node="gpu-node11", started_at=f"{day}T10:00:00+00:00",
                                                  scope="partial: 2 of 20 profile cases"))
    code = main(["history", "--node", "gpu-node11", str(tmp_path / "reports"), "--store", str(tmp_path / "none.sqlite"),
                 "--html", str(tmp_path / "h.html")])
    out = capsys.readouterr().out
    assert code == 0
    assert out.splitlines()[1].startswith("no earlier sign-off to compare against: no session before the latest")
    assert "no drift" not in out.lower()
    assert "no earlier sign-off to compare against" in (tmp_path / "h.html").read_text()


def test_only_the_worse_side_drifts_unless_no_side_is_better():
    series = [(facts("1"), 1.00), (facts("2"), 1.10)]
    assert drift_points(series, "lower", 0.03)[1].flagged
    assert not drift_points(series, "higher", 0.03)[1].flagged, "10 % faster is no drift"
    assert drift_points(series, "either", 0.03)[1].flagged
    assert not drift_points(series, "lower", 0.15)[1].flagged


@pytest.fixture(scope="module")
def history_store(tmp_path_factory) -> tuple[Path, Path]:
    """Three monthly sign-offs of gpu-node09, whose GPU 3 is 3.5 % slower in the last (still within
    every bound), and of a steady gpu-node10, added to a store."""
    root = tmp_path_factory.mktemp("history")
    for day, slow in zip(DATES, (0.0, 0.004, 0.035), strict=True):
        write_node(root / "reports", NodePlan(node="gpu-node09", slow_gpu=3, slow_by=slow,
                                              started_at=f"{day}T10:00:00+00:00"))
        write_node(root / "reports", NodePlan(node="gpu-node10", started_at=f"{day}T11:00:00+00:00"))
    assert main(["history", "--store", str(root / "h.sqlite"), "--add", str(root / "reports")]) == 0
    return root, root / "h.sqlite"


def test_the_history_of_a_gpu_flags_its_drift_while_every_session_passed(history_store, capsys, tmp_path):
    _, path = history_store
    capsys.readouterr()
    uuid = uuid_of("gpu-node09", 3)
    code = main(["history", "--store", str(path), "--gpu", uuid, "--json", str(tmp_path / "h.json"),
                 "--html", str(tmp_path / "h.html")])
    out = capsys.readouterr().out
    assert code == 1
    assert out.splitlines()[:2] == [f"history of GPU {uuid}: 5 figures over 3 sessions",
                                    "DRIFT: 1 figure at least 3 % worse than the median of earlier sign-offs "
                                    "(listed first)"]
    drifted = r"compute throughput \(no all-reduce\) .*\n.*PASS.*\n.*PASS.*\n.*PASS .* -3\.\d % vs [\d,.]+  DRIFT"
    assert re.search(drifted, out), out
    data = json.loads((tmp_path / "h.json").read_text())
    drifted = [t for t in data["trends"] if t["drifted"]]
    assert [(t["key"], len(t["points"])) for t in drifted] == [("compute_throughput", 3)]
    html = (tmp_path / "h.html").read_text()
    assert html.count("<svg") == len(data["trends"]) and "DRIFT" in html


def test_the_history_of_a_steady_node_says_no_drift(history_store, capsys):
    _, path = history_store
    capsys.readouterr()
    assert main(["history", "--store", str(path), "--node", "gpu-node10"]) == 0
    out = capsys.readouterr().out
    assert "no drift" in out.splitlines()[1] and "over 3 sessions" in out.splitlines()[0]


def test_the_history_of_a_node_holds_its_checks_and_its_gpus(history_store):
    _, path = history_store
    trends = node_history(store.load(path).sessions, "gpu-node09")
    where = {t.where for t in trends}
    assert "node" in where and f"GPU 3 ({uuid_of('gpu-node09', 3)})" in where
    drifted = {(t.where, t.name) for t in trends if t.drifted}
    assert (f"GPU 3 ({uuid_of('gpu-node09', 3)})", "compute throughput (no all-reduce)") in drifted
    assert ("node", "straggler ratio (slowest/fastest rank)") in drifted


def test_a_gpu_is_followed_by_its_uuid_when_it_moves_to_another_node(tmp_path):
    sessions = []
    for node, day, slow in (("a", "2026-09-01", 0.0), ("b", "2026-10-01", 0.05)):
        plan = NodePlan(node=node, slow_gpu=3, slow_by=slow, started_at=f"{day}T10:00:00+00:00")
        run_dir = write_node(tmp_path, plan)
        for name in ("session.json", "report.json"):
            (run_dir / name).write_text((run_dir / name).read_text().replace(uuid_of(node, 3), "GPU-moved"))
        sessions.append(read_session(run_dir))
    compute = next(t for t in gpu_history(sessions, "GPU-moved") if t.key == "compute_throughput")
    assert [p.node for p in compute.points] == ["a", "b"] and compute.drifted


def test_an_uncompacted_store_is_read_beside_report_directories(history_store, tmp_path, capsys):
    root, path = history_store
    write_node(tmp_path, NodePlan(node="gpu-node09", started_at="2026-11-15T10:00:00+00:00"))
    capsys.readouterr()
    main(["history", "--store", str(path), "--node", "gpu-node09", str(tmp_path)])
    assert capsys.readouterr().out.startswith("history of node gpu-node09: 52 figures over 4 sessions")


def test_an_unknown_node_or_gpu_lists_what_the_store_knows(history_store, capsys):
    _, path = history_store
    capsys.readouterr()
    assert main(["history", "--store", str(path), "--node", "gpu-node99"]) == 4
    assert capsys.readouterr().err == ("harness history: no measured figure of node gpu-node99 in 6 sessions read; "
                                       "known: gpu-node09, gpu-node10\n")


@pytest.mark.parametrize("args, says", [
    (["--node", "x", "--drift", "3"], "--drift 3.0: expected a fraction in (0, 1)"),
    (["--node", "x", "--store", "/no/such.sqlite"], "no history store at /no/such.sqlite"),
    (["--add", "/no/such/dir"], "/no/such/dir: no such directory"),
])
def test_bad_history_input_is_one_line_and_exit_status_4(capsys, args, says):
    assert main(["history", *args]) == 4
    err = capsys.readouterr().err
    assert err.startswith("harness history: ") and says in err


def test_history_needs_one_of_node_gpu_add_or_compact(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["history"])
    assert exit_info.value.code == 4, "argparse's own mistakes exit with the usage code too"
    assert "one of the arguments --node --gpu --add --compact is required" in capsys.readouterr().err


def test_compact_folds_what_the_sessions_wrote(history_store, capsys):
    root, _ = history_store
    path = root / "compacted.sqlite"
    main(["history", "--store", str(path), "--add", str(root / "reports")])
    capsys.readouterr()
    assert main(["history", "--store", str(path), "--compact"]) == 0
    assert capsys.readouterr().out == f"{path}: 6 session files folded in, 6 new sessions\n"
    assert store.store_files(path) == [path] and len(store.load(path).sessions) == 6
