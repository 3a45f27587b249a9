"""Every kind of job the harness ships, in the order their tests' names are required, assembled here, above
the plugin and the report, which import none of them (issue 29).

The plugin registers this module as a pytest plugin by name (harness/plugin/levels.py ``SHIPPED_KINDS``) as it
declares its options, before pytest reads the command line: its ``pytest_addoption`` declares the kinds' own options
(``Job.options``), its ``pytest_harness_jobs`` hands the list in first, as a site's conftest hands in its own after
it.
``harness report`` (harness/cli.py) renders a run directory with ``report_sections()``.
"""

from __future__ import annotations

from typing import Sequence

import pytest

from harness.jobs.job import Job
from harness.report.sections.kind import KindReports
from harness.plugin.options import add_job_options
from harness.kinds.components.job import COMPONENTS
from harness.kinds.ddp_scaling.job import DDP_SCALING
from harness.kinds.gpu_state.job import GPU_STATE
from harness.kinds.interconnect.job import ALLREDUCE, TOPOLOGY
from harness.kinds.node_shape.job import NODE_SHAPE
from harness.kinds.soak.job import SOAK

JOBS: tuple[Job, ...] = (NODE_SHAPE, GPU_STATE, TOPOLOGY, COMPONENTS, DDP_SCALING, ALLREDUCE, SOAK)
"""Every kind of job the harness ships, in the order their tests' names are required."""


def report_sections(jobs: Sequence[Job] = JOBS) -> KindReports:
    """What the kinds hand the page (harness/report/sections/kind.py ``KindReports``): their sections and per-GPU
    columns, in the jobs' order."""
    return KindReports.of(jobs)


def pytest_addoption(parser: pytest.Parser) -> None:
    """The shipped kinds' own options (``Job.options``: the soak's ``--soak``), declared as the plugin registers
    this module, before pytest reads the command line (harness/plugin/levels.py register_shipped_kinds)."""
    add_job_options(parser, JOBS)


@pytest.hookimpl(tryfirst=True)
def pytest_harness_jobs(config: pytest.Config) -> list[Job]:
    """The shipped kinds, ahead of any a site adds (harness/plugin/hookspecs.py)."""
    return list(JOBS)
