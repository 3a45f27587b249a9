"""The component tests' parameters, declared on their job (job.py ``COMPONENTS.params``): ``component_gpu`` one
per GPU, ``gpu_pair`` one per ordered GPU pair where the peer matrix runs (``peer_judged``, which the component
launch's spec reads alike)."""

from __future__ import annotations

import pytest

from harness.jobs.job import gpu_id, pair_id
from harness.kinds.components.bounds import COMPONENTS_BOUNDS
from harness.plugin.cases import NO_GPU
from harness.plugin.context import SessionContext

CPU_RANK_ID = "cpu0"
"""The one CPU rank of a CPU profile's component tests: their test id, for the parameters and the job's required
names alike."""


def gpu_params(ctx: SessionContext) -> list:
    """One test id per GPU of the component tests (``gpu0``...), or ``cpu0``: the one CPU rank of a CPU profile."""
    if ctx.device != "cuda":
        return [pytest.param(0, id=CPU_RANK_ID)]
    return [pytest.param(gpu.index, id=gpu_id(gpu.index)) for gpu in ctx.hardware.gpus]


def peer_judged(ctx: SessionContext) -> bool:
    """Whether the peer matrix runs: at level long, or where the profile bounds it (nothing is measured
    that no bound judges). The pair parameters below and the component launch's spec read it alike."""
    bounds = ctx.profile.table(COMPONENTS_BOUNDS)
    bounded = bounds is not None and (bounds.min_peer_gbps is not None or bounds.max_peer_latency_us is not None)
    return ctx.options.level == "long" or bounded


def pair_params(ctx: SessionContext) -> list:
    """One test id per ordered GPU pair (``gpu0-gpu1``); not applicable, with the reason, below two GPUs."""
    if ctx.device != "cuda":
        return [pytest.param(None, id="no-pairs", marks=pytest.mark.skip(reason=f"not applicable: {NO_GPU}"))]
    indices = [gpu.index for gpu in ctx.hardware.gpus]
    if len(indices) >= 2 and not peer_judged(ctx):
        return [pytest.param(None, id="no-pairs", marks=pytest.mark.skip(
            reason=f"not measured: profile {ctx.profile.name} has no peer bound ([components] min_peer_gbps); "
                   "--level long measures the peer matrix for the report"))]
    if len(indices) < 2:
        return [pytest.param(None, id="no-pairs", marks=pytest.mark.skip(
            reason=f"not applicable: {len(indices)} GPU on this node, no pair to copy between"))]
    return [pytest.param((a, b), id=pair_id(a, b)) for a in indices for b in indices if a != b]
