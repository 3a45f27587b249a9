"""Bad input, refused up front with one clear line (issue 20): threshold files that are not files, too
large or nested without end, and [run] values a launch cannot use."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.profile.load import MAX_PROFILE_BYTES, ThresholdError, cli_check, load_profile

CPU_PROFILE = (Path(__file__).resolve().parents[1] / "thresholds" / "cpu.toml").read_text()


# --- threshold files that are not profiles ------------------------------------------------------


def test_a_fifo_profile_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "cpu.toml"
    os.mkfifo(fifo)
    with pytest.raises(ThresholdError) as caught:
        load_profile(fifo)  # before the fix: blocks in open() for ever
    assert caught.value.problems == [f"{fifo}: is not a regular file (a pipe, device or socket); a threshold "
                                     "profile is a .toml file"]


def test_a_device_profile_is_refused_unread(tmp_path):
    with pytest.raises(ThresholdError, match=r"^/dev/zero: is not a regular file"):
        load_profile("/dev/zero")  # before the fix: read until memory runs out


def test_a_profile_over_the_size_cap_is_refused(tmp_path):
    path = tmp_path / "cpu.toml"
    path.write_text(CPU_PROFILE + "#" * MAX_PROFILE_BYTES)
    with pytest.raises(ThresholdError, match=r"cpu\.toml: is larger than 1024 KiB; a threshold profile is a few KB"):
        load_profile(path)


@pytest.mark.parametrize("nested", [
    "x = " + "[" * 5000 + "]" * 5000,             # RecursionError in tomllib
    "hardware = " + "[" * 350 + "]" * 350,         # parses, then RecursionError showing the value in a problem
    "hardware = " + "{a = " * 300 + "1" + "}" * 300,  # parses; refused by the nesting cap
])
def test_deep_nesting_is_a_threshold_error_naming_the_file(tmp_path, nested):
    path = tmp_path / "cpu.toml"
    path.write_text(nested + "\n")
    with pytest.raises(ThresholdError) as caught:
        load_profile(path)
    assert len(caught.value.problems) == 1
    assert caught.value.problems[0].startswith(f"{path}: ")
    assert "nest" in caught.value.problems[0]


def test_cli_check_reports_a_fifo_and_goes_on(tmp_path, capsys):
    os.mkfifo(tmp_path / "fifo.toml")
    (tmp_path / "cpu.toml").write_text(CPU_PROFILE)
    assert cli_check([str(tmp_path)]) == 1
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
        load_profile(path)
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
