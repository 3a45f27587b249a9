"""The report's GPU x check table and peer heatmap (the Slurm node-check script: test_node_check.py)."""

from pathlib import Path

from harness.report.outcomes import SessionTest
from harness.report.sections.gpus import build_gpu_table, peer_heatmap

ROOT = Path(__file__).resolve().parent.parent
HEADER = {"hardware": {"gpus": [{"index": 0, "uuid": "GPU-aaa"}, {"index": 1, "uuid": "GPU-bbb"}]}}


def check(key, passed, measured=None, unit="", note=""):
    return {"key": key, "passed": passed, "measured": measured, "unit": unit, "note": note}


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
                harness={"checks": [check("gpu_uniformity", False, 0.8, note="GPU 1 (GPU-bbb) 0.80 of the median")]}),
]


def test_one_row_per_gpu_one_column_per_check_and_the_bad_gpu_stands_out():
    table = build_gpu_table(HEADER, TESTS)
    assert table["columns"] == ["GEMM bf16", "peer min", "power limit", "GPU uniformity"]
    good, bad = table["rows"]
    assert (good["gpu"], good["uuid"], good["failed"], bad["gpu"], bad["failed"]) == (
        "GPU 0", "GPU-aaa", False, "GPU 1", True)
    assert [c["state"] if c else None for c in good["cells"]] == ["pass", "pass", None, None]
    assert [c["state"] for c in bad["cells"]] == ["fail", "pass", "fail", "fail"]
    assert good["cells"][0]["text"].startswith("701") and good["cells"][0]["text"].endswith("TFLOP/s")
    assert bad["cells"][0]["title"] == "GPU 1 (GPU-bbb)"


def test_no_per_gpu_results_no_table():
    assert build_gpu_table(HEADER, [SessionTest(nodeid="x::y", outcome="passed", harness={})]) is None


def test_heatmap_draws_every_pair_and_outlines_the_slowest():
    svg = str(peer_heatmap(TESTS))
    assert svg.startswith("<svg") and "GPU 0 -> GPU 1: 390 GB/s" in svg and "120.5" in svg
    assert svg.count('stroke="#cf222e"') == 1
    assert peer_heatmap(TESTS[:2]) is None


def test_the_page_shows_the_gpu_table_and_the_heatmap(tmp_path):
    import json
    import shutil

    from harness.report.render import build_report

    run = tmp_path / "run"
    shutil.copytree(ROOT / "docs" / "data" / "2026-11-21-h200x4-acceptance", run)
    session = json.loads((run / "session.json").read_text())
    session["hardware"]["gpus"] = HEADER["hardware"]["gpus"]
    for result in TESTS:
        session["results"][result.nodeid] = {**result.harness, "case": result.nodeid}
    (run / "session.json").write_text(json.dumps(session))
    html = build_report(run)
    assert '<section id="gpus">' in html and "GEMM bf16" in html and "GPU-bbb" in html
    assert "GPU-to-GPU copy bandwidth" in html and "<svg" in html
