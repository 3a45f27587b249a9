"""The all-reduce test's parameters (``allreduce_gpus``), declared on its job (job.py ``ALLREDUCE.params``)."""

from __future__ import annotations

from typing import Any

import pytest

from harness.jobs.job import gpu_count_id
from harness.kinds.interconnect.bounds import INTERCONNECT_BOUNDS
from harness.plugin.cases import no_cases_param, running_params, selected_gpu_counts
from harness.plugin.context import SessionContext

ALLREDUCE_FIXTURE = "allreduce_gpus"
"""The fixture the all-reduce test takes its GPU count by (acceptance/test_interconnect.py)."""


def allreduce_params(ctx: SessionContext) -> list[Any]:
    """GPU counts of the all-reduce test: of the selected counts above 1 (an all-reduce needs two), the widest
    this node holds runs (``allreduce_widths``); a narrower one and one wider than the node are
    listed skipped, saying why. Only when the profile has an [interconnect] section (like every optional
    section: left out, not checked), or in a calibration session (its figures are what the section's first
    bounds are fitted from)."""
    if ctx.profile.table(INTERCONNECT_BOUNDS) is None and not ctx.options.calibration:
        return [no_cases_param(f"profile {ctx.profile.name} has no [interconnect] section")]
    counts = [n for n in selected_gpu_counts(ctx) if n != 1]
    runs = allreduce_widths(counts, ctx.available_gpus)

    def why_not(n: int) -> str | None:
        if n > ctx.available_gpus:
            return f"needs {n} {ctx.core_unit}; this node has {ctx.available_gpus}"
        if n not in runs:
            return (f"not measured: the all-reduce runs once, on {runs[0]} {ctx.rank_unit}s, whose ring crosses "
                    f"every link a {n}-{ctx.rank_unit} sweep would")
        return None

    params = [pytest.param(n, id=gpu_count_id(n), marks=[pytest.mark.skip(reason=reason)] if reason else [])
              for n in counts for reason in (why_not(n),)]
    return params or [no_cases_param("no GPU count above 1 is selected: an all-reduce needs two")]


def allreduce_widths(counts: list[int], usable: int) -> list[int]:
    """The GPU counts the all-reduce sweep runs on, of ``counts`` on a node of ``usable`` GPUs: the widest
    count above one the node holds, alone. Its ring crosses every link a narrower sweep on the same node
    would, so a narrower one adds a launch (10-14 s each on 4 x H100) and no link; a node of N GPUs then
    pays one sweep whatever N is. Empty when no count above one fits."""
    fitting = [n for n in counts if 1 < n <= usable]
    return [max(fitting)] if fitting else []


def planned_allreduce(items: list[pytest.Item]) -> list[int]:
    """The GPU counts of the all-reduce tests that will run (not skipped, not deselected), in test order."""
    return [count for params in running_params(items)
            for count in (params.get(ALLREDUCE_FIXTURE),) if isinstance(count, int)]
