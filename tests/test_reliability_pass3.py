"""Issue 31 (reliability, pass 3): outputs that replace device nodes, FIFOs and links; bounded, typed reads
of run directories and history stores; the newer commands' edges. Every device node here is a ``mknod``
twin of /dev/null in a temporary directory, never a real device."""

from __future__ import annotations

import os
import stat
import sys
import time
from pathlib import Path

import pytest

from fleet_sessions import NodePlan, write_node
from harness.cli import main
from harness.files import OutputPathError
from harness.files import write_text_atomic

NODE = "gpu-node09"


def _devnull_twin(path: Path) -> Path:
    """A character device with /dev/null's numbers, made in a temporary directory (needs root)."""
    null = os.stat("/dev/null")
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, null.st_rdev)
    except PermissionError:
        pytest.skip("mknod needs root (CAP_MKNOD)")
    return path


def _special(kind: str, path: Path, tmp_path: Path) -> Path:
    if kind == "device":
        return _devnull_twin(path)
    if kind == "fifo":
        os.mkfifo(path)
        return path
    target = tmp_path / "target.txt"
    target.write_text("the link's target\n")
    path.symlink_to(target)
    return path


def _untouched(kind: str, path: Path, tmp_path: Path) -> None:
    mode = path.lstat().st_mode
    expected = {"device": stat.S_ISCHR, "fifo": stat.S_ISFIFO, "link": stat.S_ISLNK}[kind]
    assert expected(mode), f"{path} was replaced ({oct(mode)})"
    if kind == "link":
        assert (tmp_path / "target.txt").read_text() == "the link's target\n"


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pass3") / "reports"
    for day in ("2026-10-01", "2026-11-01"):
        write_node(root, NodePlan(node=NODE, started_at=f"{day}T10:00:00+00:00"))
    return root


KINDS = ("device", "fifo", "link")
WHAT = {"device": "a character device", "fifo": "a named pipe", "link": "a symbolic link"}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("option", ("--json", "--html"))
def test_history_refuses_to_replace_a_device_a_fifo_or_a_link(reports, tmp_path, capsys, kind, option):
    target = _special(kind, tmp_path / "out", tmp_path)
    code = main(["history", "--node", NODE, "--store", str(tmp_path / "none.sqlite"), str(reports),
                 option, str(target)])
    err = capsys.readouterr().err
    assert code == 4, err  # a usage error (harness/exitcodes.py)
    assert f"{option} {target}: is {WHAT[kind]}, not a regular file" in err
    assert "name a regular file or a new path" in err
    _untouched(kind, target, tmp_path)


@pytest.mark.parametrize("kind", KINDS)
def test_fleet_refuses_to_replace_a_device_a_fifo_or_a_link_in_its_output_directory(reports, tmp_path, capsys, kind):
    out = tmp_path / "fleet"
    out.mkdir()
    target = _special(kind, out / "fleet.json", tmp_path)
    code = main(["fleet", str(reports), "--output", str(out)])
    err = capsys.readouterr().err
    assert code == 4, err  # a usage error (harness/exitcodes.py)
    assert f"--output {target}: is {WHAT[kind]}, not a regular file" in err
    _untouched(kind, target, tmp_path)
    assert not (out / "fleet.html").exists(), "nothing is written when one output is refused"


def test_fleet_refuses_an_output_directory_that_is_a_device(reports, tmp_path, capsys):
    target = _devnull_twin(tmp_path / "fleet")
    assert main(["fleet", str(reports), "--output", str(target)]) == 4  # a usage error (harness/exitcodes.py)
    assert f"--output {target}: is a character device" in capsys.readouterr().err
    assert stat.S_ISCHR(target.lstat().st_mode)


@pytest.mark.parametrize("kind", KINDS)
def test_the_one_writer_never_replaces_a_special_file(tmp_path, kind):
    """Every writer (report.html, session.json, calibrate's profile, selftest's tables) goes through it."""
    target = _special(kind, tmp_path / "report.html", tmp_path)
    with pytest.raises(OutputPathError, match=f"is {WHAT[kind]}, not a regular file"):
        write_text_atomic(target, "<html>")
    _untouched(kind, target, tmp_path)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == [], "no temporary file left"


def test_fleet_and_history_outputs_follow_the_umask(reports, tmp_path, capsys):
    """They name GPU serials: under umask 077 nobody else may read them (they were forced to 0644)."""
    old = os.umask(0o077)
    try:
        assert main(["fleet", str(reports), "--output", str(tmp_path / "fleet")]) in (0, 1)
        assert main(["history", "--node", NODE, "--store", str(tmp_path / "none.sqlite"), str(reports),
                     "--json", str(tmp_path / "h.json"), "--html", str(tmp_path / "h.html")]) in (0, 1)
    finally:
        os.umask(old)
    capsys.readouterr()
    for path in [*(tmp_path / "fleet").iterdir(), tmp_path / "h.json", tmp_path / "h.html"]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


# --- item 2: the orphan sweep and PID namespaces --------------------------------------------------

_IN_NAMESPACE = r"""
import os, subprocess, sys, time
from pathlib import Path
from harness.launch.cleanup import owner_env, session_owner
from harness.node.process_tags import OWNER_ENV, RUN_ID_ENV, LAUNCH_DIR_ENV
run_id, how = sys.argv[1], sys.argv[2]
if how == "dead-launcher":  # the launcher starts the launch and dies; the namespace (its init: us) lives on
    if os.fork() == 0:
        env = {**os.environ, RUN_ID_ENV: run_id, **owner_env(Path("/tmp"))}
        subprocess.Popen(["sleep", "120"], env=env, start_new_session=True)
        os._exit(0)
    os.wait()
else:
    tag = owner_env(Path("/tmp")) if how == "live" else {OWNER_ENV: session_owner(), LAUNCH_DIR_ENV: "/tmp"}
    env = {**os.environ, RUN_ID_ENV: run_id, **tag}  # old-tag: from before the namespace was kept
    subprocess.Popen(["sleep", "120"], env=env, start_new_session=True)
print("ready", flush=True)
time.sleep(120)
"""


@pytest.fixture
def in_a_pid_namespace(tmp_path):
    """Start a launch in a new PID namespace (``unshare --pid --fork --mount-proc``, as a container does);
    yields a function ``start(how) -> host pid of the launch's tagged process``."""
    import shutil
    import signal
    import subprocess
    import time

    from harness.launch.cleanup import tagged_pids

    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs unshare and root")
    started: list[tuple[subprocess.Popen, str]] = []

    def start(how: str) -> int:
        run_id = f"reltest-ns-{how}-{os.getpid()}"
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        process = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c",
                                    _IN_NAMESPACE, run_id, how], env=env, stdout=subprocess.PIPE, text=True,
                                   start_new_session=True)
        started.append((process, run_id))
        line = process.stdout.readline() if process.stdout else ""
        if line.strip() != "ready":
            pytest.skip(f"unshare --pid did not start here ({process.poll()})")
        for _ in range(50):
            pids = tagged_pids(run_id)
            if pids:
                return pids[0]
            time.sleep(0.1)
        raise AssertionError("the tagged process in the namespace never appeared")

    yield start
    for process, run_id in started:
        for pid in tagged_pids(run_id):
            os.kill(pid, signal.SIGKILL)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def test_a_live_launch_in_another_pid_namespace_is_left_alone(in_a_pid_namespace):
    """The issue's finding: its owner tag names pid 1 of the container; on the host pid 1 is init with
    another start time, so the sweep took the container's live run for an orphan and killed it."""
    from harness.launch.cleanup import survey

    pid = in_a_pid_namespace("live")
    orphans, unsure = survey()
    assert pid not in [o.pid for o in orphans + unsure]
    assert _alive(pid)


def test_an_old_owner_tag_from_another_namespace_refuses_the_session_and_kills_nothing(in_a_pid_namespace):
    from harness.plugin.session import _stop_orphans

    pid = in_a_pid_namespace("old-tag")
    with pytest.raises(pytest.UsageError) as refused:
        _stop_orphans()
    text = str(refused.value)
    assert f"pid {pid} (sleep 120)" in text and "another PID namespace" in text
    assert "No benchmark was started" in text and "kill PID" in text
    assert _alive(pid)


def test_a_launch_whose_launcher_died_in_its_namespace_is_an_orphan_and_is_stopped(in_a_pid_namespace):
    from harness.launch.cleanup import stop_orphans, survey

    pid = in_a_pid_namespace("dead-launcher")
    orphans, unsure = survey()
    assert [o.pid for o in orphans if o.run_id.startswith("reltest-ns-")] == [pid]
    assert pid not in [o.pid for o in unsure]
    assert stop_orphans([o for o in orphans if o.pid == pid]) == []
    assert not _alive(pid)


def test_a_tag_of_another_boot_or_host_is_never_proof():
    from harness.launch.cleanup import OwnerTag, session_owner, session_where

    mine = OwnerTag.parse(session_owner(), session_where())
    assert mine is not None and mine.pid == os.getpid() and mine.namespace and mine.boot_id
    other = OwnerTag.parse("1:1", f"{mine.namespace}:00000000-0000-0000-0000-000000000000")
    assert other is not None and other.boot_id == "00000000-0000-0000-0000-000000000000"
    assert OwnerTag.parse("12:345") == OwnerTag(pid=12, start="345", namespace=None, boot_id=None)
    assert OwnerTag.parse("garbage") is None


def test_a_process_tagged_by_a_session_on_another_host_is_named_not_killed(tmp_path):
    """srun passes the environment on: a rank on this node carries its driver node's tag, whose pid means
    nothing here. Before, the sweep killed another node's live multi-node run."""
    import subprocess

    from harness.launch.cleanup import OwnerTag, session_owner, session_where, survey
    from harness.node.process_tags import LAUNCH_DIR_ENV, OWNER_ENV, OWNER_WHERE_ENV, RUN_ID_ENV

    mine = OwnerTag.parse(session_owner(), session_where())
    assert mine is not None
    env = {**os.environ, RUN_ID_ENV: "reltest-other-host", OWNER_ENV: "999999:1", LAUNCH_DIR_ENV: str(tmp_path),
           OWNER_WHERE_ENV: f"{mine.namespace}:00000000-0000-0000-0000-000000000000"}
    sleeper = subprocess.Popen(["sleep", "120"], env=env, start_new_session=True)
    try:
        for _ in range(50):
            orphans, unsure = survey()
            if sleeper.pid in [o.pid for o in unsure]:
                break
        assert sleeper.pid not in [o.pid for o in orphans]
        named = next(o for o in unsure if o.pid == sleeper.pid)
        assert "another host or an earlier boot" in named.describe()
    finally:
        sleeper.kill()
        sleeper.wait()


# --- item 3: one damaged file in the history store or a run directory ------------------------------

def _store_with(tmp_path: Path, *runs: str) -> tuple[Path, list[Path]]:
    from harness.fleet import store
    from harness.fleet.facts import GpuFigure, SessionFacts

    path = tmp_path / "h.sqlite"
    figure = GpuFigure(case_key="resnet50-bf16-weak-1gpu", key="throughput_alone", name="throughput alone",
                       host="n1", rank=0, gpu_index=0, gpu_uuid="GPU-1", value=100.0, unit="images/s",
                       direction="higher")
    files = [store.write_session(path, SessionFacts(run_id=run, node="n1", verdict="PASS", started_at=run,
                                                    gpu_figures=(figure,))) for run in runs]
    return path, files


def _tamper(file: Path, *statements: str) -> None:
    import sqlite3

    conn = sqlite3.connect(file, isolation_level=None)
    try:
        for statement in statements:
            conn.execute(statement)
    finally:
        conn.close()


def _within(seconds: float, work):
    """``work()``'s result, or a test failure when it has not returned within ``seconds`` (a hang)."""
    import threading

    box: dict = {}

    def run() -> None:
        try:
            box["result"] = work()
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s: a hang"
    if "error" in box:
        raise box["error"]
    return box.get("result")


def test_a_fifo_named_like_a_store_file_is_named_not_opened(tmp_path):
    from harness.fleet import compaction, store

    path, _ = _store_with(tmp_path, "2026-11-01")
    os.mkfifo(store.incoming_dir(path) / "x.sqlite")
    contents = _within(20, lambda: store.load(path))
    assert len(contents.sessions) == 1
    assert any("x.sqlite: is a named pipe, not a regular file" in p for p in contents.problems), contents.problems
    result = _within(20, lambda: compaction.compact(path))
    assert any("x.sqlite: is a named pipe" in p for p in result.problems)


def test_a_view_that_never_ends_is_stopped_by_the_time_limit_and_named(tmp_path, monkeypatch):
    """SQLite loops in C here, where no Python signal handler runs: its progress handler stops it."""
    from harness.fleet import store

    monkeypatch.setattr(store, "QUERY_LIMIT_S", 1.0)
    path, (bad, _good) = _store_with(tmp_path, "2026-11-01", "2026-11-02")
    _tamper(bad, "ALTER TABLE sessions RENAME TO sessions_table",
            "CREATE VIEW sessions AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
            "SELECT s.* FROM n, sessions_table AS s ORDER BY n.i")
    started = time.monotonic()
    contents = _within(30, lambda: store.load(path))
    assert time.monotonic() - started < 10
    assert [s.run_id for s in contents.sessions] == ["2026-11-02"]
    assert any(f"{bad}: reading it took more than 1 s and was stopped" in p for p in contents.problems)


def test_reasons_nested_100000_deep_and_nan_text_in_a_figure_are_problems_not_tracebacks(tmp_path, capsys):
    from harness.fleet import store

    path, (deep, nan) = _store_with(tmp_path, "2026-11-01", "2026-11-02")
    _tamper(deep, f"UPDATE sessions SET verdict_reasons = '{'[' * 100_000 + ']' * 100_000}'")
    _tamper(nan, "UPDATE gpu_figures SET value = 'NaN'")
    contents = store.load(path)
    deep_session = next(s for s in contents.sessions if s.run_id == "2026-11-01")
    assert deep_session.verdict_reasons[0].startswith("unreadable verdict reasons")
    assert any(str(nan) in p and "value = 'NaN' is not a finite number" in p for p in contents.problems)
    code = main(["history", "--node", "n1", "--store", str(path)])
    captured = capsys.readouterr()
    assert code in (0, 1, 2) and "Traceback" not in captured.err
    assert "value = 'NaN' is not a finite number" in captured.err


def test_one_bad_row_does_not_block_compaction_and_its_file_is_named_and_kept(tmp_path):
    from harness.fleet import compaction, store

    path, (bad, good) = _store_with(tmp_path, "2026-11-01", "2026-11-02")
    _tamper(bad, "UPDATE gpu_figures SET value = 'NaN'")
    result = compaction.compact(path)
    assert result.folded == [good] and not good.exists()
    assert bad.exists() and any(str(bad) in p and "the file is kept" in p for p in result.problems)
    assert [s.run_id for s in store.load(path).sessions] == ["2026-11-02"]


def test_compaction_keeps_a_write_committed_under_another_writers_lock(tmp_path):
    """A process writing the compacted store itself (an older harness, sqlite3 by hand) holds SQLite's lock
    and commits while a compaction runs: the compaction waits for it instead of copying around it."""
    import sqlite3
    import threading

    from harness.fleet import compaction, store

    path, _ = _store_with(tmp_path, "2026-11-01")
    compaction.compact(path)  # the compacted store exists
    _store_with(tmp_path, "2026-11-02")  # a new per-session file for the next compaction
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    row = {"run_id": "by-hand", "node": "n1", "verdict": "PASS", "source": "sqlite3", "recorded_at": "now"}
    writer.execute(f"INSERT INTO sessions ({', '.join(row)}) VALUES ({', '.join('?' for _ in row)})",
                   tuple(row.values()))
    compaction = threading.Thread(target=compaction.compact, args=(path,))
    compaction.start()
    time.sleep(1.0)  # the compaction is under way, waiting for the lock
    writer.execute("COMMIT")
    writer.close()
    compaction.join(60)
    assert not compaction.is_alive()
    assert {s.run_id for s in store.load(path).sessions} == {"2026-11-01", "2026-11-02", "by-hand"}


def test_a_run_directory_json_that_links_to_dev_zero_is_refused_not_read(tmp_path, capsys):
    run_dir = tmp_path / "run"
    (run_dir / "runs").mkdir(parents=True)
    (run_dir / "session.json").symlink_to("/dev/zero")
    (run_dir / "report.json").write_text("[" * 100_000 + "]" * 100_000)
    (run_dir / "runs" / "a.json").symlink_to("/dev/zero")
    code = _within(30, lambda: main(["report", str(run_dir)]))
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err
    assert "session.json is a symbolic link" in err and "report.json not readable JSON: nested too deeply" in err
    other = tmp_path / "other"
    (other / "runs").mkdir(parents=True)
    (other / "runs" / "a.json").symlink_to("/dev/zero")
    assert _within(30, lambda: main(["compare", str(other), str(other)])) == 4  # a usage error
    assert "a.json: is a symbolic link" in capsys.readouterr().err


def test_the_fleet_job_bounds_the_commands_that_read_the_store():
    text = (Path(__file__).resolve().parents[1] / "slurm" / "fleet.sbatch").read_text()
    for command in ("-m harness history", "-m harness fleet"):
        line = next(line for line in text.splitlines() if command in line)
        assert "timeout " in line, line


# --- item 7: selftest ------------------------------------------------------------------------------

_SELFTEST_ROW = r"""
import sys
from pathlib import Path
from harness.selftest.rows import ForeignLoad, RowSpec
from harness.selftest.runner import run_row

row_dir, test_file = Path(sys.argv[1]), sys.argv[2]
spec = RowSpec(key="foreign_load", injected="stand-in", expected_keys=(), pytest_args=(test_file,),
               foreign_load=ForeignLoad(device="cpu", cores=(0,), burners_per_core=1))
run_row(spec, repo_root=Path.cwd(), row_dir=row_dir, timeout_s=300)
"""


def _marked(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return [pid for pid in found if pid != os.getpid()]


def test_a_sigkilled_selftest_leaves_nothing_running(tmp_path):
    """Its row's session and foreign load run in sessions of their own: before, SIGKILL left them running
    (7 processes 15 s later). Now they get SIGTERM when it dies, and stop what they started."""
    import signal
    import subprocess

    test_file = tmp_path / "test_slow.py"
    test_file.write_text("import time\n\ndef test_slow():\n    time.sleep(120)\n")
    marker = f"SELFTEST_KILL_TEST_{os.getpid()}"
    env = {**os.environ, marker: "1", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    selftest = subprocess.Popen([sys.executable, "-c", _SELFTEST_ROW, str(tmp_path / "row"), str(test_file)],
                                env=env, cwd=tmp_path, start_new_session=True)
    try:
        deadline = time.time() + 60
        while len(_marked(marker)) < 3:  # the selftest, its session and its foreign load
            assert time.time() < deadline and selftest.poll() is None, _marked(marker)
            time.sleep(0.2)
        time.sleep(1.0)  # both children past their start-up
        selftest.kill()
        selftest.wait()
        deadline = time.time() + 15
        while _marked(marker) and time.time() < deadline:
            time.sleep(0.2)
        assert _marked(marker) == []
    finally:
        for pid in _marked(marker):
            os.kill(pid, signal.SIGKILL)


def test_two_selftests_started_in_the_same_second_get_two_directories(tmp_path):
    from harness.selftest.cli import new_directory

    wanted = tmp_path / "reports" / "selftest-20261127-070000-vm"
    first, second = new_directory(wanted), new_directory(wanted)
    assert first == wanted and second == wanted.with_name(wanted.name + "-2")
    assert first.is_dir() and second.is_dir()


# --- item 8: the lower ones ------------------------------------------------------------------------

@pytest.mark.parametrize("args, says", [
    (["--batch-size", "100000000000000000000"], "--batch-size: batch_size_per_gpu must be from 1 to 1,048,576: "
                                                "weak scaling needs a batch size per GPU"),
    (["--batch-size", "8", "--duration", "1e308"], "--duration: measure_seconds must be at most 604800 seconds"),
    (["--batch-size", "8", "--timeout", "1e308"], "--timeout: timeout_s must be at most 604800 seconds"),
])
def test_values_that_passed_validation_and_then_failed_the_node_are_usage_errors(capsys, monkeypatch, args, says):
    from harness.launch import benchmark

    monkeypatch.setattr(benchmark, "run_benchmark", lambda *a, **k: pytest.fail("a benchmark was started"))
    code = main(["run", "--model", "tiny_bert", "--precision", "fp32", "--device", "cpu", *args])
    err = capsys.readouterr().err
    assert code == 4 and says in err, err  # a usage error


def test_a_hostlist_that_expands_beyond_any_cluster_is_refused_at_once(tmp_path, capsys):
    from harness.launch.slurm import expand_hostlist

    with pytest.raises(ValueError, match=r"expands to 100,000,000,000 names, more than 100,000"):
        _within(5, lambda: expand_hostlist("n[1-100000000000]"))
    with pytest.raises(ValueError, match="more than 100,000"):
        expand_hostlist("r[1-1000]-g[1-1000]")
    assert len(expand_hostlist("gpu[00001-100000]")) == 100_000


def test_a_node_named_with_a_leading_dot_is_read_back_from_the_store(tmp_path):
    from harness.fleet import store
    from harness.fleet.facts import SessionFacts

    path = tmp_path / "h.sqlite"
    written = store.write_session(path, SessionFacts(run_id="r1", node=".n1", verdict="PASS"))
    assert not written.name.startswith(".")
    assert [s.node for s in store.load(path).sessions] == [".n1"]


@pytest.mark.parametrize("name, value", [
    ("OMP_NUM_THREADS", "3"), ("NVIDIA_TF32_OVERRIDE", "0"), ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"),
    ("TORCH_NCCL_BLOCKING_WAIT", "1"), ("CUDA_DEVICE_MAX_CONNECTIONS", "1"), ("LD_PRELOAD", "/tmp/x.so")])
def test_variables_that_change_results_are_named_as_overrides(name, value):
    from harness.results.overrides import find_overrides

    assert [o.name for o in find_overrides({name: value})] == [name]


def test_the_thread_count_the_launcher_sets_itself_is_no_override(tmp_path, fast_spec):
    from harness.launch.command import launch_env
    from harness.results.overrides import find_overrides

    env = launch_env(fast_spec().launch, "run-1")
    assert env["OMP_NUM_THREADS"] and "OMP_NUM_THREADS" not in [o.name for o in find_overrides(env)]


def test_compare_strips_terminal_escapes_read_from_the_files(tmp_path, capsys):
    import json

    from harness.records import RunRecord

    for side in ("a", "b"):
        (tmp_path / side / "runs").mkdir(parents=True)
        record = RunRecord(run_id="r", model="tiny_bert", precision="fp32", scaling="weak", world_size=1, nodes=1,
                           device_kind="cpu\x1b]0;pwned\x07\x1b[2J", batch_size_per_gpu=2, global_batch_size=2,
                           status="ok", throughput_per_gpu=10.0, throughput_total=10.0)
        (tmp_path / side / "runs" / "x.json").write_text(json.dumps(json.loads(record.to_json())))
    main(["compare", str(tmp_path / "a"), str(tmp_path / "b")])
    captured = capsys.readouterr()
    assert "\x1b" not in captured.out + captured.err and "\x07" not in captured.out + captured.err


def test_a_rank_sigkilled_while_the_kernels_oom_killer_ran_is_named_host_out_of_memory(tmp_path, monkeypatch):
    """Before: "rank 0 (host vm) was killed by SIGKILL", which reads like a person's kill or a node fault."""
    from harness.launch import failure

    (tmp_path / "torchrun.log").write_text("Root Cause (first observed failure):\n[0]:\n  time : now\n"
                                           "  host : vm\n  rank : 0 (local_rank: 0)\n  exitcode : -9 (pid: 1)\n")
    monkeypatch.setattr(failure, "oom_kills", lambda: 5)
    _, named = failure.explain_failure(tmp_path, returncode=1, stall=None, elapsed_s=3.0, phases={},
                                       oom_kills_before=4)
    assert "was killed by SIGKILL" in named.reason
    assert "the kernel's out-of-memory killer ran during this launch (1 process(es) killed)" in named.reason
    assert "CPU RAM, not the GPU's" in named.reason
    _, plain = failure.explain_failure(tmp_path, returncode=1, stall=None, elapsed_s=3.0, phases={},
                                       oom_kills_before=5)
    assert "out-of-memory" not in plain.reason
