"""What reads a session's kinds of job: ``required_tests`` (the session verdict's required set), ``job_of`` (a
test's level and whether the matrix options narrow it) and ``with_site_jobs`` (the kinds the
``pytest_harness_jobs`` hook hands in, harness/plugin/hookspecs.py).

The session's list is assembled above the plugin (harness/kinds/shipped.py: every kind, each in a folder of its
own, in test order), so nothing here or below names a kind. A test no job of the session owns is
refused at collection, so its requirement cannot be left out by forgetting a table.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from harness.jobs.job import Job, Requirement, level_rank
from harness.profile.bounds import Profile
from harness.profile.load import refuse_clashes

NOT_COLLECTED = " (acceptance/ lacks {test}, or it was not collected)"


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
        if job.bounds is not None:
            twice = next((other.name for other in merged if other.bounds is not None
                          and other.bounds.heading == job.bounds.heading), None)
            if twice is not None:
                raise ValueError(f"pytest_harness_jobs: job {job.name!r} declares {job.bounds.heading}, which job "
                                 f"{twice!r} declares")
        claimed = [(test, other.name) for other in merged for test in job.tests if test in other.tests]
        if claimed:
            raise ValueError(f"pytest_harness_jobs: job {job.name!r} claims {claimed[0][0]}, which job "
                             f"{claimed[0][1]!r} owns")
        merged.append(job)
    refuse_clashes([job.bounds for job in merged if job.bounds is not None])
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
