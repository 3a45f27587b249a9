"""The session's kinds of job, and run levels (``--level``) at collection, read from them: a test's level is
its job's; a test of an acceptance session that no job owns is refused (a usage error), since the verdict
could not require it and a skip of it would pass unseen. Every kind comes in through the
``pytest_harness_jobs`` hook (harness/plugin/hookspecs.py): the harness's own from harness/kinds/shipped.py,
registered here by name (the kinds sit above the plugin, which imports none of them), then a site's.

Collection deselects the tests above the session's level and records what it kept (``LevelSelection``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pytest

from harness.jobs.job import Job, level_rank
from harness.jobs.registry import job_of, with_site_jobs

JOBS_KEY = pytest.StashKey[tuple[Job, ...]]()
SHIPPED_KINDS = "harness.kinds.shipped"
"""The module whose ``pytest_harness_jobs`` hands in every kind the harness ships, registered by name."""


def register_shipped_kinds(pluginmanager: pytest.PytestPluginManager) -> None:
    """Register the shipped kinds as a pytest plugin (once; ``-p harness.kinds.shipped`` did it already). The
    plugin's pytest_addoption calls this, so that their own options (their pytest_addoption, which pytest calls
    on registration) are declared before the command line is read; gather_jobs again, in case it did not run."""
    if not pluginmanager.has_plugin(SHIPPED_KINDS):
        pluginmanager.import_plugin(SHIPPED_KINDS)


def gather_jobs(config: pytest.Config) -> tuple[Job, ...]:
    """Every job ``pytest_harness_jobs`` returned, the harness's shipped kinds first (harness/kinds/shipped.py),
    then a site's; a bad one is a usage error."""
    register_shipped_kinds(config.pluginmanager)
    try:
        # A Job refuses a bad declaration as it is made (an unknown level, a reserved section): inside the hook.
        added = [job for returned in config.hook.pytest_harness_jobs(config=config) for job in (returned or ())]
        jobs = with_site_jobs(added)
    except ValueError as exc:
        raise pytest.UsageError(f"pytest_harness_jobs: {exc}" if not str(exc).startswith("pytest_harness_jobs")
                                else str(exc)) from None
    config.stash[JOBS_KEY] = jobs
    return jobs


def session_jobs(config: pytest.Config) -> tuple[Job, ...]:
    """The jobs ``gather_jobs`` found at configure (it runs before the session starts, or gathers them now)."""
    jobs = config.stash.get(JOBS_KEY, None)
    return jobs if jobs is not None else gather_jobs(config)


def level_of(item: pytest.Item, jobs: tuple[Job, ...]) -> str:
    """The run level of ``item``: its job's. A test no job owns is a usage error that names the way out."""
    function = getattr(item, "originalname", item.name)
    job = job_of(function, jobs)
    if job is None:
        raise pytest.UsageError(
            f"{item.nodeid}: {function} belongs to no kind of job, so the session verdict cannot know whether "
            f"this node must run it (a skip of it would pass unseen). Add it to a job: harness/kinds/shipped.py, "
            f"or a site's pytest_harness_jobs hook (harness/plugin/hookspecs.py); jobs: "
            f"{', '.join(job.name for job in jobs)}")
    return job.level


@dataclass(frozen=True, kw_only=True)
class LevelSelection:
    """What ``--level`` kept: the level's required set, and what it left out, by pytest node id."""

    level: str
    kept: tuple[str, ...]
    deselected: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"level": self.level, "kept": list(self.kept), "deselected": list(self.deselected)}


LEVEL_KEY = pytest.StashKey[LevelSelection]()


def select_level(config: pytest.Config, items: list[pytest.Item], level: str) -> LevelSelection:
    """Deselect the tests above ``level`` (pytest reports them as deselected) and record the selection."""
    jobs = session_jobs(config)
    highest = level_rank(level)
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        (kept if level_rank(level_of(item, jobs)) <= highest else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    selection = LevelSelection(level=level, kept=tuple(i.nodeid for i in kept),
                               deselected=tuple(i.nodeid for i in dropped))
    config.stash[LEVEL_KEY] = selection
    return selection


def level_selection(config: pytest.Config) -> LevelSelection | None:
    """The session's level selection, once collection made it."""
    return config.stash.get(LEVEL_KEY, None)


_ORDER = {"first": 0, None: 1, "last": 2}


def order_by_jobs(items: list[pytest.Item], jobs: Sequence[Job]) -> None:
    """The tests where their jobs' ``order`` puts them, in place (a stable sort: the files' order otherwise): the
    node shape first, GPU state last."""
    items.sort(key=lambda item: _ORDER[getattr(job_of(getattr(item, "originalname", item.name), jobs), "order",
                                               None)])
