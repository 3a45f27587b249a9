"""The GPU-state test's parameters, declared on its job (job.py ``GPU_STATE.params``)."""

from __future__ import annotations

from typing import Any

import pytest

from harness.jobs.job import gpu_id
from harness.plugin.cases import NO_GPU
from harness.plugin.context import SessionContext
from harness.plugin.remote_gpu_state import NodeGpu, RemoteGpuState, judged_nodes

GPU_STATE_FIXTURE = "gpu_state_gpu"
"""The parameter of acceptance/test_gpu_state.py: a GPU index, one test id per GPU (``gpu3``); in a
multi-node session a ``NodeGpu``, one test id per node and GPU (``gpu01-gpu3``)."""


def gpu_state_params(ctx: SessionContext, remote: RemoteGpuState | None = None) -> list[Any]:
    """One ``gpuN`` per GPU NVML sees; in a multi-node session one ``<node>-gpuN`` per GPU of each node
    (the other nodes': every GPU its probe showed and every one it should have); on a CPU profile one
    skipped parameter saying why."""
    if ctx.device != "cuda":
        return [pytest.param(None, id="no-gpu", marks=pytest.mark.skip(reason=NO_GPU))]
    nodes = judged_nodes(ctx)
    if not nodes:
        return [pytest.param(gpu.index, id=gpu_id(gpu.index)) for gpu in ctx.hardware.gpus]
    targets = [NodeGpu(node=nodes[0], index=gpu.index) for gpu in ctx.hardware.gpus]
    for node in nodes[1:]:
        # Not probed (--collect-only): the GPUs a node of this session must have.
        indices = remote.gpu_indices(node) if remote is not None else range(ctx.expected_gpus or ctx.available_gpus)
        targets += [NodeGpu(node=node, index=index) for index in indices]
    return [pytest.param(target, id=target.test_id) for target in targets]
