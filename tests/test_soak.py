"""Burn-in (--soak): durations, windows, throughput decay, the checks, the plugin path (fake soak),
and (``slow``) a few seconds of a real soak on one gloo rank."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.kinds.soak.checks import soak_checks
from harness.kinds.soak.launch import SoakRun
from harness.kinds.soak.windows import parse_duration, throughput_decay, window_seconds
from harness.kinds.soak.spec import SoakSpec
from harness.launch.spec import LaunchSettings
from harness.kinds.soak.bounds import SoakBounds
from harness.profile.bounds import CaseBounds
from harness.results.job import Failure
from support.fake_nvml import UUIDS, FakeGpu, FakeNvml
from support.sampling import drive

pytest_plugins = ["pytester"]
REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(("text", "seconds"), [("4h", 14400), ("3m", 180), ("90s", 90), ("1h30m", 5400),
                                               ("45", 45), ("2.5m", 150), (" 10 M ", 600)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "4x", "h", "0", "-3m", "3m4", "m3"])
def test_bad_durations_say_what_is_expected(text):
    with pytest.raises(ValueError, match="expected a positive duration such as 4h, 30m, 90s or 1h30m"):
        parse_duration(text)


def test_windows_are_a_twelfth_of_the_soak_within_limits():
    assert window_seconds(180) == 15 and window_seconds(30) == 5 and window_seconds(4 * 3600) == 600


def test_decay_is_last_window_against_first():
    windows = [{"throughput": 100.0}, {"throughput": 99.0}, {"throughput": 94.0}]
    assert throughput_decay(windows) == pytest.approx(0.06)
    assert throughput_decay(windows[:1]) is None


SPEC = SoakSpec(model="resnet152", precision="bf16", batch_size_per_gpu=256, duration_s=14400,
                launch=LaunchSettings(gpus_per_node=4))
CASE = CaseBounds(model="resnet152", precision="bf16", batch_size_per_gpu=256, source="h200 case",
                  max_temperature_c=85.0)
SOAK = SoakBounds(max_throughput_decay=0.03, source="soak bound")


def _run(last: float = 2180.0, **changes) -> SoakRun:
    windows = [{"window": i, "seconds": 600.0, "throughput": t} for i, t in enumerate([2190.0, 2188.0, last])]
    fields = dict(spec=SPEC, run_id="s", status="ok", windows=windows, loss_finite=True, sample_unit="images")
    fields.update(changes)
    return SoakRun(**fields)


def _by_name(checks):
    return {c.name: c for c in checks}


def test_a_steady_cool_soak_passes(tmp_path):
    run = _run(telemetry=drive(FakeNvml([FakeGpu(uuid=UUIDS[i]) for i in range(4)]), tmp_path, gpus=4))
    checks = soak_checks(run, SOAK, CASE, missing_note="n/a")
    assert [c.name for c in checks] == ["soak completed", "loss finite", "throughput decay (last window vs first)",
                                        "max GPU temperature", "no thermal / hardware-slowdown throttling",
                                        "no new ECC errors", "no foreign process on the GPUs during the window"]
    assert all(c.passed for c in checks), [c.describe("x") for c in checks if not c.passed]


def test_decay_beyond_the_bound_fails_naming_both_windows():
    decay = _by_name(soak_checks(_run(last=2000.0), SOAK, CASE, missing_note="n/a"))[
        "throughput decay (last window vs first)"]
    assert decay.passed is False and decay.measured == pytest.approx(1 - 2000 / 2190)
    assert decay.describe("h200 soak") == ("throughput decay (last window vs first) 0.087 > 0.030: first window "
                                           "2,190.0 images/s, last 2,000.0 images/s (h200 soak)")


def test_a_hot_throttling_soak_fails_naming_the_gpu(tmp_path):
    nvml = FakeNvml([FakeGpu(uuid=UUIDS[i]) for i in range(4)])

    def during(i):
        nvml.gpus[2].temperature_c = 80 + i
        nvml.gpus[2].reasons = 0x40 if i > 6 else 0

    checks = _by_name(soak_checks(_run(telemetry=drive(nvml, tmp_path, gpus=4, during=during)), SOAK, CASE,
                                  missing_note="n/a"))
    assert checks["max GPU temperature"].passed is False and UUIDS[2] in checks["max GPU temperature"].note
    throttle = checks["no thermal / hardware-slowdown throttling"]
    assert throttle.passed is False and f"GPU 2 ({UUIDS[2]}): hw thermal slowdown in 3 of 10 samples" in throttle.note


def test_without_a_soak_bound_the_decay_is_shown_not_passed():
    decay = _by_name(soak_checks(_run(), None, CASE, missing_note="n/a"))["throughput decay (last window vs first)"]
    assert decay.passed is None and decay.measured == pytest.approx(1 - 2180 / 2190)
    assert "no [soak] bound" in decay.note


def test_a_soak_that_died_keeps_its_windows_and_fails():
    run = _run(status="failed", failure=Failure(reason="rank 1 (host a, GPU 1) was killed by SIGKILL in phase measure"),
               loss_finite=None)
    checks = _by_name(soak_checks(run, SOAK, CASE, missing_note="n/a"))
    assert checks["soak completed"].passed is False and "SIGKILL" in checks["soak completed"].note
    assert checks["throughput decay (last window vs first)"].measured is not None


# --- through the plugin (fake soak) ----------------------------------------------------------

PROFILE = """
schema_version = 1
[hardware]
name = "cpu-test"
description = "test CPU profile"
device = "cpu"
[defaults]
gpu_counts = [1, 2]
models = ["resnet18", "tiny_bert"]
precisions = ["bf16"]
source = "test"
[models.tiny_bert.bf16]
batch_size_per_gpu = 4
source = "test bounds"
[models.resnet18.bf16]
batch_size_per_gpu = 8
source = "test bounds"
[soak]
max_throughput_decay = 0.05
source = "test soak bound"
"""


@pytest.fixture
def soak_suite(pytester, monkeypatch, tmp_path):
    thresholds = tmp_path / "thresholds"
    thresholds.mkdir()
    (thresholds / "cpu-test.toml").write_text(PROFILE)
    pytester.makeini("[pytest]\nharness_acceptance = true\n")
    pytester.makepyfile(test_accept_soak=(REPO / "acceptance" / "test_soak.py").read_text())
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    specs = []

    def run(last_throughput: float, *args):
        def fake(spec, run_dir, *, run_id, on_progress=None):
            specs.append(spec)
            windows = [{"window": 0, "seconds": 5.0, "throughput": 100.0},
                       {"window": 1, "seconds": 5.0, "throughput": last_throughput}]
            return SoakRun(spec=spec, run_id=run_id, status="ok", windows=windows, loss_finite=True,
                           sample_unit="images", elapsed_s=12.5,
                           telemetry={"status": "unavailable", "reason": "a CPU run (gloo) has no GPU to sample"})

        monkeypatch.setattr("harness.kinds.soak.launch.run_soak", fake)
        return pytester.runpytest(f"--harness-thresholds-dir={thresholds}", "-p", "no:cacheprovider", "-rs", *args)

    return run, specs


def test_without_soak_the_test_is_not_selected(soak_suite):
    """The soak is the long level's job: the default (standard) session deselects it, whatever its file's name."""
    run, specs = soak_suite
    run(100.0).assert_outcomes(deselected=1)
    assert specs == []


def test_soak_runs_the_most_compute_heavy_case_on_every_rank_for_the_duration(soak_suite, pytester):
    run, specs = soak_suite
    run(99.0, "--soak", "2m").assert_outcomes(passed=1)
    # tiny_bert (1.46 GFLOP per sample) over resnet18 at 64 px (0.89), though listed second
    assert [(s.model, s.precision, s.gpus_per_node, s.duration_s, s.batch_size_per_gpu) for s in specs] == [
        ("tiny_bert", "bf16", 2, 120.0, 4)]
    session = json.loads((pytester.path / "reports" / "latest" / "session.json").read_text())
    assert session["soak"]["throughput_decay"] == pytest.approx(0.01)
    # The soak's launch is named in the session's time line, not lumped into "other" (on 4 x H200 a 2 min soak
    # read "other (launch gaps, checks, outputs) 144 s", docs/data/2026-11-28-h200x4-after-merge)
    assert session["timeline"]["launches_s"] == {"soak": 12.5}


def test_a_decaying_soak_fails(soak_suite):
    run, _ = soak_suite
    result = run(90.0, "--soak", "2m")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*throughput decay (last window vs first) 0.100 > 0.050*"])


def test_a_bad_soak_duration_is_a_usage_error(soak_suite):
    run, specs = soak_suite
    result = run(100.0, "--soak", "4x")
    result.stderr.fnmatch_lines(["*--soak: soak duration '4x': expected a positive duration*"])
    assert specs == []


@pytest.mark.parametrize("duration, says", [
    ("1" + "0" * 400 + "h", "*--soak 1000*h: inf s; a soak lasts from 1 s*to a week*"),  # inf: FAILed the node
    ("0.0000001s", "*--soak 0.0000001s: 1e-07 s; a soak lasts from 1 s*"),  # counted as a burn-in
    ("8000h", "*--soak 8000h: 2.88e+07 s; a soak lasts from 1 s*"),
])
def test_a_soak_that_overflows_or_is_too_short_or_too_long_is_a_usage_error(soak_suite, duration, says):
    run, specs = soak_suite
    result = run(100.0, "--soak", duration)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([says])
    assert specs == []


# --- a real soak, briefly --------------------------------------------------------------------


@pytest.mark.slow
def test_a_short_real_soak_reports_every_window_and_cleans_up(tmp_path, assert_no_process_left):
    from harness.kinds.soak.launch import run_soak

    spec = SoakSpec(model="tiny_bert", precision="fp32", batch_size_per_gpu=4, duration_s=3.0, window_s=1.0,
                    warmup_seconds=0.3, launch=LaunchSettings(gpus_per_node=1, device="cpu"))
    run = run_soak(spec, tmp_path / "soak", run_id="soak-real-test")
    assert_no_process_left("soak-real-test")
    assert run.status == "ok" and run.loss_finite, run.failure
    assert [w["window"] for w in run.windows] == [0, 1, 2]
    assert all(w["throughput"] > 0 and w["seconds"] > 0.5 for w in run.windows)
    assert run.decay is not None and run.telemetry["status"] == "unavailable"
