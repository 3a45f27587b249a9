"""A kind of job's section of the page (issue 29): the kind (harness/kinds/<kind>/report.py) builds it from the
run's header and tests, and the page draws it where the kinds' sections go, without importing the kind: its
``Job.report`` is handed to ``build_view`` by whoever renders the page (the plugin, ``harness report``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from markupsafe import Markup

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
"""What a kind hands the report: (the run's header, its tests) -> its section."""
KindSections = Sequence[SectionBuilder]
