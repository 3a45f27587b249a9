"""harness.launch.slurm (pure: hostlists, the allocation, the srun prefix) and slurm/acceptance.sbatch,
then the same against a real Slurm: slurmctld and two slurmd (nodes n1, n2) on loopback, started
and stopped by .ci/slurm-cluster.sh around the tests that need them."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.launch import slurm
from harness.launch.slurm import (SlurmAllocation, allocation_from_env, expand_hostlist, rendezvous_endpoint,
                           rendezvous_port, srun_prefix, step_wrapper)
from harness.kinds.shipped import load_shipped_profile

REPO = Path(__file__).resolve().parent.parent
SBATCH = REPO / "slurm" / "acceptance.sbatch"
CLUSTER = REPO / ".ci" / "slurm-cluster.sh"


def alloc(**overrides) -> SlurmAllocation:
    fields = {"job_id": "4242", "nodes": ("n1", "n2", "n3"), "gpus_per_node": 8, "cpus_per_node": 96, **overrides}
    return SlurmAllocation(**fields)


# --- hostlists -----------------------------------------------------------------------------------


@pytest.mark.parametrize("text, hosts", [
    ("n[1-3,05],gpu-a7", ["n1", "n2", "n3", "n05", "gpu-a7"]),
    ("x[008-010]", ["x008", "x009", "x010"]),
    ("gpu[09-11]", ["gpu09", "gpu10", "gpu11"]),
    ("r[1-2]-g[01-02]", ["r1-g01", "r1-g02", "r2-g01", "r2-g02"]),
    ("node7", ["node7"]),
    ("a,b.example.org", ["a", "b.example.org"]),
    ("n[1-2],m[3]", ["n1", "n2", "m3"]),
    (" n[1-2] ", ["n1", "n2"]),
    ("", []),
])
def test_expand_hostlist(text, hosts):
    assert expand_hostlist(text) == hosts


@pytest.mark.parametrize("text, says", [
    ("n[3-1]", "runs backwards"),
    ("n[1-", "never closed"),
    ("n1]", r"without '\["),
    ("n[a-b]", "expected N or N-M"),
    ("n[1-2-3]", "expected N or N-M"),
    ("n[]", "expected N or N-M"),
    ("n1,,n2", "empty host name"),
    ("n[1-[2]]", "nested"),
])
def test_expand_hostlist_rejects_malformed_lists_naming_the_problem(text, says):
    with pytest.raises(ValueError, match=says) as info:
        expand_hostlist(text)
    assert repr(text) in str(info.value)


# --- the allocation ------------------------------------------------------------------------------


BATCH_ENV = {"SLURM_JOB_ID": "77", "SLURM_JOB_NODELIST": "gpu[01-02]", "SLURM_JOB_NUM_NODES": "2",
             "SLURM_NNODES": "2", "SLURM_CPUS_ON_NODE": "112", "SLURM_GPUS_ON_NODE": "8"}


def test_no_allocation_outside_slurm():
    assert allocation_from_env({"PATH": "/usr/bin"}) is None


def test_allocation_from_a_batch_environment():
    assert allocation_from_env(BATCH_ENV) == SlurmAllocation(job_id="77", nodes=("gpu01", "gpu02"),
                                                             gpus_per_node=8, cpus_per_node=112)


@pytest.mark.parametrize("gpu_env, gpus", [
    ({"SLURM_GPUS_ON_NODE": "4"}, 4),
    ({"SLURM_GPUS_PER_NODE": "h100:8"}, 8),
    ({"SLURM_GPUS_PER_NODE": "8"}, 8),
    ({"SLURM_JOB_GPUS": "0,1,2,3"}, 4),
    ({"SLURM_GPUS": "16"}, 8),         # over 2 nodes
    ({"SLURM_GPUS": "3"}, None),       # does not divide over 2 nodes: unknown, not guessed
    ({}, None),
])
def test_gpus_per_node_from_whichever_variable_slurm_set(gpu_env, gpus):
    env = {k: v for k, v in BATCH_ENV.items() if "GPUS" not in k} | gpu_env
    assert allocation_from_env(env).gpus_per_node == gpus


def test_cpus_per_node_is_the_smallest_node_of_a_compressed_list():
    env = {k: v for k, v in BATCH_ENV.items() if k != "SLURM_CPUS_ON_NODE"} | {"SLURM_JOB_CPUS_PER_NODE": "72(x1),36"}
    assert allocation_from_env(env).cpus_per_node == 36


def test_a_node_count_that_contradicts_the_node_list_is_an_error():
    with pytest.raises(ValueError, match=r"SLURM_JOB_NUM_NODES=3 .* names 2 nodes"):
        allocation_from_env(BATCH_ENV | {"SLURM_JOB_NUM_NODES": "3"})


def test_a_job_without_a_node_list_is_an_error_that_says_where_to_run():
    with pytest.raises(ValueError, match="SLURM_JOB_NODELIST is not"):
        allocation_from_env({"SLURM_JOB_ID": "5"})


def test_a_malformed_gpu_count_names_the_variable():
    with pytest.raises(ValueError, match="SLURM_GPUS_PER_NODE='h100:many'"):
        allocation_from_env({k: v for k, v in BATCH_ENV.items() if k != "SLURM_GPUS_ON_NODE"}
                            | {"SLURM_GPUS_PER_NODE": "h100:many"})


# --- launching -----------------------------------------------------------------------------------


def test_srun_prefix_starts_one_agent_on_each_of_the_first_nodes_with_the_nodes_resources():
    assert srun_prefix(alloc(), 2) == [
        "srun", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--nodelist=n1,n2", "--kill-on-bad-exit=1",
        "--export=ALL", "--cpus-per-task=96", "--gpus-per-node=8"]


def test_srun_prefix_leaves_out_resources_it_does_not_know_and_puts_extra_last():
    command = srun_prefix(alloc(gpus_per_node=None, cpus_per_node=None), 3, extra=["apptainer", "exec", "x.sif"])
    assert not any(arg.startswith(("--cpus-per-task", "--gpus-per-node")) for arg in command)
    assert command[-3:] == ["apptainer", "exec", "x.sif"]
    assert "--nodelist=n1,n2,n3" in command


@pytest.mark.parametrize("nodes", [0, 4])
def test_srun_prefix_refuses_a_node_count_the_job_does_not_have(nodes):
    with pytest.raises(ValueError, match=r"job 4242, which has 3 nodes \(n1, n2, n3\)"):
        srun_prefix(alloc(), nodes)


def test_rendezvous_is_on_the_head_node_at_a_port_of_the_job():
    assert rendezvous_endpoint(alloc()) == "n1:29500"
    assert rendezvous_endpoint(alloc(), rendezvous_port(alloc())) == "n1:29742"
    assert rendezvous_port(alloc(job_id="weird")) == 29500
    with pytest.raises(ValueError, match="1-65535"):
        rendezvous_endpoint(alloc(), 70000)


def test_step_wrapper_splits_shell_quoted_words():
    env = {"HARNESS_STEP_WRAPPER": "apptainer exec --nv --bind '/a b:/reports' /img/h.sif "}
    assert step_wrapper(env) == ["apptainer", "exec", "--nv", "--bind", "/a b:/reports", "/img/h.sif"]
    assert step_wrapper({}) == []


def test_an_allocation_needs_nodes():
    with pytest.raises(ValueError, match="no nodes"):
        alloc(nodes=())


def test_command_line(monkeypatch, capsys):
    assert slurm.main(["expand", "n[1-2]"]) == 0
    assert capsys.readouterr().out.split() == ["n1", "n2"]
    for name in [k for k in os.environ if k.startswith("SLURM_")]:
        monkeypatch.delenv(name)
    assert slurm.main(["show"]) == 1
    assert "not in a Slurm job" in capsys.readouterr().err
    for name, value in BATCH_ENV.items():
        monkeypatch.setenv(name, value)
    assert slurm.main(["show"]) == 0
    assert json.loads(capsys.readouterr().out)["nodes"] == ["gpu01", "gpu02"]
    assert slurm.main(["srun-prefix", "3"]) == 2
    assert "ask sbatch for --nodes=3" in capsys.readouterr().err


# --- the batch script, without a cluster -------------------------------------------------------


def run_sbatch_script(tmp_path: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "HARNESS_"))}
    return subprocess.run(["bash", str(SBATCH), *args], env=base | env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)


def fake_apptainer(tmp_path: Path) -> Path:
    """Records its arguments and HARNESS_STEP_WRAPPER, as `apptainer exec` would have received them."""
    script = tmp_path / "apptainer"
    script.write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$0.args"\n'
                      'printf "%s" "$HARNESS_STEP_WRAPPER" > "$0.wrapper"\n')
    script.chmod(0o755)
    return script


def test_sbatch_script_parses():
    subprocess.run(["bash", "-n", str(SBATCH)], check=True)


def test_sbatch_script_asks_for_the_whole_node_gpus_and_memory_included():
    """--exclusive alone gives no GPU where the partition oversubscribes or Slurm predates giving an
    exclusive job its GRES, and only the memory asked for (issue 20)."""
    directives = [line.split()[1] for line in SBATCH.read_text().splitlines() if line.startswith("#SBATCH ")]
    assert {"--exclusive", "--gpus-per-node=8", "--mem=0"} <= set(directives)


def test_sbatch_script_says_how_to_get_a_python(tmp_path):
    done = run_sbatch_script(tmp_path, {"HARNESS_HOME": str(tmp_path)})
    assert done.returncode == 2
    assert f"no Python at {tmp_path}/.venv/bin/python; run `make venv`" in done.stderr


def test_sbatch_script_in_a_container_on_one_node(tmp_path):
    apptainer = fake_apptainer(tmp_path)
    (tmp_path / "h.sif").write_text("")
    done = run_sbatch_script(tmp_path, {"HARNESS_CONTAINER": str(tmp_path / "h.sif"),
                                        "HARNESS_APPTAINER": str(apptainer),
                                        "HARNESS_REPORT_DIR": str(tmp_path / "out"), "SLURM_JOB_NUM_NODES": "1"},
                             "--models", "resnet50")
    assert done.returncode == 0, done.stderr
    assert Path(f"{apptainer}.args").read_text().splitlines() == [
        "exec", "--nv", "--bind", f"{tmp_path}/out:/reports", "--pwd", "/opt/harness", str(tmp_path / "h.sif"),
        "python", "-m", "pytest", "acceptance", "--harness-report-dir=/reports", "--models", "resnet50"]
    assert Path(f"{apptainer}.wrapper").read_text() == ""  # one node: no srun, no wrapper


def test_sbatch_script_in_a_container_on_two_nodes_wraps_each_agent_in_the_image(tmp_path):
    apptainer = fake_apptainer(tmp_path)
    image = tmp_path / "my images" / "h.sif"
    image.parent.mkdir()
    image.write_text("")
    done = run_sbatch_script(tmp_path, {"HARNESS_CONTAINER": str(image), "HARNESS_APPTAINER": str(apptainer),
                                        "HARNESS_REPORT_DIR": str(tmp_path / "out"), "SLURM_JOB_NUM_NODES": "2",
                                        "HARNESS_SLURM_BINDS": "/usr/bin/srun,/etc/slurm"})
    assert done.returncode == 0, done.stderr
    binds = f"{tmp_path}/out:/reports,/usr/bin/srun,/etc/slurm"
    assert Path(f"{apptainer}.args").read_text().splitlines()[:4] == ["exec", "--nv", "--bind", binds]
    assert shlex.split(Path(f"{apptainer}.wrapper").read_text()) == [
        str(apptainer), "exec", "--nv", "--bind", binds, str(image)]


# --- a real Slurm ------------------------------------------------------------------------------


def require(*tools: str, why: str) -> None:
    """Skip where a tool is missing; in CI (.ci/run installs them) a missing tool is a failure."""
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if os.geteuid() != 0:
        missing.append("root")
    if missing:
        message = f"needs {', '.join(missing)} ({why})"
        if os.environ.get("CI"):
            pytest.fail(f"{message}: .ci/run should have installed it")
        pytest.skip(message)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A two-node Slurm on loopback for this module's tests; always stopped, even after a failure."""
    require("slurmctld", "slurmd", "munged", "sbatch", "unshare",
            why="a local Slurm cluster: apt-get install slurm-wlm munge")
    state = tmp_path_factory.mktemp("slurm")
    started = subprocess.run([str(CLUSTER), "start", str(state)], capture_output=True, text=True, timeout=180)
    try:
        assert started.returncode == 0, f"cluster did not start:\n{started.stderr}"
        yield {"SLURM_CONF": str(state / "etc" / "slurm.conf"), "state": state}
    finally:
        subprocess.run([str(CLUSTER), "stop", str(state)], capture_output=True, timeout=120)


def submit(cluster: dict, tmp_path: Path, *args: str, env: dict | None = None, timeout_s: float = 600) -> str:
    """sbatch ARGS, wait for the job to leave the queue, return its output file's text."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "HARNESS_", "PYTEST_"))}
    job_env = base | {"SLURM_CONF": cluster["SLURM_CONF"]} | (env or {})
    out = tmp_path / "job.out"
    job = subprocess.run(["sbatch", "--parsable", f"--output={out}", *args], env=job_env, cwd=REPO,
                         capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        queue = subprocess.run(["squeue", "-h", "-j", job], env=job_env, capture_output=True, text=True).stdout
        if not queue.strip():
            break
        time.sleep(1)
    else:
        subprocess.run(["scancel", job], env=job_env)
        pytest.fail(f"job {job} still queued or running after {timeout_s:.0f} s:\n"
                    f"{out.read_text() if out.exists() else ''}")
    return out.read_text() if out.exists() else ""


@pytest.mark.slow
def test_scontrol_expands_hostlists_as_we_do(cluster, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", cluster["SLURM_CONF"])
    for text in ("n[1-3,05],gpu-a7", "x[008-010]", "r[1-2]-g[01-02]", "gpu[09-11],a,b"):
        assert slurm.hostnames_via_scontrol(text) == expand_hostlist(text), text


@pytest.mark.slow
def test_batch_job_sees_both_nodes(cluster, tmp_path):
    output = submit(cluster, tmp_path, "--nodes=2", "--exclusive",
                    f"--wrap={sys.executable} -m harness.launch.slurm show")
    seen = json.loads(output[output.index("{"):])
    assert seen["nodes"] == ["n1", "n2"]
    assert seen["cpus_per_node"] == os.cpu_count()


@pytest.mark.slow
def test_two_node_benchmark_through_srun_and_c10d_rendezvous(cluster, tmp_path):
    """srun_prefix + launch.torchrun_command with a Rendezvous, in a batch job: one rank on each node."""
    run_dir = tmp_path / "run"
    output = submit(cluster, tmp_path, "--nodes=2", "--exclusive",
                    f"--wrap={sys.executable} tests/data/slurm_multinode_launch.py {run_dir}", timeout_s=300)
    launched = json.loads((run_dir / "launch.json").read_text())
    assert launched["command"][:2] == ["srun", "--nodes=2"]
    assert "--rdzv-backend=c10d" in launched["command"]
    assert f"--rdzv-endpoint=n1:{29500 + int(launched['allocation']['job_id']) % 1000}" in launched["command"]
    assert launched["driver_host"] == "n1"
    record = json.loads((run_dir / "record.json").read_text())
    assert record["status"] == "ok", f"{output}\n{(run_dir / 'torchrun.log').read_text()}"
    assert (record["world_size"], record["nodes"]) == (2, 2)
    assert sorted(record["hosts"]) == ["n1", "n2"]
    assert sorted(rank["host"] for rank in record["per_rank"]) == ["n1", "n2"]


def harness_plans_multinode_cases() -> bool:
    from harness.launch import command

    return hasattr(command, "slurm_launch")


@pytest.mark.slow
def test_acceptance_sbatch_on_two_nodes(cluster, tmp_path):
    """slurm/acceptance.sbatch on 2 nodes: the plugin plans a 2x1 case and the harness launches it with srun."""
    if not harness_plans_multinode_cases():
        pytest.skip("harness.launch does not launch multi-node runs through harness.launch.slurm yet "
                    "(docs/slurm.md, wiring)")
    reports = tmp_path / "reports"
    # --gpus-per-node=0: this cluster has CPUs only (the script asks for 8 GPUs per node by default).
    output = submit(cluster, tmp_path, "--nodes=2", "--gpus-per-node=0", str(SBATCH), "--models", "tiny_bert",
                    "--precisions", "fp32",
                    "--gpus", "1", "-k", "test_weak_scaling", "--harness-warmup-seconds", "1",
                    "--harness-measure-seconds", "2",
                    env={"HARNESS_HOME": str(REPO), "HARNESS_PYTHON": sys.executable,
                         "HARNESS_REPORT_DIR": str(reports),
                         # both "nodes" share this machine's cores: one thread per rank, not one per core
                         "OMP_NUM_THREADS": "1"})
    assert "Slurm job" in output and "n1, n2" in output, output
    report = json.loads((reports / "latest" / "report.json").read_text())
    assert report["harness"]["slurm"]["nodes"] == ["n1", "n2"]
    results = {t["nodeid"].split("[")[-1].rstrip("]"): t["metadata"]["harness"] for t in report["tests"]
               if "harness" in t.get("metadata", {})}
    assert set(results) == {"tiny_bert-fp32-1gpu", "tiny_bert-fp32-2x1gpu"}, output
    two = results["tiny_bert-fp32-2x1gpu"]["record"]
    assert two["status"] == "ok", output
    assert (two["nodes"], two["world_size"], sorted(two["hosts"])) == (2, 2, ["n1", "n2"])
    assert results["tiny_bert-fp32-1gpu"]["record"]["hosts"] == ["n1"]
    # Judged against the 1-rank run: the efficiency check was evaluated, whatever a loaded machine made of it.
    efficiency = next(c for c in results["tiny_bert-fp32-2x1gpu"]["checks"] if c["name"] == "weak-scaling efficiency")
    cpu_bounds = load_shipped_profile(REPO / "thresholds" / "cpu.toml").cases[("tiny_bert", "fp32")]
    assert efficiency["measured"] is not None
    assert efficiency["bound"] == pytest.approx(cpu_bounds.min_weak_efficiency[2]), "the profile's 2-GPU bound"


def test_plugin_plans_multinode_cases_in_a_slurm_job(tmp_path):
    """In a 2-node allocation the matrix gains 2xN cases (collected only: nothing is launched)."""
    if not harness_plans_multinode_cases():
        pytest.skip("harness.launch does not launch multi-node runs through harness.launch.slurm yet "
                    "(docs/slurm.md, wiring)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PYTEST_"))}
    env |= {"SLURM_JOB_ID": "9", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_JOB_NUM_NODES": "2", "SLURM_CPUS_ON_NODE": "2"}
    done = subprocess.run([sys.executable, "-m", "pytest", "acceptance", "--collect-only", "-q", "--hardware", "cpu",
                           "--models", "tiny_bert", "--precisions", "fp32", "--gpus", "1",
                           f"--harness-report-dir={tmp_path}"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    collected = {line.split("::")[-1] for line in done.stdout.splitlines() if "::" in line}
    assert {"test_weak_scaling[tiny_bert-fp32-1gpu]", "test_weak_scaling[tiny_bert-fp32-2x1gpu]",
            "test_strong_scaling[tiny_bert-fp32-2x1gpu]"} <= collected, done.stdout


@pytest.mark.slow
def test_gpu_state_probe_of_the_other_node_through_real_srun(cluster, tmp_path):
    """The other node's GPU-state probe through real srun (harness/plugin/remote_gpu_state.py): n2 has no
    NVML, so its test must fail saying so, naming n2; a case-shaped step still starts beside the probe
    step (--overlap), and the probe step ends when the session does."""
    run_dir = tmp_path / "run"
    output = submit(cluster, tmp_path, "--nodes=2", "--exclusive",
                    f"--wrap={sys.executable} tests/data/slurm_gpu_state_probe.py {run_dir}", timeout_s=300)
    probe = json.loads((run_dir / "probe.json").read_text())
    assert probe["ids"] == ["n2-gpu0"], output
    [result] = probe["results"].values()
    assert all(check["passed"] is False for check in result["checks"]), result
    assert "node n2: NVML unavailable" in result["checks"][0]["note"]
    start = probe["summary"]["other_nodes"]["start"]["n2"]
    assert (start["host"], start["status"]) == ("n2", "unavailable")
    assert probe["summary"]["other_nodes"]["end"]["n2"]["phase"] == "end"
    assert probe["case_step"]["returncode"] == 0 and sorted(probe["case_step"]["stdout"].split()) == ["n1", "n2"], probe
    assert probe["probe_step_returncode"] == 0
    # The driver's fallback when a watcher does not see `stop`: srun forwards SIGUSR1, the handler runs.
    assert probe["sigusr1"] == {"returncode": 0, "handled": True}, probe


def test_the_step_wrapper_the_batch_script_writes_reads_back_with_shlex_in_the_c_locale(tmp_path):
    """Issue 31: printf %q wrote $'\\303\\251' for a non-ASCII image path under LC_ALL=C, which shlex read as
    other words; the script's own quoting function, run as the script runs it, must round-trip."""
    import re as regex

    script = (Path(__file__).resolve().parents[1] / "slurm" / "acceptance.sbatch").read_text()
    function = regex.search(r"^ *shell_words\(\) \{.*?^ *\}$", script, regex.S | regex.M)
    assert function is not None
    words = ["/opt/apptainer", "exec", "--nv", "--bind", "/data/é x,/it's", "/images/harness café.sif"]
    done = subprocess.run(["bash", "-c", function.group(0) + '\nshell_words "$@"', "bash", *words],
                          capture_output=True, env={**os.environ, "LC_ALL": "C"}, check=True)
    assert step_wrapper({slurm.STEP_WRAPPER_ENV: done.stdout.decode("utf-8")}) == words
