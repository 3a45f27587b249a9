"""The component tests and --level in the plugin, through pytester with a fake component launch."""

import json
import sys
from pathlib import Path

import pytest

from harness.jobs.job import RESERVED_SECTIONS
from harness.kinds.components.launch import ComponentsRun
from harness.results.job import Failure
from support.profiles import cpu_test_profile

pytest_plugins = ["pytester"]

ACCEPTANCE = Path(__file__).resolve().parent.parent / "acceptance"
COMPONENTS = "[components]\nmin_gemm_tflops = {{ fp32 = {gemm} }}\nmin_hbm_copy_gbps = 1.0\nsource = \"test\""
LEVEL_FILES = {
    "test_scaling": "def test_weak_scaling(harness):\n    pass\n",
    "test_soak": "def test_soak(harness):\n    pass\n",
    "test_site": "def test_site_check(harness):\n    pass\n",
}
SITE_JOB = """
from harness.jobs.job import Job

def pytest_harness_jobs(config):
    return [Job(name="site check", tests=("test_site_check",), level="quick",
                required=lambda need: {required!r})]
"""


def fake_run(spec, run_dir, *, run_id):
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    figures = {"rank": 0, "gpu_index": None, "gpu_uuid": None, "numa_node": None, "bound": False,
               "gemm": {"fp32": {"tflops": 0.01, "n": 512}}, "hbm": {"copy": {"gbps": 5.0}, "rmw": {"gbps": 6.0}}}
    return ComponentsRun(run_id=run_id, status="ok", result={"status": "ok", "ranks": [figures], "peer": None})


@pytest.fixture
def suite(pytester, monkeypatch, tmp_path):
    """An acceptance session with the shipped test_components.py; returns (run, write_profile)."""
    monkeypatch.setattr("harness.kinds.components.runner.run_components", fake_run)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    thresholds = tmp_path / "thresholds"
    thresholds.mkdir()

    def write_profile(sections=""):
        (thresholds / "cpu-test.toml").write_text(cpu_test_profile(sections=sections))

    write_profile(COMPONENTS.format(gemm=0.001))
    pytester.makeini("[pytest]\nharness_acceptance = true\n")
    pytester.makepyfile(test_components=(ACCEPTANCE / "test_components.py").read_text(), **LEVEL_FILES)
    for name in LEVEL_FILES:  # this process may hold tests/test_soak.py under the same module name
        monkeypatch.delitem(sys.modules, name, raising=False)

    def run(*args):
        return pytester.runpytest(f"--harness-thresholds-dir={thresholds}", "-p", "no:cacheprovider", "-rs", *args)

    return run, write_profile


def test_each_component_is_a_test_of_its_own_and_host_and_peer_are_not_applicable_on_cpu(suite, pytester):
    run, _ = suite
    result = run("test_components.py")
    result.assert_outcomes(passed=2, skipped=2)
    result.stdout.fnmatch_lines(["*not applicable: no GPU on a CPU run*"])
    session = json.loads((pytester.path / "reports" / "latest" / "session.json").read_text())
    gemm = session["results"]["test_components.py::test_gemm[cpu0]"]
    assert [c["key"] for c in gemm["checks"]] == ["components_completed", "gemm_fp32"]
    assert gemm["components"]["gemm"]["fp32"]["tflops"] == 0.01
    assert session["timeline"]["launches_s"] == {"components": 0.0}  # the runner's one launch (faked: no time)
    assert "components" not in session  # its figures are in each test's result, no section of its own


def test_a_component_below_its_bound_fails_naming_the_rank(suite):
    run, write_profile = suite
    write_profile(COMPONENTS.format(gemm=1.0))
    result = run("test_components.py", "-k", "gemm")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*GEMM fp32 512^3 0.010 TFLOP/s < 1.000 TFLOP/s: CPU rank 0*"])


def test_without_bounds_a_component_test_is_skipped_as_not_evaluated_never_passed(suite):
    run, write_profile = suite
    write_profile()
    result = run("test_components.py", "-k", "gemm or memory")
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["*not evaluated: profile cpu-test has no [[]components[]] bound*"])


@pytest.mark.parametrize("args, kept", [
    ((), {"test_weak_scaling", "test_site_check", "test_gemm"}),
    (("--level", "quick"), {"test_site_check", "test_gemm"}),
    (("--soak", "1s"), {"test_weak_scaling", "test_site_check", "test_gemm", "test_soak"}),
    (("--level", "long", "--soak", "1s"), {"test_weak_scaling", "test_site_check", "test_gemm", "test_soak"}),
])
def test_level_selects_by_kind_of_job_a_sites_own_included(suite, pytester, args, kept):
    run, _ = suite
    pytester.makeconftest(SITE_JOB.format(required=["test_site_check"]))
    result = run("--collect-only", "-q", "-k", "not memory and not host and not peer", *args)
    collected = {line.split("::")[1].split("[")[0] for line in result.outlines if "::" in line}
    assert collected == kept


@pytest.mark.parametrize("args, message", [
    (("--level", "long"), "*--level long runs the soak: give its duration too*"),
    (("--level", "quick", "--soak", "1h"), "*--soak runs at --level long, not --level quick*"),
    (("--level", "fast"), "*invalid choice: 'fast'*"),
])
def test_contradictory_levels_are_usage_errors(suite, args, message):
    run, _ = suite
    result = run(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


SITE_OPTION_JOB = """
from harness.jobs.job import Job, JobOption
from harness.plugin.options import add_job_options

JOB = Job(name="site check", tests=("test_site_check",), level="quick", required=lambda need: ["test_site_check"],
          options=(JobOption(name="site-scratch", metavar="PATH", help="the scratch file system", parse=str.upper),))

def pytest_addoption(parser):
    add_job_options(parser, [JOB])

def pytest_harness_jobs(config):
    return [JOB]
"""
READS_ITS_OPTION = "def test_site_check(harness):\n    assert harness.options.of('site-scratch') == '/SCRATCH'\n"


def test_a_sites_job_declares_and_reads_its_own_option_as_the_soak_does(suite, pytester):
    """Job.options: the plugin parses a kind's own option (``--soak``, or a site's) once and names none of them."""
    run, _ = suite
    pytester.makeconftest(SITE_OPTION_JOB)
    pytester.makepyfile(test_site=READS_ITS_OPTION)
    run("test_site.py", "--harness-site-scratch", "/scratch").assert_outcomes(passed=1)


def test_a_sites_option_never_declared_is_a_usage_error(suite, pytester):
    run, _ = suite
    pytester.makeconftest(SITE_OPTION_JOB.replace("def pytest_addoption(parser):\n    add_job_options(parser, [JOB])\n",
                                                  ""))
    pytester.makepyfile(test_site=READS_ITS_OPTION)
    result = run("test_site.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*job 'site check': its option --harness-site-scratch was never declared*"])


SITE_PARAMS_JOB = """
from harness.jobs.job import Job

def pytest_harness_jobs(config):
    return [Job(name="site disks", tests=("test_disk",), level="quick", order="first",
                required=lambda need: ["test_disk[nvme0]", "test_disk[nvme1]"],
                params={"disk": lambda session: ["nvme0", "nvme1"]}),
            Job(name="site check", tests=("test_site_check",), level="quick", required=lambda need: [])]
"""


def test_a_sites_job_parametrizes_its_own_fixture_and_runs_where_its_order_says(suite, pytester):
    """Job.params and Job.order, as a site declares them: the plugin parametrizes the fixture the job names
    (``disk``) and ``order="first"`` puts the site's tests before the node's other
    tests whatever the file order."""
    run, _ = suite
    pytester.makeconftest(SITE_PARAMS_JOB)
    pytester.makepyfile(test_zz_disks="def test_disk(harness, disk):\n    assert disk.startswith('nvme')\n")
    result = run("--collect-only", "-q", "-k", "not memory and not host and not peer")
    collected = [line.split("::")[1] for line in result.outlines if "::" in line]
    assert collected[:2] == ["test_disk[nvme0]", "test_disk[nvme1]"] and "test_gemm[cpu0]" in collected


def test_a_test_no_kind_of_job_owns_is_refused_naming_the_way_out(suite):
    """Its requirement could not be known: a skip of it would pass unseen."""
    run, _ = suite  # no conftest: test_site.py's test belongs to no job
    result = run("--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*test_site_check belongs to no kind of job*pytest_harness_jobs*"])


@pytest.mark.parametrize("conftest, message", [
    (SITE_JOB.format(required=[]).replace('"test_site_check"', '"test_gemm"'),
     "*job 'site check' claims test_gemm, which job 'components' owns*"),
    ("def pytest_harness_jobs(config):\n    return ['test_site_check']\n", "*expected harness.jobs.job.Job*"),
])
def test_a_site_job_that_would_blur_the_requirement_is_refused(suite, pytester, conftest, message):
    run, _ = suite
    pytester.makeconftest(conftest)
    result = run("--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_a_site_jobs_required_test_that_is_missing_keeps_the_session_from_passing(suite, pytester):
    run, _ = suite
    pytester.makeconftest(SITE_JOB.format(required=["test_site_check", "test_site_check_two"]))
    run("--level", "quick")
    session = json.loads((pytester.path / "reports" / "latest" / "session.json").read_text())
    verdict = session["session_verdict"]
    assert verdict["verdict"] == "INCOMPLETE", verdict
    assert [n["name"] for n in verdict["not_run"]] == ["test_site_check_two"]
    assert verdict["required_total"] == 4 and verdict["required_selected"] == 3  # gemm, memory, site check


SITE_JOB_WITH_RUNNER = """
from dataclasses import dataclass

from harness.jobs.job import Job, KindRunner
from harness.plugin.results import CheckedResult
from harness.results.check import Check


@dataclass(kw_only=True)
class ScratchRunner(KindRunner):
    ctx: object
    gbps: float | None = None

    def measure(self):
        self.gbps = {gbps}
        check = Check(name="scratch bandwidth", kind="performance", measured=self.gbps, bound=1.0, unit="GB/s",
                      comparison=">=", passed=self.gbps >= 1.0)
        return CheckedResult(name="scratch", context="site, scratch", checks=[check], bounds={{"min_gbps": 1.0}})

    def summary(self):
        return None if self.gbps is None else {{"gbps": self.gbps}}

    def launches_s(self):
        return {{}} if self.gbps is None else {{"scratch probe": 0.5}}


def pytest_harness_jobs(config):
    return [Job(name="site check", tests=("test_site_check",), level="quick",
                required=lambda need: ["test_site_check"], section="site_scratch", runner=ScratchRunner)]
"""
SITE_TEST_WITH_RUNNER = """
def test_site_check(harness):
    harness.assert_passed(harness.keep(harness.runner("site_scratch").measure()))
"""


@pytest.mark.parametrize("gbps, outcome", [(2.0, "passed"), (0.5, "failed")])
def test_a_site_job_brings_its_runner_whose_section_and_launches_the_session_writes(suite, pytester, gbps, outcome):
    """Issue 29: a kind of job reached through its Job declaration only -- the session builds its runner, writes its
    session.json section and its launches' time, and its test reaches it by section; no harness module names it."""
    run, _ = suite
    pytester.makeconftest(SITE_JOB_WITH_RUNNER.format(gbps=gbps))
    pytester.makepyfile(test_site=SITE_TEST_WITH_RUNNER)
    result = run("--level", "quick")
    result.assert_outcomes(passed=2 + (outcome == "passed"), failed=outcome == "failed", skipped=2)
    session = json.loads((pytester.path / "reports" / "latest" / "session.json").read_text())
    assert session["site_scratch"] == {"gbps": gbps}
    # job.py's RESERVED_SECTIONS is a copy of session.json's own keys: it must hold every one the session wrote
    assert set(session) - {"site_scratch", "interconnect", "soak"} <= RESERVED_SECTIONS
    assert session["timeline"]["launches_s"]["scratch probe"] == 0.5
    assert session["session_verdict"]["verdict"] == ("PASS" if outcome == "passed" else "FAIL")


@pytest.mark.parametrize("conftest, message", [
    ("from harness.jobs.job import Job\ndef pytest_harness_jobs(config):\n    return [Job(name='s', "
     "tests=('test_site_check',), level='quick', required=lambda need: [], section='results', runner=dict)]\n",
     "*section 'results' is one of session.json's own keys*"),
    ("from harness.jobs.job import Job\ndef pytest_harness_jobs(config):\n    return [Job(name='s', "
     "tests=('test_site_check',), level='quick', required=lambda need: [], section='mine')]\n",
     "*job 's' names section 'mine', which no job's runner writes*"),
])
def test_a_site_jobs_section_must_be_its_own_and_have_a_runner(suite, pytester, conftest, message):
    run, _ = suite
    pytester.makeconftest(conftest)
    result = run("--collect-only")
    assert result.ret != 0
    (result.stderr if result.ret == pytest.ExitCode.USAGE_ERROR else result.stdout).fnmatch_lines([message])


def test_a_gpu_no_rank_reported_fails_rather_than_skips(suite, monkeypatch):
    run, _ = suite

    def nobody(spec, run_dir, *, run_id):
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        return ComponentsRun(run_id=run_id, status="ok", result={"status": "ok", "ranks": [], "peer": None})

    monkeypatch.setattr("harness.kinds.components.runner.run_components", nobody)
    result = run("test_components.py", "-k", "gemm")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*component figures reported: FAILED*CPU rank 0: the launch finished but no rank*"])


def test_a_failed_launch_fails_every_component_test_with_its_reason(suite, monkeypatch):
    run, _ = suite
    monkeypatch.setattr("harness.kinds.components.runner.run_components", lambda spec, run_dir, *, run_id: (
        ComponentsRun(run_id=run_id, status="timeout", failure=Failure(reason="the launch exceeded its 60 s limit"))))
    result = run("test_components.py", "-k", "gemm or memory")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*component benchmarks completed: FAILED*exceeded its 60 s limit*"])


SITE_KIND_WITH_BOUNDS = """
from harness.jobs.job import BoundsTable, Job
from harness.profile.kinds import NUMBER, Field

def pytest_harness_jobs(config):
    return [Job(name="scratch", tests=("test_scratch",), level="quick", required=lambda need: ["test_scratch"],
                bounds=BoundsTable(name="scratch", fields=(
                    Field(key="min_write_gbps", kind=NUMBER, required=True, doc="GB/s"),)))]
"""
READS_ITS_BOUND = "def test_scratch(harness):\n    assert harness.profile.site['scratch']['min_write_gbps'] == 4.5\n"


def test_a_sites_kind_reads_its_own_bounds_table_in_a_session(suite, pytester):
    """Job.bounds: ``[site.scratch]`` checked as the session loads the profiles, read as ``profile.site``
    (tests/test_site_bounds.py: the loader's side)."""
    run, write_profile = suite
    pytester.makeconftest(SITE_KIND_WITH_BOUNDS)
    pytester.makepyfile(test_site=READS_ITS_BOUND)
    write_profile("[site.scratch]\nmin_write_gbps = 4.5")
    run("test_site.py").assert_outcomes(passed=1)
    session = json.loads((pytester.path / "reports" / "latest" / "session.json").read_text())
    assert session["profile"]["raw"]["site"] == {"scratch": {"min_write_gbps": 4.5}}


def test_a_session_refuses_a_site_table_its_kind_would_not_read(suite, pytester):
    """A misspelt key would leave the kind judging against nothing: the session does not start."""
    run, write_profile = suite
    pytester.makeconftest(SITE_KIND_WITH_BOUNDS)
    pytester.makepyfile(test_site=READS_ITS_BOUND)
    write_profile("[site.scratch]\nmin_write_gpbs = 4.5")
    result = run("test_site.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*threshold files are invalid; no benchmark was started*",
                                 "*site.scratch.min_write_gpbs: unknown key*"])
