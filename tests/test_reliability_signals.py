"""Issue 20, items 1-3: cleanup no second signal can cut short, launches that die with the session,
a sweep for what a SIGKILLed session left, and processes told apart by session.

Each launcher here is a small Python process running ``run_job`` on a stand-in launch (a Python
child that ignores SIGTERM, so the cleanup must reach its SIGKILL), so every test takes seconds.
The real torchrun paths are the ``slow`` tests at the end."""

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.launch.cleanup import find_orphans, stop_orphans, tagged_pids
from harness.node.process_tags import LAUNCH_DIR_ENV, OWNER_ENV, RUN_ID_ENV

ROOT = Path(__file__).resolve().parent.parent

LAUNCHER = """
import os, signal, sys, threading, time
from pathlib import Path
from harness.launch import supervise
from harness.launch.spec import LaunchSettings

supervise.stop_on_sigterm()
run_dir, run_id, mode = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
child = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
         "open(%r, 'w').write('up'); time.sleep(120)" % str(run_dir / "child.up"))
launch = LaunchSettings(gpus_per_node=1, device="cpu", telemetry=False)
print("launcher up", flush=True)
try:
    supervise.run_job(launch, [sys.executable, "-c", child], run_dir, run_id)
except KeyboardInterrupt as exc:
    print(f"interrupted: {exc}", flush=True)
    sys.exit(130)
"""


def _start_launcher(tmp_path: Path, run_id: str) -> tuple[subprocess.Popen, Path]:
    run_dir = tmp_path / "launch"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(run_dir), run_id, "-"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.time() + 60
    while not (run_dir / "child.up").exists():
        assert time.time() < deadline and launcher.poll() is None, launcher.communicate()[0]
        time.sleep(0.05)
    return launcher, run_dir


def _wait_gone(run_id: str, within_s: float = 15.0) -> list[int]:
    deadline = time.time() + within_s
    while tagged_pids(run_id) and time.time() < deadline:
        time.sleep(0.1)
    return tagged_pids(run_id)


def _kill_tagged(run_id: str) -> None:
    for pid in tagged_pids(run_id):
        os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_second_signal_during_the_cleanup_does_not_abort_it(tmp_path, signum):
    """timeout(1), make, Slurm and a double Ctrl-C send two: the second came during kill_run's grace
    period and left the launch running (parent pid 1). Now it is ignored until every process is gone."""
    run_id = f"reltest-{os.getpid()}-twice-{signum}"
    launcher, _ = _start_launcher(tmp_path, run_id)
    try:
        assert tagged_pids(run_id)
        launcher.send_signal(signum)
        time.sleep(1.0)  # inside kill_run's 5 s grace: the child ignores SIGTERM
        assert launcher.poll() is None, "the cleanup should still be waiting for the child"
        launcher.send_signal(signum)
        output, _ = launcher.communicate(timeout=30)
        assert _wait_gone(run_id) == []
    finally:
        launcher.kill()
        _kill_tagged(run_id)
    assert launcher.returncode == 130, output
    assert f"{signal.Signals(signum).name} ignored: already stopping" in output
    assert f"interrupted: signal {signal.Signals(signum).name}" in output


def test_a_sigkilled_launcher_takes_its_launch_with_it(tmp_path):
    """The OOM killer or a CI runner's hard kill: the launch gets the parent-death signal."""
    run_id = f"reltest-{os.getpid()}-sigkill"
    launcher, _ = _start_launcher(tmp_path, run_id)
    try:
        launcher.kill()
        launcher.communicate()
        assert _wait_gone(run_id, within_s=5.0) == []
    finally:
        _kill_tagged(run_id)


def _tagged_sleeper(tmp_path: Path, run_id: str, owner: str) -> subprocess.Popen:
    env = {**os.environ, RUN_ID_ENV: run_id, OWNER_ENV: owner, LAUNCH_DIR_ENV: str(tmp_path)}
    return subprocess.Popen(["sleep", "120"], env=env, start_new_session=True)


def _start_time(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[19]


def test_the_sweep_stops_what_a_dead_launcher_left_and_nothing_else(tmp_path):
    """A launcher that is gone (here: a pid whose start time no longer matches) left a process; a live
    launcher's process (another session's) is not touched."""
    orphan = _tagged_sleeper(tmp_path, "reltest-orphan", f"{os.getpid()}:1")  # our pid, another start time
    others = _tagged_sleeper(tmp_path, "reltest-live", f"{os.getpid()}:{_start_time(os.getpid())}")
    try:
        time.sleep(0.2)
        found = [o for o in find_orphans() if o.run_id.startswith("reltest-")]
        assert [(o.pid, o.run_id, o.launch_dir) for o in found] == [(orphan.pid, "reltest-orphan", str(tmp_path))]
        assert "sleep 120" in found[0].describe()
        assert stop_orphans(found) == []
        assert orphan.wait(timeout=10) == -signal.SIGTERM
        assert others.poll() is None
    finally:
        for process in (orphan, others):
            process.kill()
            process.wait()


def test_two_launchers_never_touch_each_others_processes(tmp_path):
    """Session run ids are unique (pid in the run id): one launch's cleanup finds only its own tag."""
    mine = _tagged_sleeper(tmp_path, "reltest-session-a-case", f"{os.getpid()}:{_start_time(os.getpid())}")
    theirs = _tagged_sleeper(tmp_path, "reltest-session-b-case", f"{os.getpid()}:{_start_time(os.getpid())}")
    try:
        time.sleep(0.2)
        assert tagged_pids("reltest-session-a-case") == [mine.pid]
    finally:
        for process in (mine, theirs):
            process.kill()
            process.wait()


# --- the real paths: torchrun on CPU ranks, signalled as timeout(1), make, Slurm and a terminal do ---

def _load_signal_paths():
    """benchmarks/ is not a package: the script is loaded by path (as tests/test_benchmark_scripts.py does)."""
    spec = importlib.util.spec_from_file_location("bench_signal_paths", ROOT / "benchmarks" / "signal_paths.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SIGNAL_PATHS = _load_signal_paths()
TINY_PROFILE = """
schema_version = 1
[hardware]
name = "cpu"
description = "signal tests"
device = "cpu"
[run]
warmup_seconds = 0.5
measure_seconds = {measure}
timeout_seconds = 300
[defaults]
gpu_counts = [1, 2]
models = ["tiny_bert"]
precisions = ["fp32"]
source = "test"
[models.tiny_bert.fp32]
batch_size_per_gpu = 2
source = "test"
"""


def _interrupt(command: list[str], cwd: Path, how: str, *, gpus: int | None = None) -> dict:
    """benchmarks/signal_paths.py's ``interrupt``; each row also goes to $RELIABILITY_TABLE when set."""
    outcome = SIGNAL_PATHS.interrupt(command, cwd, how, gpus=gpus)
    table = os.environ.get("RELIABILITY_TABLE")
    if table:
        with open(table, "a") as rows:
            rows.write(json.dumps({key: value for key, value in outcome.items() if key != "output"}) + "\n")
    return outcome


@pytest.mark.slow
@pytest.mark.parametrize("how", ["SIGTERM", "SIGTERM x2", "SIGTERM group", "SIGINT x2", "SIGKILL"])
def test_harness_run_leaves_nothing_running(tmp_path, how):
    command = [sys.executable, "-m", "harness.cli", "run", "--model", "tiny_bert", "--precision", "fp32",
               "--gpus", "2", "--batch-size", "2", "--device", "cpu", "--duration", "120", "--warmup", "0.5",
               "--output", str(tmp_path / "run.json")]
    outcome = _interrupt(command, tmp_path, f"{how}")
    assert outcome["running"] >= 3, outcome["output"]  # torchrun and two ranks
    assert outcome["left_15s"] == 0, outcome
    if how != "SIGKILL":
        assert outcome["returncode"] == 2, outcome["output"]  # interrupted: the one table's code (harness/exitcodes.py)
        assert "interrupted; every process it started has been stopped" in outcome["output"]


@pytest.mark.slow
@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT x2", "SIGTERM group", "SIGTERM x3", "SIGHUP", "SIGKILL"])
def test_an_acceptance_session_leaves_nothing_running_and_a_report(tmp_path, how):
    """The 1-rank case measures 8 s and finishes; the signal comes while the 2-rank case measures."""
    thresholds = tmp_path / "thresholds"
    thresholds.mkdir()
    (thresholds / "cpu.toml").write_text(TINY_PROFILE.format(measure=8))
    reports = tmp_path / "reports"
    command = [sys.executable, "-m", "pytest", str(ROOT / "acceptance"), f"--harness-thresholds-dir={thresholds}",
               f"--harness-report-dir={reports}", "-p", "no:cacheprovider", "-k", "weak and not soak",
               "--harness-launch=per-case"]
    outcome = _interrupt(command, tmp_path, how, gpus=2)
    assert outcome["left_15s"] == 0, outcome
    run_dir = next(path for path in reports.iterdir() if (path / "runs").is_dir() and not path.is_symlink())
    if how == "SIGKILL":
        assert not (run_dir / "session.json").exists()
        rebuilt = subprocess.run([sys.executable, "-m", "harness.cli", "report", str(run_dir)], capture_output=True,
                                 text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert rebuilt.returncode == 0, rebuilt.stderr
        page = (run_dir / "report.html").read_text()
        assert "tiny_bert" in page and "INCOMPLETE" in page  # the finished 1-rank case, not signed off
    else:
        assert outcome["returncode"] == pytest.ExitCode.INTERRUPTED, outcome["output"]
        summary = json.loads((run_dir / "session.json").read_text())
        assert summary["interrupted"] is True
        # issue 31: SIGHUP killed the session with nothing written; a third SIGTERM 1 s apart ended it 143
        assert summary["session_verdict"]["exit_code"] == outcome["returncode"]
        assert "INCOMPLETE" in (run_dir / "report.html").read_text()


@pytest.mark.slow
def test_two_sessions_started_together_keep_their_own_directories_records_and_processes(tmp_path):
    """Same second, same report directory: two run ids, each session's records its own, both finish."""
    thresholds = tmp_path / "thresholds"
    thresholds.mkdir()
    (thresholds / "cpu.toml").write_text(TINY_PROFILE.format(measure=2))
    reports = tmp_path / "reports"
    command = [sys.executable, "-m", "pytest", str(ROOT / "acceptance"), f"--harness-thresholds-dir={thresholds}",
               f"--harness-report-dir={reports}", "-p", "no:cacheprovider", "-k", "weak and not soak", "--gpus", "1"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    sessions = [subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True) for _ in range(2)]
    outputs = [session.communicate(timeout=600)[0] for session in sessions]
    assert [session.returncode for session in sessions] == [0, 0], outputs
    run_dirs = sorted(path for path in reports.iterdir() if (path / "runs").is_dir() and not path.is_symlink())
    assert len(run_dirs) == 2
    for run_dir in run_dirs:
        records = [json.loads(path.read_text()) for path in run_dir.glob("runs/*.json")]
        assert len(records) == 1 and records[0]["run_id"].startswith(run_dir.name), run_dir
        assert json.loads((run_dir / "session.json").read_text())["run_id"] == run_dir.name


def test_a_session_run_in_this_process_leaves_the_suite_stoppable():
    """An in-process session's stop handler and its "ending" state (which ignores every later stop signal) are
    put back after the test (tests/support/signals.py, autouse in conftest): the suite stays stoppable by timeout(1)
    or a CI cancel, where it had run past a 1800 s limit to its end."""
    from harness.launch import supervise
    from support.signals import stop_signals_restored

    before = signal.getsignal(signal.SIGTERM)
    with stop_signals_restored():
        supervise.stop_on_sigterm()
        supervise.ending()
        assert signal.getsignal(signal.SIGTERM) is supervise._on_stop_signal and supervise._Hold.stopping
    assert signal.getsignal(signal.SIGTERM) is before and not supervise._Hold.stopping
