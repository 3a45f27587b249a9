"""The soak kind's declaration: the burn-in at the long level (its own option, ``--soak DURATION``), its runner writing
session.json's ``soak``. It has no page section of its own: its test's checks are on the page as every test's."""

from __future__ import annotations

from harness.jobs.job import Job, Requirement
from harness.kinds.soak.bounds import SOAK_BOUNDS
from harness.kinds.soak.options import SOAK_OPTION
from harness.kinds.soak.runner import SoakRunner

SECTION = "soak"


def _soak(need: Requirement) -> list[str]:
    return ["test_soak"]


SOAK = Job(name="soak", tests=("test_soak",), level="long", required=_soak, section=SECTION, runner=SoakRunner,
           options=(SOAK_OPTION,), bounds=SOAK_BOUNDS)
