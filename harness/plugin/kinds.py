"""The shipped kinds' runners, attached to their registry entries (harness/jobs/registry.py) here, where the
plugin starts: the registry's floor knows no runner, and the session knows no kind. It builds one runner per
``Job.section`` from the jobs it was given, the harness's and a site's (``pytest_harness_jobs``) alike, and
reaches each only through ``KindRunner`` (harness/jobs/job.py): session.json's sections, the timeline's launches,
the early start. The DDP cases, the component launch and the GPU-state reads stay the session's own parts: each
judges or feeds the others (the GPU-state runner's in-window readings judge every DDP case).
"""

from __future__ import annotations

from dataclasses import replace

from harness.jobs.job import Job
from harness.jobs.registry import ALLREDUCE, JOBS, SOAK, TOPOLOGY
from harness.plugin.interconnect import InterconnectRuns
from harness.plugin.soak import SoakRunner

RUNNERS = {ALLREDUCE.name: InterconnectRuns, TOPOLOGY.name: InterconnectRuns, SOAK.name: SoakRunner}
"""Job name -> its runner's factory (called with the SessionContext)."""


def shipped_jobs() -> tuple[Job, ...]:
    """The harness's jobs, each with its runner where it has one."""
    return tuple(replace(job, runner=RUNNERS[job.name]) if job.name in RUNNERS else job for job in JOBS)
