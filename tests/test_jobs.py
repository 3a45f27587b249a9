"""The kinds of job (harness/jobs/, harness/kinds/shipped.py): every acceptance test belongs to exactly one,
every test a job owns exists, and the test ids the verdict requires are the ones the plugin parametrizes."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from harness.jobs.job import LEVELS, Job, Requirement, gpu_count_id, gpu_id, node_gpu_id, pair_id
from harness.jobs.registry import job_of, with_site_jobs
from harness.kinds.shipped import JOBS
from support.jobs import required_tests
from harness.kinds.shipped import load_shipped_profile

ACCEPTANCE = Path(__file__).resolve().parent.parent / "acceptance"
THRESHOLDS = Path(__file__).resolve().parent.parent / "thresholds"


def acceptance_tests() -> set[str]:
    return {node.name for path in ACCEPTANCE.glob("test_*.py") for node in ast.parse(path.read_text()).body
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}


def test_every_acceptance_test_belongs_to_exactly_one_kind_of_job():
    owners = {test: [job.name for job in JOBS if test in job.tests] for test in acceptance_tests()}
    assert {test: names for test, names in owners.items() if len(names) != 1} == {}


def test_every_test_a_job_owns_is_in_the_acceptance_suite():
    """A job owning a test no file defines would make every session INCOMPLETE (or hide a renamed test)."""
    owned = {test for job in JOBS for test in job.tests}
    assert owned - acceptance_tests() == set()


def test_levels_are_cumulative_and_the_sign_off_needs_the_ddp_matrix():
    h100 = load_shipped_profile(THRESHOLDS / "h100-80gb.toml")
    quick, standard, long = (required_tests(h100, 4, level=level) for level in LEVELS)
    assert set(quick) < set(standard) < set(long)
    assert not [name for name in quick if job_of(name, JOBS).level != "quick"]
    assert "test_weak_scaling[resnet50-bf16-4gpu]" in standard and long[-1] == "test_soak"


def test_the_required_ids_are_spelt_as_the_plugin_spells_its_parameters():
    assert (gpu_id(3), node_gpu_id("gpu02", 3), pair_id(0, 1), gpu_count_id(4)) == (
        "gpu3", "gpu02-gpu3", "gpu0-gpu1", "4gpu")
    h100 = load_shipped_profile(THRESHOLDS / "h100-80gb.toml")
    names = required_tests(h100, 2, level="quick", nodes=("gpu01", "gpu02"))
    assert "test_gpu_state[gpu02-gpu1]" in names and "test_gemm[gpu1]" in names


def test_a_job_names_a_known_level_and_owns_a_test():
    with pytest.raises(ValueError, match="level 'nightly' is not one of quick, standard, long"):
        Job(name="x", tests=("test_x",), level="nightly", required=lambda need: [])
    with pytest.raises(ValueError, match="owns no test"):
        Job(name="x", tests=(), level="quick", required=lambda need: [])


def test_a_site_job_joins_after_the_harness_jobs_and_its_requirement_counts():
    site = Job(name="site storage", tests=("test_scratch",), level="quick", required=lambda need: ["test_scratch"])
    jobs = with_site_jobs([site], JOBS)
    assert jobs[-1] is site and job_of("test_scratch[a]", jobs) is site
    cpu = load_shipped_profile(THRESHOLDS / "cpu.toml")
    assert required_tests(cpu, 2, level="quick", jobs=jobs)[-1] == "test_scratch"
    with pytest.raises(ValueError, match="a job named 'site storage' already exists"):
        with_site_jobs([site, site], JOBS)


def test_a_requirement_counts_only_the_gpu_counts_the_node_can_run():
    h100 = load_shipped_profile(THRESHOLDS / "h100-80gb.toml")
    assert Requirement(profile=h100, expected_gpus=2).gpu_counts == [n for n in sorted(h100.gpu_counts) if n <= 2]


def test_every_kind_of_job_the_harness_ships_requires_its_tests_somewhere():
    """A job whose ``required`` never names a test would let its tests be skipped unseen: each one the harness
    ships asks a 4-GPU node of some shipped profile for at least one test of its own."""
    profiles = [load_shipped_profile(path) for path in sorted(THRESHOLDS.glob("*.toml"))]
    for job in JOBS:
        asked = {name for profile in profiles for name in job.required(Requirement(profile=profile, expected_gpus=4))}
        assert asked and all(job_of(name, JOBS) is job for name in asked), job.name


def test_a_job_with_a_runner_names_its_section_and_no_section_is_session_jsons_own():
    def runner(**_):
        raise AssertionError("not built here")

    with pytest.raises(ValueError, match="has a runner but no section"):
        Job(name="x", tests=("test_x",), level="quick", required=lambda need: [], runner=runner)
    with pytest.raises(ValueError, match="section 'timeline' is one of session.json's own keys"):
        Job(name="x", tests=("test_x",), level="quick", required=lambda need: [], section="timeline", runner=runner)
    shared = Job(name="x", tests=("test_x",), level="quick", required=lambda need: [], section="interconnect")
    assert with_site_jobs([shared], JOBS)[-1] is shared  # the all-reduce and topology's runner writes it


def test_the_shipped_list_holds_every_kind_once_in_test_order_each_from_its_own_folder():
    """Every kind in a folder of its own (issue 29 item 2), one list (harness/kinds/shipped.py); the core declares
    none."""
    from harness.jobs import registry

    names = [job.name for job in JOBS]
    assert len(set(names)) == len(names)
    assert not any(isinstance(value, Job) for value in vars(registry).values())
    assert all(job.runner is None or job.runner.__module__.startswith("harness.kinds.") for job in JOBS)
    assert [job.name for job in JOBS] == ["node shape", "GPU state", "topology", "components", "DDP scaling",
                                          "all-reduce", "soak"]


def test_a_job_declares_its_fixtures_and_order_and_two_jobs_cannot_parametrize_one_fixture():
    """Job.params: the plugin parametrizes each fixture a job names (harness/plugin/__init__.py), so a site's job
    that names a shipped kind's fixture is refused, saying which; Job.order is first, last or None."""
    site = Job(name="site gemm", tests=("test_site_gemm",), level="quick", required=lambda need: [],
               params={"component_gpu": lambda session: []})
    with pytest.raises(ValueError, match="job 'site gemm' parametrizes component_gpu, which job 'components'"):
        with_site_jobs([site], JOBS)
    with pytest.raises(ValueError, match="order 'middle' is not 'first', 'last' or None"):
        Job(name="x", tests=("test_x",), level="quick", required=lambda need: [], order="middle")  # type: ignore
    declared = {fixture: job.name for job in JOBS for fixture in job.params}
    assert declared == {"gpu_state_gpu": "GPU state", "component_gpu": "components", "gpu_pair": "components",
                        "allreduce_gpus": "all-reduce", "weak_case": "DDP scaling", "strong_case": "DDP scaling"}
    assert {job.name: job.order for job in JOBS if job.order} == {"node shape": "first", "GPU state": "last"}
