"""Rebuild the fleet example in docs/examples/fleet/: fleet.png (a screenshot of the fleet page) and
history.html (a GPU's history). The fleet page itself (about 370 KiB) is not kept: run this.

    .venv/bin/python docs/examples/fleet/build.py       # needs chromium on PATH for the PNG

The nodes are MADE UP (tests/fleet_sessions.py): twelve 8 x H200 nodes whose run records, checks
and results come from the harness's own code against the h200 profile as shipped before its 4-GPU fit
(tests/data/h200-hand-set/h200.toml: hand-set bounds for 1-8 GPUs; the shipped one bounds no 8-GPU node), with invented
measurements: gpu-node04's GPU 3 computes 4 % slower than its peers (every bound still met) and
gpu-node05 runs 15 % below the profile's measured throughput (it fails). gpu-node04 was signed
off twice before, when its GPU 3 was as fast as the others: its history shows the drift.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from fleet_sessions import NodePlan, fleet_plans, uuid_of, write_node  # noqa: E402
from harness.cli import main as harness  # noqa: E402
from harness.report.browser import screenshot  # noqa: E402

OUT = ROOT / "docs" / "examples" / "fleet"
def _node_report_build():
    """docs/examples/build.py, whose PNG shrinking this page shares (a script, not a package)."""
    spec = importlib.util.spec_from_file_location("node_report_build", ROOT / "docs" / "examples" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        reports = Path(tmp) / "reports"
        for plan in fleet_plans(12):
            write_node(reports, plan)
        for day in ("2026-09-18", "2026-10-16"):
            write_node(reports, NodePlan(node="gpu-node04", started_at=f"{day}T10:00:00+00:00"))
        harness(["fleet", str(reports), "--output", tmp])
        harness(["history", "--gpu", uuid_of("gpu-node04", 3), str(reports), "--store", f"{tmp}/none.sqlite",
                 "--html", str(OUT / "history.html")])
        if shutil.which("chromium") is None:
            print("chromium is not on PATH: the screenshot was not rebuilt", file=sys.stderr)
            return 0
        screenshot(Path(tmp) / "fleet.html", OUT / "fleet.png", height=1900)
    _node_report_build().shrink(OUT / "fleet.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
