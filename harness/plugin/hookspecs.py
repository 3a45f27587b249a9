"""Hooks the harness plugin adds to pytest's: a site's conftest.py or plugin implements them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from harness.jobs.job import Job

def pytest_harness_jobs(config: pytest.Config) -> "list[Job]":
    """Kinds of job a site adds (``harness.jobs.job.Job``): their tests join the session at their level and
    the verdict requires what their ``required`` returns, like the harness's own (docs/architecture.md).

    Example (a site's acceptance/conftest.py)::

        from harness.jobs.job import Job

        def pytest_harness_jobs(config):
            return [Job(name="site storage", tests=("test_scratch_bandwidth",), level="quick",
                        required=lambda need: ["test_scratch_bandwidth"])]
    """
    raise NotImplementedError  # a hook specification: pluggy calls the implementations, never this
