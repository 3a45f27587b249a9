"""The session's test cases: the profile's matrix, narrowed by the command line, as pytest parameters.

A benchmark case is a ``harness.cases.CaseId`` (its ``test_param`` is the pytest id); a case the
node cannot run, or the profile does not bound, is collected and skipped with the reason, so the
report still lists it. The other kinds' parameters are their jobs' (``Job.params``, in harness/kinds/).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from harness.cases import CaseId, Scaling
from harness.launch.slurm import SlurmAllocation
from harness.node.cpu_features import no_native_bf16_reason
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


def scaling_params(ctx: SessionContext, scaling: Scaling,
                   other_node_gpus: Mapping[str, int] | None = None) -> list[Any]:
    """One ``pytest.param(CaseId)`` per selected case of this scaling mode, in launch order.
    ``other_node_gpus``: the GPUs each other node of the allocation showed (plugin/remote_gpu_state.py)."""
    profile, options = ctx.profile, ctx.options
    models = options.models if options.models is not None else profile.models
    precisions = options.precisions if options.precisions is not None else profile.precisions
    # Compiling, the widest GPU count goes first: its launch compiles every graph for each of its
    # GPUs at once (Inductor's cache key holds the device index), and the narrower launches after
    # it, the 1-GPU baselines included, find their graphs cached (harness/workloads/compilecache.py).
    gpus = sorted(selected_gpu_counts(ctx), reverse=options.compile)
    # Single-node cases, then the same GPU counts per node on each multi-node count (Slurm).
    layouts = [(1, count) for count in gpus] + [(n, count) for n in node_counts(options, ctx.allocation)
                                                 for count in gpus]
    params = []
    for nodes, count in layouts:
        for model in models:
            for precision in precisions:
                case = CaseId(model=model, precision=precision, gpus=count, scaling=scaling, nodes=nodes)
                if scaling == "strong" and not _has_strong_bound(ctx, case):
                    continue
                params.append(pytest.param(case, id=case.test_param,
                                           marks=_case_marks(ctx, case, other_node_gpus or {})))
    return params


def _has_strong_bound(ctx: SessionContext, case: CaseId) -> bool:
    bounds = ctx.profile.bounds(case.model, case.precision)
    return bounds is not None and case.world_size > 1 and case.world_size in bounds.min_strong_efficiency


def _case_marks(ctx: SessionContext, case: CaseId, other_node_gpus: Mapping[str, int]) -> list[Any]:
    marks = [pytest.mark.weak_scaling if case.scaling == "weak" else pytest.mark.strong_scaling]
    if ctx.profile.bounds(case.model, case.precision) is None:
        marks.append(pytest.mark.skip(
            reason=f"profile {ctx.profile.name} has no [models.{case.model}.{case.precision}] bounds"))
    elif case.precision == "bf16" and ctx.profile.bf16_needs_native and ctx.native_bf16 is None:
        marks.append(pytest.mark.skip(reason=f"profile {ctx.profile.name}: {no_native_bf16_reason()}"))
    elif case.gpus > ctx.available_gpus:
        marks.append(pytest.mark.skip(reason=f"needs {case.gpus} {ctx.core_unit}; this node has {ctx.available_gpus}"))
    elif case.nodes > 1 and ctx.allocation is not None:
        # The other nodes of the case: one short of GPUs fails test_node_shape (remote_gpu_count) already.
        short = [f"{node} has {count}" for node in ctx.allocation.nodes[1:case.nodes]
                 if (count := other_node_gpus.get(node, case.gpus)) < case.gpus]
        if short:
            marks.append(pytest.mark.skip(reason=f"needs {case.gpus} {ctx.core_unit} on each node; {', '.join(short)}"))
    return marks


def no_cases_param(reason: str) -> Any:
    return pytest.param(None, id="none", marks=pytest.mark.skip(reason=reason))


def _running_params(items: list[pytest.Item]) -> list[dict]:
    """The parameters of each test that will run (not skipped, not deselected), in test order."""
    return [getattr(getattr(item, "callspec", None), "params", {}) for item in items
            if item.get_closest_marker("skip") is None]


def planned_cases(items: list[pytest.Item]) -> list[CaseId]:
    """The scaling cases that will run (not skipped, not deselected), in test order."""
    return [case for params in _running_params(items)
            for case in (params.get("weak_case") or params.get("strong_case"),) if isinstance(case, CaseId)]


def planned_allreduce(items: list[pytest.Item]) -> list[int]:
    """The GPU counts of the all-reduce tests that will run (not skipped, not deselected), in test order."""
    return [count for params in _running_params(items)
            for count in (params.get("allreduce_gpus"),) if isinstance(count, int)]
