"""A kind of job's section of the page (issue 29): the kind (harness/kinds/<kind>/report.py) builds it from the
run's header and tests, and the page draws it where the kinds' sections go, without importing the kind: its
``Job.report`` is handed to ``build_view`` by whoever renders the page (the plugin, ``harness report``), with
every kind's per-GPU columns (``KindReports``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from markupsafe import Markup

from harness.jobs.job import Job
from harness.report.outcomes import SessionTest


@dataclass(frozen=True, kw_only=True)
class KindSection:
    title: str
    """Its heading: ``Interconnect``."""
    charts: list[Markup] = field(default_factory=list)
    note: str = ""
    """A line under the charts (e.g. no bound was recorded)."""
    missing: str = ""
    """Said instead of the charts when there are none."""


SectionBuilder = Callable[[dict, list[SessionTest]], KindSection]
"""A kind's section builder: (the run's header, its tests) -> its section."""
GpuColumn = tuple[str, str]
"""(check key, column label) of a kind's per-GPU figure on the page's GPU table."""


@dataclass(frozen=True, kw_only=True)
class KindReports:
    """What the session's kinds hand the page, in their order: each one's section (``Job.report``) and its per-GPU
    columns (``Job.gpu_columns``)."""

    sections: tuple[SectionBuilder, ...] = ()
    gpu_columns: tuple[GpuColumn, ...] = ()

    @classmethod
    def of(cls, jobs: Sequence[Job]) -> KindReports:
        return cls(sections=tuple(job.report for job in jobs if job.report is not None),
                   gpu_columns=tuple(column for job in jobs for column in job.gpu_columns))
