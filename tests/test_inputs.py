"""Bad input, refused up front with one clear line (issue 20): `harness run`'s --output, durations and
CPU rank count, and threshold files that are not files, too large or nested without end.

Every refusal here happens before any benchmark: run_benchmark is replaced by a stand-in that fails
the test if it is called.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness import cli
from harness.launch import benchmark, command
from harness.kinds.shipped import BOUNDS_TABLES, load_shipped_profile
from harness.profile.load import MAX_PROFILE_BYTES, ThresholdError, cli_check
from harness.records import RunRecord, read_record

CPU_PROFILE = (Path(__file__).resolve().parents[1] / "thresholds" / "cpu.toml").read_text()
RUN = ["run", "--model", "tiny_bert", "--precision", "fp32", "--device", "cpu", "--batch-size", "4"]


@pytest.fixture(autouse=True)
def keep_sigterm(monkeypatch):
    """cli.main turns SIGTERM into KeyboardInterrupt for its launches; not in the test process."""
    monkeypatch.setattr("harness.launch.supervise.stop_on_sigterm", lambda: None)


@pytest.fixture
def no_benchmark(monkeypatch):
    """Fails the test if a benchmark is launched."""
    def launched(*args, **kwargs):
        raise AssertionError("a benchmark was started")

    monkeypatch.setattr(benchmark, "run_benchmark", launched)


def refusal(capsys, *args: str) -> str:
    """`harness run ...` exits 2 before any benchmark; its one-line message."""
    assert cli.main([*RUN, *args]) == 4
    err = capsys.readouterr().err.strip()
    assert err.startswith("harness run: ") and "\n" not in err, err
    return err


def fake_record(run_id: str = "r1") -> RunRecord:
    return RunRecord(run_id=run_id, model="tiny_bert", precision="fp32", scaling="weak", world_size=1, nodes=1,
                     device_kind="cpu", batch_size_per_gpu=4, global_batch_size=4, status="ok",
                     throughput_per_gpu=10.0, throughput_total=10.0, sample_unit="sequences")


# --- --output -----------------------------------------------------------------------------------


def test_an_output_that_is_a_fifo_is_refused_and_left_a_fifo(tmp_path, capsys, no_benchmark):
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    err = refusal(capsys, "--output", str(fifo))
    assert f"--output {fifo}: is a named pipe, not a regular file" in err and "--output run.json" in err
    assert fifo.is_fifo()


def test_an_output_that_is_a_device_is_refused(capsys, no_benchmark, monkeypatch):
    # write_record must not be reached either: as root it would replace the host's /dev/null.
    monkeypatch.setattr("harness.records.write_record", lambda *a: pytest.fail("the record was written"))
    err = refusal(capsys, "--output", os.devnull)
    assert f"--output {os.devnull}: is a character device, not a regular file" in err
    assert Path(os.devnull).is_char_device()


def test_an_output_that_is_a_symlink_is_refused_and_its_target_untouched(tmp_path, capsys, no_benchmark):
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    link = tmp_path / "run.json"
    link.symlink_to(target)
    err = refusal(capsys, "--output", str(link))
    assert "is a symbolic link, not a regular file" in err
    assert link.is_symlink() and target.read_text() == "keep me"


def test_an_output_that_is_a_directory_is_refused_with_a_file_in_it_as_example(tmp_path, capsys, no_benchmark):
    err = refusal(capsys, "--output", str(tmp_path))
    assert err == (f"harness run: --output {tmp_path}: is a directory; name a file in it, "
                   f"e.g. --output {tmp_path / 'run.json'}")


def test_an_output_in_a_directory_that_cannot_be_written_is_refused(capsys, no_benchmark):
    # /proc refuses new files even to root (chmod would not stop a root test run).
    err = refusal(capsys, "--output", "/proc/run.json")
    assert err.startswith("harness run: --output /proc/run.json: cannot create files in /proc (")
    assert err.endswith("choose a writable directory")


def test_an_output_under_a_file_is_refused(tmp_path, capsys, no_benchmark):
    plain = tmp_path / "plain"
    plain.write_text("")
    err = refusal(capsys, "--output", str(plain / "run.json"))
    assert err == (f"harness run: --output {plain / 'run.json'}: {plain} is not a directory; "
                   "choose a path in a directory")


def test_a_log_directory_that_is_a_file_is_refused(tmp_path, capsys, no_benchmark):
    (tmp_path / "run.json.logs").write_text("")
    err = refusal(capsys, "--output", str(tmp_path / "run.json"))
    assert f"its log directory {tmp_path / 'run.json.logs'} exists and is not a directory" in err


def test_a_regular_output_is_written_and_its_logs_go_beside_it(tmp_path, capsys, monkeypatch):
    seen = {}

    def fake_run(spec, run_dir):
        seen["run_dir"] = run_dir
        return fake_record()

    monkeypatch.setattr(benchmark, "run_benchmark", fake_run)
    output = tmp_path / "old.logs"  # a name ending in .logs used to be its own log directory
    output.write_text("an earlier record")
    assert cli.main([*RUN, "--output", str(output)]) == 0
    assert read_record(output).run_id == "r1"
    assert seen["run_dir"] == tmp_path / "old.logs.logs"


def test_an_output_that_became_a_fifo_during_the_run_is_left_alone(tmp_path, capsys, monkeypatch):
    output = tmp_path / "run.json"

    def fake_run(spec, run_dir):
        os.mkfifo(output)
        return fake_record()

    monkeypatch.setattr(benchmark, "run_benchmark", fake_run)
    assert cli.main([*RUN, "--output", str(output)]) == 7, "could not record: the record is elsewhere"
    assert output.is_fifo()
    err = capsys.readouterr().err
    assert "is a named pipe now, so the record was not written there; it is in" in err
    assert str(tmp_path / "run.json.logs" / "record.json") in err


# --- durations and rank counts ----------------------------------------------------------------


@pytest.mark.parametrize(("args", "expected"), [
    (["--duration", "inf"], "--duration: measure_seconds must be > 0 seconds and finite, got inf"),
    (["--duration", "0"], "--duration: measure_seconds must be > 0 seconds and finite, got 0.0"),
    (["--warmup", "nan"], "--warmup: warmup_seconds must be > 0 seconds and finite, got nan"),
    (["--timeout", "inf"], "--timeout: timeout_s must be > 0 seconds and finite, got inf"),
    (["--ci-target", "0.01", "--max-duration", "inf"], "--max-duration: max_measure_seconds (inf) must be >= "),
    (["--peak-tflops", "-5"], "--peak-tflops: peak_tflops must be a finite dense peak TFLOP/s per GPU > 0"),
])
def test_durations_must_be_finite_and_positive(capsys, no_benchmark, tmp_path, args, expected):
    assert refusal(capsys, "--output", str(tmp_path / "run.json"), *args).startswith(f"harness run: {expected}")


def test_more_cpu_ranks_than_cores_are_refused_before_spawning(capsys, no_benchmark, monkeypatch, tmp_path):
    monkeypatch.setattr(command, "usable_cpu_cores", lambda: 2)
    err = refusal(capsys, "--gpus", "999", "--output", str(tmp_path / "run.json"))
    assert err == ("harness run: --gpus 999 --device cpu: a CPU run starts one rank per --gpus, and this process "
                   "may use 2 CPU cores; use --gpus 2 or fewer")


def test_as_many_cpu_ranks_as_cores_are_launched(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(command, "usable_cpu_cores", lambda: 2)
    monkeypatch.setattr(benchmark, "run_benchmark", lambda spec, run_dir: fake_record())
    assert cli.main([*RUN, "--gpus", "2", "--output", str(tmp_path / "run.json")]) == 0


# --- threshold files that are not profiles ------------------------------------------------------


def test_a_fifo_profile_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "cpu.toml"
    os.mkfifo(fifo)
    with pytest.raises(ThresholdError) as caught:
        load_shipped_profile(fifo)  # before the fix: blocks in open() for ever
    assert caught.value.problems == [f"{fifo}: is not a regular file (a pipe, device or socket); a threshold "
                                     "profile is a .toml file"]


def test_a_device_profile_is_refused_unread(tmp_path):
    with pytest.raises(ThresholdError, match=r"^/dev/zero: is not a regular file"):
        load_shipped_profile("/dev/zero")  # before the fix: read until memory runs out


def test_a_profile_over_the_size_cap_is_refused(tmp_path):
    path = tmp_path / "cpu.toml"
    path.write_text(CPU_PROFILE + "#" * MAX_PROFILE_BYTES)
    with pytest.raises(ThresholdError, match=r"cpu\.toml: is larger than 1024 KiB; a threshold profile is a few KB"):
        load_shipped_profile(path)


@pytest.mark.parametrize("nested", [
    "x = " + "[" * 5000 + "]" * 5000,             # RecursionError in tomllib
    "hardware = " + "[" * 350 + "]" * 350,         # parses, then RecursionError showing the value in a problem
    "hardware = " + "{a = " * 300 + "1" + "}" * 300,  # parses; refused by the nesting cap
])
def test_deep_nesting_is_a_threshold_error_naming_the_file(tmp_path, nested):
    path = tmp_path / "cpu.toml"
    path.write_text(nested + "\n")
    with pytest.raises(ThresholdError) as caught:
        load_shipped_profile(path)
    assert len(caught.value.problems) == 1
    assert caught.value.problems[0].startswith(f"{path}: ")
    assert "nest" in caught.value.problems[0]


def test_cli_check_reports_a_fifo_and_goes_on(tmp_path, capsys):
    os.mkfifo(tmp_path / "fifo.toml")
    (tmp_path / "cpu.toml").write_text(CPU_PROFILE)
    assert cli_check([str(tmp_path)], BOUNDS_TABLES) == 1
    out, err = capsys.readouterr()
    assert f"ok  {tmp_path / 'cpu.toml'}" in out
    assert f"{tmp_path / 'fifo.toml'}: is not a regular file" in err


# --- [run] values a launch cannot use -----------------------------------------------------------


def run_problems(tmp_path: Path, run_table: str) -> list[str]:
    text = CPU_PROFILE.replace("warmup_seconds = 2\nmeasure_seconds = 4\ntimeout_seconds = 180\n", run_table)
    assert text != CPU_PROFILE
    path = tmp_path / "cpu.toml"
    path.write_text(text)
    with pytest.raises(ThresholdError) as caught:
        load_shipped_profile(path)
    return [problem.removeprefix(f"{path}: ") for problem in caught.value.problems]


def test_a_zero_warmup_is_refused_as_the_launcher_would(tmp_path):
    assert run_problems(tmp_path, "warmup_seconds = 0\n") == ["run.warmup_seconds = 0: must be > 0 s"]


def test_the_default_timeout_must_outlast_the_durations_set(tmp_path):
    assert run_problems(tmp_path, "warmup_seconds = 100\nmeasure_seconds = 600\n") == [
        "run.timeout_seconds: is not set, and its default (600 s) does not exceed warmup_seconds + measure_seconds "
        "(700 s): every launch would time out; set timeout_seconds above 700 s, with room for start-up and model build"]


def test_the_timeout_must_outlast_an_adaptive_window_that_never_converges(tmp_path):
    table = ("warmup_seconds = 2\nmeasure_seconds = 4\nci_target = 0.01\nmax_measure_seconds = 200\n"
             "timeout_seconds = 180\n")
    assert run_problems(tmp_path, table) == [
        "run.timeout_seconds = 180: must exceed warmup_seconds + max_measure_seconds (202 s), with room for "
        "start-up and model build"]


def test_the_default_cap_of_an_adaptive_window_counts_too(tmp_path):
    table = "warmup_seconds = 2\nmeasure_seconds = 40\nci_target = 0.01\ntimeout_seconds = 200\n"
    assert run_problems(tmp_path, table) == [
        "run.timeout_seconds = 200: must exceed warmup_seconds + the default max_measure_seconds (6 x measure_seconds "
        "+ 10 = 250 s) (252 s), with room for start-up and model build"]
