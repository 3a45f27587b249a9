"""The report's GPU x check table and peer heatmap (the Slurm node-check script: test_node_check.py)."""

from pathlib import Path

from harness.report.outcomes import SessionTest
from harness.kinds.shipped import report_sections
from harness.report.sections.gpus import build_gpu_table, peer_heatmap

GPU_COLUMNS = report_sections().gpu_columns
"""Every shipped kind's per-GPU columns, in the jobs' order (Job.gpu_columns)."""

ROOT = Path(__file__).resolve().parent.parent
HEADER = {"hardware": {"gpus": [{"index": 0, "uuid": "GPU-aaa"}, {"index": 1, "uuid": "GPU-bbb"}]}}


def check(key, passed, measured=None, unit="", note="", locations=()):
    return {"key": key, "passed": passed, "measured": measured, "unit": unit, "note": note,
            "locations": list(locations)}


def result_of(nodeid, checks, **components):
    return SessionTest(nodeid=nodeid, outcome="passed", harness={"checks": checks, "components": components})


PEER = {"pairs": [{"src": {"index": 0}, "dst": {"index": 1}, "gbps": 390.0},
                  {"src": {"index": 1}, "dst": {"index": 0}, "gbps": 120.5}]}
TESTS = [
    result_of("test_components.py::test_gemm[gpu0]", [check("gemm_bf16", True, 701.2, "TFLOP/s")], gpu={"index": 0}),
    result_of("test_components.py::test_gemm[gpu1]", [check("gemm_bf16", False, 402.0, "TFLOP/s", "GPU 1 (GPU-bbb)")],
         gpu={"index": 1}),
    result_of("test_components.py::test_peer_copy[gpu0-gpu1]", [check("peer_bandwidth", True, 390.0, "GB/s")],
         pair=[0, 1], peer=PEER),
    result_of("test_components.py::test_peer_copy[gpu1-gpu0]", [check("peer_bandwidth", None, 120.5, "GB/s")],
         pair=[1, 0], peer=PEER),
    SessionTest(nodeid="test_gpu_state.py::test_gpu_state[gpu1]", outcome="failed",
                harness={"checks": [check("power_limit", False, 500.0, "W")], "gpu_state": {"index": 1}}),
    SessionTest(nodeid="test_scaling.py::test_weak_scaling[resnet50-bf16-2gpu]", outcome="failed",
                harness={"checks": [check("gpu_uniformity", False, 0.8, note="GPU 0 is the median; GPU 1 0.80 of it",
                                          locations=[{"gpu_index": 1, "gpu_uuid": "GPU-bbb", "rank": 1}])]}),
]


def test_one_row_per_gpu_one_column_per_check_and_the_bad_gpu_stands_out():
    table = build_gpu_table(HEADER, TESTS, GPU_COLUMNS)
    assert table["columns"] == ["power limit", "GEMM bf16", "peer min", "GPU uniformity"]  # the kinds' order
    good, bad = table["rows"]
    assert (good["gpu"], good["uuid"], good["failed"], bad["gpu"], bad["failed"]) == (
        "GPU 0", "GPU-aaa", False, "GPU 1", True)
    assert [c["state"] if c else None for c in good["cells"]] == [None, "pass", "pass", None]
    assert [c["state"] for c in bad["cells"]] == ["fail", "fail", "pass", "fail"]
    assert good["cells"][1]["text"].startswith("701") and good["cells"][1]["text"].endswith("TFLOP/s")
    assert bad["cells"][1]["title"] == "GPU 1 (GPU-bbb)"


def test_no_per_gpu_results_no_table():
    assert build_gpu_table(HEADER, [SessionTest(nodeid="x::y", outcome="passed", harness={})], GPU_COLUMNS) is None


def test_heatmap_draws_every_pair_and_outlines_the_slowest():
    svg = str(peer_heatmap(TESTS))
    assert svg.startswith("<svg") and "GPU 0 -> GPU 1: 390 GB/s" in svg and "120.5" in svg
    assert svg.count('stroke="#cf222e"') == 1
    assert peer_heatmap(TESTS[:2]) is None


def test_each_cell_shows_measured_over_bound_and_the_slow_gpu_is_the_row_marked_lowest():
    def gemm(index, tflops):
        return result_of(f"test_components.py::test_gemm[gpu{index}]",
                         [{"key": "gemm_bf16", "passed": tflops >= 600, "measured": tflops, "bound": 600.0,
                           "unit": "TFLOP/s", "comparison": ">="},
                          {"key": "hbm_copy", "passed": True, "measured": 4000.0 - 100 * (index == 2),
                           "bound": 3200.0, "unit": "GB/s", "comparison": ">="}], gpu={"index": index})
    header = {"hardware": {"gpus": [{"index": i, "uuid": f"GPU-{i}"} for i in range(4)]}}
    table = build_gpu_table(header, [gemm(0, 700.0), gemm(1, 702.0), gemm(2, 640.0), gemm(3, 699.0)], GPU_COLUMNS)
    slow = table["rows"][2]
    assert [c["ratio"] for c in slow["cells"]] == ["1.07 × bound", "1.22 × bound"]
    assert [c["lowest"] for c in slow["cells"]] == [True, True] and slow["lowest"] == 2
    assert all(row["lowest"] == 0 for index, row in enumerate(table["rows"]) if index != 2)
    upper = {"key": "xid_events", "passed": True, "measured": 2.0, "bound": 4.0, "comparison": "<="}
    assert build_gpu_table(header, [SessionTest(nodeid="t::test_gpu_state[gpu0]", outcome="passed", harness={
        "checks": [upper], "gpu_state": {"index": 0}})], GPU_COLUMNS)["rows"][0]["cells"][0]["ratio"] == "2.00 × bound"


def test_the_gpu_grid_shows_topology_without_a_peer_test_and_names_a_pair_without_p2p():
    topology = {"gpus": [{"index": 0, "nvlinks_active": 18}, {"index": 1, "nvlinks_active": 18},
                         {"index": 2, "nvlinks_active": 0}],
                "p2p_read": {"0-1": "ok", "0-2": "ioh topology not supported", "1-2": "ok"}}
    svg = str(peer_heatmap([SessionTest(nodeid="test_interconnect.py::test_topology", outcome="passed",
                                        harness={"checks": [], "topology": topology})]))
    assert "GPU 0 -> GPU 2: P2P ioh topology not supported" in svg and "GPU 1 -> GPU 0: P2P ok" in svg
    assert "18 NVLinks" in svg and "0 NVLinks" in svg and svg.count(">no P2P<") == 2
    both = str(peer_heatmap([*TESTS, SessionTest(nodeid="t::test_topology", outcome="passed",
                                                 harness={"topology": {"p2p_read": {"0-1": "ok"}}})]))
    assert "GPU 0 -> GPU 1: 390 GB/s · P2P ok" in both


def test_the_page_shows_the_gpu_table_and_the_heatmap(tmp_path):
    import json
    import shutil

    from support.report import build_report

    run = tmp_path / "run"
    shutil.copytree(ROOT / "docs" / "data" / "2026-11-21-h200x4-acceptance", run)
    session = json.loads((run / "session.json").read_text())
    session["hardware"]["gpus"] = HEADER["hardware"]["gpus"]
    for result in TESTS:
        session["results"][result.nodeid] = {**result.harness, "case": result.nodeid}
    (run / "session.json").write_text(json.dumps(session))
    html = build_report(run)
    assert '<section id="gpus">' in html and "GEMM bf16" in html and "GPU-bbb" in html
    assert "GPU × GPU: peer bandwidth and topology" in html and "<svg" in html


def test_a_kinds_declared_columns_are_the_tables_and_a_site_kind_adds_its_own():
    """Job.gpu_columns: the per-GPU table's columns come from the session's kinds (issue 29), so a site's kind
    declares its per-GPU figure on its own Job, and a check no job declares a column for is not one."""
    from harness.jobs.job import Job
    from harness.kinds.shipped import JOBS

    site = Job(name="site nvlink", tests=("test_site_nvlink",), level="quick", required=lambda need: [],
               gpu_columns=(("nvlink_gbps", "NVLink per link"),))
    tests = [SessionTest(nodeid=f"t::test_site_nvlink[gpu{index}]", outcome="passed", harness={
        "gpu": {"index": index}, "checks": [check("nvlink_gbps", True, measured=value, unit="GB/s")]})
        for index, value in ((0, 25.1), (1, 24.9))]
    assert build_gpu_table(HEADER, tests, GPU_COLUMNS) is None  # the shipped kinds declare no such column
    table = build_gpu_table(HEADER, tests, report_sections([*JOBS, site]).gpu_columns)
    assert table is not None and table["columns"] == ["NVLink per link"]
    assert [row["cells"][0]["text"] for row in table["rows"]] == ["25.100 GB/s", "24.900 GB/s"]
    assert [label for _, label in GPU_COLUMNS][:2] == ["power limit", "clocks"]  # GPU state's, in job order
