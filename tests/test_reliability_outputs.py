"""Issue 20, items 4, 5, 6, 8, 11, 12 through an acceptance session with a fake launcher (no benchmark
starts): bad options refused before any launch, run directories never shared, a full disk losing
nothing, environment overrides named, fault injection refused, compile caches kept private."""

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from harness.exitcodes import EXIT_NOT_RECORDED
from support.filesystems import tmpfs
from harness.results.overrides import expected_settings, find_overrides
from harness.workloads.compilecache import CacheDirError, prepare_cache_root
from test_plugin import suite  # noqa: F401 - the fixture: an acceptance session with a fake launcher

pytest_plugins = ["pytester"]


@pytest.mark.parametrize("args, message", [
    (("--harness-timeout", "-1"), "*--harness-timeout -1.0: expected seconds > 0*"),
    (("--harness-timeout", "0"), "*--harness-timeout 0.0: expected seconds > 0 (leave the option out*"),
    (("--harness-stall-factor", "0"), "*--harness-stall-factor 0.0: expected a factor > 0*"),
    (("--harness-measure-seconds", "0"), "*--harness-measure-seconds 0.0: expected seconds > 0 (leave*"),
    (("--harness-warmup-seconds", "0"), "*--harness-warmup-seconds 0.0: expected seconds > 0 (leave*"),
    (("--harness-measure-seconds", "inf"), "*--harness-measure-seconds inf: expected seconds > 0*"),
    (("--harness-timeout", "1"), "*--harness-timeout 1: every launch would time out*"),
])
def test_each_bad_duration_is_a_usage_error_before_any_benchmark(suite, args, message):  # noqa: F811
    run, launcher, _ = suite
    result = run(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert launcher.calls == []


def _run_dirs(pytester) -> list[Path]:
    return sorted(p for p in (pytester.path / "reports").iterdir() if (p / "runs").is_dir() and not p.is_symlink())


def test_two_sessions_in_one_second_get_two_run_directories(suite, pytester):  # noqa: F811
    """Sessions of one process (pytest.main called twice in the second) too: the second is numbered."""
    run, _, _ = suite
    run("--gpus", "1").assert_outcomes(passed=1)
    run("--gpus", "1").assert_outcomes(passed=1)
    first, second = _run_dirs(pytester)[-2:]
    assert first != second
    assert f"-{os.getpid()}" in first.name  # the session's pid is in its run id
    for run_dir in (first, second):
        assert json.loads((run_dir / "session.json").read_text())["run_id"] == run_dir.name


def test_a_run_directory_another_session_holds_is_refused(tmp_path):
    """The lock: a second session reaching a locked run directory is refused with a clear message."""
    from harness.plugin.rundir import LOCK_FILE, _lock  # the lock alone, as make_run_dir takes it

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    holder = subprocess.Popen(["flock", "-x", str(run_dir / LOCK_FILE), "sleep", "30"])
    try:
        for _ in range(50):
            if (run_dir / LOCK_FILE).exists():
                break
            subprocess.run(["sleep", "0.1"])
        subprocess.run(["sleep", "0.3"])
        with pytest.raises(pytest.UsageError, match=f"another session .* is writing {run_dir}"):
            _lock(run_dir)
    finally:
        holder.kill()
        holder.wait()


def test_a_report_directory_without_room_is_refused_before_any_benchmark(suite, pytester, monkeypatch):  # noqa: F811
    run, launcher, _ = suite
    usage = shutil.disk_usage(pytester.path)
    monkeypatch.setattr("harness.plugin.rundir.shutil.disk_usage",
                        lambda path: usage._replace(free=2 * 1024 * 1024))
    result = run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*has 2.0 MiB free; a session needs at least 64 MiB*no benchmark was started*"])
    assert launcher.calls == []


def test_latest_that_is_a_real_directory_is_named_not_silently_kept(suite, pytester):  # noqa: F811
    run, _, _ = suite
    (pytester.path / "reports" / "latest").mkdir(parents=True)
    result = run("--gpus", "1")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*warning: *reports/latest is a real directory, not a link*Move it away*"])
    session = json.loads((_run_dirs(pytester)[-1] / "session.json").read_text())
    assert "is a real directory" in session["warnings"][0]


def test_outputs_of_a_run_share_one_mode(suite, pytester):  # noqa: F811
    run, _, _ = suite
    run("--gpus", "1").assert_outcomes(passed=1)
    run_dir = _run_dirs(pytester)[-1]
    files = [run_dir / "session.json", run_dir / "report.html", *run_dir.glob("runs/*.json")]
    modes = {stat.S_IMODE(path.stat().st_mode) for path in files}
    umask = os.umask(0)
    os.umask(umask)
    assert modes == {0o666 & ~umask}


def test_environment_overrides_are_named_with_their_effect():
    env = {"HARNESS_FAULT": "kind=nan,rank=0", "HARNESS_TELEMETRY": "0", "NCCL_P2P_DISABLE": "1",
           "NCCL_NET_PLUGIN": "x", "NCCL_DEBUG": "INFO", "NCCL_NVLS_ENABLE": "0", "NVSHMEM_DISABLE_NVLS": "1",
           "NCCL_VERSION": "2.28.3-1",  # set by NVIDIA's container images: a label, not a setting
           "HARNESS_GIT_COMMIT": "abc", "HARNESS_CONTAINER_IMAGE": "img", "CUDA_LAUNCH_BLOCKING": "1",
           "CUDA_VISIBLE_DEVICES": "0", "PATH": "/bin"}
    named = {override.name: override.effect for override in find_overrides(env)}
    assert set(named) == {"HARNESS_FAULT", "HARNESS_TELEMETRY", "NCCL_P2P_DISABLE", "NCCL_NET_PLUGIN",
                          "HARNESS_GIT_COMMIT", "HARNESS_CONTAINER_IMAGE", "CUDA_LAUNCH_BLOCKING"}
    assert "not evaluated" in named["HARNESS_TELEMETRY"]
    assert expected_settings(env) == {"NCCL_NVLS_ENABLE": "0", "NVSHMEM_DISABLE_NVLS": "1"}
    assert find_overrides({"HARNESS_TELEMETRY": "1", "NCCL_NVLS_ENABLE": "0", "HARNESS_FAULT": ""}) == ()
    assert [o.name for o in find_overrides({"NCCL_NVLS_ENABLE": "1"})] == ["NCCL_NVLS_ENABLE"]


def test_overrides_reach_session_json_and_every_record(suite, pytester, monkeypatch):  # noqa: F811
    run, _, _ = suite
    monkeypatch.setenv("NCCL_P2P_DISABLE", "1")
    result = run("--gpus", "1")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*harness: OVERRIDE NCCL_P2P_DISABLE=1: NCCL does not use peer-to-peer*"])
    run_dir = _run_dirs(pytester)[-1]
    session = json.loads((run_dir / "session.json").read_text())
    assert [o["name"] for o in session["overrides"]] == ["NCCL_P2P_DISABLE"]
    for record in run_dir.glob("runs/*.json"):
        assert [o["name"] for o in json.loads(record.read_text())["overrides"]] == ["NCCL_P2P_DISABLE"]


def test_fault_injection_is_refused_unless_allowed(suite, monkeypatch):  # noqa: F811
    run, launcher, _ = suite
    monkeypatch.setenv("HARNESS_FAULT", "kind=nan,rank=0,phase=measure,step=1")
    result = run("--gpus", "1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*HARNESS_FAULT=kind=nan* is set*--harness-allow-fault-injection*"])
    assert launcher.calls == []
    run("--gpus", "1", "--harness-allow-fault-injection").assert_outcomes(passed=1)


def test_a_compile_cache_others_can_write_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(CacheDirError, match="writable by its group or by everyone"):
        prepare_cache_root(shared)
    if os.getuid() == 0:
        foreign = tmp_path / "foreign"
        foreign.mkdir(mode=0o700)
        os.chown(foreign, 12345, 12345)
        with pytest.raises(CacheDirError, match="belongs to uid 12345"):
            prepare_cache_root(foreign)
    fresh = prepare_cache_root(tmp_path / "new" / "cache")
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o700


def test_a_compile_cache_option_naming_a_shared_directory_is_a_usage_error(suite, tmp_path):  # noqa: F811
    run, launcher, _ = suite
    shared = tmp_path / "shared-cache"
    shared.mkdir()
    shared.chmod(0o777)
    result = run("--gpus", "1", "--harness-compile", f"--harness-compile-cache={shared}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--harness-compile-cache: the compile cache * is writable by its group*"])
    assert launcher.calls == []


FILL_DISK = """
from pathlib import Path

import pytest
from support.filesystems import fill

@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    fill(Path({directory!r}))  # the disk fills before the reports are written
"""


@pytest.fixture
def tiny_fs(tmp_path):
    """A 2 MiB tmpfs (root only)."""
    with tmpfs(tmp_path / "tiny", "2m") as mount_point:
        yield mount_point


def test_a_disk_full_at_the_end_keeps_what_was_measured_and_says_where(suite, pytester, tiny_fs, monkeypatch):  # noqa: F811
    run, _, _ = suite
    monkeypatch.setattr("harness.plugin.rundir.MIN_FREE_BYTES", 0)  # the start's check would refuse 2 MiB
    monkeypatch.setattr("tempfile.tempdir", str(tiny_fs.parent))  # what is kept goes there, not to /tmp
    pytester.makeconftest(FILL_DISK.format(directory=str(tiny_fs)))
    result = run("--gpus", "1", f"--harness-report-dir={tiny_fs / 'reports'}")
    assert result.ret == EXIT_NOT_RECORDED  # 7, "could not record": not 1, a node's failure
    output = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in output and "Traceback" not in output
    result.stdout.fnmatch_lines(["*harness: WRITE ERROR: *", "*what was measured is kept: 1 record(s) in *",
                                 "*free space in *, then rebuild the page with `harness report *"])
    run_dir = next((tiny_fs / "reports").glob("*-cpu-test-*"))
    for name in ("report.json", "junit.xml", "session.json"):
        assert not (run_dir / name).exists() or (run_dir / name).stat().st_size > 0, name
    fallback = next(Path(p) for p in output.split() if p.endswith("-session.json") and Path(p).is_file())
    try:
        summary = json.loads(fallback.read_text())
        assert summary["run_id"] == run_dir.name and len(summary["results"]) == 1
    finally:
        fallback.unlink()


def test_a_failure_record_names_the_overrides_its_ranks_ran_with():
    """A fault injected through the launch's environment turns up in the launcher's failure record too."""
    from harness.launch.benchmark import failure_record
    from harness.launch.spec import BenchmarkSpec, LaunchSettings
    from harness.results.job import Failure

    spec = BenchmarkSpec(model="tiny_bert", precision="fp32", batch_size_per_gpu=2,
                         launch=LaunchSettings(gpus_per_node=1, device="cpu",
                                               extra_env={"HARNESS_FAULT": "kind=kill,rank=0"}))
    record = failure_record(spec, "run-1", status="failed", failure=Failure(reason="killed"), elapsed_s=1.0,
                            phases={})
    assert [(o.name, o.value) for o in record.overrides] == [("HARNESS_FAULT", "kind=kill,rank=0")]
