"""What the kinds' test parameters share: the GPU counts and node counts of the session's matrix, the skip
reasons said alike by every kind, and the parameters of the tests that will run. Each kind's parameters are its
job's (``Job.params``, in harness/kinds/: the DDP cases in harness/kinds/ddp_scaling/params.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from harness.launch.slurm import SlurmAllocation
from harness.plugin.context import SessionContext
from harness.plugin.options import HarnessOptions

NOT_AN_ACCEPTANCE_SESSION = "not an acceptance session (run `make acceptance` or pytest on acceptance/)"
NO_GPU = "no GPU on a CPU run"


def selected_gpu_counts(ctx: SessionContext) -> list[int]:
    """The GPU counts of this session: --gpus, else the profile's, each once."""
    chosen = ctx.options.gpus
    return sorted(set(chosen if chosen is not None else ctx.profile.gpu_counts))


def node_counts(options: HarnessOptions, allocation: SlurmAllocation | None) -> list[int]:
    """Node counts of the multi-node cases: --nodes, else the whole allocation (none outside Slurm)."""
    if options.nodes is not None:
        return sorted({n for n in options.nodes if n > 1})
    if allocation is not None and allocation.node_count > 1:
        return [allocation.node_count]
    return []


def no_cases_param(reason: str) -> Any:
    return pytest.param(None, id="none", marks=pytest.mark.skip(reason=reason))


def running_params(items: list[pytest.Item]) -> list[dict]:
    """The parameters of each test that will run (not skipped, not deselected), in test order."""
    return [getattr(getattr(item, "callspec", None), "params", {}) for item in items
            if item.get_closest_marker("skip") is None]
