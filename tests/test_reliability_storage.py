"""Issue 31 item 5: a storage failure is never a node failure. A disk that fills during a case or at the
session's end makes the verdict "could not record" with exit status 7 (``EXIT_NOT_RECORDED``), and
what was measured survives in the temporary directory (else stderr). Real tmpfs file systems (root)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from harness.exitcodes import EXIT_NOT_RECORDED
from harness.files import KEPT_DIR_NAME, NotRecorded
from support.filesystems import fill, tmpfs
from test_plugin import suite  # noqa: F401 - the fixture: an acceptance session with a fake launcher
from test_reliability_outputs import FILL_DISK

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def own_temporary_directory(tmp_path, monkeypatch):
    """What could not be written is kept in the temporary directory: this test's, not /tmp (ranks too)."""
    import tempfile

    kept = tmp_path / "tmpdir"
    kept.mkdir()
    monkeypatch.setenv("TMPDIR", str(kept))
    monkeypatch.setattr(tempfile, "tempdir", str(kept))
    return kept


@pytest.fixture
def small_fs(tmp_path):
    """A 16 MiB tmpfs (root only)."""
    with tmpfs(tmp_path / "small", "16m") as mount_point:
        yield mount_point


def test_the_writer_keeps_what_it_could_not_write_and_says_it_is_a_storage_failure(small_fs):
    fill(small_fs)
    text = json.dumps({"throughput_per_gpu": 123.4})
    with pytest.raises(NotRecorded) as raised:
        from harness.files import write_text_atomic

        write_text_atomic(small_fs / "record.json", text)
    message = str(raised.value)
    assert f"could not record {small_fs / 'record.json'}: No space left on device" in message
    assert "not the node's" in message
    kept = Path(message.split("its content is kept in ", 1)[1].split(". ", 1)[0])
    try:
        assert kept.parent.name == KEPT_DIR_NAME and kept.read_text() == text
    finally:
        kept.unlink()


def test_a_disk_that_fills_during_a_launch_is_not_recorded_not_a_failed_node(small_fs, fast_spec):
    """The real launcher and a real CPU rank: the disk fills while it measures. Before, the launch was a
    failed record (FAIL, exit 1, a drained node); now it raises NotRecorded naming the directory."""
    from harness.launch.benchmark import run_benchmark

    run_dir = small_fs / "case"
    spec = fast_spec(measure_seconds=3.0)

    def fill_once_measuring() -> None:
        deadline = time.time() + 100
        while time.time() < deadline:
            phase = run_dir / "rank0.phase"
            try:
                if "measure" in phase.read_text():
                    break
            except OSError:
                pass
            time.sleep(0.05)
        fill(small_fs)

    filler = threading.Thread(target=fill_once_measuring, daemon=True)
    filler.start()
    with pytest.raises(NotRecorded) as raised:
        run_benchmark(spec, run_dir)
    filler.join(timeout=120)
    message = str(raised.value)
    assert "could not record" in message and str(small_fs) in message and "not the node's" in message


def _filling_launcher(launcher, ballast_dir: Path):
    """The fake launcher, whose launch writes its record through the real writer onto a disk that fills."""
    from harness.records import write_record

    def launch(spec, run_dir, *, run_id=None, rendezvous=None):
        record = launcher(spec, run_dir, run_id=run_id, rendezvous=rendezvous)
        fill(ballast_dir)
        write_record(Path(run_dir) / "record.json", record)
        return record

    return launch


def test_a_session_whose_disk_fills_during_a_case_says_could_not_record_and_exits_7(  # noqa: F811
        suite, pytester, small_fs, monkeypatch):  # noqa: F811
    run, launcher, _ = suite
    monkeypatch.setattr("harness.plugin.rundir.MIN_FREE_BYTES", 0)
    monkeypatch.setattr("harness.launch.benchmark.run_benchmark", _filling_launcher(launcher, small_fs))
    result = run("--gpus", "1", f"--harness-report-dir={small_fs / 'reports'}")
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == EXIT_NOT_RECORDED, output
    assert "Traceback" not in output and "INTERNALERROR" not in output
    result.stdout.fnmatch_lines(["*harness: INCOMPLETE — could not record (a storage failure, not the node's)*"
                                 "(exit status 7)*"])
    assert "FAIL" not in output.split("short test summary")[-1].replace("FAILED", "")


def test_a_disk_full_at_the_end_says_could_not_record_and_exits_7_not_pass(  # noqa: F811
        suite, pytester, small_fs, monkeypatch):  # noqa: F811
    """Before: the last line said "PASS … (exit status 0)" and the process exited 3."""
    run, _, _ = suite
    monkeypatch.setattr("harness.plugin.rundir.MIN_FREE_BYTES", 0)
    pytester.makeconftest(FILL_DISK.format(directory=str(small_fs)))
    result = run("--gpus", "1", f"--harness-report-dir={small_fs / 'reports'}")
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == EXIT_NOT_RECORDED, output
    last = [line for line in result.stdout.lines if line.startswith("harness: ") and "exit status" in line][-1]
    assert "could not record" in last and last.endswith("(exit status 7)"), last
    assert "PASS —" not in last.split("of what was recorded:")[0]
    fallback = next(Path(p) for p in output.split() if p.endswith("-session.json") and Path(p).is_file())
    try:
        summary = json.loads(fallback.read_text())
        assert summary["session_verdict"]["exit_code"] == EXIT_NOT_RECORDED
        assert len(summary["results"]) == 1  # what was measured survives
    finally:
        fallback.unlink()
