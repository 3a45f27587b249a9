"""slurm/fleet.sbatch: its own checks without Slurm, then two nodes signed off on the loopback Slurm
of .ci/slurm-cluster.sh (nodes n1 and n2, CPU ranks) and their fleet page."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.fleet import store

REPO = Path(__file__).resolve().parent.parent
SBATCH = REPO / "slurm" / "fleet.sbatch"
CLUSTER = REPO / ".ci" / "slurm-cluster.sh"
SMALLEST = ("--models", "tiny_bert", "--precisions", "fp32", "--gpus", "1", "-k", "test_weak_scaling",
            "--harness-warmup-seconds", "1", "--harness-measure-seconds", "1")


def clean_env(**extra: str) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "HARNESS_", "PYTEST_"))} | extra


def test_the_script_parses():
    subprocess.run(["bash", "-n", str(SBATCH)], check=True)


def test_outside_a_job_it_says_how_to_submit_it(tmp_path):
    done = subprocess.run(["bash", str(SBATCH)], env=clean_env(HARNESS_PYTHON=sys.executable), cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "not in a Slurm job; submit it: sbatch --nodes=N slurm/fleet.sbatch" in done.stderr


def test_without_a_python_it_says_how_to_get_one(tmp_path):
    done = subprocess.run(["bash", str(SBATCH)], env=clean_env(HARNESS_HOME=str(tmp_path)), cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and f"no Python at {tmp_path}/.venv/bin/python; run `make venv`" in done.stderr


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A two-node Slurm on loopback; always stopped, even after a failure."""
    missing = [t for t in ("slurmctld", "slurmd", "munged", "sbatch", "unshare") if shutil.which(t) is None]
    missing += ["root"] if os.geteuid() != 0 else []
    if missing:
        message = f"needs {', '.join(missing)} (a local Slurm cluster: apt-get install slurm-wlm munge)"
        if os.environ.get("CI"):
            pytest.fail(f"{message}: .ci/run should have installed it")
        pytest.skip(message)
    state = tmp_path_factory.mktemp("slurm")
    started = subprocess.run([str(CLUSTER), "start", str(state)], capture_output=True, text=True, timeout=180)
    try:
        assert started.returncode == 0, f"cluster did not start:\n{started.stderr}"
        yield {"SLURM_CONF": str(state / "etc" / "slurm.conf")}
    finally:
        subprocess.run([str(CLUSTER), "stop", str(state)], capture_output=True, timeout=120)


@pytest.mark.slow
def test_two_nodes_signed_off_in_one_job_and_their_fleet_page(cluster, tmp_path):
    reports = tmp_path / "reports"
    env = clean_env(SLURM_CONF=cluster["SLURM_CONF"], HARNESS_HOME=str(REPO), HARNESS_PYTHON=sys.executable,
                    HARNESS_REPORT_DIR=str(reports), OMP_NUM_THREADS="1")  # both "nodes" share these cores
    out = tmp_path / "job.out"
    job = subprocess.run(["sbatch", "--parsable", "--nodes=2", f"--output={out}", str(SBATCH), *SMALLEST], env=env,
                         cwd=REPO, capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    deadline = time.monotonic() + 900
    while subprocess.run(["squeue", "-h", "-j", job], env=env, capture_output=True, text=True).stdout.strip():
        if time.monotonic() > deadline:
            subprocess.run(["scancel", job], env=env)
            pytest.fail(f"job {job} still running after 900 s:\n{out.read_text() if out.exists() else ''}")
        time.sleep(2)
    output = out.read_text()
    fleet = reports / f"fleet-{job}"
    assert f"gpu-fleet: job {job} signs off 2 node(s): n[1-2]" in output, output
    assert sorted(p.name for p in fleet.iterdir()) == ["fleet", "n1", "n2"], output
    view = json.loads((fleet / "fleet" / "fleet.json").read_text())
    assert sorted(n["node"] for n in view["nodes"]) == ["n1", "n2"] and view["missing"] == [], output
    assert (fleet / "fleet" / "fleet.html").is_file() and (fleet / "fleet" / "fleet.csv").is_file()
    assert store.store_files(reports / "history.sqlite") == [reports / "history.sqlite"], "compacted"
    assert sorted(s.node for s in store.load(reports / "history.sqlite").sessions) == ["n1", "n2"]
    assert f"{view['verdict']}: 2 nodes" in output
