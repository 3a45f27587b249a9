"""The DDP scaling kind's test parameters, declared on its job (job.py ``DDP_SCALING.params``): the profile's
matrix of model x precision x GPU count, narrowed by the command line, one ``pytest.param(CaseId)`` per case.

A benchmark case is a ``harness.cases.CaseId`` (its ``test_param`` is the pytest id); a case the node cannot run,
or the profile does not bound, is collected and skipped with the reason, so the report still lists it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from harness.cases import CaseId, Scaling
from harness.node.cpu_features import no_native_bf16_reason
from harness.plugin.cases import no_cases_param, node_counts, running_params, selected_gpu_counts
from harness.plugin.context import SessionContext

CASE_FIXTURES: dict[Scaling, str] = {"weak": "weak_case", "strong": "strong_case"}
"""The fixture each scaling mode's test takes its case by (acceptance/test_scaling.py)."""


def session_params(session: Any, scaling: Scaling) -> list[Any]:
    """The parameters of ``scaling``'s test in ``session`` (the plugin's HarnessSession: its context and the other
    nodes' GPU counts its GPU-state probes saw), or one skipped parameter saying why there are none."""
    remote = session.gpu_state.remote
    params = scaling_params(session.ctx, scaling, remote.gpu_counts() if remote is not None else None)
    return params or [no_cases_param(f"profile {session.ctx.profile.name} has no {scaling}-scaling cases for this "
                                     "selection")]


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


def planned_cases(items: list[pytest.Item]) -> list[CaseId]:
    """The scaling cases that will run (not skipped, not deselected), in test order."""
    return [case for params in running_params(items)
            for case in (params.get(CASE_FIXTURES["weak"]) or params.get(CASE_FIXTURES["strong"]),)
            if isinstance(case, CaseId)]
