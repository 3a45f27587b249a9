"""The all-reduce test's parameters (``allreduce_gpus``), declared on its job (job.py ``ALLREDUCE.params``)."""

from __future__ import annotations

from typing import Any

import pytest

from harness.jobs.job import allreduce_widths, gpu_count_id
from harness.plugin.cases import no_cases_param, selected_gpu_counts
from harness.plugin.context import SessionContext


def allreduce_params(ctx: SessionContext) -> list[Any]:
    """GPU counts of the all-reduce test: of the selected counts above 1 (an all-reduce needs two), the widest
    this node holds runs (harness.jobs.job.allreduce_widths); a narrower one and one wider than the node are
    listed skipped, saying why. Only when the profile has an [interconnect] section (like every optional
    section: left out, not checked), or in a calibration session (its figures are what the section's first
    bounds are fitted from)."""
    if ctx.profile.interconnect is None and not ctx.options.calibration:
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
