"""The fleet end to end with real CPU sessions: three "nodes" signed off at once into one store,
one of them again later, then the fleet page (with made-up GPU nodes beside them) in headless
Chromium and the history across sessions.

Each session runs in a UTS and mount namespace of its own (unshare, as .ci/slurm-cluster.sh does)
so that it has a host name of its own: the nodes cpu-node1..3 are three hosts to the harness.
Needs root, unshare and chromium; skipped with the reason where they are missing, a failure in CI.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fleet_sessions import fleet_plans, write_node
from harness.cli import main
from harness.fleet import store
from harness.report.browser import load_in_chromium, screenshot
from test_fleet import parse_exposition

REPO = Path(__file__).resolve().parent.parent
NODES = ("cpu-node1", "cpu-node2", "cpu-node3")
# The smallest session that produces checks: one case, one rank, a short window.
SMALLEST = ("--hardware", "cpu", "--models", "tiny_bert", "--precisions", "fp32", "--gpus", "1",
            "-k", "test_weak_scaling", "--harness-warmup-seconds", "1", "--harness-measure-seconds", "1")

pytestmark = pytest.mark.slow


def require(*tools: str, why: str) -> None:
    missing = [tool for tool in tools if shutil.which(tool) is None] + (["root"] if os.geteuid() != 0 else [])
    if missing:
        message = f"needs {', '.join(missing)} ({why})"
        if os.environ.get("CI"):
            pytest.fail(f"{message}: .ci/run should have installed it")
        pytest.skip(message)


def start_session(node: str, root: Path) -> subprocess.Popen:
    """One acceptance session on host ``node``: its reports under root/reports/<node>/."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "HARNESS_"))}
    env["OMP_NUM_THREADS"] = "1"  # the nodes share this machine's cores
    command = ["unshare", "--uts", "--mount", "--propagation", "private", "--", "sh", "-c",
               'mount --bind "$0" /etc/hosts && hostname "$1" && shift && exec "$@"', str(root / "hosts"), node,
               sys.executable, "-m", "pytest", "acceptance", *SMALLEST, "-p", "no:cacheprovider",
               f"--harness-report-dir={root / 'reports' / node}", f"--harness-store={root / 'history.sqlite'}",
               f"--harness-prometheus-dir={root / 'textfile' / node}"]
    return subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(processes: dict[str, subprocess.Popen]) -> dict[str, str]:
    outputs = {node: p.communicate(timeout=900)[0] for node, p in processes.items()}
    for node, p in processes.items():
        assert p.returncode in (0, 1), f"{node}: pytest exit status {p.returncode}\n{outputs[node]}"
    return outputs


@pytest.fixture(scope="module")
def sessions(tmp_path_factory) -> Path:
    require("unshare", why="a host name per session: util-linux")
    root = tmp_path_factory.mktemp("fleet-e2e")
    (root / "hosts").write_text(f"127.0.0.1\tlocalhost {' '.join(NODES)}\n")
    finish({node: start_session(node, root) for node in NODES})  # three writers into one store at once
    finish({NODES[0]: start_session(NODES[0], root)})  # a later session of the first node
    return root


def run_dirs(root: Path, node: str) -> list[Path]:
    return sorted(p for p in (root / "reports" / node).iterdir() if p.is_dir() and not p.is_symlink())


def test_every_session_added_itself_to_the_store_and_wrote_its_prometheus_file(sessions):
    files = store.store_files(sessions / "history.sqlite")
    assert len(files) == 4, files
    contents = store.load(sessions / "history.sqlite")
    assert contents.problems == []
    assert sorted(s.node for s in contents.sessions) == sorted([*NODES, NODES[0]])
    for node in NODES:
        samples = parse_exposition((sessions / "textfile" / node / "harness_acceptance.prom").read_text())
        latest = run_dirs(sessions, node)[-1]
        verdict = re.search(r'data-verdict="(\w+)"', (latest / "report.html").read_text())[1]
        (labels, value), = [(dict(labels), v) for (name, labels), v in samples.items()
                            if name == "harness_session_verdict" and dict(labels)["verdict"] == verdict]
        assert value == 1
        # A narrowed CPU session: never a sign-off, and the labels say so for an alert rule.
        assert (labels["scope"], labels["cpu_self_check"], labels["sign_off"]) == ("partial", "true", "false")
        assert samples[("harness_session_sign_off", (("node", node),))] == 0
        textfile = sessions / "textfile" / node / "harness_acceptance.prom"
        assert (latest / "metrics.prom").read_text() == textfile.read_text()


def test_the_fleet_page_of_real_and_made_up_nodes_loads_in_chromium(sessions, tmp_path, capsys):
    require("chromium", why="the page in a real browser: apt-get install chromium")
    for plan in fleet_plans():
        write_node(tmp_path / "gpu", plan)
    code = main(["fleet", str(sessions / "reports"), str(tmp_path / "gpu"), "--output", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert code == 1 and out.startswith("FAIL: 9 nodes"), out
    view = json.loads((tmp_path / "out" / "fleet.json").read_text())
    verdicts = {n["node"]: n["verdict"] for n in view["nodes"]}
    for node in NODES:  # a narrowed CPU session signs nothing off: its FAIL stands, its PASS is no PASS
        report = (run_dirs(sessions, node)[-1] / "report.html").read_text()
        own = re.search(r'data-verdict="(\w+)"', report)[1]
        assert verdicts[node] == ("FAIL" if own == "FAIL" else "INCOMPLETE")
    assert verdicts["gpu-node05"] == "FAIL" and verdicts["gpu-node04"] == "PASS"
    assert [e["node"] for e in view["earlier"]] == [NODES[0]]
    assert any(o["node"] == "gpu-node04" and o["gpu"] == "GPU 3" and o["worse"] for o in view["outliers"])
    dom, errors = load_in_chromium(tmp_path / "out" / "fleet.html")
    assert errors == []
    assert 'data-verdict="FAIL"' in dom and all(node in dom for node in (*NODES, "gpu-node04", "gpu-node05"))
    screenshot(tmp_path / "out" / "fleet.html", tmp_path / "fleet.png", height=1600)
    assert (tmp_path / "fleet.png").stat().st_size > 10_000


def test_the_history_of_a_node_spans_its_two_sessions(sessions, capsys):
    code = main(["history", "--store", str(sessions / "history.sqlite"), "--node", NODES[0]])
    out = capsys.readouterr().out
    assert code in (0, 1), "drift or not, on a shared CPU: both are answers"
    assert "over 2 sessions" in out.splitlines()[0]
    # Two points; neither is a sign-off (a narrowed CPU session), so nothing is compared with anything.
    assert "no earlier sign-off to compare against" in out.splitlines()[1]
    two_points = r"tiny_bert-fp32-weak-1gpu · per-GPU throughput · node .*\n(  \S+ +(PASS|FAIL) +cpu-node1 .*\n){2}"
    assert re.search(two_points, out + "\n"), out
    assert main(["history", "--store", str(sessions / "history.sqlite"), "--compact"]) == 0
    assert len(store.load(sessions / "history.sqlite").sessions) == 4
