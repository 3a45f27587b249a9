"""Every kind of job the harness ships, in the order their tests' names are required, assembled here, above
the plugin and the report, which import none of them (issue 29).

The plugin registers this module as a pytest plugin by name (harness/plugin/levels.py ``SHIPPED_KINDS``) as it
declares its options, before pytest reads the command line: its ``pytest_addoption`` declares the kinds' own options
(``Job.options``), its ``pytest_harness_jobs`` hands the list in first, as a site's conftest hands in its own after
it.
``harness report`` (harness/cli.py) renders a run directory with ``report_sections()``; the commands that read
threshold files without a session (``harness thresholds check``, ``detect``, the tools) load them with the shipped
kinds' bounds tables (``load_shipped_profile``).
"""

from __future__ import annotations

import os
from typing import Sequence

import pytest

from harness.jobs.job import Job
from harness.profile import load
from harness.profile.bounds import Profile
from harness.profile.tables import BoundsTable
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

BOUNDS_TABLES: tuple[BoundsTable, ...] = tuple(job.bounds for job in JOBS if job.bounds is not None)
"""The shipped kinds' own tables of the threshold profile (``[interconnect]``, ``[components]``, ...)."""


def load_shipped_profile(path: str | os.PathLike[str]) -> Profile:
    """One threshold file, every shipped kind's table checked and built, a site's ``[site.*]`` for its shape alone
    (no session says which a site's kinds declare): what ``harness thresholds check``, the tools and the
    benchmarks read. ThresholdError lists every problem."""
    return load.load_profile(path, BOUNDS_TABLES, sites_declared=False)


def load_shipped_profiles(directory: str | os.PathLike[str]) -> list[Profile]:
    """Every ``*.toml`` in ``directory`` as ``load_shipped_profile`` reads one, sorted by name."""
    return load.load_profiles(directory, BOUNDS_TABLES, sites_declared=False)


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
