"""A conftest that gives the plain tests of a plugin-level test session a kind of job of their own
(``test_other``, ``test_x``): a test no job owns is refused at collection (harness/plugin/levels.py)."""

OTHER_TESTS_JOB = """
from harness.jobs.job import Job


def pytest_harness_jobs(config):
    return [Job(name="other tests of this suite", tests=("test_other", "test_x"), level="quick",
                required=lambda need: [])]
"""


def required_tests(*args, **kw) -> list[str]:
    """harness/jobs/registry.py ``required_tests`` of the harness's shipped kinds (harness/kinds/shipped.py)."""
    from harness.jobs import registry
    from harness.kinds.shipped import JOBS

    return registry.required_tests(*args, jobs=kw.pop("jobs", JOBS), **kw)
