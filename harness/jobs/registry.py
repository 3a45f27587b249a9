"""The kinds of job the core still declares, and what reads a session's kinds: ``required_tests`` (the session
verdict's required set), ``job_of`` (a test's level and whether the matrix options narrow it) and
``with_site_jobs`` (the kinds the ``pytest_harness_jobs`` hook hands in, harness/plugin/hookspecs.py).

The session's list is assembled above the plugin (harness/kinds/shipped.py: these and the kinds in folders of
their own, in test order), so nothing here or below names a kind folder. A test no job of the session owns is
refused at collection, so its requirement cannot be left out by forgetting a table.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from harness.cases import SCALINGS, CaseId
from harness.jobs.job import Job, Requirement, level_rank
from harness.profile.bounds import Profile

NOT_COLLECTED = " (acceptance/ lacks {test}, or it was not collected)"


def case_required(profile: Profile, case: CaseId, native_bf16: str | None) -> bool:
    """Whether the profile asks for ``case`` at its GPU count: it bounds it, and bf16 runs on this CPU."""
    bounds = profile.bounds(case.model, case.precision)
    if bounds is None:
        return False
    if case.precision == "bf16" and profile.bf16_needs_native and native_bf16 is None:
        return False
    return case.scaling == "weak" or (case.gpus > 1 and case.gpus in bounds.min_strong_efficiency)


def _ddp_scaling(need: Requirement) -> list[str]:
    profile = need.profile
    return [f"test_{scaling}_scaling[{case.test_param}]"
            for scaling in SCALINGS for count in need.gpu_counts for model in profile.models
            for precision in profile.precisions
            for case in (CaseId(model=model, precision=precision, gpus=count, scaling=scaling),)
            if case_required(profile, case, need.native_bf16)]


DDP_SCALING = Job(name="DDP scaling", tests=("test_weak_scaling", "test_strong_scaling"), level="standard",
                  required=_ddp_scaling, narrowed_by_matrix=True)

CORE_JOBS: tuple[Job, ...] = (DDP_SCALING,)
"""The kinds of job not yet in a folder of their own under harness/kinds/: this floor knows no runner."""


def function_of(test_name: str) -> str:
    """``test_gemm`` of ``test_gemm[gpu3]``."""
    return test_name.split("[", 1)[0]


def job_of(test: str, jobs: Sequence[Job]) -> Job | None:
    """The job that owns ``test`` (a function name, or a test name with its parameter id)."""
    function = function_of(test)
    return next((job for job in jobs if function in job.tests), None)


def with_site_jobs(added: Iterable[object], jobs: Sequence[Job] = ()) -> tuple[Job, ...]:
    """``jobs`` and the ones the ``pytest_harness_jobs`` hook returned (the harness's shipped kinds first, then a
    site's), in that order; ValueError, saying which, for anything that is not a Job, a name taken twice, a
    section no runner writes or a test two jobs claim."""
    merged = list(jobs)
    for job in added:
        if not isinstance(job, Job):
            raise ValueError(f"pytest_harness_jobs returned {job!r}: expected harness.jobs.job.Job")
        if any(job.name == other.name for other in merged):
            raise ValueError(f"pytest_harness_jobs: a job named {job.name!r} already exists")
        if job.section is not None and job.runner is None and all(other.section != job.section for other in merged):
            raise ValueError(f"pytest_harness_jobs: job {job.name!r} names section {job.section!r}, which no job's "
                             "runner writes: give it a runner")
        fixtures = [(fixture, other.name) for other in merged for fixture in job.params if fixture in other.params]
        if fixtures:
            raise ValueError(f"pytest_harness_jobs: job {job.name!r} parametrizes {fixtures[0][0]}, which job "
                             f"{fixtures[0][1]!r} parametrizes")
        claimed = [(test, other.name) for other in merged for test in job.tests if test in other.tests]
        if claimed:
            raise ValueError(f"pytest_harness_jobs: job {job.name!r} claims {claimed[0][0]}, which job "
                             f"{claimed[0][1]!r} owns")
        merged.append(job)
    return tuple(merged)


def required_tests(profile: Profile, expected_gpus: int, *, level: str = "standard", native_bf16: str | None = None,
                   nodes: Sequence[str] = (), jobs: Sequence[Job]) -> list[str]:
    """The test names (``test_weak_scaling[resnet50-bf16-4gpu]``) the profile requires of a node of
    ``expected_gpus`` GPUs (ranks on a CPU profile), from every job at or below ``level``. ``nodes``:
    every node of a multi-node session (the driver's first), each of whose GPUs must pass its GPU-state
    test (``test_gpu_state[gpu02-gpu3]``); empty on one node (``gpu3``).

    Cases the profile itself leaves out are not required: a model × precision without bounds, bf16
    on a CPU without native bf16 where the profile says so, a GPU count above the node's.
    """
    need = Requirement(profile=profile, expected_gpus=expected_gpus, native_bf16=native_bf16, nodes=tuple(nodes))
    highest = level_rank(level)
    return [name for job in jobs if level_rank(job.level) <= highest for name in job.required(need)]
