"""The report's GPU x check table and peer heatmap, and the Slurm node-check script."""

import os
import subprocess
from pathlib import Path

from harness.report.outcomes import SessionTest
from harness.report.sections.gpus import build_gpu_table, peer_heatmap

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


def node_check(tmp_path, exit_code):
    """Run slurm/node-check.sh with a stub Python exiting ``exit_code`` and a stub scontrol; its calls."""
    calls = tmp_path / "calls"
    for name, body in (("python", f'echo "$@" >> {calls}.python\nexit {exit_code}'),
                       ("scontrol", f'echo "$@" >> {calls}.scontrol')):
        (tmp_path / name).write_text(f"#!/bin/sh\n{body}\n")
        (tmp_path / name).chmod(0o755)
    env = {**os.environ, "HARNESS_PYTHON": str(tmp_path / "python"), "HARNESS_SCONTROL": str(tmp_path / "scontrol"),
           "HARNESS_REPORT_DIR": str(tmp_path / "reports"), "SLURMD_NODENAME": "gpu07", "SLURM_JOB_ID": "42"}
    done = subprocess.run(["bash", str(ROOT / "slurm" / "node-check.sh")], env=env, capture_output=True, text=True,
                          timeout=30)
    scontrol = Path(f"{calls}.scontrol")
    return done.returncode, Path(f"{calls}.python").read_text(), scontrol.read_text() if scontrol.exists() else ""


def test_node_check_passes_quietly_and_drains_on_fail(tmp_path):
    status, python, scontrol = node_check(tmp_path, 0)
    assert status == 0 and scontrol == ""
    assert "-m pytest acceptance --harness-level quick" in python
    status, _, scontrol = node_check(tmp_path, 1)
    assert status == 1
    assert scontrol.startswith("update nodename=gpu07 state=drain reason=gpu-acceptance quick: FAIL; report ")
    _, _, scontrol = node_check(tmp_path, 4)
    assert "could not start" in scontrol.splitlines()[-1]


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
