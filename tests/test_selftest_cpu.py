"""The real `harness selftest` on CPU ranks: the foreign-load row must turn the throughput check FAIL,
a core hidden by the affinity the node-shape check, and the rows that cannot apply on CPU must say
why (never read as passed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_selftest_on_cpu_ranks_catches_the_foreign_load_and_a_hidden_core_and_skips_the_gpu_rows(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "harness", "selftest", "--hardware", "cpu",
                           "--report-dir", str(tmp_path)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "SELFTEST PASSED: 2 of 2 injected degradations caught with their cause; 2 not applicable" in proc.stdout
    [result] = tmp_path.glob("selftest-*/selftest.json")
    rows = {row["key"]: row for row in json.loads(result.read_text())["rows"]}
    load = rows["foreign_load"]
    assert load["ok"] and load["failed"] and "throughput_per_gpu" in load["failed_keys"]
    hidden = rows["hidden_gpu"]
    assert hidden["ok"] and hidden["failed_keys"] == ["gpu_count"] and hidden["cause_named"]
    for key in ("nccl_p2p_off", "host_sync"):
        assert not rows[key]["applicable"] and rows[key]["summary"].startswith("not applicable: "), key
    session = json.loads(next(result.parent.glob("1-foreign_load/*/session.json")).read_text())
    [case] = session["results"].values()
    assert case["case_id"]["model"] == "resnet18" and case["case_id"]["precision"] == "fp32"
    assert (result.parent / "selftest.md").read_text().count("| not applicable: ") == 2
