"""Daily use of the plugin (issue 20): `-p harness.plugin` with the entry point installed, listing or
asking for help leaves nothing behind, short options only in acceptance sessions, progress lines,
and the CPU profile's bf16 cases only where the CPU has native bf16."""

import importlib.metadata
import threading
import time
import tomllib
from pathlib import Path

import pytest

from harness.kinds.soak.launch import progress_line, reporting_progress
from harness.kinds.soak.spec import SoakSpec
from harness.launch.spec import LaunchSettings
from harness.node.cpu_features import native_bf16_flag
from harness.kinds.shipped import load_shipped_profile
from harness.kinds.soak.plan import SOAK_PROGRESS_FILE
from test_plugin import PROFILE, suite  # noqa: F401 - the fixture

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parent.parent
DIST_NAME = "gpu-acceptance-harness"


@pytest.fixture
def installed_as_pyproject_says(tmp_path, monkeypatch):
    """The package's pytest11 entry point as pyproject.toml declares it, whatever the venv has installed."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    info = tmp_path / "dist" / "gpu_acceptance_harness-0.0.0.dist-info"
    info.mkdir(parents=True)
    info.joinpath("METADATA").write_text(f"Metadata-Version: 2.1\nName: {DIST_NAME}\nVersion: 0.0.0\n")
    lines = ["[pytest11]", *(f"{name} = {value}" for name, value in project["entry-points"]["pytest11"].items())]
    info.joinpath("entry_points.txt").write_text("\n".join(lines) + "\n")
    others = [d for d in importlib.metadata.distributions() if (d.metadata["Name"] or "").lower() != DIST_NAME]
    ours = importlib.metadata.PathDistribution(info)
    monkeypatch.setattr(importlib.metadata, "distributions", lambda **_: iter([*others, ours]))


def test_p_harness_plugin_is_harmless_when_the_entry_point_loaded_it(pytester, installed_as_pyproject_says):
    pytester.makepyfile(test_other="def test_x():\n    pass\n")
    result = pytester.runpytest("-p", "harness.plugin", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*already registered*")


@pytest.mark.parametrize("args", [("--collect-only",), ("--help",), ("--markers",), ("--fixtures",)])
def test_listing_or_help_makes_no_run_directory(suite, pytester, args):  # noqa: F811
    run, launcher, _ = suite
    (pytester.path / "reports").mkdir()
    (pytester.path / "reports" / "earlier-run").mkdir()
    (pytester.path / "reports" / "latest").symlink_to("earlier-run")
    result = run(*args)
    assert result.ret == 0
    assert sorted(p.name for p in (pytester.path / "reports").iterdir()) == ["earlier-run", "latest"]
    assert (pytester.path / "reports" / "latest").readlink() == Path("earlier-run")
    assert launcher.calls == []


def test_collect_only_lists_the_cases(suite):  # noqa: F811
    run, _, _ = suite
    run("--collect-only", "-q").stdout.fnmatch_lines(["*test_weak_scaling[[]tiny_bert-bf16-1gpu[]]*"])


def test_short_options_exist_only_in_acceptance_sessions(pytester):
    pytester.makepyfile(test_other="def test_x():\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "--gpus", "1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unrecognized arguments: --gpus*"])
    # The long spellings stay everywhere: a shared addopts or script may pass them.
    pytester.runpytest("-p", "no:cacheprovider", "--harness-gpus", "1").assert_outcomes(passed=1)


def test_each_finished_case_prints_its_verdict_then_what_runs_next(suite):  # noqa: F811
    run, _, _ = suite
    result = run()
    result.stdout.fnmatch_lines([
        "harness: [[]1/2[]] PASS test_weak_scaling[[]tiny_bert-bf16-1gpu[]] in * s: "
        "per-GPU throughput 100.0 sequences/s >= 50.000 sequences/s",
        "harness: next test_weak_scaling[[]tiny_bert-bf16-2gpu[]]; 1 test left, about * s (* s per test so far)",
        "harness: [[]2/2[]] PASS test_weak_scaling[[]tiny_bert-bf16-2gpu[]] in * s: "
        "weak-scaling efficiency 1.000 >= 0.500",
    ])
    assert "harness: next" not in result.stdout.str().split("[2/2]")[1]


def test_a_failed_case_shows_the_check_that_missed(suite, pytester):  # noqa: F811
    run, _, thresholds = suite
    (thresholds / "cpu-test.toml").write_text(PROFILE.format(min_tp=1_000_000))
    run("--gpus", "1").stdout.fnmatch_lines([
        "harness: [[]1/1[]] FAIL test_weak_scaling[[]tiny_bert-bf16-1gpu[]] in * s: "
        "per-GPU throughput 100.0 sequences/s < 1,000,000.0 sequences/s"])


def test_quiet_keeps_the_verdicts_and_drops_the_estimates(suite):  # noqa: F811
    run, _, _ = suite
    quiet = run("-q")
    quiet.stdout.fnmatch_lines(["harness: [[]1/2[]] PASS *", "harness: [[]2/2[]] PASS *"])
    assert "harness: next" not in quiet.stdout.str()
    assert "harness: [" not in run("-qq").stdout.str()


def test_the_soak_reports_its_state_while_it_runs(tmp_path):
    spec = SoakSpec(model="tiny_bert", precision="fp32", batch_size_per_gpu=4, duration_s=600, window_s=60,
                    launch=LaunchSettings(gpus_per_node=2, device="cpu"))
    lines: list[str] = []
    with reporting_progress(spec, tmp_path, lines.append, period_s=0.05):
        deadline = time.monotonic() + 10
        while not lines and time.monotonic() < deadline:
            time.sleep(0.01)
        assert lines[0].startswith("soak tiny_bert fp32 on 2 ranks: 0 of 10 min, warming up")
        (tmp_path / SOAK_PROGRESS_FILE).write_text(
            '[{"window": 0, "seconds": 60, "throughput": 50.0}, {"window": 1, "seconds": 60, "throughput": 49.0}]')
        seen = len(lines)
        while len(lines) == seen and time.monotonic() < deadline:
            time.sleep(0.01)
    assert "window 2/10 at 49.0 sequences/s (first 50.0, decay 2.0%)" in lines[-1]
    assert not any(t.name == "soak-progress" for t in threading.enumerate())


def test_progress_line_of_a_gpu_soak():
    spec = SoakSpec(model="resnet50", precision="bf16", batch_size_per_gpu=256, duration_s=4 * 3600,
                    launch=LaunchSettings(gpus_per_node=4))
    windows = [{"throughput": 3000.0}, {"throughput": 2990.0}]
    assert progress_line(spec, windows, 720).startswith("soak resnet50 bf16 on 4 GPUs: 12 of 240 min, window 2/")


X86_AVX2 = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma\n\nprocessor\t: 1\nflags\t\t: fpu sse2 avx avx2 fma\n"
X86_AMX = "processor\t: 0\nflags\t\t: avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n"
ARM64 = "processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\n"


@pytest.mark.parametrize("text, flag", [(X86_AVX2, None), (X86_AMX, "amx_bf16"), (ARM64, "bf16"), ("", None),
                                        (X86_AMX + "\n" + X86_AVX2, None)])
def test_native_bf16_comes_from_the_cpu_flags(text, flag):
    assert native_bf16_flag(text) == flag


def test_the_shipped_cpu_profile_runs_bf16_only_on_native_bf16():
    assert load_shipped_profile(REPO / "thresholds" / "cpu.toml").bf16_needs_native


@pytest.mark.parametrize("flag, outcomes", [(None, {"skipped": 3}), ("amx_bf16", {"passed": 2, "skipped": 1})])
def test_bf16_cases_are_skipped_saying_why_where_the_cpu_emulates_bf16(suite, monkeypatch, flag, outcomes):  # noqa: F811
    run, launcher, thresholds = suite
    text = PROFILE.format(min_tp=50).replace('device = "cpu"', 'device = "cpu"\nbf16_needs_native = true')
    (thresholds / "cpu-test.toml").write_text(text)
    monkeypatch.setattr("harness.plugin.session.native_bf16_flag", lambda: flag)
    result = run("-rs")
    result.assert_outcomes(**outcomes)
    if flag is None:
        result.stdout.fnmatch_lines(["*profile cpu-test: this CPU has no native bf16 (none of amx_bf16, "
                                     "avx512_bf16, bf16 in /proc/cpuinfo)*"])
        assert launcher.calls == []
